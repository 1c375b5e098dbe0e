package sluicetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/internal/outcome"
	"github.com/sluicehq/sluice/internal/runnerkit"
	"github.com/sluicehq/sluice/sim"
	"github.com/sluicehq/sluice/sim/disk"
	"github.com/sluicehq/sluice/sim/faults"
)

const (
	journalName     = "jobs.journal"
	capacityDefault = 4
	jobsMaxDefault  = 8
	horizonDefault  = 30 * time.Second
	stepsMaxDefault = 100_000
	// restartsMax bounds the failed reopens in a row before the run reports it.
	restartsMax = 50
	// diskStorm multiplies the disk profile's rates when the DiskFaults knob is on.
	diskStorm = 10
)

// world is one run: core/runner's Node, the host the production owner executes, executed over
// sim/disk with the world's clock and faults.
type world[A any] struct {
	*sched
	sc      *Scenario[A]
	codec   sluice.Codec[A]
	disk    *disk.Disk
	ecfg    runner.Config
	rJitter *rand.Rand
	rClose  *rand.Rand    // close points
	kit     runnerkit.Kit // the user's Config as a Runner runs it: middleware, hooks, defaults

	node       *runner.Node   // nil while the process is down
	eng        *runner.Engine // node's, for reads
	ref        runner.Ref     // the last command's
	gen        int
	stopping   bool
	restarting bool
	failedOpen int
	wakeAt     time.Time

	plan     []planOp[A]
	planLeft int
	pending  map[runner.Ref]int // plan op awaiting its acknowledgement
	running  map[runner.Token]*attempt
	refID    []uint64 // JobRef -> acknowledged id (0: none)

	acked       map[uint64]bool
	settled     map[uint64]runner.JobState
	reported    map[uint64]bool      // a success outcome was fed for the job
	cancelAcked map[uint64]time.Time // when the job's cancel became durable
	last        runner.Snapshot      // the state when the process last went down
	closed      bool                 // it went down by a graceful stop, not a crash

	crashCalls []int // crash after this many completed calls (ascending)
	stopCalls  []int
}

// Violation is a broken invariant found by a run.
type Violation struct {
	Seed      int64
	Knobs     Knobs
	Invariant string
	Err       error
	At        time.Duration // simulated time since the start
	Timeline  []string
}

// Token is the replay token of the run: SLUICETEST_SEED=<token> replays it exactly.
func (v *Violation) Token() string { return fmt.Sprintf("%d:%s", v.Seed, v.Knobs) }

func (v *Violation) Error() string {
	return fmt.Sprintf("seed %d: invariant %q broken at +%s: %v", v.Seed, v.Invariant, v.At, v.Err)
}

// result is a finished run.
type result struct {
	violation *Violation
	timeline  []string
	digest    [32]byte
}

// run runs the scenario once for seed with knobs k.
func run[A any](sc *Scenario[A], seed int64, k Knobs) result {
	w := newWorld(sc, seed, k)
	w.run(w, w.stepsMax(), loopText{unsettled: "jobs have not settled", stepsField: "Scenario.StepsMax", end: "every job settled"})
	return finished(w.violation, w.log)
}

