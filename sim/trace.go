package sim

import (
	"time"

	"github.com/sluicehq/sluice/sim/internal/trace"
)

// Epoch is simulated time zero. Traces print times as offsets from it, never wall times.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// epochUnix is Epoch in Unix seconds (its nanoseconds are 0).
var epochUnix = Epoch.Unix()

// since is t.Sub(Epoch), without Sub's check for overflow (an Add and an Equal) when t lies
// within 285 years of Epoch, where the difference cannot overflow: the checker turns every
// job's times into offsets after every commit.
func since(t time.Time) time.Duration {
	if s := t.Unix() - epochUnix; s > -9e9 && s < 9e9 {
		return time.Duration(s)*time.Second + time.Duration(t.Nanosecond())
	}
	return t.Sub(Epoch)
}

// Offset renders d as seconds with millisecond-or-finer digits: "12.345s", "0.000001s".
func Offset(d time.Duration) string { return trace.Offset(d) }
