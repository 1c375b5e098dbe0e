package sluice

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/sluicehq/sluice/core/runner"
)

// gatherBytesMax bounds the payload bytes one commit gathers (one batch stays a few MiB even
// with 1 MiB payloads).
const gatherBytesMax = 16 << 20

// wakeMin is the shortest timer the owner sets, so a wake time at or before now cannot spin.
const wakeMin = time.Millisecond

// owner is the single goroutine that drives the engine; every engine call happens here. It
// decides nothing: it submits commands and outcomes, commits, and performs what the result
// says (acknowledge, start, cancel, wake, and at a stop: flush, compact, close).
//
// One iteration: block for one command, outcome, timer or Close; gather everything else
// already waiting (group commit); one Commit; perform its result; answer reads.
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
	for {
		select {
		case c := <-o.r.cmds:
			o.command(c)
		case d := <-o.r.done:
			o.outcome(d)
		case <-o.timer.C:
		case <-o.quit:
			o.quit, o.closing = nil, true
			o.dispatch(false)
		}
		if !o.r.cfg.opts.SyncEveryRecord {
			// Let callers just acknowledged by the last commit send their next command, so
			// they share this commit instead of waiting for the one after.
			runtime.Gosched()
			o.gather()
		}
		if o.commit() {
			return
		}
	}
}

// gather takes everything already waiting, up to gatherMax commands and outcomes and
// gatherBytesMax of payload, into the coming commit.
func (o *owner) gather() {
	bytes := 0
	for range gatherMax {
		if bytes >= gatherBytesMax {
			return
		}
		select {
		case c := <-o.r.cmds:
			bytes += len(c.payload)
			o.command(c)
		case d := <-o.r.done:
			o.outcome(d)
		default:
			return
		}
	}
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
	case cmdGet, cmdStats, cmdList, cmdSchedules:
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
		o.r.log.Debug("sluice: attempt failed", "id", d.tok.ID, "attempt", d.tok.Attempt,
			"outcome", d.out.Kind.String(), "retryable", d.out.Retryable, "err", d.out.Err)
	}
	// A poisoned engine refuses the outcome; the commit reports the poison.
	_ = o.eng.AttemptDone(o.r.clk.Now(), d.tok, coreOutcome(d.out))
}

// commit makes the buffered work durable and performs what the engine returns. It reports
// true once the runner is closed.
func (o *owner) commit() bool {
	now := o.r.clk.Now()
	res, err := o.engineCommit(now)
	o.perform(res)
	if err == nil {
		// A compaction lost after a durable batch poisons the engine with a nil error from
		// Commit: fail now, not at a next commit that an idle runner may reach much later.
		err = o.eng.Poisoned()
	}
	if err != nil && o.failed == nil {
		o.becomeFailed(err)
	}
	if o.closing && (res.Stopped || o.failed != nil) {
		o.finishClose()
		return true
	}
	setTimer(o.timer, now, res.Wake)
	o.answerReads()
	o.notifyWaiters(res.Stopped)
	if err := o.checkInvariants(); err != nil {
		panic(err)
	}
	return false
}

// engineCommit is one Commit; with the internal SyncEveryRecord option the commands and
// outcomes are flushed on their own first, so the Started records of the attempts they admit
// get their own fsync: the benchmark's baseline pays about one fsync per record.
func (o *owner) engineCommit(now time.Time) (runner.Result, error) {
	if !o.r.cfg.opts.SyncEveryRecord {
		return o.eng.Commit(now)
	}
	first, err := o.eng.Flush(now)
	if err != nil {
		return first, err
	}
	o.perform(first)
	return o.eng.Commit(now)
}

// perform acts on a commit's result: acknowledge, report settled jobs, cancel, start.
func (o *owner) perform(res runner.Result) {
	for _, a := range res.Acks {
		c := o.pending[a.Ticket]
		delete(o.pending, a.Ticket)
		c.reply <- reply{id: a.ID, ids: a.IDs, dup: a.Duplicate}
	}
	if cb := o.r.cfg.OnSettled; cb != nil {
		for _, s := range res.Settled {
			cb(settledOf(s))
		}
	}
	for _, c := range res.Cancels {
		o.running[c.Token](causeOf(c.Why))
	}
	for _, s := range res.Starts {
		o.startAttempt(s)
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

// startAttempt runs the kind's handler for s on its own goroutine; the engine's decode check
// has already made the payload's value, and starts only jobs of registered kinds.
func (o *owner) startAttempt(s runner.Attempt) {
	k, ok := o.kinds[s.Kind]
	if !ok {
		panic(fmt.Sprintf("sluice: the engine started job %d of unregistered kind %q", s.Token.ID, s.Kind))
	}
	ctx, cancel := context.WithCancelCause(o.r.base)
	o.running[s.Token] = cancel
	go func() {
		out := k.start(ctx, s)
		select {
		case o.r.done <- doneMsg{tok: s.Token, out: out}:
		case <-o.r.exit:
		}
	}()
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
		}
	}
	o.reads = o.reads[:0]
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
		res, err := o.eng.Flush(o.r.clk.Now())
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
	o.r.hardStop()
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
	if len(o.reads) != 0 {
		return fmt.Errorf("sluice: %d reads unanswered after a commit", len(o.reads))
	}
	return nil
}
