package worker

import (
	"errors"
	"fmt"
)

// checkInvariants states the machine's invariants in code; tests call it after every step.
// Each report shows the whole of what it checked, whichever part broke.
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
		// A waiting or running delivery holds its lease; a cancelled one no longer does.
		if held := e.lease.Held(r); held != (d.state == waiting || d.state == running) && d.state != finished {
			fail("%s %s, its lease held %v", r, d.state, held)
		}
	}
	if e.queued == nil {
		e.queued = map[string]bool{}
	}
	queued := e.queued // emptied and reused: the simulator checks after every step
	clear(queued)
	entries := 0
	for _, r := range e.queue {
		if d := e.deliveries[r]; d != nil && d.state == waiting {
			queued[r] = true
			entries++
		}
	}
	live := 0
	for _, c := range e.leaseCalls {
		if !c.abandoned {
			live++
		}
	}
	// The counters match the deliveries; each waiting delivery is queued once; no receive
	// goes out while stopping; the live lease calls are counted.
	if nRunning != e.running || nWaiting != e.waiting || e.running > e.cfg.Concurrency || len(queued) != e.waiting ||
		entries != len(queued) || e.stopping && e.recvCall != 0 && e.out.Receive != nil || live != e.liveCalls {
		fail("counted running=%d waiting=%d, recorded %d %d (limit %d); %d waiting deliveries queued in %d entries; stopping %v with receive %d issued %v; %d lease calls not abandoned, counted %d",
			nRunning, nWaiting, e.running, e.waiting, e.cfg.Concurrency, len(queued), entries, e.stopping, e.recvCall, e.out.Receive != nil, live, e.liveCalls)
	}
	if err := e.lease.CheckInvariants(); err != nil {
		fail("lease: %w", err)
	}
	return errors.Join(errs...)
}

// CheckInvariants is checkInvariants for checkers outside the package (the simulator runs it
// after every step). It is O(receipts held).
func (e *Machine) CheckInvariants() error { return e.checkInvariants() }
