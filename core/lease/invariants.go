package lease

import (
	"errors"
	"fmt"
)

// checkInvariants states the machine's invariants in code; tests call it after every step.
func (m *Machine) checkInvariants() error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for i, r := range m.heap.items {
		if r.idx != i {
			fail("heap[%d] %q records index %d", i, r.key, r.idx)
		}
		if i > 0 && less(r, m.heap.items[(i-1)/2]) {
			fail("heap order broken at %d", i)
		}
		if m.receipts[r.key] != r {
			fail("heap holds %q which is not a current receipt", r.key)
		}
	}
	inCall := map[*receipt]CallID{}
	for id, c := range m.calls {
		if len(c.receipts) == 0 || len(c.receipts) > 10 {
			fail("call %d has %d entries", id, len(c.receipts))
		}
		live := 0
		for _, r := range c.receipts {
			if !r.removed && r.call == id {
				live++
				if prev, ok := inCall[r]; ok {
					fail("%q in calls %d and %d", r.key, prev, id)
				}
				inCall[r] = id
			}
		}
		if live != c.live {
			fail("call %d names %d held receipts, counted %d", id, live, c.live)
		}
	}
	for key, r := range m.receipts {
		if r.key != key || r.removed {
			fail("receipt map entry %q is %q (removed %v)", key, r.key, r.removed)
		}
		if r.deadline > r.t0+int64(r.ceiling) {
			fail("%q deadline past its ceiling", key)
		}
		switch r.phase {
		case phaseHeld:
			if r.idx < 0 || r.call != 0 {
				fail("held %q: heap index %d, call %d", key, r.idx, r.call)
			}
		case phaseRenewing, phaseWaiting:
			if r.idx < 0 || r.next != r.stop() {
				fail("%v %q must wait in the heap at its stop point", r.phase, key)
			}
			if r.phase == phaseWaiting && r.call == 0 {
				fail("waiting %q has no renewal in flight", key)
			}
		case phaseDisposing:
			if r.idx >= 0 && (r.call != 0 || r.next >= retryUntil(r.window, r.deadline)) {
				fail("disposing %q in the heap with call %d, retry at %d past retryUntil", key, r.call, r.next)
			}
		default:
			fail("%q has phase %v", key, r.phase)
		}
		if r.phase != phaseDisposing && r.stop() <= m.now {
			fail("%q held at %d past its stop point %d", key, m.now, r.stop())
		}
		if r.call != 0 && inCall[r] != r.call {
			fail("%q names call %d which does not hold it", key, r.call)
		}
	}
	disposing := 0
	for _, r := range m.receipts {
		if r.phase == phaseDisposing {
			disposing++
		}
	}
	if disposing != m.disposing {
		fail("%d receipts disposing, counted %d", disposing, m.disposing)
	}
	if len(m.receipts) > m.cfg.ReceiptsMax {
		fail("%d receipts over the limit %d", len(m.receipts), m.cfg.ReceiptsMax)
	}
	return errors.Join(errs...)
}

// CheckInvariants is checkInvariants for checkers outside the package (the worker machine,
// the simulator).
func (m *Machine) CheckInvariants() error { return m.checkInvariants() }
