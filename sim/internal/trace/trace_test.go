package trace

import (
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The trace keeps the last lines for violation reports and hashes every line.
func TestTraceLastAndDigest(t *testing.T) {
	var out strings.Builder
	tr := New(&out)
	for i := 0; i < LastMax+5; i++ {
		tr.Add(time.Duration(i)*time.Millisecond, "w", "event "+strconv.Itoa(i))
	}
	last := tr.Last()
	if len(last) != LastMax || last[0] != "0.005s w event 5" || last[len(last)-1] != "0.034s w event 34" {
		t.Fatalf("Last() = %q...%q (%d lines)", last[0], last[len(last)-1], len(last))
	}
	if n := strings.Count(out.String(), "\n"); n != LastMax+5 {
		t.Fatalf("wrote %d lines, want %d", n, LastMax+5)
	}
	other := New(nil)
	for i := 0; i < LastMax+5; i++ {
		other.Add(time.Duration(i)*time.Millisecond, "w", "event "+strconv.Itoa(i))
	}
	if tr.Digest() != other.Digest() {
		t.Fatal("the same lines gave different digests")
	}
	other.Add(0, "w", "one more")
	if tr.Digest() == other.Digest() {
		t.Fatal("different lines gave the same digest")
	}
}

// Since is t.Sub(Epoch) near Epoch, far from it (saturated), at the zero time and at the fast
// path's edges.
func TestSinceIsSubEpoch(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	ts := []time.Time{{}, Epoch, Epoch.Add(-1), Epoch.Add(1), time.Unix(0, 0), time.Unix(1<<62, 0),
		time.Unix(-1<<62, 999999999), Epoch.Add(time.Duration(math.MaxInt64)), Epoch.Add(time.Duration(math.MinInt64)),
		time.Unix(epochUnix+9e9-1, 999999999).UTC(), time.Unix(epochUnix-9e9+1, 0).UTC(), time.Unix(epochUnix+9e9, 0).UTC()}
	for range 2000 {
		ts = append(ts, Epoch.Add(time.Duration(r.Int63()-r.Int63())), time.Unix(r.Int63n(1<<40)-1<<39, r.Int63n(1e9)))
	}
	for _, tm := range ts {
		if got, want := Since(tm), tm.Sub(Epoch); got != want {
			t.Fatalf("Since(%v) = %v, want %v", tm, got, want)
		}
	}
}
