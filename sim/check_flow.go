package sim

import (
	"slices"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim/internal/flowcheck"
)

// Flow control in the world (drawn in sim/config/flow.go, checked by sim/internal/flowcheck,
// whose invariants join the report's list after the others): its operator and hooks.
func init() {
	for _, inv := range flowcheck.Promises {
		invIndex[inv.Name] = len(Invariants)
		Invariants = append(Invariants, inv)
	}
}

// drawFlow draws job options o's flow options from the node's own "flow-jobs" stream. A fair
// kind's jobs all call one target, so that its breaker holds every key alike (fair-share).
func (n *runnerNode) drawFlow(o *runner.Opts, target *string) {
	c := &n.w.cfg
	if !c.FlowOn {
		return
	}
	if n.rFlow == nil {
		n.rFlow = Stream(c.Seed, "flow-jobs/"+n.name)
	}
	if f := c.Flow[slices.Index(kindNames[:], o.Kind)]; f.Job(n.rFlow, o, c) {
		*target = "t1"
	}
}

// startOperator starts the node's operator when flow control is on: every second or so (its
// own "flow-ops" stream) it pauses or resumes a kind, and retries or cancels a dead job that
// holds its group; in the liveness phase it resumes every kind and cancels every such job.
func (n *runnerNode) startOperator() {
	w := n.w
	if !w.cfg.FlowOn {
		return
	}
	if w.chk.flow == nil {
		w.chk.flow = flowcheck.New(flowcheck.Report{Fail: w.chk.Fail, Pass: w.chk.pass}, kindNames[:], w.cfg.Flow[:])
		w.chk.flow.Slack = w.cfg.Faults.Timing.Slack()
	}
	n.rOps = Stream(w.cfg.Seed, "flow-ops/"+n.name)
	var tick func()
	tick = func() {
		if n.up && !n.stopping && n.flight == nil {
			n.operateFlow()
		}
		w.loop.After(operatorEvery, tick)
	}
	w.loop.After(drawBetween(n.rOps, 0, operatorEvery), tick)
}

const operatorEvery = time.Second // the operator's period (the liveness bound allows two)

func (n *runnerNode) operateFlow() {
	w, fl := n.w, n.w.chk.flow
	for _, op := range fl.Operate(n.id, n.rOps, w.liveness, w.cfg.PPause, kindNames[:], n.views) {
		id := strconv.FormatUint(op.ID, 10)
		cmd, p, what := runner.Event(runner.Cancel{ID: op.ID}), pendingCmd{kind: cmdCancel, id: op.ID}, "cancel held "+id
		switch k := kindNames[op.Kind]; {
		case op.ID == 0 && op.Pause:
			cmd, p, what = runner.Pause{Kind: k}, pendingCmd{kind: cmdPause, id: uint64(op.Kind)}, "pause "+k
		case op.ID == 0:
			cmd, p, what = runner.Resume{Kind: k}, pendingCmd{kind: cmdResume, id: uint64(op.Kind)}, "resume "+k
		case op.Retry:
			cmd, p, what = runner.Retry{ID: op.ID}, pendingCmd{kind: cmdRetry, id: op.ID}, "retry held "+id
		}
		if _, err := n.propose(cmd, p); err == nil {
			w.trace(n.name, "operator "+what)
			w.chk.flowSubmitted(n.id, op.ID, op.Retry, kindNames[op.Kind], op.Pause)
		}
	}
	n.scheduleCommit()
}

// flowSubmitted tells the checker of an operator's command the node took.
func (c *Checker) flowSubmitted(node int, id uint64, retry bool, kind string, pause bool) {
	switch {
	case id == 0:
		c.flow.Pause(node, kind, pause, c.now)
	case retry:
		c.RetrySubmitted(node, id)
	default:
		c.CancelSubmitted(node, id)
	}
}

// flowBlocked is flowcheck's Blocked for job id of node model n, by its kind as enqueued.
func (c *Checker) flowBlocked(n *nodeModel, id uint64, now time.Duration) (bool, time.Duration) {
	kind := "" // (a nil model blocks nothing)
	if j := c.job(n, id); j != nil {
		kind = j.kind
	}
	return c.flow.Blocked(n.id, id, kind, now, n.live)
}
