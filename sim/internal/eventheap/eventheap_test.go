package eventheap

import (
	"math/rand"
	"testing"
	"time"
)

// Events pop in (At, Seq) order whatever the order they were pushed in, ties included.
func TestPopOrder(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for round := 0; round < 200; round++ {
		var h Heap
		n := r.Intn(64)
		for i := 0; i < n; i++ {
			h.Push(Event{At: time.Duration(r.Intn(8)), Seq: uint64(r.Intn(1000))})
			if r.Intn(4) == 0 && len(h) > 0 {
				h.Pop()
			}
		}
		var last Event
		for i := 0; len(h) > 0; i++ {
			e := h.Pop()
			if i > 0 && (e.At < last.At || e.At == last.At && e.Seq < last.Seq) {
				t.Fatalf("round %d: popped (%v, %d) after (%v, %d)", round, e.At, e.Seq, last.At, last.Seq)
			}
			last = e
		}
	}
}
