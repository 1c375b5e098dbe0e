package sluice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/lease"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/core/worker"
)

// Worker receives messages from a queue Transport, runs a handler per message while its lease
// controller keeps the message hidden, and disposes of each (SPEC 3). It drives
// core/worker's engine from one goroutine (Run); transport calls and handlers run on their own
// goroutines and come back to it as events stamped with the clock.
type Worker struct {
	t   core.Transport
	cfg WorkerConfig
	h   WorkerHandler
	log *slog.Logger
	clk clock.Clock
	eng *worker.Engine

	events  chan worker.Event
	stopped chan struct{} // closed when Run returns: late goroutines drop their event

	running   atomic.Bool
	heartbeat atomic.Int64 // UnixNano of the last loop iteration
	// lateReleased counts messages an abandoned receive returned after shutdown, released by
	// its goroutine (possibly after Run returned).
	lateReleased atomic.Int64

	mu    sync.Mutex
	stats WorkerStats
}

// WorkerStats counts what a worker did (a copy published after every loop iteration).
type WorkerStats struct {
	Received, Started, Succeeded, Released, Permanent, Terminal int
	Retired, Poison, Dropped, Cancelled, ReleasedAtEnd          int
	Running, Waiting, Held                                      int
	RenewalsSent, RenewalRetries                                int
	ReceiveErrors                                               int // failed receive calls (retried with backoff)
}

// eventsMax bounds the events waiting for the loop; senders block beyond it.
const eventsMax = 1024

// NewWorker returns a worker over t. It does nothing until Run.
func NewWorker(t core.Transport, cfg WorkerConfig, handler WorkerHandler) (*Worker, error) {
	if t == nil {
		panic("sluice: NewWorker with a nil transport")
	}
	if handler == nil {
		panic("sluice: NewWorker with a nil handler")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var decode func(core.Message) error
	if cfg.Decode != nil {
		decode = func(m core.Message) error { return cfg.Decode(messageOf(m)) }
	}
	eng, err := worker.New(worker.Config{
		Window:             cfg.Window,
		Ceiling:            cfg.Ceiling,
		Wait:               cfg.Wait,
		WaitNone:           cfg.Wait == 0,
		Concurrency:        cfg.Concurrency,
		Prefetch:           cfg.Prefetch,
		Budget:             cfg.Budget,
		RedriveMaxReceives: cfg.RedriveMax,
		Retry:              retry.Policy{Attempts: cfg.Policy.Attempts, Base: cfg.Policy.Base, Cap: cfg.Policy.Cap, Deadline: cfg.Policy.Deadline},
		Rand:               rand.New(rand.NewSource(cfg.Seed)),
		Decode:             decode,
		Grace:              cfg.Grace,
		Lease:              lease.Config{Logger: cfg.Logger},
		Logger:             cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("sluice: new worker: %w", err)
	}
	return &Worker{t: t, cfg: cfg, h: handler, log: cfg.Logger, clk: cfg.Clock, eng: eng,
		events: make(chan worker.Event, eventsMax), stopped: make(chan struct{})}, nil
}

func messageOf(m core.Message) Message {
	return Message{ID: m.ID, Body: m.Body, ReceiveCount: m.ReceiveCount}
}

// Heartbeat returns when the worker's loop last ran (the zero time before Run). A loop that
// stops moving for much longer than the long-poll wait is stuck.
func (w *Worker) Heartbeat() time.Time {
	n := w.heartbeat.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Stats returns the counters as of the loop's last iteration (ReleasedAtEnd also counts
// messages an abandoned receive returned after shutdown, as they are released).
func (w *Worker) Stats() WorkerStats {
	w.mu.Lock()
	s := w.stats
	w.mu.Unlock()
	s.ReleasedAtEnd += int(w.lateReleased.Load())
	return s
}

// Run works the queue until ctx ends, then shuts down per SPEC 3.2: it stops receiving,
// releases messages whose handler has not started with one ChangeMessageVisibilityBatch(0),
// keeps renewing running handlers' leases for up to Grace, then cancels those handlers and
// lets their leases lapse. It returns nil after a clean shutdown. Handlers that ignore their
// cancelled context are abandoned after another Grace (logged). A receive call still in
// flight (a long poll, which Transport cannot cancel) is not waited for: once nothing else is
// left, Run returns and that call's goroutine releases whatever it later returns with
// ChangeVisibility 0 (so the transport may see that call up to Wait after Run returned).
// Run may be called once.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer close(w.stopped)
	l := &workerLoop{w: w, handlers: map[string]context.CancelFunc{}}
	return l.run(ctx)
}

type workerLoop struct {
	w        *Worker
	timer    *clock.Timer
	handlers map[string]context.CancelFunc // running handlers by receipt
	recv     *receiveCall                  // the receive call in flight, nil when none
	abandon  time.Time                     // when to give up on cancelled handlers (zero: not yet)
}

// receiveCall decides, once, who owns a receive call's reply: the loop (the goroutine sends
// ReceiveDone) or, after the loop abandoned it at shutdown, the goroutine (it releases the
// messages itself). Transport.Receive takes no context, so a long poll cannot be cut short.
type receiveCall struct {
	call      worker.CallID
	mu        sync.Mutex
	replied   bool
	abandoned bool
}

// claimReply is called by the receive goroutine: true if the loop still wants the reply.
func (rc *receiveCall) claimReply() bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.abandoned {
		return false
	}
	rc.replied = true
	return true
}

// abandon is called by the loop: true if it gave the call up before its reply was claimed.
func (rc *receiveCall) abandon() bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.replied {
		return false
	}
	rc.abandoned = true
	return true
}

