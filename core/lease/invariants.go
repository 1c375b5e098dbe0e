package lease

import (
	"errors"
	"fmt"
)

// checkInvariants states the machine's invariants in code; tests call it after every step.
// Each report shows the whole of what it checked, whichever part broke.
func (m *Machine) checkInvariants() error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for i, r := range m.heap.items {
		// Indexed, in heap order, and a current receipt.
		if ordered := i == 0 || !less(r, m.heap.items[(i-1)/2]); r.idx != i || !ordered || m.receipts[r.key] != r {
			fail("heap[%d] %q records index %d, ordered %v, current %v", i, r.key, r.idx, ordered, m.receipts[r.key] == r)
		}
	}
	if m.inCall == nil {
		m.inCall = map[*receipt]CallID{}
	}
	inCall := m.inCall // emptied and reused: the simulator checks after every step
	clear(inCall)
	entries := 0
	for id, c := range m.calls {
		live := 0
		for _, r := range c.receipts {
			if !r.removed && r.call == id {
				live++
				inCall[r] = id
			}
		}
		// One to ten entries, of which the held ones are counted.
		if len(c.receipts) == 0 || len(c.receipts) > 10 || live != c.live {
			fail("call %d has %d entries, names %d held receipts, counted %d", id, len(c.receipts), live, c.live)
		}
		entries += live
	}
	// No held receipt is in two calls (inCall kept one call per receipt).
	if len(inCall) != entries {
		fail("%d receipts held by calls, in %d call entries", len(inCall), entries)
	}
	disposing := 0
	for key, r := range m.receipts {
		if r.phase == phaseDisposing {
			disposing++
		}
		if !m.receiptOK(key, r, inCall) {
			fail("receipt %q (map key %q, removed %v) %v at %d: deadline %d (ceiling from %d by %v), stop %d, heap index %d, next %d, call %d (held by %d)",
				r.key, key, r.removed, r.phase, m.now, r.deadline, r.t0, r.ceiling, r.stop(), r.idx, r.next, r.call, inCall[r])
		}
	}
	if disposing != m.disposing || len(m.receipts) > m.cfg.ReceiptsMax {
		fail("%d receipts disposing, counted %d; %d receipts, limit %d", disposing, m.disposing, len(m.receipts), m.cfg.ReceiptsMax)
	}
	return errors.Join(errs...)
}

// receiptOK says whether r, filed under key, is consistent: current, within its ceiling, named
// only by the call that holds it, before its stop point unless disposing; held and renewing or
// waiting receipts wait in the heap (renewing and waiting ones at the stop point, waiting ones
// with a renewal in flight); a disposing receipt in the heap waits for a retry before retryUntil.
func (m *Machine) receiptOK(key string, r *receipt, inCall map[*receipt]CallID) bool {
	ok := r.key == key && !r.removed && r.deadline <= r.t0+int64(r.ceiling) && (r.call == 0 || inCall[r] == r.call) &&
		(r.phase == phaseDisposing || r.stop() > m.now)
	switch r.phase {
	case phaseHeld:
		return ok && r.idx >= 0 && r.call == 0
	case phaseRenewing, phaseWaiting:
		return ok && r.idx >= 0 && r.next == r.stop() && (r.phase == phaseRenewing || r.call != 0)
	case phaseDisposing:
		return ok && (r.idx < 0 || r.call == 0 && r.next < retryUntil(r.window, r.deadline))
	}
	return false
}

// CheckInvariants is checkInvariants for checkers outside the package (the worker machine,
// the simulator).
func (m *Machine) CheckInvariants() error { return m.checkInvariants() }
