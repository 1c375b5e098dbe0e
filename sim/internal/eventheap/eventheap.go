// Package eventheap is the simulator loop's queue of scheduled events: a binary min-heap by
// (At, Seq). It is container/heap's algorithm on the concrete type: going through
// heap.Interface boxed every event pushed and popped (two allocations per event, a sixth of a
// sweep's allocations).
package eventheap

import "time"

// Event is one scheduled action of the world. Events run in (At, Seq) order: time first, then
// the order in which they were scheduled, so ties break the same way on every run.
type Event struct {
	At  time.Duration // offset from Epoch
	Seq uint64
	Fn  func()
}

// Heap is a binary min-heap of events by (At, Seq).
type Heap []Event

func (h Heap) less(i, j int) bool {
	if h[i].At != h[j].At {
		return h[i].At < h[j].At
	}
	return h[i].Seq < h[j].Seq
}

// Push adds e.
func (h *Heap) Push(e Event) {
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

// Pop removes and returns the least event; the heap must not be empty.
func (h *Heap) Pop() Event {
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
	s[n] = Event{}
	*h = s[:n]
	return e
}