func (l *workerLoop) run(ctx context.Context) error {
	w := l.w
	l.timer = w.clk.Timer(time.Hour)
	stopTimer(l.timer)
	defer l.timer.Stop()
	if err := l.step(worker.Tick{Now: w.clk.Now()}); err != nil {
		return err
	}
	done := ctx.Done()
	for {
		rd := w.eng.Ready()
		l.perform(rd)
		st := w.eng.Status()
		if l.onlyReceiveLeft(st) && l.recv.abandon() {
			// Shutdown need not wait up to a whole long poll: the call's goroutine releases
			// whatever it returns (ChangeVisibility 0), even after Run has returned.
			w.log.Info("sluice: worker not waiting for the receive in flight; its messages will be released")
			if err := l.step(worker.ReceiveAbandoned{Call: l.recv.call, At: w.clk.Now()}); err != nil {
				l.cancelAll()
				return fmt.Errorf("sluice: worker: %w", err)
			}
			continue
		}
		w.publish(st)
		if st.Done {
			return nil
		}
		if l.onlyAbandoned(st) {
			now := w.clk.Now()
			if l.abandon.IsZero() {
				l.abandon = now.Add(w.cfg.Grace)
			} else if !now.Before(l.abandon) {
				w.log.Warn("sluice: worker stopping with handlers that ignored their cancelled context", "handlers", len(l.handlers))
				return nil
			}
			rd.WakeAt = earliest(rd.WakeAt, l.abandon)
		}
		setTimer(l.timer, w.clk.Now(), rd.WakeAt)
		var err error
		select {
		case ev := <-w.events:
			err = l.step(ev)
			// A burst: let finishing handlers report, then take what is already waiting, so
			// their dispositions share batch calls.
			runtime.Gosched()
			for i := 0; err == nil && i < eventsMax; i++ {
				select {
				case ev := <-w.events:
					err = l.step(ev)
					continue
				default:
				}
				break
			}
		case <-l.timer.C:
			err = l.step(worker.Tick{Now: w.clk.Now()})
		case <-done:
			done = nil
			w.log.Info("sluice: worker shutting down")
			err = l.step(worker.Shutdown{Now: w.clk.Now()})
		}
		if err != nil {
			// Misuse of the engine is a driver bug: stop everything.
			l.cancelAll()
			return fmt.Errorf("sluice: worker: %w", err)
		}
	}
}

func (l *workerLoop) cancelAll() {
	for _, cancel := range l.handlers {
		cancel()
	}
}

