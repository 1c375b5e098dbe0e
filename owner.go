package sluice

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/benbjohnson/clock"
)

// gatherBytesMax bounds the payload bytes one commit gathers (one batch stays a few MiB even
// with 1 MiB payloads).
const gatherBytesMax = 16 << 20

// wakeMin is the shortest timer the owner sets, so a wake time at or before now cannot spin.
const wakeMin = time.Millisecond

// owner is the single goroutine that drives the engine. Every engine call happens here.
//
// One iteration: block for one command, outcome or timer; gather everything else already
// waiting (group commit; skipped with SyncEveryRecord); one Commit; acknowledge each command
// the commit covered; start the attempts it returned; answer reads; set the timer.
type owner[A any] struct {
	r        *Runner[A]
	eng      engine
	dispatch bool
	failed   error
	timer    *clock.Timer

	// Invariant: running holds exactly the attempts whose handler goroutine has not reported.
	running map[uint64]*attempt
	pending map[ticket]command // commands buffered in the engine, awaiting their commit
	reads   []command          // answered after the commit, so they see acknowledged state only

	idleWaiters  []chan struct{}
	quietWaiters []chan struct{}
}

type attempt struct {
	tok    token
	cancel context.CancelFunc
}

func (o *owner[A]) loop() {
	defer close(o.r.exit)
	o.pending = map[ticket]command{}
	o.timer = o.r.clk.Timer(time.Hour)
	o.stopTimer()
	for {
		select {
		case c := <-o.r.cmds:
			o.command(c)
		case d := <-o.r.done:
			o.outcome(d)
		case <-o.timer.C:
		case <-o.r.quit:
			o.shutdown()
			return
		}
		if !o.r.cfg.SyncEveryRecord {
			// Let callers just acknowledged by the last commit send their next command, so
			// they share this commit instead of waiting for the one after.
			runtime.Gosched()
			o.gather()
		}
		o.commit()
	}
}

