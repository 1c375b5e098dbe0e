package sim

import (
	"time"

	"github.com/sluicehq/sluice/core/worker"
	"github.com/sluicehq/sluice/sim/internal/liveness"
	"github.com/sluicehq/sluice/sim/queue"
)

// The liveness bound is a critical path, not a serialised worst case (docs/simulator.md gives
// the formula). For a runner node, Graham's argument for a work-conserving list schedule: at
// every instant of the phase either every unit is busy, or the job that settles last is not
// ready (running, backing off, deferred, or within one commit cycle of its start). So the node
// settles within
//
//	allowance + work / Capacity + max over limited kinds (work of kind / its limit)
//	          + longest chain + one commit cycle
//
// (a job held back while a unit is free is held by its kind's limit, every unit of which is
// then busy with its kind's work);
// where work is the handler time of the phase's attempts (drawn by the executor, which is the
// environment's), and a job's chain is its own handlers plus, for each wait, the wait the
// configured policy and the checker's breaker model allow (never the engine's own due), plus a
// commit cycle per step. Both grow as the phase draws attempts, so the bound is final when the
// node settles. A runner that waits longer than its policy, or uses fewer units than configured,
// overruns it.

// chain adds d to job id's chain.
func (n *nodeModel) chain(id uint64, d time.Duration) {
	c := n.chains[id] + d
	n.chains[id] = c
	n.longest = max(n.longest, c)
}

// BeginLiveness starts the critical-path accounting at now: every node's waiting jobs start
// their chain at their due (as the checker's model allows it), running attempts count as a
// whole handler (handlerMax), and allow[node] is what the node waits for before it can work
// (a restart, a stop in progress).
func (c *Checker) BeginLiveness(handlerMax, restartMax time.Duration, allow map[int]time.Duration) {
	// An attempt running now returns within HandlerMax, its return event perhaps moved later
	// by the scheduling slack in the safety phase.
	handlerMax += c.hiddenSlack
	c.liveFrom, c.restartMax = c.now, restartMax
	c.flow.BeginLiveness()
	for id := 1; id <= len(c.nodes); id++ {
		n := c.nodes[id]
		if n == nil {
			continue
		}
		n.cycle = c.cycle()
		n.chains, n.allow = make(map[uint64]time.Duration), allow[id]
		n.work = time.Duration(n.running) * handlerMax
		n.kindWork = make(map[string]time.Duration)
		for k, r := range n.kindRunning {
			n.kindWork[k] = time.Duration(r) * handlerMax
		}
		for _, v := range n.live {
			j := c.job(n, v.ID)
			switch {
			case j != nil && j.running:
				n.chain(v.ID, handlerMax)
			case v.State == "waiting":
				due := v.Due
				if w := n.waits[v.ID]; w != nil && w.cap > 0 && w.cap < due {
					due = w.cap
				}
				n.chain(v.ID, max(0, due-c.now))
			}
		}
	}
}

// AttemptDrawn: the executor drew d for node's attempt of job id (after AttemptStarted).
func (c *Checker) AttemptDrawn(node int, id uint64, d time.Duration) {
	n := c.node(node)
	if n.chains == nil {
		return
	}
	// A unit is busy for the handler and then idle until the commit that starts its next
	// attempt: up to one cycle per attempt (swarm seed 1619 overran by 60 ms without it).
	n.work += d + n.cycle
	if j := c.jobs[jobKey{node, id}]; j != nil {
		n.kindWork[j.kind] += d + n.cycle
	}
	n.chain(id, d+n.cycle)
	c.flow.Drawn(node, id, d+n.cycle)
}

// RunnerBound is node's liveness deadline as of now (absolute offset).
func (c *Checker) RunnerBound(node int) time.Duration {
	n := c.node(node)
	held := time.Duration(0)
	for k, w := range n.kindWork { // a max: the order does not matter
		if l := n.p.KindLimits[k]; l > 0 {
			held = max(held, w/time.Duration(l))
		}
	}
	held += c.flow.Allowance(node, operatorEvery, func(id uint64) time.Duration { return n.chains[id] })
	return c.liveFrom + n.allow + n.work/time.Duration(n.p.Capacity) + held + n.longest + n.cycle
}

// liveSide is one side of the world (the runner nodes, or the queue) in the liveness phase.
type liveSide struct {
	on      bool          // the world has this side
	bound   time.Duration // absolute deadline
	settled time.Duration // when it settled; -1: not yet
}