// onlyReceiveLeft reports a stopping worker whose only unfinished business that needs the
// queue is the receive call in flight: no lease held or being disposed, no call out.
// (Handlers still running with their leases gone are waited for separately.)
func (l *workerLoop) onlyReceiveLeft(st worker.Stats) bool {
	return st.Stopping && l.recv != nil && st.Waiting == 0 && st.Lease.Held == 0 &&
		st.Lease.Disposing == 0 && st.Lease.InFlightCalls == 0
}

// onlyAbandoned reports a stopping worker whose leases are all gone and whose only remaining
// work is handlers that were cancelled and have not returned.
func (l *workerLoop) onlyAbandoned(st worker.Stats) bool {
	return st.Stopping && l.recv == nil && st.Waiting == 0 && st.Running > 0 && st.Lease.Held == 0 &&
		st.Lease.Disposing == 0 && st.Lease.InFlightCalls == 0
}

func (l *workerLoop) step(ev worker.Event) error {
	switch ev := ev.(type) {
	case worker.ReceiveDone, worker.ReceiveAbandoned:
		l.recv = nil
	case worker.HandlerDone:
		if cancel, ok := l.handlers[ev.Receipt]; ok {
			cancel()
			delete(l.handlers, ev.Receipt)
		}
	}
	l.w.heartbeat.Store(l.w.clk.Now().UnixNano())
	return l.w.eng.Step(ev)
}

// perform carries out the effects: cancels first, then calls and handler starts, each on its
// own goroutine that reports back with the time it finished.
func (l *workerLoop) perform(rd worker.Ready) {
	w := l.w
	for _, c := range rd.Cancel {
		if cancel, ok := l.handlers[c.Receipt]; ok {
			w.log.Warn("sluice: lease lost; cancelling handler", "receipt", c.Receipt, "reason", c.Reason)
			cancel()
		}
	}
	for _, c := range rd.Changes {
		go func() {
			entries, err := w.t.ChangeVisibilityBatch(c.Entries)
			entries, err = w.checkBatch("change-visibility", len(c.Entries), entries, err)
			w.send(worker.CallDone{Call: c.Call, At: w.clk.Now(), Entries: entries, Err: err})
		}()
	}
	for _, d := range rd.Deletes {
		go func() {
			entries, err := w.t.DeleteBatch(d.Receipts)
			entries, err = w.checkBatch("delete", len(d.Receipts), entries, err)
			w.send(worker.CallDone{Call: d.Call, At: w.clk.Now(), Entries: entries, Err: err})
		}()
	}
	if r := rd.Receive; r != nil {
		rc := &receiveCall{call: r.Call}
		l.recv = rc
		go func() {
			msgs, err := w.t.Receive(r.Max, r.Wait, r.Visibility)
			at := w.clk.Now()
			if !rc.claimReply() {
				w.lateReleased.Add(int64(w.release(msgs, "received after shutdown")))
				return
			}
			if len(msgs) > r.Max {
				// The transport broke its contract; hand back what was not asked for.
				w.log.Error("sluice: transport returned more messages than asked for; releasing the extra", "asked", r.Max, "got", len(msgs))
				w.release(msgs[r.Max:], "received beyond the requested maximum")
				msgs = msgs[:r.Max]
			}
			w.send(worker.ReceiveDone{Call: r.Call, At: at, Messages: msgs, Err: err})
		}()
	}
	for _, s := range rd.Start {
		// Not derived from Run's ctx: running handlers outlive it by the grace period.
		ctx, cancel := context.WithCancel(context.Background())
		l.handlers[s.Receipt] = cancel
		go func() {
			res := runWorkerHandler(ctx, w.h, messageOf(s.Message))
			w.send(worker.HandlerDone{Receipt: s.Receipt, At: w.clk.Now(), Result: res})
		}()
	}
}

