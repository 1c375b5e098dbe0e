package sluice

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/internal/outcome"
)

// wakeMin is the shortest timer the owner sets, so a wake time at or before now cannot spin.
const wakeMin = time.Millisecond

// The owner executes core/runner's Node, the runner's one protocol (docs/runner.md, "The
// host"): it steps what arrives (commands, outcomes, the timer, Close, the sync's result) into
// the Node and performs the effects the Node returns, and reads no state to choose anything.
// What is its own:
//
//  1. Goroutines and channels: one owner goroutine per Runner steps the Node; a syncer
//     goroutine runs the fsync of the batch in flight (one at a time); a pool of at most
//     Capacity attempt goroutines runs the handlers, through the middleware, each with a
//     context the Node's cancels end (context.Cause is ErrJobCancelled or ErrShutdown).
//     Panics become Panicked.
//  2. Gathering: it blocks for one input, then takes what else is already waiting while the
//     Node has Room (group commit), yielding once before a write so that callers just
//     acknowledged can join it. Every input follows a Clock with the time it was taken.
//  3. Time only from Config.Clock: one timer, set to Effects.WakeAt.
//  4. A failure (Effects.Failed) cancels every running handler, and Run and Drain return
//     it; recovery is Close and Open again (the disk is the truth).
//  5. At Effects.Close: handlers still running are abandoned, the journal and the
//     directory are closed, and Stats keeps the values at close.
//
// Invariant of the owner (checkInvariants, after every Ready): at most Capacity attempts run.
type owner struct {
	r       *Runner
	node    *runner.Node
	eng     *runner.Engine // the Node's, for reads only
	closeFS func() error
	failed  error
	timer   *clock.Timer
	quit    <-chan struct{}      // Close was called; nil once stepped
	kinds   map[string]kindEntry // registered (Register)

	// Invariant: running holds exactly the attempts whose handler goroutine has not reported.
	running map[runner.Token]context.CancelCauseFunc
	next    runner.Ref
	calls   map[runner.Ref]command       // commands and reads the Node has not answered
	waits   map[runner.Ref]chan struct{} // waiters the Node has not woken

	// work feeds the attempt goroutines, reused from one attempt to the next; workers is how
	// many were started. Invariant: queued plus running attempts = len(running) ≤ workers ≤
	// Capacity = cap(work), so a send on work never blocks the owner.
	work    chan attemptRun
	workers int
	// taken is the outcomes slice last taken from the outbox, handed back to it at the next
	// take (two slices serve in turn, so no outcome allocates).
	taken []doneMsg

	// flying: a batch's sync is on the syncer and its result not yet taken from synced.
	flying bool
	toSync chan runner.Batch // to the syncer goroutine (started with the first batch)
	synced chan error        // its results; capacity 1, so the syncer never blocks
}

// attemptRun is one attempt handed to a worker goroutine.
type attemptRun struct {
	ctx  context.Context
	kind kindEntry
	a    runner.Attempt
}

// dueWaiter is a DrainDue waiting until nothing due at or before t waits or runs.
type dueWaiter struct {
	t  time.Time
	ch chan struct{}
}

func (o *owner) loop() {
	defer close(o.r.exit)
	o.timer = o.r.clk.Timer(time.Hour)
	stopTimer(o.timer)
	defer func() {
		if o.toSync != nil {
			close(o.toSync) // never while flying: the Node closes only with nothing in flight
		}
	}()
	for {
		if o.pump() {
			return
		}
		cmds, done, synced := o.r.cmds, o.r.done.ready, o.synced
		if o.node.Room() == 0 {
			cmds, done = nil, nil
		}
		if !o.flying {
			synced = nil
		}
		select {
		case c := <-cmds:
			o.tick()
			o.command(c)
		case <-done:
			o.tick()
			o.outcomes()
		case <-o.timer.C:
			o.tick()
		case <-o.quit:
			o.quit = nil
			o.tick()
			o.node.Step(runner.Close{Compact: o.r.cfg.CompactOnClose})
		case err := <-synced:
			o.flying = false
			o.tick()
			o.node.Step(runner.SyncDone{Err: err})
			continue // perform the landing before taking more
		}
		o.gather()
	}
}

