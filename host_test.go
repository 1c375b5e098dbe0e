package sluice

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/internal/runneropt"
	"github.com/sluicehq/sluice/sim"
	"github.com/sluicehq/sluice/sim/disk"
)

// transcript renders what a runner.Node took and returned, without what differs between
// executors by design: the clock (Clock inputs, WakeAt), the driver's refs (renamed in order
// of their commands), reads and waiters (the simulator has no callers waiting), Admit off (Run's
// stop steps it before Close; Close turns admission off itself), kind registration (a Register
// call here, the engine's Config there), and batches that made nothing durable.
type transcript struct {
	mu    sync.Mutex
	refs  map[runner.Ref]int
	lines []string
}

func (tr *transcript) observe(in runner.Input, rd *runner.Effects) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.refs == nil {
		tr.refs = map[runner.Ref]int{}
	}
	if rd != nil {
		tr.effects(rd)
		return
	}
	switch in := in.(type) {
	case runner.Propose:
		tr.refs[in.Ref] = len(tr.refs) + 1
		tr.add("propose #%d %T", tr.refs[in.Ref], in.Cmd)
	case runner.Ended:
		tr.add("ended %v %v", in.Token, in.Outcome.Kind)
	case runner.SyncDone:
		tr.add("sync done, err %v", in.Err != nil)
	case runner.Admit:
		if in.On {
			tr.add("admit")
		}
	case runner.Close:
		tr.add("close, compact %v", in.Compact)
	}
}

func (tr *transcript) effects(rd *runner.Effects) {
	if !rd.Sync.Empty() {
		tr.add("write")
	}
	if rd.Landed != nil && rd.Landed.Records > 0 {
		tr.add("landed %d records", rd.Landed.Records)
	}
	for _, a := range rd.Acks {
		if k, ok := tr.refs[a.Ref]; ok {
			tr.add("ack #%d ids %d %v dup %v err %v", k, a.ID, a.IDs, a.Duplicate, a.Err)
		}
	}
	for _, c := range rd.Cancels {
		tr.add("cancel %v %v", c.Token, c.Why)
	}
	for _, s := range rd.Starts {
		tr.add("start %v", s.Token)
	}
	for _, s := range rd.Settled {
		tr.add("settled %d %v %v attempts %d", s.ID, s.State, s.Reason, s.Attempts)
	}
	if rd.Failed != nil {
		tr.add("failed")
	}
	if rd.Compact {
		tr.add("compact")
	}
	if rd.Close {
		tr.add("closed")
	}
}

func (tr *transcript) add(format string, args ...any) {
	tr.lines = append(tr.lines, fmt.Sprintf(format, args...))
}

// hostScript: three jobs through a pool of one: a success, a retryable failure then a
// success after the jittered backoff, a permanent failure; then a graceful stop.
var hostScript = sim.Script{
	Config: runner.Config{Capacity: 1, Policy: retry.Policy{Attempts: 3, Base: 200 * time.Millisecond, Cap: time.Second},
		Kinds: []runner.KindConfig{{Name: DefaultKind}}, KindsOnly: true},
	Kind: DefaultKind,
	Jobs: []sim.ScriptJob{
		{Payload: "a", Outcomes: []runner.Outcome{runner.Success()}},
		{Payload: "b", Outcomes: []runner.Outcome{runner.Failure("try again", true), runner.Success()}},
		{Payload: "c", Outcomes: []runner.Outcome{runner.Failure("never", false)}},
	},
	Hold: 50 * time.Millisecond,
}

// TestNodeSameUnderOwnerAndSimulator runs hostScript through the production owner (under
// synctest, over sim/disk) and through the simulator's runner node: the Node must take the
// same inputs and return the same effects in the same order under both executors.
func TestNodeSameUnderOwnerAndSimulator(t *testing.T) {
	var simulated transcript
	if err := sim.RunScript(hostScript, simulated.observe); err != nil {
		t.Fatal(err)
	}
	var produced transcript
	synctest.Test(t, func(t *testing.T) { runHostScript(t, hostScript, &produced) })
	if len(simulated.lines) < 20 {
		t.Fatalf("the simulated transcript is too short to compare:\n%s", strings.Join(simulated.lines, "\n"))
	}
	if diff := cmp.Diff(simulated.lines, produced.lines); diff != "" {
		t.Fatalf("the Node's transcript under the simulator (-) and the owner (+) differ:\n%s", diff)
	}
}

// runHostScript performs s with the production owner: Run first, each job enqueued 1 ms after
// the last, handlers holding for s.Hold, Run's context cancelled once every job settled.
func runHostScript(t *testing.T, s sim.Script, tr *transcript) {
	settled := make(chan struct{}, len(s.Jobs))
	cfg := Config{Capacity: s.Config.Capacity, Policy: Policy(s.Config.Policy), Seed: 1, Logger: quiet,
		OnSettled: func(Settled) { settled <- struct{}{} }}
	cfg.opts = runneropt.Options{FS: disk.New(1), Observe: tr.observe}
	k, err := Open("", cfg, JSON[string](), func(ctx context.Context, j Job[string]) error {
		time.Sleep(s.Hold)
		return scriptOutcome(s, j.Payload, j.Attempt)
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	synctest.Wait() // admission is on before the first enqueue, as in the simulator
	for i, j := range s.Jobs {
		if i > 0 {
			time.Sleep(time.Millisecond)
		}
		if _, err := k.Enqueue(context.Background(), time.Time{}, "t1", j.Payload); err != nil {
			t.Fatal(err)
		}
	}
	for range s.Jobs {
		<-settled
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func scriptOutcome(s sim.Script, payload string, attempt int) error {
	for _, j := range s.Jobs {
		if j.Payload != payload || attempt > len(j.Outcomes) {
			continue
		}
		switch o := j.Outcomes[attempt-1]; o.Kind {
		case runner.OutcomeFailed:
			if !o.Retryable {
				return Permanent(errors.New(o.Err))
			}
			return errors.New(o.Err)
		case runner.OutcomePanicked:
			panic(o.Err)
		}
	}
	return nil
}
