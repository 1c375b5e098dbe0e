package sluice

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/sluicehq/sluice/core/runner"
)

// gatherBytesMax bounds the payload bytes one commit gathers (one batch stays a few MiB even
// with 1 MiB payloads).
const gatherBytesMax = 16 << 20

// wakeMin is the shortest timer the owner sets, so a wake time at or before now cannot spin.
const wakeMin = time.Millisecond

// The owner's rules (the Runner's internals; docs/runner.md has the user's view):
//
//  1. One owner goroutine per Runner drives core/runner's Engine, and decides nothing: it
//     submits commands and outcomes, commits, and performs what the commit's result says
//     (acknowledge, report to the hooks, start, cancel, wake; at a stop: flush, compact,
//     close). Zero due times, the record size limit, undecodable payloads (the engine's
//     decode-check port, fed by the Codec) and which handlers to cancel are all the engine's
//     decisions, which the simulator runs too.
//  2. Group commit, pipelined: the owner blocks for one command, outcome or timer, then takes
//     everything else already waiting (up to gatherMax) into the same batch: one journal write,
//     one fsync. The fsync runs on the syncer goroutine (one in flight) while the owner keeps
//     taking commands and outcomes into the engine for the next batch (Engine.Stage); that
//     batch is written only once the sync returned (Engine.Finish, then Begin): never before.
//     Reads and waiters are answered only when the engine is quiet (every record it produced is
//     durable), so they see acknowledged state only; while one waits, the owner takes nothing
//     new during a flight, so the next Finish is quiet.
//  3. Attempts start only while Run or Drain is active, and only as the engine returns them
//     (their Started record durable). Each runs its handler, through the middleware, on its
//     own goroutine with a context that the engine's cancels end: context.Cause is
//     ErrJobCancelled (Cancel) or ErrShutdown (a stop's grace passed). Panics become Panicked.
//  4. A stop (Run's context ends, Drain's context ends, Close) turns admission off; the engine
//     waits Grace for running attempts, cancels those left, and waits Grace again. One still
//     running after that is abandoned (its outcome ignored). Close then flushes, compacts if
//     CompactOnClose, and closes the journal.
//  5. A failed commit (a poisoned journal), or a durable one after which the engine is
//     poisoned (a compaction lost after its rename), fails every waiting and later command
//     with the first failure, cancels running handlers and stops dispatch at once; Run and
//     Drain return it. Recovery is Close and Open again (the disk is the truth).
//  6. Time comes only from Config.Clock: one timer, set to the engine's next wake time.
//  7. Stats after Close returns the values at close.
//
// Invariants of the owner (checkInvariants, after every commit): at most Capacity attempts
// run; a read left unanswered after a commit is held for the next, quiet one.

