package worker

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// TestStopHeldReleasesAtOnce: with StopHeld, the grace period's end cancels a running handler
// with its lease held, and its result (a retry after 0) releases the message at once; without
// it the lease is dropped and the result ignored (the window lapses).
func TestStopHeldReleasesAtOnce(t *testing.T) {
	for _, held := range []bool{false, true} {
		e, t0 := newTicked(t, Config{Concurrency: 1, Grace: 10 * time.Second, StopHeld: held})
		rc := e.Ready().Receive
		if err := e.Step(ReceiveDone{Call: rc.Call, Now: t0.Add(time.Millisecond),
			Messages: []core.Message{{ID: "m1", Receipt: "r1", ReceiveCount: 1}}}); err != nil {
			t.Fatal(err)
		}
		e.Ready()
		if err := e.Step(Shutdown{Now: t0.Add(time.Second)}); err != nil {
			t.Fatal(err)
		}
		e.Ready()
		if err := e.Step(Tick{Now: t0.Add(11 * time.Second)}); err != nil {
			t.Fatal(err)
		}
		rd := e.Ready()
		if len(rd.Cancel) != 1 || rd.Cancel[0].Receipt != "r1" || rd.Cancel[0].Held != held {
			t.Fatalf("held %v: cancels %+v, want r1 once, Held %v", held, rd.Cancel, held)
		}
		zero := time.Duration(0)
		if err := e.Step(HandlerDone{Receipt: "r1", Now: t0.Add(11*time.Second + time.Millisecond),
			Result: Result{Outcome: Retryable, After: &zero}}); err != nil {
			t.Fatal(err)
		}
		renewals := rd.Changes
		rd = e.Ready()
		for _, c := range renewals { // the renewal in flight is answered; the release follows
			if err := e.Step(CallDone{Call: c.Call, Now: t0.Add(11*time.Second + 2*time.Millisecond), Entries: make([]error, len(c.Entries))}); err != nil {
				t.Fatal(err)
			}
		}
		released := false
		for _, c := range append(rd.Changes, e.Ready().Changes...) {
			for _, en := range c.Entries {
				released = released || en.Receipt == "r1" && en.Timeout == 0
			}
		}
		if released != held {
			t.Errorf("held %v: released at once %v", held, released)
		}
		if err := e.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
}
