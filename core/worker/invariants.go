package worker

import (
	"errors"
	"fmt"
)

// checkInvariants states the machine's invariants in code; tests call it after every step.
func (e *Machine) checkInvariants() error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	nRunning, nWaiting := 0, 0
	for r, d := range e.deliveries {
		switch d.state {
		case running, cancelled:
			nRunning++
		case waiting:
			nWaiting++
		}
		held := e.lease.Held(r)
		switch d.state {
		case waiting, running:
			if !held {
				fail("%s %s but its lease is not held", r, d.state)
			}
		case cancelled:
			if held {
				fail("%s cancelled but its lease is still held", r)
			}
		}
	}
	if nRunning != e.running || nWaiting != e.waiting {
		fail("counted running=%d waiting=%d, recorded %d %d", nRunning, nWaiting, e.running, e.waiting)
	}
	if e.running > e.cfg.Concurrency {
		fail("%d handlers running, limit %d", e.running, e.cfg.Concurrency)
	}
	queued := map[string]bool{}
	for _, r := range e.queue {
		if d := e.deliveries[r]; d != nil && d.state == waiting {
			if queued[r] {
				fail("%s queued twice", r)
			}
			queued[r] = true
		}
	}
	if len(queued) != e.waiting {
		fail("%d waiting deliveries, %d queued", e.waiting, len(queued))
	}
	if e.stopping && e.recvCall != 0 && e.out.Receive != nil {
		fail("receive issued while stopping")
	}
	live := 0
	for _, c := range e.leaseCalls {
		if !c.abandoned {
			live++
		}
	}
	if live != e.liveCalls {
		fail("%d lease calls not abandoned, counted %d", live, e.liveCalls)
	}
	if err := e.lease.CheckInvariants(); err != nil {
		fail("lease: %w", err)
	}
	return errors.Join(errs...)
}

// CheckInvariants is checkInvariants for checkers outside the package (the simulator runs it
// after every step). It is O(receipts held).
func (e *Machine) CheckInvariants() error { return e.checkInvariants() }