// owner is the single goroutine that drives the engine; every engine call happens here. It
// decides nothing: it submits commands and outcomes, commits, and performs what the result
// says (acknowledge, start, cancel, wake, and at a stop: flush, compact, close).
//
// One iteration: block for one command, outcome, timer, Close or the sync in flight; gather
// everything else already waiting (group commit); with no batch in flight, Begin one and hand
// its sync to the syncer; when the sync returns, Finish it and perform its result.
type owner struct {
	r       *Runner
	eng     *runner.Engine
	closeFS func() error
	failed  error
	timer   *clock.Timer
	quit    <-chan struct{} // Close was called; nil once the stop began
	closing bool
	kinds   map[string]kindEntry // registered (Register)

	// Invariant: running holds exactly the attempts whose handler goroutine has not reported.
	running map[runner.Token]context.CancelCauseFunc
	pending map[runner.Ticket]command // commands buffered in the engine, awaiting their commit
	reads   []command                 // answered after the commit, so they see acknowledged state only

	idleWaiters []chan struct{}
	stopWaiters []chan struct{}
	dueWaiters  []dueWaiter

	// work feeds the attempt goroutines, reused from one attempt to the next; workers is how
	// many were started. Invariant: queued plus running attempts = len(running) ≤ workers ≤
	// Capacity = cap(work), so a send on work never blocks the owner.
	work    chan attemptRun
	workers int
	// taken is the outcomes slice last taken from the outbox, handed back to it at the next
	// take (two slices serve in turn, so no outcome allocates).
	taken []doneMsg

	// The pipelined commit. Invariant: flying iff a batch's sync is on the syncer and its
	// result not yet taken from synced; nothing is written while flying.
	flying  bool
	batch   runner.Batch
	began   time.Time
	toSync  chan runner.Batch // to the syncer goroutine (started with the first batch)
	synced  chan error        // its results; capacity 1, so the syncer never blocks
	dirty   bool              // something was submitted since the last Begin
	holding bool              // a read or waiter wants a quiet Finish: take nothing new meanwhile
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
			close(o.toSync) // never while flying: the loop returns only after a Finish
		}
	}()
	for {
		cmds, done, synced := o.r.cmds, o.r.done.ready, o.synced
		if o.flying && o.holding {
			cmds, done = nil, nil
		}
		if !o.flying {
			synced = nil
		}
		select {
		case c := <-cmds:
			o.command(c)
		case <-done:
			o.outcomes()
		case <-o.timer.C:
		case <-o.quit:
			o.quit, o.closing = nil, true
			o.dispatch(false)
		case err := <-synced:
			o.flying = false
			if o.finish(o.batch, err) {
				return
			}
			if !o.dirty && o.eng.Quiet() {
				continue
			}
		}
		o.dirty = true
		if o.flying {
			// Prepare the next batch while this one syncs: take what is waiting, step it,
			// encode it.
			if !o.holding {
				o.gather()
				_ = o.eng.Stage() // a refusal poisons the engine; Finish reports it
			}
			continue
		}
		if !o.r.cfg.opts.SyncEveryRecord {
			// Let callers just acknowledged by the last commit send their next command, so
			// they share this commit instead of waiting for the one after.
			runtime.Gosched()
			o.gather()
		}
		if o.begin() {
			return
		}
	}
}

// begin writes everything submitted as one batch and hands its sync to the syncer, or, when
// nothing was written (or SyncEveryRecord), finishes at once. It reports true once the runner
// is closed.
func (o *owner) begin() bool {
	now := o.r.clk.Now()
	o.dirty = false
	if o.r.cfg.opts.SyncEveryRecord {
		res, err := o.engineCommit(now)
		return o.finished(now, res, err)
	}
	b, err := o.eng.Begin(now)
	if err != nil || b.Empty() {
		res, ferr := o.eng.Finish(b, nil)
		if err == nil {
			err = ferr
		}
		return o.finished(now, res, err)
	}
	if o.toSync == nil {
		o.toSync, o.synced = make(chan runner.Batch, 1), make(chan error, 1)
		go syncer(o.toSync, o.synced)
	}
	o.flying, o.batch, o.began = true, b, now
	o.toSync <- b
	return false
}

// syncer runs the fsync of each batch the owner hands it, one at a time, and reports the
// result; it ends when the owner closes in.
func syncer(in <-chan runner.Batch, out chan<- error) {
	for b := range in {
		out <- b.Sync()
	}
}

// finish ends the batch in flight with its sync's result. It reports true once the runner is
// closed.
func (o *owner) finish(b runner.Batch, syncErr error) bool {
	res, err := o.eng.Finish(b, syncErr)
	return o.finished(o.began, res, err)
}

// gather takes everything already waiting into the coming commit: every outcome, and up to
// gatherMax commands and gatherBytesMax of payload.
func (o *owner) gather() {
	o.outcomes()
	bytes := 0
	for range gatherMax {
		if bytes >= gatherBytesMax {
			return
		}
		select {
		case c := <-o.r.cmds:
			bytes += len(c.payload)
			o.command(c)
		default:
			return
		}
	}
}