// release makes msgs visible again at once, in batches of at most core.BatchMax, outside the
// engine: their leases were never taken, so nothing else names these receipts; a failed
// release only means the message reappears when its window lapses. It returns how many were
// released.
func (w *Worker) release(msgs []core.Message, why string) int {
	released := 0
	for len(msgs) > 0 {
		n := min(len(msgs), core.BatchMax)
		entries := make([]core.VisibilityChange, n)
		for i, m := range msgs[:n] {
			entries[i] = core.VisibilityChange{Receipt: m.Receipt, Timeout: 0}
		}
		errs, err := w.t.ChangeVisibilityBatch(entries)
		errs, err = w.checkBatch("change-visibility", n, errs, err)
		for i, e := range entries {
			failure := err
			if failure == nil {
				failure = errs[i]
			}
			if failure == nil {
				released++
				continue
			}
			w.log.Warn("sluice: releasing a message failed; it reappears when its window lapses",
				"message", msgs[i].ID, "receipt", e.Receipt, "why", why, "err", failure)
		}
		msgs = msgs[n:]
	}
	return released
}

// errBadBatchReply marks a batch reply that broke the Transport contract.
var errBadBatchReply = errors.New("sluice: transport broke the batch contract")

// checkBatch holds a batch reply to the Transport contract (one result per entry unless the
// whole call failed). A reply that breaks it counts as a retryable failure of the whole call,
// logged at Error: a faulty transport costs a renewal retry or a disposition, not the worker.
func (w *Worker) checkBatch(op string, n int, entries []error, err error) ([]error, error) {
	if err != nil || len(entries) == n {
		return entries, err
	}
	w.log.Error("sluice: transport returned the wrong number of batch results", "op", op, "results", len(entries), "entries", n)
	return nil, &core.TransportError{Class: core.Retryable, Op: op,
		Err: fmt.Errorf("%w: %d results for %d entries", errBadBatchReply, len(entries), n)}
}

// send hands an event to the loop, or drops it once Run has returned.
func (w *Worker) send(ev worker.Event) {
	select {
	case w.events <- ev:
	case <-w.stopped:
	}
}

func (w *Worker) publish(st worker.Stats) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats = WorkerStats{Received: st.Received, Started: st.Started, Succeeded: st.Succeeded,
		Released: st.Released, Permanent: st.Permanent, Terminal: st.Terminal, Retired: st.Retired,
		Poison: st.Poison, Dropped: st.Dropped, Cancelled: st.Cancelled, ReleasedAtEnd: st.ReleasedAtEnd,
		Running: st.Running, Waiting: st.Waiting, Held: st.Lease.Held,
		RenewalsSent: st.Lease.RenewalsSent, RenewalRetries: st.Lease.Retries, ReceiveErrors: st.ReceiveErrors}
}

// runWorkerHandler calls h, mapping its Result to the engine's; a panic or an invalid Result
// is a permanent failure.
func runWorkerHandler(ctx context.Context, h WorkerHandler, msg Message) (res worker.Result) {
	defer func() {
		if v := recover(); v != nil {
			res = worker.Result{Outcome: worker.Permanent, Err: &PanicError{Value: v, Stack: debug.Stack()}}
		}
	}()
	r := h(ctx, msg)
	switch r.Kind {
	case ResultAck:
		return worker.Result{Outcome: worker.Success}
	case ResultRetry:
		return worker.Result{Outcome: worker.Retryable, Err: r.Err, After: r.After}
	case ResultPermanent:
		return worker.Result{Outcome: worker.Permanent, Err: r.Err}
	case ResultTerminal:
		return worker.Result{Outcome: worker.Terminal, Err: r.Err}
	}
	return worker.Result{Outcome: worker.Permanent, Err: errors.New("sluice: handler returned an invalid Result")}
}

func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// setTimer re-arms t for wake (zero: leave it stopped), at least wakeMin from now.
func setTimer(t *clock.Timer, now, wake time.Time) {
	stopTimer(t)
	if wake.IsZero() {
		return
	}
	t.Reset(max(wake.Sub(now), wakeMin))
}

// stopTimer stops t and empties its channel: a mock timer blocks on a full channel.
func stopTimer(t *clock.Timer) {
	t.Stop()
	select {
	case <-t.C:
	default:
	}
}
