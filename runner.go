package sluice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// gatherMax bounds the commands and outcomes one commit gathers, so one batch cannot grow
// without limit under a flood of enqueues.
const gatherMax = 4096

// Runner runs jobs with payloads of type A durably (SPEC 2). All methods are safe for
// concurrent use. Enqueue, Cancel and Retry work from Open to Close; attempts start only while
// Run or Drain is active.
type Runner[A any] struct {
	cfg     Config
	codec   Codec[A]
	handler Handler[A]
	log     *slog.Logger
	clk     clock.Clock

	cmds chan command
	done chan doneMsg
	quit chan struct{} // closed by Close: the owner stops
	exit chan struct{} // closed by the owner when it has stopped

	closeOnce sync.Once
	closeErr  error

	// base is the parent of every attempt's context; hardStop cancels it.
	base     context.Context
	hardStop context.CancelFunc

	syncs *counter

	mu      sync.Mutex
	active  bool  // Run or Drain in progress
	failure error // set once, before failC is closed
	failC   chan struct{}
}

type cmdKind uint8

const (
	cmdEnqueue cmdKind = iota + 1
	cmdCancel
	cmdRetry
	cmdGet
	cmdStats
	cmdDispatch       // on = dispatch flag
	cmdWaitIdle       // reply.wait closes once the engine is idle and nothing runs
	cmdWaitQuiet      // reply.wait closes once no attempt runs
	cmdCancelAttempts // cancel the context of every running attempt
)

type command struct {
	kind    cmdKind
	due     time.Time
	target  string
	payload []byte
	id      uint64
	on      bool
	reply   chan reply
}

type reply struct {
	id    uint64
	err   error
	job   jobView
	found bool
	stats Stats
	wait  <-chan struct{}
}

type doneMsg struct {
	tok token
	out Outcome
}

