package sim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Events run in (time, scheduling order); time only moves forward; Step stops at the limit.
func TestLoopOrder(t *testing.T) {
	var l Loop
	var got []string
	add := func(at time.Duration, name string) { l.At(at, func() { got = append(got, name) }) }
	add(2*time.Second, "c")
	add(time.Second, "a")
	add(2*time.Second, "d") // same time as c, scheduled later: runs after it
	add(time.Second, "b")
	l.At(time.Second, func() {
		got = append(got, "e")
		l.After(0, func() { got = append(got, "f") }) // same instant, after everything scheduled
		l.At(0, func() { got = append(got, "g") })    // the past clamps to now
	})
	for l.Step(time.Second) {
	}
	if diff := cmp.Diff([]string{"a", "b", "e", "f", "g"}, got); diff != "" {
		t.Fatalf("events up to 1s (-want +got):\n%s", diff)
	}
	if l.Now() != time.Second {
		t.Fatalf("now = %v, want 1s", l.Now())
	}
	for l.Step(time.Hour) {
	}
	if diff := cmp.Diff([]string{"a", "b", "e", "f", "g", "c", "d"}, got); diff != "" {
		t.Fatalf("all events (-want +got):\n%s", diff)
	}
	if l.Steps() != 7 || l.Pending() != 0 {
		t.Fatalf("steps %d pending %d, want 7 and 0", l.Steps(), l.Pending())
	}
}

func TestCountsString(t *testing.T) {
	var c Counts
	if c.String() != "none" {
		t.Fatalf("empty Counts = %q", c.String())
	}
	c.Add("zeta", 2)
	c.Add("alpha", 1)
	c.Add("zeta", 3)
	if got := c.String(); got != "alpha=1 zeta=5" {
		t.Fatalf("Counts = %q, want alpha=1 zeta=5", got)
	}
	if c.Total() != 6 || c.Get("zeta") != 5 {
		t.Fatalf("Total %d Get %d", c.Total(), c.Get("zeta"))
	}
}
