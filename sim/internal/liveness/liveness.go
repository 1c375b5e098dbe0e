// Package liveness is a run's liveness result: each side's settle time against its bound,
// their ratio, and its one-line rendering.
package liveness

import (
	"strconv"
	"time"
)

// Liveness is a run's settle time against its bound, per side (from the start of the phase).
type Liveness struct {
	Runner, Queue Side
}

// Side is one side's settle time and bound from the start of the liveness phase; Settled is
// -1 when it did not settle, and On false when the world has no such side.
type Side struct {
	On             bool
	Settled, Bound time.Duration
}

// Ratio is the larger of the sides' settle time over bound (0 when neither settled at all).
func (l Liveness) Ratio() float64 {
	r := 0.0
	for _, s := range []Side{l.Runner, l.Queue} {
		if s.On && s.Settled >= 0 && s.Bound > 0 {
			r = max(r, float64(s.Settled)/float64(s.Bound))
		}
	}
	return r
}

// String renders "settled in X of Y (runner X of Y, queue X of Y)".
func (l Liveness) String() string {
	sec := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "s" }
	part := func(name string, s Side) string {
		if !s.On {
			return ""
		}
		x := "not settled"
		if s.Settled >= 0 {
			x = sec(s.Settled)
		}
		return name + " " + x + " of " + sec(s.Bound)
	}
	var parts []string
	for _, p := range []string{part("runner", l.Runner), part("queue", l.Queue)} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	all := Side{On: true, Settled: max(l.Runner.Settled, l.Queue.Settled), Bound: max(l.Runner.Bound, l.Queue.Bound)}
	if (l.Runner.On && l.Runner.Settled < 0) || (l.Queue.On && l.Queue.Settled < 0) {
		all.Settled = -1
	}
	head := "not settled"
	if all.Settled >= 0 {
		head = "settled in " + sec(all.Settled)
	}
	s := head + " of " + sec(all.Bound)
	if len(parts) > 0 {
		s += " (" + parts[0]
		for _, p := range parts[1:] {
			s += ", " + p
		}
		s += ")"
	}
	return s + ", ratio " + strconv.FormatFloat(l.Ratio(), 'f', 4, 64)
}