// Open opens (or creates) the runner journal in dir, replaying it, and starts the owner
// goroutine. Jobs that were running when the last process stopped are recorded as failed
// (interrupted, retryable) attempts.
func Open[A any](dir string, cfg Config, codec Codec[A], handler Handler[A]) (*Runner[A], error) {
	if codec == nil {
		panic("sluice: Open with a nil codec")
	}
	if handler == nil {
		panic("sluice: Open with a nil handler")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	syncs := &counter{}
	eng, err := openEngine(dir, cfg, syncs)
	if err != nil {
		return nil, fmt.Errorf("sluice: opening runner in %s: %w", dir, err)
	}
	return newRunner(eng, cfg, codec, handler, syncs), nil
}

func newRunner[A any](eng engine, cfg Config, codec Codec[A], handler Handler[A], syncs *counter) *Runner[A] {
	base, hardStop := context.WithCancel(context.Background())
	r := &Runner[A]{
		cfg:      cfg,
		codec:    codec,
		handler:  handler,
		log:      cfg.Logger,
		clk:      cfg.Clock,
		cmds:     make(chan command, gatherMax),
		done:     make(chan doneMsg, gatherMax),
		quit:     make(chan struct{}),
		exit:     make(chan struct{}),
		base:     base,
		hardStop: hardStop,
		syncs:    syncs,
		failC:    make(chan struct{}),
	}
	o := &owner[A]{r: r, eng: eng, running: map[uint64]*attempt{}}
	go o.loop()
	return r
}

// Enqueue adds a job due at due (the zero time means now) and returns its id once the record is
// durable. If ctx ends first, Enqueue returns ctx.Err() and the job may or may not exist.
func (r *Runner[A]) Enqueue(ctx context.Context, due time.Time, target string, payload A) (uint64, error) {
	b, err := r.codec.Encode(payload)
	if err != nil {
		return 0, fmt.Errorf("sluice: enqueue: %w", err)
	}
	if len(b) > r.cfg.RecordMax {
		return 0, fmt.Errorf("sluice: enqueue: payload of %d bytes exceeds RecordMax (%d): %w", len(b), r.cfg.RecordMax, ErrTooLarge)
	}
	rep, err := r.call(ctx, command{kind: cmdEnqueue, due: due, target: target, payload: b})
	if err != nil {
		return 0, err
	}
	return rep.id, rep.err
}

// Cancel cancels a job that is not terminal, durably. A running attempt's context is cancelled
// and its outcome ignored.
func (r *Runner[A]) Cancel(ctx context.Context, id uint64) error {
	rep, err := r.call(ctx, command{kind: cmdCancel, id: id})
	if err != nil {
		return err
	}
	return rep.err
}

// Retry re-enqueues a dead job, due now, durably.
func (r *Runner[A]) Retry(ctx context.Context, id uint64) error {
	rep, err := r.call(ctx, command{kind: cmdRetry, id: id})
	if err != nil {
		return err
	}
	return rep.err
}

// Get returns a copy of the job with the given id, or ErrNotFound.
func (r *Runner[A]) Get(id uint64) (JobInfo[A], error) {
	rep, err := r.call(context.Background(), command{kind: cmdGet, id: id})
	if err != nil {
		return JobInfo[A]{}, err
	}
	if !rep.found {
		return JobInfo[A]{}, fmt.Errorf("sluice: get %d: %w", id, ErrNotFound)
	}
	v := rep.job
	info := JobInfo[A]{ID: v.ID, Target: v.Target, State: v.State, Attempts: v.Attempts,
		FirstDue: v.FirstDue, Due: v.Due, Reason: v.Reason, LastErr: v.LastErr}
	if info.Payload, err = r.codec.Decode(v.Payload); err != nil {
		return info, fmt.Errorf("sluice: get %d: %w", id, err)
	}
	return info, nil
}

// Stats returns counts by state and the disk work done since Open.
func (r *Runner[A]) Stats() Stats {
	rep, err := r.call(context.Background(), command{kind: cmdStats})
	if err != nil {
		return Stats{Syncs: r.syncs.load()}
	}
	return rep.stats
}

// Run starts attempts until ctx ends; then it stops starting attempts, waits up to
// Config.Grace for running ones, cancels the rest, and closes the runner. It returns nil after
// a clean shutdown, or the error that stopped the runner (a poisoned journal).
func (r *Runner[A]) Run(ctx context.Context) error {
	if err := r.begin(); err != nil {
		return err
	}
	defer r.end()
	fail := r.failed()
	select {
	case <-ctx.Done():
	case <-fail:
	case <-r.exit:
		return ErrClosed
	}
	r.stopDispatch()
	cerr := r.Close()
	if err := r.failureErr(); err != nil {
		return err
	}
	return cerr
}

// Drain starts attempts until nothing is due, waiting, deferred or running, then returns nil
// (the runner stays open). If ctx ends first, it stops starting attempts, waits up to
// Config.Grace for running ones, cancels the rest and returns ctx.Err().
func (r *Runner[A]) Drain(ctx context.Context) error {
	if err := r.begin(); err != nil {
		return err
	}
	defer r.end()
	rep, err := r.call(ctx, command{kind: cmdWaitIdle})
	if err != nil {
		r.stopDispatch()
		return err
	}
	select {
	case <-rep.wait:
		r.stopDispatch()
		if err := r.failureErr(); err != nil {
			return err
		}
		return nil
	case <-r.failed():
		r.stopDispatch()
		return r.failureErr()
	case <-r.exit:
		return ErrClosed
	case <-ctx.Done():
		r.stopDispatch()
		return ctx.Err()
	}
}

// Close stops the runner: it stops starting attempts, cancels running attempts' contexts,
// waits up to Config.Grace for them to return, records their outcomes and closes the journal.
// Close returns the journal's close error, if any; later calls return nil.
func (r *Runner[A]) Close() error {
	first := false
	r.closeOnce.Do(func() {
		first = true
		close(r.quit)
		<-r.exit
	})
	if !first {
		<-r.exit
		return nil
	}
	return r.closeErr
}

func (r *Runner[A]) begin() error {
	r.mu.Lock()
	if r.active {
		r.mu.Unlock()
		return ErrRunning
	}
	r.active = true
	r.mu.Unlock()
	if _, err := r.call(context.Background(), command{kind: cmdDispatch, on: true}); err != nil {
		r.end()
		return err
	}
	return nil
}

func (r *Runner[A]) end() {
	r.mu.Lock()
	r.active = false
	r.mu.Unlock()
}

// stopDispatch stops starting attempts, waits up to Grace for running ones, then cancels the
// contexts of those still running.
func (r *Runner[A]) stopDispatch() {
	ctx := context.Background()
	if _, err := r.call(ctx, command{kind: cmdDispatch, on: false}); err != nil {
		return
	}
	rep, err := r.call(ctx, command{kind: cmdWaitQuiet})
	if err != nil {
		return
	}
	t := r.clk.Timer(r.cfg.Grace)
	defer t.Stop()
	select {
	case <-rep.wait:
		return
	case <-r.exit:
		return
	case <-t.C:
	}
	r.log.Warn("sluice: grace period over; cancelling running attempts", "grace", r.cfg.Grace)
	_, _ = r.call(ctx, command{kind: cmdCancelAttempts})
}

// failed returns a channel closed once the runner has failed (a poisoned journal).
func (r *Runner[A]) failed() <-chan struct{} { return r.failC }

// failureErr returns the error that failed the runner, or nil.
func (r *Runner[A]) failureErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failure
}

// fail records the first error that stops the runner (called by the owner).
func (r *Runner[A]) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failure == nil {
		r.failure = err
		close(r.failC)
	}
}

// call sends a command to the owner and waits for its reply.
func (r *Runner[A]) call(ctx context.Context, c command) (reply, error) {
	c.reply = make(chan reply, 1)
	select {
	case r.cmds <- c:
	case <-r.exit:
		return reply{}, ErrClosed
	case <-ctx.Done():
		return reply{}, ctx.Err()
	}
	select {
	case rep := <-c.reply:
		return rep, nil
	case <-r.exit:
		// The owner may have answered just before it stopped.
		select {
		case rep := <-c.reply:
			return rep, nil
		default:
			return reply{}, ErrClosed
		}
	case <-ctx.Done():
		return reply{}, ctx.Err()
	}
}

// ErrTooLarge is returned by Enqueue for a payload over Config.RecordMax.
var ErrTooLarge = errors.New("sluice: payload too large")
