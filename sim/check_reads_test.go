package sim

import (
	"testing"

	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim/internal/corepanic"
)

// Reads that agree with the model pass: a history grown past the cap keeps the last ten, a
// released attempt is uncounted, a retry resets the count and keeps the history and the last
// error, and a crash leaves the newest outcome to the next open.
func TestReadsMatchModelOnValidHistory(t *testing.T) {
	c := newTestChecker()
	enqueue(c, 1, "a")
	c.JobAttemptsMax(1, 1, 20)
	var hist []ReadAttempt
	for a := 1; a <= 12; a++ {
		c.AttemptStarted(1, 1, a)
		c.OutcomeFed(1, 1, a, "failed", "simulated retryable failure")
		c.AttemptEnded(1, 1, a, false, false) // kept out of the breaker: only the history matters here
		hist = append(hist, ReadAttempt{a, "failed"})
		c.JobRead(1, ReadView{ID: 1, State: "waiting", Attempts: a, LastErr: "simulated retryable failure: x", History: hist[max(0, len(hist)-historyCap):]}, "Get")
	}
	c.RetrySubmitted(1, 1)
	c.JobRead(1, ReadView{ID: 1, State: "waiting", Attempts: 0, LastErr: "simulated retryable failure", History: hist[2:]}, "Get")
	c.AttemptStarted(1, 1, 1)
	c.AttemptStopCut(1, 1, 1)
	c.OutcomeFed(1, 1, 1, "failed", "context canceled")
	c.AttemptEnded(1, 1, 1, false, false)
	hist = append(hist, ReadAttempt{1, "released"})
	c.JobRead(1, ReadView{ID: 1, State: "waiting", Attempts: 0, LastErr: "simulated retryable failure", History: hist[3:]}, "List")
	c.Committed(1, []JobView{view(1, "waiting", 0, 0, "a")})
	c.AttemptStarted(1, 1, 1)
	c.Committed(1, []JobView{view(1, "running", 1, 0, "a")})
	c.NodeCrashed(1)
	hist = append(hist, ReadAttempt{1, "failed"})                     // interrupted
	c.NodeRecovered(1, []JobView{view(1, "waiting", 1, sec(1), "a")}) // requeued after a second
	c.JobRead(1, ReadView{ID: 1, State: "waiting", Attempts: 1, LastErr: "interrupted", History: hist[4:]}, "Get")
	if v := c.Violation(); v != nil {
		t.Fatalf("unexpected violation: %v", v)
	}
}

// A panic raised inside a machine under test is named as the machine's; one raised by the
// simulator is not.
func TestCorePanickerNamesTheMachine(t *testing.T) {
	got := func(fn func()) (name string) {
		defer func() {
			recover()
			name = corepanic.Panicker()
		}()
		fn()
		return "no panic"
	}
	if g := got(func() { _, _ = NewConfig(1, "swarm"); panic("sim") }); g != "" {
		t.Errorf("a simulator panic was named %q", g)
	}
	if g := got(func() { faultyMachine() }); g == "" {
		t.Errorf("a machine's panic was not named")
	} else {
		t.Log(g)
	}
}

// faultyMachine misuses a core function that panics on misuse: a snapshot of a running job
// without attempts.
func faultyMachine() {
	runner.EncodeSnapshot(runner.Snapshot{NextID: 9, Jobs: []runner.Job{{ID: 5, State: runner.Running}}})
}

// A start journaled by Begin and withdrawn by a cancel taken during the flight holds its unit
// until the commit lands (swarm seed 5666); without it, the job left waiting is caught.
func TestStartWhenFreeCountsWithdrawnStarts(t *testing.T) {
	c := newTestChecker()
	c.NodeRecovered(1, nil)
	for id := uint64(1); id <= 3; id++ {
		enqueue(c, id, "a")
	}
	c.AttemptStarted(1, 1, 1)
	c.CancelSubmitted(1, 2)
	c.CommitDispatched(1, []JobView{view(1, "running", 1, 0, "a"), view(2, "running", 1, 0, "a"), view(3, "waiting", 0, 0, "a")})
	if v := c.Violation(); v != nil {
		t.Fatalf("unexpected violation: %v", v)
	}
	c.CommitDispatched(1, []JobView{view(1, "running", 1, 0, "a"), view(3, "waiting", 0, 0, "a")})
	if v := c.Violation(); v == nil || v.Invariant != InvStartWhenFree {
		t.Fatalf("violation %v, want %s", v, InvStartWhenFree)
	}
}
