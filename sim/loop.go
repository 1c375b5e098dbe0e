package sim

import (
	"time"
)

// event is one scheduled action of the world. Events run in (at, seq) order: time first, then
// the order in which they were scheduled, so ties break the same way on every run.
type event struct {
	at  time.Duration // offset from Epoch
	seq uint64
	fn  func()
}

// eventHeap is a binary min-heap of events by (at, seq). It is container/heap's algorithm on
// the concrete type: going through heap.Interface boxed every event pushed and popped (two
// allocations per event, a sixth of a sweep's allocations).
type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	s := *h
	for j := len(s) - 1; j > 0; {
		i := (j - 1) / 2 // parent
		if i == j || !s.less(j, i) {
			break
		}
		s[i], s[j] = s[j], s[i]
		j = i
	}
}

func (h *eventHeap) pop() event {
	s := *h
	n := len(s) - 1
	s[0], s[n] = s[n], s[0]
	for i := 0; ; {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 {
			break
		}
		j := j1 // left child
		if j2 := j1 + 1; j2 < n && s.less(j2, j1) {
			j = j2 // right child
		}
		if !s.less(j, i) {
			break
		}
		s[i], s[j] = s[j], s[i]
		i = j
	}
	e := s[n]
	s[n] = event{}
	*h = s[:n]
	return e
}

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
	h     eventHeap
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
	l.h.push(event{at: at, seq: seq, fn: fn})
}

// AtExact schedules fn at offset at, never shifted (the world's own phase boundaries).
func (l *Loop) AtExact(at time.Duration, fn func()) {
	if at < l.now {
		at = l.now
	}
	l.seq++
	l.h.push(event{at: at, seq: l.seq, fn: fn})
}

// After schedules fn d after now.
func (l *Loop) After(d time.Duration, fn func()) { l.At(l.now+d, fn) }

// Next reports the time of the next event.
func (l *Loop) Next() (time.Duration, bool) {
	if len(l.h) == 0 {
		return 0, false
	}
	return l.h[0].at, true
}

// Step runs the next event if it is at or before until; it reports whether one ran.
func (l *Loop) Step(until time.Duration) bool {
	if len(l.h) == 0 || l.h[0].at > until {
		return false
	}
	e := l.h.pop()
	if e.at < l.now {
		panic("sim: event scheduled in the past")
	}
	l.now = e.at
	l.steps++
	if l.OnTime != nil {
		l.OnTime(l.now)
	}
	e.fn()
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