// pump performs every Ready the Node has. It reports true once the runner is closed.
func (o *owner) pump() bool {
	for o.node.HasReady() {
		rd := o.node.Ready()
		closed := o.perform(rd)
		o.node.Advance()
		if closed {
			return true
		}
		if err := o.checkInvariants(); err != nil {
			panic(err)
		}
		if rd.Landed != nil && rd.Sync.Empty() {
			o.gather() // what arrived during the flight joins the next batch
		}
	}
	return false
}

// tick tells the Node the time.
func (o *owner) tick() { o.node.Step(runner.Clock{Now: o.r.clk.Now()}) }

// syncer runs the fsync of each batch the owner hands it, one at a time, and reports the
// result; it ends when the owner closes in.
func syncer(in <-chan runner.Batch, out chan<- error) {
	for b := range in {
		out <- b.Sync()
	}
}

// gather takes what is already waiting while the Node has Room: outcomes, then commands, at
// the clock's time (the Node's Clock comes before what it takes). Before a write it lets
// callers just acknowledged send their next command first.
func (o *owner) gather() {
	if !o.node.Flying() && !o.r.cfg.opts.SyncEveryRecord {
		runtime.Gosched()
	}
	o.tick()
	o.outcomes()
	for o.node.Room() > 0 {
		select {
		case c := <-o.r.cmds:
			o.command(c)
		default:
			return
		}
	}
}

// outcomes steps the outcomes waiting in the outbox, as many as the Node has Room for.
func (o *owner) outcomes() {
	room := o.node.Room()
	if room == 0 {
		return
	}
	msgs := o.r.done.take(o.taken, room)
	for _, d := range msgs {
		o.outcome(d)
	}
	clear(msgs) // drop the errors they hold
	o.taken = msgs
}

// ref names a command, read or waiter for the Node.
func (o *owner) ref() runner.Ref {
	o.next++
	return o.next
}

func (o *owner) command(c command) {
	var cmd runner.Event
	switch c.kind {
	case cmdEnqueue:
		cmd = runner.Enqueue{Due: c.due, Target: c.target, Payload: c.payload, Opts: c.opts}
	case cmdEnqueueMany:
		cmd = runner.EnqueueMany{Jobs: c.jobs}
	case cmdCancel:
		cmd = runner.Cancel{ID: c.id}
	case cmdRetry:
		cmd = runner.Retry{ID: c.id}
	case cmdPause:
		cmd = runner.Pause{Kind: c.target}
	case cmdResume:
		cmd = runner.Resume{Kind: c.target}
	case cmdSchedule, cmdUnschedule:
		cmd = scheduleCmd(c)
	case cmdRegister:
		if _, dup := o.kinds[c.reg.name]; dup {
			c.reply <- reply{err: fmt.Errorf("sluice: Register %q: registered already", c.reg.name)}
			return
		}
		r := o.ref()
		o.calls[r] = c
		f := c.reg.flow
		o.node.Step(runner.RegisterKind{Ref: r, Kind: runner.KindConfig{Name: c.reg.name, Limit: c.reg.limit, Decode: c.reg.decode,
			Rate: f.rate.core(), KeyRate: f.keyRate.core(), KeyLimit: f.keyLimit, Fair: f.fair, Timeout: f.timeout}})
		return
	case cmdGet, cmdStats, cmdList, cmdSchedules, cmdBreakers, cmdPaused:
		r := o.ref()
		o.calls[r] = c
		o.node.Step(runner.Read{Ref: r})
		return
	case cmdDispatch:
		o.node.Step(runner.Admit{On: c.on})
		c.reply <- reply{}
		return
	case cmdWaitIdle, cmdWaitStopped, cmdWaitDue:
		o.wait(c)
		return
	default:
		panic(fmt.Sprintf("sluice: unknown command kind %d", c.kind))
	}
	r := o.ref()
	o.calls[r] = c
	o.node.Step(runner.Propose{Ref: r, Cmd: cmd})
}