// gather takes everything already waiting, up to gatherMax commands and outcomes and
// gatherBytesMax of payload, into the coming commit.
func (o *owner[A]) gather() {
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

func (o *owner[A]) command(c command) {
	now := o.r.clk.Now()
	var (
		t   ticket
		err error
	)
	switch c.kind {
	case cmdEnqueue, cmdCancel, cmdRetry:
		if o.failed != nil {
			c.reply <- reply{err: o.failed}
			return
		}
		switch c.kind {
		case cmdEnqueue:
			due := c.due
			if due.IsZero() {
				due = now
			}
			t, err = o.eng.Enqueue(now, due, c.target, c.payload)
		case cmdCancel:
			t, err = o.eng.Cancel(now, c.id)
		case cmdRetry:
			t, err = o.eng.Retry(now, c.id)
		}
		if err != nil {
			c.reply <- reply{err: err}
			return
		}
		o.pending[t] = c
	case cmdGet, cmdStats:
		o.reads = append(o.reads, c)
	case cmdDispatch:
		o.dispatch = c.on
		c.reply <- reply{}
	case cmdWaitIdle:
		ch := make(chan struct{})
		o.idleWaiters = append(o.idleWaiters, ch)
		c.reply <- reply{wait: ch}
	case cmdWaitQuiet:
		ch := make(chan struct{})
		o.quietWaiters = append(o.quietWaiters, ch)
		c.reply <- reply{wait: ch}
	case cmdCancelAttempts:
		for _, a := range o.running {
			a.cancel()
		}
		c.reply <- reply{}
	default:
		panic(fmt.Sprintf("sluice: unknown command kind %d", c.kind))
	}
}

func (o *owner[A]) outcome(d doneMsg) {
	if a, ok := o.running[d.tok.ID]; ok && a.tok == d.tok {
		a.cancel()
		delete(o.running, d.tok.ID)
	}
	if o.failed != nil {
		return
	}
	if d.out.Kind != KindSucceeded {
		o.r.log.Debug("sluice: attempt failed", "id", d.tok.ID, "attempt", d.tok.Attempt,
			"outcome", d.out.Kind.String(), "retryable", d.out.Retryable, "err", d.out.Err)
	}
	o.eng.Done(o.r.clk.Now(), d.tok, d.out)
}

// commit makes the buffered work durable and acts on what the engine returns.
func (o *owner[A]) commit() {
	for {
		if o.failed != nil {
			o.answerReads()
			o.notifyWaiters()
			return
		}
		now := o.r.clk.Now()
		rd, err := o.engineCommit(now)
		// Acknowledge first: with SyncEveryRecord, a failed second commit leaves the first's
		// acknowledgements standing.
		for _, a := range rd.Acks {
			c, ok := o.pending[a.Ticket]
			if !ok {
				panic(fmt.Sprintf("sluice: engine acknowledged unknown ticket %d", a.Ticket))
			}
			delete(o.pending, a.Ticket)
			if c.kind == cmdCancel && a.Err == nil {
				if at, ok := o.running[c.id]; ok {
					at.cancel()
				}
			}
			c.reply <- reply{id: a.ID, err: a.Err}
		}
		if cb := o.r.cfg.OnSettled; cb != nil {
			for _, s := range rd.Settled {
				cb(s)
			}
		}
		if err != nil {
			o.becomeFailed(err)
			continue
		}
		if err := o.eng.Poisoned(); err != nil {
			// The batch was durable (its acknowledgements stand), but the engine now refuses
			// all work (a compaction lost after the batch): fail now, not at the next commit,
			// which an idle runner might reach only much later. Nothing starts: an outcome
			// could not be recorded, and the next Open requeues the attempts as interrupted.
			o.becomeFailed(err)
			continue
		}
		immediate := false
		for _, s := range rd.Starts {
			if !o.startAttempt(now, s) {
				immediate = true
			}
		}
		if immediate {
			continue // an attempt that could not start was reported failed: commit that too
		}
		o.setTimer(now, rd.Wake) // before answering reads: a test that reads then moves a mock clock finds the timer set
		o.answerReads()
		o.notifyWaiters()
		if err := o.checkInvariants(); err != nil {
			panic(err)
		}
		return
	}
}

// engineCommit is one engine commit; with SyncEveryRecord the command or outcome is committed
// on its own first, so that the Started records of the attempts it admits get their own
// fsync: the baseline then pays about one fsync per record.
func (o *owner[A]) engineCommit(now time.Time) (ready, error) {
	if !o.r.cfg.SyncEveryRecord || !o.dispatch {
		return o.eng.Commit(now, o.dispatch)
	}
	first, err := o.eng.Commit(now, false)
	if err != nil {
		return ready{}, err
	}
	rd, err := o.eng.Commit(now, true)
	if err != nil {
		// The first commit's acknowledgements stand: its records are durable.
		return first, err
	}
	rd.Acks = append(first.Acks, rd.Acks...)
	rd.Settled = append(first.Settled, rd.Settled...)
	return rd, nil
}

// startAttempt runs the handler for s on its own goroutine. It reports false when the payload
// could not be decoded: that attempt is recorded as a non-retryable failure at once.
func (o *owner[A]) startAttempt(now time.Time, s start) bool {
	payload, err := o.r.codec.Decode(s.Payload)
	if err != nil {
		o.r.log.Error("sluice: cannot decode payload; failing the attempt", "id", s.Token.ID, "attempt", s.Token.Attempt, "err", err)
		o.eng.Done(now, s.Token, Failed(fmt.Errorf("sluice: decoding payload of job %d: %w", s.Token.ID, err), false))
		return false
	}
	ctx, cancel := context.WithCancel(o.r.base)
	o.running[s.Token.ID] = &attempt{tok: s.Token, cancel: cancel}
	job := Job[A]{ID: s.Token.ID, Target: s.Target, Attempt: s.Token.Attempt, Due: s.FirstDue, Payload: payload}
	go func() {
		out := runHandler(ctx, o.r.handler, job)
		select {
		case o.r.done <- doneMsg{tok: s.Token, out: out}:
		case <-o.r.exit:
		}
	}()
	return true
}

func (o *owner[A]) answerReads() {
	for _, c := range o.reads {
		switch c.kind {
		case cmdGet:
			v, ok := o.eng.Get(c.id)
			c.reply <- reply{job: v, found: ok}
		case cmdStats:
			st := o.eng.Stats()
			st.Syncs = o.r.syncs.load()
			c.reply <- reply{stats: st}
		}
	}
	o.reads = o.reads[:0]
}

func (o *owner[A]) notifyWaiters() {
	if len(o.running) > 0 {
		return
	}
	for _, ch := range o.quietWaiters {
		close(ch)
	}
	o.quietWaiters = nil
	if o.failed != nil || !o.eng.Idle() {
		return
	}
	for _, ch := range o.idleWaiters {
		close(ch)
	}
	o.idleWaiters = nil
}

func (o *owner[A]) setTimer(now, wake time.Time) { setTimer(o.timer, now, wake) }

func (o *owner[A]) stopTimer() { stopTimer(o.timer) }

// becomeFailed stops the runner after a commit failed (the journal is poisoned): nothing
// buffered is acknowledged, every later command fails, running attempts are cancelled.
func (o *owner[A]) becomeFailed(err error) {
	err = fmt.Errorf("sluice: runner stopped: %w", err)
	o.r.log.Error("sluice: journal commit failed; the runner refuses all work until reopened", "err", err)
	o.failed = err
	o.dispatch = false
	for t, c := range o.pending {
		c.reply <- reply{err: err}
		delete(o.pending, t)
	}
	for _, a := range o.running {
		a.cancel()
	}
	o.r.fail(err)
}

// shutdown runs once Close was called: stop starting attempts, cancel the running ones, wait
// up to Grace for their outcomes, commit them, close the engine.
func (o *owner[A]) shutdown() {
	o.dispatch = false
	o.r.hardStop()
	if len(o.running) > 0 {
		grace := o.r.clk.Timer(o.r.cfg.Grace)
	wait:
		for len(o.running) > 0 {
			select {
			case d := <-o.r.done:
				o.outcome(d)
			case c := <-o.r.cmds:
				o.command(c)
			case <-grace.C:
				o.r.log.Warn("sluice: closing with attempts still running; they count as interrupted at next open",
					"running", len(o.running))
				break wait
			}
		}
		grace.Stop()
	}
	o.gather()
	o.commit()
	o.stopTimer()
	for t, c := range o.pending {
		c.reply <- reply{err: ErrClosed}
		delete(o.pending, t)
	}
	if o.r.cfg.CompactOnClose && o.failed == nil && len(o.running) == 0 {
		if err := o.eng.Compact(); err != nil {
			o.r.log.Warn("sluice: compaction at close failed", "err", err)
		}
	}
	if err := o.eng.Close(); err != nil {
		o.r.closeErr = fmt.Errorf("sluice: closing runner: %w", err)
	}
}

// checkInvariants states the owner's invariants in code. It runs after every commit, so it
// must stay O(1) in production: the per-attempt check (each running attempt filed under its
// own id, with a cancel func) runs only when invariantsFull is set, as tests do.
func (o *owner[A]) checkInvariants() error {
	if n := len(o.running); n > o.r.cfg.Capacity {
		return fmt.Errorf("sluice: %d attempts running, capacity %d", n, o.r.cfg.Capacity)
	}
	if len(o.reads) != 0 {
		return fmt.Errorf("sluice: %d reads unanswered after a commit", len(o.reads))
	}
	if invariantsFull {
		return o.checkRunning()
	}
	return nil
}

// invariantsFull adds the O(running) checks to checkInvariants; the package's tests set it.
var invariantsFull = false

// checkRunning checks every running attempt and pending command (O(running + pending): for
// tests, not the commit path).
func (o *owner[A]) checkRunning() error {
	ids := make([]uint64, 0, len(o.running))
	for id := range o.running {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if a := o.running[id]; a.tok.ID != id || a.cancel == nil {
			return fmt.Errorf("sluice: running attempt %v filed under %d", a.tok, id)
		}
	}
	tickets := make([]ticket, 0, len(o.pending))
	for t := range o.pending {
		tickets = append(tickets, t)
	}
	slices.Sort(tickets)
	for _, t := range tickets {
		if o.pending[t].reply == nil {
			return fmt.Errorf("sluice: pending command of ticket %d has no reply channel", t)
		}
	}
	return nil
}