// outcomes steps every outcome waiting in the outbox; with the internal SyncEveryRecord
// option only the first, so that each gets a commit of its own (the benchmark's baseline).
func (o *owner) outcomes() {
	limit := 0
	if o.r.cfg.opts.SyncEveryRecord {
		limit = 1
	}
	msgs := o.r.done.take(o.taken, limit)
	for _, d := range msgs {
		o.outcome(d)
	}
	clear(msgs) // drop the errors they hold
	o.taken = msgs
}

func (o *owner) command(c command) {
	now := o.r.clk.Now()
	var (
		t   runner.Ticket
		err error
	)
	switch c.kind {
	case cmdEnqueue:
		t, _, err = o.eng.EnqueueJob(now, runner.NewJob{Due: c.due, Target: c.target, Payload: c.payload, Opts: c.opts})
	case cmdEnqueueMany:
		t, _, err = o.eng.EnqueueMany(now, c.jobs)
	case cmdCancel:
		t, err = o.eng.Cancel(c.id)
	case cmdRetry:
		t, err = o.eng.Retry(now, c.id)
	case cmdRegister:
		c.reply <- reply{err: o.register(c.reg)}
		return
	case cmdSchedule, cmdUnschedule:
		t, err = o.scheduleCmd(now, c)
	case cmdGet, cmdStats, cmdList, cmdSchedules, cmdBreakers:
		o.reads = append(o.reads, c)
		return
	case cmdDispatch:
		o.dispatch(c.on)
		c.reply <- reply{}
		return
	case cmdWaitIdle:
		ch := make(chan struct{})
		o.idleWaiters = append(o.idleWaiters, ch)
		c.reply <- reply{wait: ch}
		return
	case cmdWaitStopped:
		ch := make(chan struct{})
		o.stopWaiters = append(o.stopWaiters, ch)
		c.reply <- reply{wait: ch}
		return
	case cmdWaitDue:
		ch := make(chan struct{})
		o.dueWaiters = append(o.dueWaiters, dueWaiter{c.due, ch})
		c.reply <- reply{wait: ch}
		return
	default:
		panic(fmt.Sprintf("sluice: unknown command kind %d", c.kind))
	}
	if err != nil {
		c.reply <- reply{err: o.refusal(err)}
		return
	}
	o.pending[t] = c
}

// refusal is the error for a command the engine refused: the runner's failure once it has
// failed (the engine then refuses everything as poisoned), else the engine's own reason.
func (o *owner) refusal(err error) error {
	if o.failed != nil {
		return o.failed
	}
	return mapErr(err)
}

// dispatch turns admission on or off; off begins the engine's graceful stop.
func (o *owner) dispatch(on bool) {
	// A poisoned engine refuses; the runner has failed already and Close will close it.
	_ = o.eng.Dispatch(o.r.clk.Now(), on)
}

func (o *owner) outcome(d doneMsg) {
	o.running[d.tok](nil) // release the attempt's context
	delete(o.running, d.tok)
	if d.out.Kind != KindSucceeded {
		o.r.log.Debug("sluice: attempt failed", "job", d.tok.ID, "attempt", d.tok.Attempt,
			"outcome", d.out.Kind.String(), "retryable", d.out.Retryable, "err", d.out.Err)
	}
	// A poisoned engine refuses the outcome; the commit reports the poison.
	_ = o.eng.AttemptDone(o.r.clk.Now(), d.tok, coreOutcome(d.out))
}

// finished performs what a commit begun at start returned: acknowledge, start, cancel, wake;
// at a quiet engine, answer reads and waiters. It reports true once the runner is closed.
func (o *owner) finished(start time.Time, res runner.Result, err error) bool {
	o.committed(start, res)
	o.perform(res)
	if err == nil {
		// A compaction lost after a durable batch poisons the engine with a nil error from
		// Finish: fail now, not at a next commit that an idle runner may reach much later.
		err = o.eng.Poisoned()
	}
	if err != nil && o.failed == nil {
		o.becomeFailed(err)
	}
	if o.closing && (res.Stopped || o.failed != nil) {
		o.finishClose()
		return true
	}
	setTimer(o.timer, o.r.clk.Now(), res.Wake)
	o.holding = false
	if o.failed != nil || o.eng.Quiet() {
		o.answerReads()
		o.notifyWaiters(res.Stopped)
	} else {
		// Records submitted during the flight are not durable yet: what they changed must not
		// be read, nor compacted. Hold new work off until the next Finish, which is then quiet.
		o.holding = len(o.reads) > 0 || res.CompactDue || o.waitersDue(res.Stopped)
	}
	if err := o.checkInvariants(); err != nil {
		panic(err)
	}
	return false
}