// wait registers a waiter with the Node and hands its channel to the caller.
func (o *owner) wait(c command) {
	w := runner.Wait{Ref: o.ref(), For: runner.WaitIdle}
	switch c.kind {
	case cmdWaitStopped:
		w.For = runner.WaitStopped
	case cmdWaitDue:
		w.For, w.Through = runner.WaitDue, c.due
	}
	ch := make(chan struct{})
	o.waits[w.Ref] = ch
	o.node.Step(w)
	c.reply <- reply{wait: ch}
}

func (o *owner) outcome(d doneMsg) {
	o.running[d.tok](nil) // release the attempt's context
	delete(o.running, d.tok)
	if d.err != nil {
		o.r.log.Debug("sluice: attempt failed", "job", d.tok.ID, "attempt", d.tok.Attempt,
			"outcome", OutcomeName(d.err), "err", d.err)
	}
	o.node.Step(runner.Ended{Token: d.tok, Outcome: outcome.Runner(d.err)})
}

// perform carries out one Ready in the order of its fields. It reports true once the runner
// is closed.
func (o *owner) perform(rd runner.Effects) bool {
	if !rd.Sync.Empty() {
		o.startSync(rd.Sync)
	}
	for _, a := range rd.Acks {
		o.answer(a)
	}
	reportDurable(&o.r.cfg, rd, o.r.clk.Now())
	for _, c := range rd.Cancels {
		o.running[c.Token](causeOf(c.Why))
	}
	if len(rd.Starts) > 0 {
		now := o.r.clk.Now() // one instant for the batch the sync released
		for _, s := range rd.Starts {
			o.startAttempt(s, now)
		}
	}
	for _, r := range rd.Reads {
		c := o.calls[r]
		delete(o.calls, r)
		o.answerRead(c)
	}
	for _, r := range rd.Wakes {
		close(o.waits[r])
		delete(o.waits, r)
	}
	if rd.Failed != nil {
		o.becomeFailed(rd.Failed)
	}
	if rd.Compact {
		_ = o.node.Compact() // the engine logs a failure; the journal stands either way
	}
	if rd.Close {
		o.finishClose()
		return true
	}
	setTimer(o.timer, o.r.clk.Now(), rd.WakeAt)
	return false
}

// startSync hands a written batch to the syncer goroutine.
func (o *owner) startSync(b runner.Batch) {
	if o.toSync == nil {
		o.toSync, o.synced = make(chan runner.Batch, 1), make(chan error, 1)
		go syncer(o.toSync, o.synced)
	}
	o.flying = true
	o.toSync <- b
}

// answer replies to a command the Node answered.
func (o *owner) answer(a runner.Answer) {
	c := o.calls[a.Ref]
	delete(o.calls, a.Ref)
	switch {
	case c.kind == cmdRegister && a.Err == nil:
		o.kinds[c.reg.name] = c.reg
		c.reply <- reply{}
	case c.kind == cmdRegister && errors.Is(a.Err, runner.ErrInvalidConfig):
		c.reply <- reply{err: wrapf(nil, a.Err, "Register %q: the runner has started (Run or Drain); register every kind before", c.reg.name)}
	case a.Err != nil:
		c.reply <- reply{err: mapErr(a.Err)}
	default:
		c.reply <- reply{id: a.ID, ids: a.IDs, dup: a.Duplicate, dups: a.Duplicates}
	}
}

