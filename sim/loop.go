package sim

import (
	"time"

	"github.com/sluicehq/sluice/sim/internal/eventheap"
)

// Loop is the discrete-event scheduler: single-threaded, it jumps to the next event.
//
// Invariant: now never decreases; every pending event has at >= now.
type Loop struct {
	// OnTime, when set, is called with the event's time before each event runs (the checker
	// stamps facts with it).
	OnTime func(time.Duration)
	// Shift, when set, may move an event scheduled in the future later (never earlier) and
	// add to its tie-break sequence: the world's late-timer, bunching and reordering families.
	Shift func(at time.Duration) (time.Duration, uint64)
	now   time.Duration
	seq   uint64
	h     eventheap.Heap
	steps int
}

// Now is the current simulated time as an offset from Epoch.
func (l *Loop) Now() time.Duration { return l.now }

// Steps is the number of events run so far.
func (l *Loop) Steps() int { return l.steps }

// Pending is the number of scheduled events.
func (l *Loop) Pending() int { return len(l.h) }

// At schedules fn at offset at; a time in the past is clamped to now (it runs next among the
// events of this instant, after those already scheduled).
func (l *Loop) At(at time.Duration, fn func()) {
	if at < l.now {
		at = l.now
	}
	l.seq++
	seq := l.seq
	if l.Shift != nil && at > l.now {
		later, extra := l.Shift(at)
		at, seq = max(at, later), seq+extra
	}
	l.h.Push(eventheap.Event{At: at, Seq: seq, Fn: fn})
}

// AtExact schedules fn at offset at, never shifted (the world's own phase boundaries).
func (l *Loop) AtExact(at time.Duration, fn func()) {
	if at < l.now {
		at = l.now
	}
	l.seq++
	l.h.Push(eventheap.Event{At: at, Seq: l.seq, Fn: fn})
}

// After schedules fn d after now.
func (l *Loop) After(d time.Duration, fn func()) { l.At(l.now+d, fn) }

// Next reports the time of the next event.
func (l *Loop) Next() (time.Duration, bool) {
	if len(l.h) == 0 {
		return 0, false
	}
	return l.h[0].At, true
}

// Step runs the next event if it is at or before until; it reports whether one ran.
func (l *Loop) Step(until time.Duration) bool {
	if len(l.h) == 0 || l.h[0].At > until {
		return false
	}
	e := l.h.Pop()
	if e.At < l.now {
		panic("sim: event scheduled in the past")
	}
	l.now = e.At
	l.steps++
	if l.OnTime != nil {
		l.OnTime(l.now)
	}
	e.Fn()
	return true
}

// AdvanceTo moves now forward to t when nothing is scheduled before it.
func (l *Loop) AdvanceTo(t time.Duration) {
	if t > l.now {
		if at, ok := l.Next(); ok && at < t {
			panic("sim: AdvanceTo past a pending event")
		}
		l.now = t
	}
}