// committed reports the batch a commit begun at start made durable, if any, to OnCommitted.
func (o *owner) committed(start time.Time, res runner.Result) {
	if res.Records > 0 {
		o.r.cfg.OnCommitted(Committed{Records: res.Records, Duration: o.r.clk.Since(start)})
	}
}

// engineCommit is the internal SyncEveryRecord option's commit, not pipelined: the commands
// and outcomes are flushed on their own first, so the Started records of the attempts they
// admit get their own fsync: the benchmark's baseline pays about one fsync per record.
func (o *owner) engineCommit(now time.Time) (runner.Result, error) {
	first, err := o.eng.Flush(now)
	if err != nil {
		return first, err
	}
	o.committed(now, first)
	o.perform(first)
	return o.eng.Commit(now)
}

// perform acts on a commit's result: acknowledge, report settled jobs, cancel, start.
func (o *owner) perform(res runner.Result) {
	for _, a := range res.Acks {
		c := o.pending[a.Ticket]
		delete(o.pending, a.Ticket)
		c.reply <- reply{id: a.ID, ids: a.IDs, dup: a.Duplicate, dups: a.Duplicates}
	}
	reportTransitions(&o.r.cfg, res.Transitions)
	for _, s := range res.Settled {
		o.r.cfg.OnSettled(settledOf(s))
	}
	for _, c := range res.Cancels {
		o.running[c.Token](causeOf(c.Why))
	}
	if len(res.Starts) > 0 {
		now := o.r.clk.Now() // one instant for the batch the sync released
		for _, s := range res.Starts {
			o.startAttempt(s, now)
		}
	}
}