// beginBounds starts the liveness accounting at now.
func (w *World) beginBounds() {
	c := w.cfg
	now := w.loop.Now()
	slack := c.Faults.Timing.Slack()
	w.runnerSide = liveSide{on: c.Nodes > 0, settled: -1}
	w.queueSide = liveSide{on: w.queue != nil, settled: -1}
	if c.Nodes > 0 {
		allow := make(map[int]time.Duration, len(w.nodes))
		for _, n := range w.nodes {
			switch {
			case n.refused:
			case !n.up:
				allow[n.id] = c.Faults.Process.RestartMax + slack
			case n.stopping:
				// The stop's two graces, its last commit, and the restart.
				allow[n.id] = 2*n.cfg.Grace + c.SyncDelay + 2*slack + c.Faults.Process.RestartMax
			}
		}
		w.chk.BeginLiveness(c.HandlerMax, c.Faults.Process.RestartMax, allow)
	}
	if w.queue != nil {
		w.queueSide.bound = now + w.queueBound()
	}
	w.updateBounds()
}

// queueBound is the queue side's allowance from now: what is in flight must come back (its
// handler end, its hiding), then work over the workers' slots plus the longest chain of one
// message's deliveries, each a receive, a handler, a disposition and the longest hiding after it.
func (w *World) queueBound() time.Duration {
	c := w.cfg
	now := w.loop.Now()
	t := c.Faults.Transport
	slack := c.Faults.Timing.Slack()
	// Worker processes down, stopping or failed come back after their stop and restart.
	allow := c.Faults.Process.RestartMax + 2*c.Grace + slack
	// In flight now: hidden until its visibility deadline, or held by a handler that runs on
	// (renewed until it ends, the ceiling at most).
	initial := time.Duration(0)
	st := w.queue.Status(w.now())
	live := 0
	for _, m := range st.Messages {
		if m.State == queue.Visible || m.State == queue.InFlight {
			live++
		}
		if m.State == queue.InFlight {
			initial = max(initial, m.VisibleAt.Sub(Epoch)-now)
		}
	}
	for _, p := range w.workers {
		for _, h := range p.handlers {
			initial = max(initial, min(h.end-now, ceiling)+c.Visibility)
		}
	}
	receive := max(c.PollWait, worker.IdleDelayDefault) + 2*t.LatencyMax + slack
	hide := max(300*time.Second, c.MsgCap.Truncate(time.Second)+time.Second, c.Visibility)
	step := receive + c.HandlerMax + t.LatencyMax + hide
	deliveries := time.Duration(c.Budget + 1)
	slots := time.Duration(max(1, c.Workers*c.Concurrency))
	return allow + initial + time.Duration(live)*deliveries*c.HandlerMax/slots + deliveries*step
}

// updateBounds recomputes the runner side's bound (it grows with the attempts drawn) and notes
// when each side settled; it returns the deadline the loop may run to: the earliest bound of a
// side not settled yet.
func (w *World) updateBounds() time.Duration {
	now := w.loop.Now()
	if w.runnerSide.on && w.runnerSide.settled < 0 {
		b := time.Duration(0)
		settled := true
		for _, n := range w.nodes {
			b = max(b, w.chk.RunnerBound(n.id))
			settled = settled && n.settled()
		}
		w.runnerSide.bound = b
		if settled {
			w.runnerSide.settled = now
		}
	}
	if w.queueSide.on && w.queueSide.settled < 0 && w.msgs.settled(w) {
		w.queueSide.settled = now
	}
	limit := never
	for _, s := range []liveSide{w.runnerSide, w.queueSide} {
		if s.on && s.settled < 0 {
			limit = min(limit, s.bound)
		}
	}
	w.bound = max(w.runnerSide.bound, w.queueSide.bound)
	return limit
}

// Liveness is a run's settle time against its bound, per side (from the start of the phase).
type Liveness = liveness.Liveness

// Side is one side's settle time and bound from the start of the liveness phase.
type Side = liveness.Side

func (w *World) livenessResult() Liveness {
	side := func(s liveSide) Side {
		out := Side{On: s.on, Settled: -1, Bound: max(0, s.bound-w.safetyEnd)}
		if s.settled >= 0 {
			out.Settled = s.settled - w.safetyEnd
		}
		return out
	}
	return Liveness{Runner: side(w.runnerSide), Queue: side(w.queueSide)}
}
