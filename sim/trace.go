package sim

import (
	"time"

	"github.com/sluicehq/sluice/sim/internal/trace"
)

// Epoch is simulated time zero. Traces print times as offsets from it, never wall times.
var Epoch = trace.Epoch

// Offset renders d as seconds with millisecond-or-finer digits: "12.345s", "0.000001s".
func Offset(d time.Duration) string { return trace.Offset(d) }