// register adds a kind to the engine (which refuses one after the first dispatch) and keeps
// its handler.
func (o *owner) register(e kindEntry) error {
	if _, dup := o.kinds[e.name]; dup {
		return fmt.Errorf("sluice: Register %q: registered already", e.name)
	}
	if err := o.eng.Register(runner.KindConfig{Name: e.name, Limit: e.limit, Decode: e.decode}); err != nil {
		return fmt.Errorf("sluice: Register %q: the runner has started (Run or Drain); register every kind before (%w)", e.name, err)
	}
	o.kinds[e.name] = e
	return nil
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
	ctx, cancel := context.WithCancelCause(context.Background())
	o.running[s.Token] = cancel
	o.r.cfg.OnAttemptStarted(attemptStarted(s, now))
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
func (r *Runner) attempt(ctx context.Context, k kindEntry, s runner.Attempt) Outcome {
	if r.chain == nil {
		return k.start(ctx, s)
	}
	call := Call{ID: strconv.FormatUint(s.Token.ID, 10), Kind: s.Kind, Target: s.Target, Attempt: s.Token.Attempt}
	call.inner = func(ctx context.Context) Verdict { return verdictOfOutcome(k.start(ctx, s)) }
	return outcomeOfVerdict(callChain(ctx, r.chain, call))
}

// work runs attempts one after another until the owner has stopped, so a busy runner starts
// no goroutine per attempt. A handler still running at the stop is abandoned, as before.
func work(r *Runner, in <-chan attemptRun) {
	for {
		select {
		case a := <-in:
			r.done.put(doneMsg{tok: a.a.Token, out: r.attempt(a.ctx, a.kind, a.a)})
		case <-r.exit:
			return
		}
	}
}

func (o *owner) answerReads() {
	for _, c := range o.reads {
		switch c.kind {
		case cmdGet:
			j, ok := o.eng.Get(c.id)
			rep := reply{found: ok}
			if ok {
				rep.job = infoOf(j)
			}
			c.reply <- rep
		case cmdStats:
			c.reply <- reply{stats: statsOf(o.eng.Status(), o.r.syncs.load())}
		case cmdSchedules:
			c.reply <- reply{scheds: o.eng.Schedules()}
		case cmdList:
			c.reply <- reply{page: listPage(o.eng, c.filter)}
		case cmdBreakers:
			c.reply <- reply{breakers: breakersOf(o.eng.Breakers())}
		}
	}
	o.reads = o.reads[:0]
}

// waitersDue reports whether a waiter would be woken now (notifyWaiters) by the live state.
func (o *owner) waitersDue(stopped bool) bool {
	if stopped && len(o.stopWaiters) > 0 || len(o.idleWaiters) > 0 && o.eng.Idle() {
		return true
	}
	for _, w := range o.dueWaiters {
		if o.eng.IdleThrough(w.t) {
			return true
		}
	}
	return false
}

// notifyWaiters wakes Drain: idle once nothing is waiting or running, stopped once the engine
// says a stop is done (or the runner failed).
func (o *owner) notifyWaiters(stopped bool) {
	if stopped || o.failed != nil {
		for _, ch := range o.stopWaiters {
			close(ch)
		}
		o.stopWaiters = nil
	}
	if o.failed != nil {
		return
	}
	keep := o.dueWaiters[:0]
	for _, w := range o.dueWaiters {
		if o.eng.IdleThrough(w.t) {
			close(w.ch)
			continue
		}
		keep = append(keep, w)
	}
	o.dueWaiters = keep
	if !o.eng.Idle() {
		return
	}
	for _, ch := range o.idleWaiters {
		close(ch)
	}
	o.idleWaiters = nil
}

// becomeFailed stops the runner after a commit failed (the journal is poisoned): nothing
// buffered is acknowledged, every later command fails, running attempts are cancelled.
func (o *owner) becomeFailed(err error) {
	err = fmt.Errorf("sluice: runner stopped: %w", err) // the engine logged the failure
	o.failed = err
	for t, c := range o.pending {
		c.reply <- reply{err: err}
		delete(o.pending, t)
	}
	for _, cancel := range o.running {
		cancel(err)
	}
	o.r.fail(err)
}

// finishClose ends the stop the engine reported done: Flush, compact if configured, record
// the last Stats, close the engine. Attempts still running (they ignored the cancellation past
// the second grace) are abandoned: their outcomes are ignored, and the next Open counts them as
// interrupted.
func (o *owner) finishClose() {
	stopTimer(o.timer)
	if o.failed == nil {
		now := o.r.clk.Now()
		res, err := o.eng.Flush(now)
		o.committed(now, res)
		o.perform(res)
		if err == nil && o.r.cfg.CompactOnClose {
			_ = o.eng.Compact() // the engine logs a failure; the journal stands either way
		}
	}
	for t, c := range o.pending {
		c.reply <- reply{err: ErrClosed}
		delete(o.pending, t)
	}
	o.answerReadsClosed()
	o.r.last = statsOf(o.eng.Status(), o.r.syncs.load())
	for _, cancel := range o.running { // abandoned: the engine cancelled them already
		cancel(ErrShutdown)
	}
	err := o.eng.Close()
	if ferr := o.closeFS(); err == nil {
		err = ferr
	}
	if err != nil {
		o.r.closeErr = fmt.Errorf("sluice: closing runner: %w", err)
	}
}

func (o *owner) answerReadsClosed() {
	for _, c := range o.reads {
		c.reply <- reply{err: ErrClosed}
	}
	o.reads = nil
}

// checkInvariants states the owner's invariants in code; it runs after every commit.
func (o *owner) checkInvariants() error {
	if n := len(o.running); n > o.r.cfg.Capacity {
		return fmt.Errorf("sluice: %d attempts running, capacity %d", n, o.r.cfg.Capacity)
	}
	if len(o.reads) != 0 && !o.holding {
		return fmt.Errorf("sluice: %d reads unanswered after a commit, and none is coming", len(o.reads))
	}
	return nil
}