// startAttempt hands s to a worker goroutine, starting one if every worker is taken; the
// engine's decode check has already made the payload's value, and starts only jobs of
// registered kinds.
//
// The attempt's context has no parent: the owner cancels every attempt it ends itself (the
// engine's cancels, a failure, the close), so no parent's bookkeeping is paid per attempt.
func (o *owner) startAttempt(s runner.Attempt, now time.Time) {
	k, ok := o.kinds[s.Kind]
	if !ok {
		panic(fmt.Sprintf("sluice: the engine started job %d of unregistered kind %q", s.Token.ID, s.Kind))
	}
	ctx, cancel := attemptContext(context.Background(), s.Timeout, afterFunc(o.r.clk))
	o.running[s.Token] = cancel
	o.r.cfg.OnAttemptStarted(attemptStarted(s, now)) // as runnerkit.Kit.Started
	if o.work == nil {
		o.work = make(chan attemptRun, o.r.cfg.Capacity)
	}
	if len(o.running) > o.workers {
		o.workers++
		go work(o.r, o.work)
	}
	o.work <- attemptRun{ctx: ctx, kind: k, a: s}
}

// attempt runs one attempt's handler, through the middleware chain when one is set.
func (r *Runner) attempt(ctx context.Context, k kindEntry, s runner.Attempt) error {
	return runAttempt(ctx, r.chain, k, s)
}

// runAttempt runs k's handler for s through chain (nil: directly); a panic is a *PanicError.
func runAttempt(ctx context.Context, chain CallHandler, k kindEntry, s runner.Attempt) error {
	if chain == nil {
		return k.start(ctx, s)
	}
	call := Call{ID: strconv.FormatUint(s.Token.ID, 10), Kind: s.Kind, Target: s.Target, Attempt: s.Token.Attempt}
	return callThrough(ctx, chain, call, func(ctx context.Context) error { return k.start(ctx, s) })
}

// work runs attempts one after another until the owner has stopped, so a busy runner starts
// no goroutine per attempt. A handler still running at the stop is abandoned, as before.
func work(r *Runner, in <-chan attemptRun) {
	for {
		select {
		case a := <-in:
			r.done.put(doneMsg{tok: a.a.Token, err: r.attempt(a.ctx, a.kind, a.a)})
		case <-r.exit:
			return
		}
	}
}

// answerRead answers a read from the Node's state, which is durable when the Node says so.
func (o *owner) answerRead(c command) {
	switch c.kind {
	case cmdGet:
		j, ok := o.eng.Get(c.id)
		rep := reply{found: ok}
		if ok {
			rep.job = infoOf(j)
			rep.job.Blocked = o.blocked(&j)
		}
		c.reply <- rep
	case cmdStats:
		c.reply <- reply{stats: statsOf(o.eng.Status(), o.r.syncs.load())}
	case cmdSchedules:
		c.reply <- reply{scheds: o.eng.Schedules()}
	case cmdList:
		c.reply <- reply{page: listPage(o.eng, c.filter, o.blocked)}
	case cmdBreakers:
		c.reply <- reply{breakers: breakersOf(o.eng.Breakers())}
	case cmdPaused:
		c.reply <- reply{paused: o.paused()}
	}
}

// becomeFailed performs Effects.Failed: every running handler is cancelled, and Run and Drain
// return the failure. (The Node answered the pending commands with it.)
func (o *owner) becomeFailed(err error) {
	err = fmt.Errorf("sluice: runner stopped: %w", err) // the engine logged the failure
	o.failed = err
	for _, cancel := range o.running {
		cancel(err)
	}
	o.r.fail(err)
}

// finishClose performs Effects.Close: the last Stats, the handlers still running abandoned
// (their outcomes are ignored; the next Open counts them as interrupted), the journal and the
// directory closed.
func (o *owner) finishClose() {
	stopTimer(o.timer)
	o.r.last = statsOf(o.eng.Status(), o.r.syncs.load())
	for _, cancel := range o.running { // abandoned: the Node cancelled them already
		cancel(ErrShutdown)
	}
	err := o.node.Close()
	if ferr := o.closeFS(); err == nil {
		err = ferr
	}
	if err != nil {
		o.r.closeErr = fmt.Errorf("sluice: closing runner: %w", err)
	}
}

// checkInvariants states the owner's invariants in code; it runs after every Ready.
func (o *owner) checkInvariants() error {
	if n := len(o.running); n > o.r.cfg.Capacity {
		return fmt.Errorf("sluice: %d attempts running, capacity %d", n, o.r.cfg.Capacity)
	}
	return nil
}