// finished is a run's result: its violation (with the timeline attached) and the digest of
// its timeline, which the determinism guard compares.
func finished(v *Violation, log []string) result {
	res := result{violation: v, timeline: log}
	h := sha256.New()
	for _, l := range log {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	copy(res.digest[:], h.Sum(nil))
	if res.violation != nil {
		res.violation.Timeline = log
	}
	return res
}

func newWorld[A any](sc *Scenario[A], seed int64, k Knobs) *world[A] {
	w := &world[A]{
		sched:       newSched(seed, k, "disk"),
		sc:          sc,
		codec:       sc.Codec,
		disk:        disk.New(sim.Stream(seed, "disk").Int63()),
		rJitter:     sim.Stream(seed, "jitter"),
		rClose:      sim.Stream(seed, "close-point"),
		pending:     map[runner.Ref]int{},
		running:     map[runner.Token]*attempt{},
		acked:       map[uint64]bool{},
		settled:     map[uint64]runner.JobState{},
		reported:    map[uint64]bool{},
		cancelAcked: map[uint64]time.Time{},
	}
	if w.codec == nil {
		w.codec = sluice.JSON[A]()
	}
	if k.DiskFaults {
		// simrun's disk profile, every kind at ten times its drawn rate: a sluicetest run makes
		// tens of disk operations where a simrun run makes thousands.
		fs := w.fs
		fs.Storm(diskStorm)
		w.disk.SetFaults(fs.Disk)
	}
	kit, err := sluice.NewRunnerKit(sc.simConfig(), sc.kindName(), sc.Setup(&Env{w: w.sched}), sc.Kind...)
	if err != nil {
		panic(err) // validate refused it before any run
	}
	w.kit, w.ecfg = kit, kit.Engine
	w.ecfg.Decode = func(b []byte) (any, error) { return w.codec.Decode(b) }

	// The workload first, from its own stream, so the knobs never shift its draws.
	p := &Plan[A]{jobsMax: k.Jobs}
	if sc.Workload != nil {
		sc.Workload(sim.Stream(seed, "workload"), p)
	}
	w.plan = p.sorted()
	for i := range w.plan {
		op := &w.plan[i]
		if op.kind != opEnqueue {
			continue
		}
		var err error
		if op.o, err = kit.JobOpts(op.payload, op.opts); err != nil {
			w.fail("the workload's job options", fmt.Errorf("job ref %d: %w", op.ref, err))
		}
	}
	w.refID = make([]uint64, p.refs)
	w.planLeft = len(w.plan)
	for i, op := range w.plan {
		w.at(epoch.Add(op.at), func() { w.planLeft--; w.submit(i) })
	}

	// Crash points: a third each at a random time, after a random service call, and inside a
	// commit (armed at a random time); stop points: half at a random time, half while a random
	// service call is in flight.
	// Crash and stop points come from their own streams, so lowering one knob while
	// shrinking keeps the other points (and the first n of its own) where they were.
	callsGuess := 3 * k.Jobs
	rc, rs := sim.Stream(seed, "crashes"), sim.Stream(seed, "stops")
	for range k.Crashes {
		kind, at, n := rc.Intn(3), randDur(rc, k.Horizon), 1+rc.Intn(callsGuess)
		switch kind {
		case 0:
			w.at(epoch.Add(at), w.crashPoint)
		case 1:
			w.crashCalls = append(w.crashCalls, n)
		default:
			w.at(epoch.Add(at), w.armCommitCrash)
		}
	}
	for range k.Stops {
		kind, at, n := rs.Intn(2), randDur(rs, k.Horizon), 1+rs.Intn(callsGuess)
		if kind == 0 {
			w.at(epoch.Add(at), w.stop)
		} else {
			w.stopCalls = append(w.stopCalls, n)
		}
	}
	slices.Sort(w.crashCalls)
	slices.Sort(w.stopCalls)
	w.onCallDone, w.onCallIssued, w.onOutcome = w.callHook, w.stopHook, w.outcome
	w.loop.AtExact(k.Horizon, w.horizon)
	return w
}

// simConfig is the user's Config with the world's parts: Capacity 0 means 4 (the simulation
// does not read the CPU count), and the logs are discarded (the timeline says what happened).
func (sc *Scenario[A]) simConfig() sluice.Config {
	cfg := sc.Config
	if cfg.Capacity == 0 {
		cfg.Capacity = capacityDefault
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

func randDur(r *rand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(r.Int63n(int64(d)))
}

// callHook schedules the crashes that wait for the n-th completed call.
func (w *world[A]) callHook() {
	for len(w.crashCalls) > 0 && w.crashCalls[0] <= w.callsN {
		w.crashCalls = w.crashCalls[1:]
		if !w.stormOver {
			w.after(randDur(w.rFault, 20*time.Millisecond), w.crashPoint)
		}
	}
}

// stopHook schedules the stops that wait for the n-th issued call, while it is in flight: a
// graceful stop that finds its handler inside a call.
func (w *world[A]) stopHook(lat time.Duration) {
	for len(w.stopCalls) > 0 && w.stopCalls[0] <= w.issuedN {
		w.stopCalls = w.stopCalls[1:]
		if !w.stormOver {
			w.after(randDur(w.rFault, lat), w.stop)
		}
	}
}

func (w *world[A]) stepsMax() int {
	if w.sc.StepsMax > 0 {
		return w.sc.StepsMax
	}
	return stepsMaxDefault
}

// release ends the handler goroutines a violation left parked, so a sweep leaks none.
func (w *world[A]) release() {
	if w.aborted != nil {
		return // a blocked handler cannot be ended; the report says so
	}
	for _, a := range w.running { // order-free: each ends on its own, nothing is logged
		w.kill(a)
	}
}

func (w *world[A]) up() bool { return w.eng != nil }

// settledAll: the storm is over, the plan done, and nothing waits, runs or is in flight.
func (w *world[A]) settledAll() bool {
	return w.stormOver && w.planLeft == 0 && w.eng != nil && !w.stopping && w.eng.Idle() && !w.node.Flying() &&
		len(w.running) == 0 && w.inflight == 0 && len(w.pending) == 0
}

// crashPoint crashes the process, if it runs and the storm is not over.
func (w *world[A]) crashPoint() {
	if w.eng != nil && !w.stormOver {
		w.crash("crash")
	}
}

// armCommitCrash cuts the process at its k-th mutating disk operation from now, k drawn as
// simrun's crash points are: over every operation of a batch and of a compaction's swap.
func (w *world[A]) armCommitCrash() {
	if w.eng != nil && !w.stormOver {
		n := w.fs.Process.Point(w.rFault)
		w.logf("arm    crash at the %d-th disk write or sync from now", n)
		w.disk.CrashAfter(n)
	}
}

// stop begins a graceful stop: the Node's close sequence.
func (w *world[A]) stop() {
	if w.eng != nil && !w.stopping && !w.stormOver {
		w.logf("stop   graceful stop begins")
		w.stopping = true
		w.step(runner.Close{Compact: w.sc.Config.CompactOnClose})
	}
}

// horizon ends the storm: no more faults; a process down is restarted.
func (w *world[A]) horizon() {
	w.stormOver = true
	w.svcFault = false
	w.disk.SetFaults(faults.Disk{})
	w.logf("calm   no more faults")
	if w.eng == nil && !w.restarting {
		w.scheduleRestart()
	}
}

// submit proposes a planned command to the Node, as the owner does with a producer's call.
func (w *world[A]) submit(i int) {
	op := w.plan[i]
	if w.eng == nil {
		w.logf("refuse plan op %d (runner down): the producer gets an error", i)
		return
	}
	var cmd runner.Event
	switch op.kind {
	case opEnqueue:
		b, eerr := w.codec.Encode(op.payload)
		if eerr != nil {
			w.fail("codec", fmt.Errorf("encoding the payload of job ref %d: %w", op.ref, eerr))
			return
		}
		o := op.o
		cmd = runner.Enqueue{Due: epoch.Add(op.due), Target: op.target, Payload: b, Opts: o}
		o.Kind = "" // the kit's, on every job
		w.logf("enq    ref %d target=%s due=+%s%s", op.ref, op.target, op.due, runner.DescribeOpts(o))
	case opCancel:
		id := w.refID[op.ref]
		if id == 0 {
			w.logf("skip   cancel of ref %d (never acknowledged)", op.ref)
			return
		}
		cmd = runner.Cancel{ID: id}
		w.logf("cancel job %d", id)
	case opRetry:
		id := w.refID[op.ref]
		if id == 0 {
			w.logf("skip   retry of ref %d (never acknowledged)", op.ref)
			return
		}
		cmd = runner.Retry{ID: id}
		w.logf("retry  job %d", id)
	}
	w.ref++
	w.step(runner.Propose{Ref: w.ref, Cmd: cmd})
	if _, err := w.node.LastProposal(); err != nil {
		w.logf("refuse %v", err)
		return
	}
	w.pending[w.ref] = i
}

// step tells the Node the world's time, then steps in.
func (w *world[A]) step(in runner.Input) {
	w.node.Step(runner.Clock{Now: w.now})
	w.node.Step(in)
}

func (w *world[A]) outcome(a *attempt) {
	if a.dead || a.gen != w.gen || w.running[a.tok] != a {
		return
	}
	delete(w.running, a.tok)
	a.cancel(nil)
	out := a.out
	w.logf("end    %v %s", a.tok, describeOutcome(out))
	if out == nil {
		w.reported[a.tok.ID] = true
	}
	w.step(runner.Ended{Token: a.tok, Outcome: outcome.Runner(out)})
}

func (w *world[A]) drive() { w.commit() }

// commit performs the Node's Readys. A written batch's sync lands as an event of this instant,
// after the events already due now: what they step goes into the next batch (pipelined, as in
// production).
func (w *world[A]) commit() {
	n := w.node
	n.Step(runner.Clock{Now: w.now})
	for w.node == n && n.HasReady() {
		rd := n.Ready()
		w.perform(rd)
		n.Advance()
		if w.node != n {
			return // crashed or closed
		}
		if err := n.CheckInvariants(); err != nil {
			w.fail("sluice engine invariant", err)
			return
		}
		if !rd.Sync.Empty() {
			gen := w.gen
			w.after(0, func() {
				if w.gen == gen && w.node == n {
					n.Step(runner.SyncDone{Err: rd.Sync.Sync()})
				}
			})
		}
		if !rd.WakeAt.IsZero() && !rd.WakeAt.Equal(w.wakeAt) {
			w.wakeAt = rd.WakeAt
			at := rd.WakeAt
			if min := w.now.Add(time.Millisecond); at.Before(min) {
				at = min
			}
			w.at(at, func() {}) // an instant to look at the Node again
		}
	}
}

// perform acknowledges, reports settled jobs, cancels and starts, in the order of the Node's
// effects; a failure crashes the process, a close ends it.
func (w *world[A]) perform(rd runner.Effects) {
	if rd.Failed != nil {
		w.crash(fmt.Sprintf("runner poisoned: %v", rd.Failed))
		return
	}
	for _, a := range rd.Acks {
		i, ok := w.pending[a.Ref]
		if !ok {
			continue
		}
		delete(w.pending, a.Ref)
		op := w.plan[i]
		switch op.kind {
		case opEnqueue:
			w.refID[op.ref] = a.ID
			w.acked[a.ID] = true
			w.logf("ack    ref %d is job %d", op.ref, a.ID)
		case opCancel:
			id := w.refID[op.ref]
			w.cancelAcked[id] = w.now
			w.logf("ack    cancel of job %d", id)
		case opRetry:
			delete(w.settled, w.refID[op.ref]) // dead no more: it runs again
			w.logf("ack    retry of job %d", w.refID[op.ref])
		}
	}
	w.kit.Durable(rd, w.now)
	for _, s := range rd.Settled {
		w.settled[s.ID] = s.State
		w.logf("settle job %d %s after %d attempts", s.ID, s.State, s.Attempts)
	}
	for _, c := range rd.Cancels {
		a := w.running[c.Token]
		if a == nil || a.finished.Load() {
			continue
		}
		cause := sluice.ErrShutdown
		if c.Why == runner.ByUser {
			cause = sluice.ErrJobCancelled
			a.userCancelled = true
		}
		w.logf("cancel %v (%v)", c.Token, cause)
		a.cancelled = true
		a.cancel(cause)
		w.interrupt(a, cause)
	}
	for _, s := range rd.Starts {
		w.start(s)
		if w.aborted != nil {
			return
		}
	}
	if rd.Compact {
		_ = w.node.Compact() // a kept failure leaves the old journal; a lost one shows at Close
	}
	if rd.Close {
		w.finishClose()
	}
}

// start runs the handler of s on its own goroutine until it parks or returns.
func (w *world[A]) start(s runner.Attempt) {
	a := &attempt{w: w.sched, tok: s.Token, gen: w.gen, resume: make(chan reply)}
	ctx, cancel := w.kit.Context(context.WithValue(context.Background(), attemptKey{}, a), s.Timeout, w.timer(a))
	if d := w.ecfg.Policy.Deadline; d > 0 {
		ctx = deadlineCtx{Context: ctx, at: s.FirstDue.Add(d)}
	}
	a.cancel = cancel
	w.running[s.Token] = a
	w.logf("start  %v target=%s", s.Token, s.Target)
	w.kit.Started(s, w.now)
	attempt := w.kit.Attempt
	go func() {
		var out error
		defer func() { w.yield <- yieldMsg{att: a, done: true, out: out} }()
		out = attempt(ctx, s)
	}()
	w.await(a)
}

// timer is the kit's attempt timer for a on the simulated clock: when it fires while a still
// runs, the context's cause is ErrAttemptTimeout, and a parked call of a returns it at once.
func (w *world[A]) timer(a *attempt) func(time.Duration, func()) func() {
	return func(d time.Duration, fire func()) func() {
		stopped, gen := false, w.gen
		w.sched.after(d, func() {
			if stopped || w.gen != gen || w.running[a.tok] != a || a.finished.Load() {
				return
			}
			w.logf("timeout %v after %v", a.tok, d)
			fire()
			w.interrupt(a, sluice.ErrAttemptTimeout)
		})
		return func() { stopped = true }
	}
}

// crash kills the process: running handlers die at their current call, unacknowledged commands
// are lost, the disk keeps what a power cut leaves.
func (w *world[A]) crash(why string) {
	w.logf("CRASH  %s", why)
	w.closed = false
	w.killAll()
	w.eng, w.node = nil, nil
	w.disk.Crash()
	if rep := w.disk.LastCrash(); rep != "" {
		for _, l := range strings.Split(rep, "\n") {
			w.logf("disk   %s", l)
		}
	}
	w.scheduleRestart()
}

// afterClose, when set (by a test), may change what the closing runner held: a seam to plant
// a Close that did not make all of it durable.
var afterClose func(last *runner.Snapshot)

// finishClose performs Effects.Close: the journal closed (after the Node's flush and
// compaction); the process then exits and attempts still running are abandoned.
func (w *world[A]) finishClose() {
	w.armClosePoint()
	if err := w.node.Close(); err != nil {
		w.crash(fmt.Sprintf("close failed: %v", err))
		return
	}
	w.logf("stop   runner closed; the process exits")
	if tok, ok := w.uncancelled(); ok {
		w.fail("a graceful stop waits for its handlers", fmt.Errorf("the runner closed while attempt %v ran, never cancelled: the stop gives a running handler its grace, then cancels it, before it closes", tok))
		return
	}
	w.killAll()
	w.eng, w.node = nil, nil
	w.closed = true // w.last is what the closing runner held: all of it durable
	if afterClose != nil {
		afterClose(&w.last)
	}
	w.scheduleRestart()
}

// armClosePoint draws the disk profile's close point: with its probability, a crash cuts Close
// at its k-th mutating disk operation (the clean-close mark's write, or its sync).
func (w *world[A]) armClosePoint() {
	p := w.fs.Process.ClosePoint
	if !w.k.DiskFaults || w.stormOver || p == 0 || !faults.Hit(w.rClose, p) {
		return
	}
	k := 1 + w.rClose.Intn(faults.ClosePointOps)
	w.logf("arm    crash at Close's disk operation %d", k)
	w.disk.CrashAfter(k)
}

// uncancelled reports the first attempt, by token, still running and never cancelled.
func (w *world[A]) uncancelled() (runner.Token, bool) {
	for _, t := range w.runningTokens() {
		if !w.running[t].cancelled {
			return t, true
		}
	}
	return runner.Token{}, false
}

// runningTokens lists the running attempts in token order (never map order).
func (w *world[A]) runningTokens() []runner.Token {
	toks := make([]runner.Token, 0, len(w.running))
	for t := range w.running {
		toks = append(toks, t)
	}
	sort.Slice(toks, func(i, j int) bool {
		if toks[i].ID != toks[j].ID {
			return toks[i].ID < toks[j].ID
		}
		return toks[i].Attempt < toks[j].Attempt
	})
	return toks
}

func (w *world[A]) killAll() {
	if w.eng != nil {
		w.last = w.eng.State()
	}
	for _, t := range w.runningTokens() {
		a := w.running[t]
		a.cancel(sluice.ErrShutdown)
		w.kill(a)
	}
	w.running = map[runner.Token]*attempt{}
	lost := make([]int, 0, len(w.pending))
	for _, i := range w.pending {
		lost = append(lost, i)
	}
	slices.Sort(lost)
	for _, i := range lost {
		w.logf("lost   plan op %d was not acknowledged", i)
	}
	w.pending = map[runner.Ref]int{}
	w.stopping = false
	w.wakeAt = time.Time{}
	w.gen++
}

func (w *world[A]) scheduleRestart() {
	w.restarting = true
	w.after(w.restartIn(), func() {
		w.restarting = false
		w.open()
	})
}

// open starts the process: Open (replay, requeue interrupted attempts), then Run's dispatch on.
func (w *world[A]) open() {
	ecfg := w.ecfg
	ecfg.Rand = rand.New(rand.NewSource(w.rJitter.Int63()))
	e, err := runner.Open(w.disk, journalName, ecfg, w.now)
	if err != nil {
		w.failedOpen++
		w.logf("open   failed: %v", err)
		if (sim.Injected(err, w.fs.Disk) || errors.Is(err, disk.ErrCrashed)) && w.failedOpen < restartsMax {
			w.disk.Crash()
			w.scheduleRestart()
			return
		}
		w.fail("restart", fmt.Errorf("the runner could not reopen its journal: %w", err))
		return
	}
	w.failedOpen = 0
	w.eng, w.node = e, runner.NewNode(e, runner.NodeConfig{})
	w.logf("open   %d interrupted attempts requeued", e.Orphans())
	if err := w.reopenedAsClosed(); err != nil {
		w.fail("a graceful stop keeps every outcome", err)
		return
	}
	if err := w.recovered(); err != nil {
		w.fail("durable state survives a restart", err)
		return
	}
	w.step(runner.Admit{On: true})
}

// reopenedAsClosed compares the journal reopened after a graceful stop with what the closing
// runner held, which Close made durable: each job as it was (attempts running at the stop
// requeued), unless compaction at close pruned it settled.
func (w *world[A]) reopenedAsClosed() error {
	if !w.closed {
		return nil
	}
	w.closed = false
	for _, c := range w.last.Jobs {
		j, ok := w.eng.Get(c.ID)
		switch {
		case !ok && c.State.Terminal():
		case !ok:
			return fmt.Errorf("job %d was %s when the runner closed, and is gone from the reopened journal", c.ID, c.State)
		case c.State == runner.Running:
			if j.State.Terminal() || j.Attempts < c.Attempts {
				return fmt.Errorf("job %d was running attempt %d when the runner closed, and reopened %s after %d", c.ID, c.Attempts, j.State, j.Attempts)
			}
		case j.State != c.State || j.Attempts != c.Attempts:
			return fmt.Errorf("job %d was %s after %d attempts when the runner closed, and reopened %s after %d: the stop did not make it durable",
				c.ID, c.State, c.Attempts, j.State, j.Attempts)
		}
	}
	return nil
}

// recovered compares the reopened journal with what the process was told was durable: every
// acknowledged job is there, unless it settled (compaction prunes settled jobs), and every job
// reported settled is still settled, in the same state. A terminal job the world had not seen
// settle (the process died between the sync and its effects) is settled from now on.
func (w *world[A]) recovered() error {
	ids := make([]uint64, 0, len(w.acked))
	for id := range w.acked {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		j, ok := w.eng.Get(id)
		st, settled := w.settled[id]
		switch {
		case !ok && !settled:
			return fmt.Errorf("acknowledged job %d is gone from the reopened journal", id)
		case ok && settled && j.State != st:
			return fmt.Errorf("job %d was reported settled %s, but the reopened journal has it %s", id, st, j.State)
		case ok && !settled && j.State.Terminal():
			w.settled[id] = j.State
		}
	}
	return nil
}

// jobs is the last durable state in the invariants' terms.
func (w *world[A]) jobs() []JobView[A] {
	s := w.last
	if w.eng != nil {
		s = w.eng.State()
	}
	out := make([]JobView[A], 0, len(s.Jobs))
	for _, j := range s.Jobs {
		v := JobView[A]{ID: j.ID, Target: j.Target, State: publicState(j), Attempts: j.Attempts, Acked: w.acked[j.ID]}
		if p, err := w.codec.Decode(j.Payload); err == nil {
			v.Payload = p
		}
		out = append(out, v)
	}
	return out
}

// checkAll runs the provided invariants and the user's.
func (w *world[A]) checkAll() {
	if w.violation != nil {
		return
	}
	for _, inv := range w.provided() {
		if err := inv.Check(View[A]{w}); err != nil {
			w.fail(inv.Name, err)
			return
		}
	}
	for _, inv := range w.sc.Invariants {
		if err := inv.Check(View[A]{w}); err != nil {
			w.fail(inv.Name, err)
			return
		}
	}
}

func (w *world[A]) provided() []Invariant[A] {
	return []Invariant[A]{
		{Name: "no effect after cancel", Check: func(View[A]) error {
			if c, svc, ok := w.effectAfterCancel(); ok {
				return fmt.Errorf("attempt %d#%d's call %s.%s key %q took effect although the job's cancellation had reached its context (does the handler use context.WithoutCancel or context.Background?)",
					c.Job, c.Attempt, svc, c.Op, c.Key)
			}
			return nil
		}},
		{Name: "success was reported", Check: func(View[A]) error {
			ids := make([]uint64, 0, len(w.settled))
			for id, st := range w.settled {
				if st == runner.Succeeded && !w.reported[id] {
					ids = append(ids, id)
				}
			}
			if len(ids) > 0 {
				slices.Sort(ids)
				return fmt.Errorf("job %d settled succeeded but no attempt reported success", ids[0])
			}
			return nil
		}},
		{Name: "acknowledged jobs settle", Check: func(View[A]) error {
			if !w.final {
				return nil
			}
			ids := make([]uint64, 0, len(w.acked))
			for id := range w.acked {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			for _, id := range ids {
				if _, ok := w.settled[id]; ok {
					continue
				}
				j, ok := w.eng.Get(id)
				if !ok {
					return fmt.Errorf("acknowledged job %d is lost", id)
				}
				if w.heldByDead(id) {
					continue // held by a dead job of its sequence (WithHoldOnDead), as promised
				}
				if !j.State.Terminal() {
					return fmt.Errorf("acknowledged job %d is %s at the end", id, j.State)
				}
			}
			return nil
		}},
	}
}

// heldByDead reports whether, by the world's own records (the plan's options and the settled
// jobs, not the runner under test), job id waits behind an earlier job of its sequence that
// settled dead while holding it (planned in a sequence of a WithHoldOnDead kind).
func (w *world[A]) heldByDead(id uint64) bool {
	var group, kind string
	for _, op := range w.plan {
		if op.kind == opEnqueue && w.refID[op.ref] == id {
			group, kind = op.o.Group, op.o.Kind
		}
	}
	if group == "" {
		return false
	}
	for _, op := range w.plan {
		if op.kind != opEnqueue || !op.o.Hold || op.o.Group != group || op.o.Kind != kind {
			continue
		}
		if by := w.refID[op.ref]; by != 0 && by < id && w.settled[by] == runner.Dead {
			return true
		}
	}
	return false
}

func describeOutcome(err error) string {
	switch k, _ := outcome.Of(err); k {
	case outcome.KindSucceeded:
		return "succeeded"
	case outcome.KindRetry:
		return fmt.Sprintf("failed (retryable=true): %v", err)
	case outcome.KindPanicked:
		return fmt.Sprintf("panicked: %v", err)
	}
	return fmt.Sprintf("failed (retryable=false): %v", err)
}

// publicState is a job's state as sluice.Runner.Get reports it (pending, waiting, deferred).
func publicState(j runner.Job) sluice.State {
	if j.State == runner.Waiting {
		switch {
		case j.Deferred:
			return sluice.StateDeferred
		case j.Attempts == 0:
			return sluice.StatePending
		}
	}
	return stateOf(j.State)
}

func stateOf(s runner.JobState) sluice.State {
	switch s {
	case runner.Waiting:
		return sluice.StateWaiting
	case runner.Running:
		return sluice.StateRunning
	case runner.Succeeded:
		return sluice.StateSucceeded
	case runner.Dead:
		return sluice.StateDead
	case runner.Cancelled:
		return sluice.StateCancelled
	}
	return 0
}

// deadlineCtx reports the job's retry deadline in simulated time; it never fires on its own
// (a real timer would compare simulated time with the wall clock).
type deadlineCtx struct {
	context.Context
	at time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.at, true }
