package sluice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/lease"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/core/worker"
	"github.com/sluicehq/sluice/internal/outcome"
	"github.com/sluicehq/sluice/internal/workerkit"
)

// Worker receives messages from a queue Transport, runs a handler per message while its lease
// controller keeps the message hidden, and disposes of each. It executes core/worker's Node
// from one goroutine (Run); transport calls and handlers run on their own goroutines and come
// back to it as events stamped with the clock. Every decision (when to receive, what to
// release, when to give up on a long poll or on a handler, when Run ends) is the Node's: Run
// only performs the effects.
type Worker struct {
	t   core.Transport
	cfg WorkerConfig
	kit workerkit.Kit
	log *slog.Logger
	clk clock.Clock
	n   *worker.Node

	events  chan worker.Event
	stopped chan struct{} // closed when Run returns: late handlers drop their event

	running   atomic.Bool
	heartbeat atomic.Int64 // UnixNano of the last loop iteration

	mu    sync.Mutex
	stats WorkerStats
}

// Errors of a Worker's Run, and the causes a handler's context carries (context.Cause).
var (
	// ErrFatal is wrapped by the error Run returns when the queue answered a receive with a
	// fatal error (the queue does not exist, access denied, invalid credentials, a malformed
	// request): retrying cannot help, so the worker stops instead of looking healthy.
	ErrFatal = errors.New("sluice: fatal queue error")
	// ErrStopped is returned by Run on a worker whose Run already returned: make a new Worker.
	ErrStopped = errors.New("sluice: worker stopped")
	// ErrLeaseLost is the cause of a handler's cancelled context when the message's lease could
	// not be kept (renewals failed until the margin, the ceiling was reached, a fatal error on
	// a renewal): another consumer may receive the message now.
	ErrLeaseLost = errors.New("sluice: lease lost")
	// ErrMessageGone is the cause of a handler's cancelled context when the queue said the
	// receipt is no longer valid: the message was deleted or already redelivered.
	ErrMessageGone = errors.New("sluice: message gone")
)

// WorkerStats counts what a worker did (a copy published after every loop iteration).
type WorkerStats struct {
	Received  int // deliveries received
	Started   int // handlers started
	Succeeded int // handlers that returned nil: the message was deleted
	Released  int // retryable errors (RetryAfter and Snooze too): the message was made visible again later
	Permanent int // Permanent errors (and panics) without a redrive policy: deleted, logged at Error
	Terminal  int // DeadLetter errors, and Permanent ones with a redrive policy: hidden for the redrive
	Retired   int // deliveries over the receive budget: deleted without running, logged at Error
	Poison    int // deliveries Decode refused (never handled)
	Dropped   int // leases lost before a disposition (handler cancelled, or never started)
	Cancelled int // running handlers cancelled (lease lost, or shutdown's grace over)
	// ReleasedAtEnd counts messages made visible at once because the worker was stopping:
	// those waiting for a handler, and those a receive returned during the shutdown.
	ReleasedAtEnd int
	// ReleasedExtra counts messages a receive returned beyond what it asked for (a transport
	// breaking its contract), made visible again at once.
	ReleasedExtra int
	Running       int // handlers running now (cancelled ones included until they return)
	Waiting       int // received messages waiting for a free handler now
	Held          int // leases held now
	// RenewalsSent counts renewal entries sent (one per message per renewal); RenewalRetries
	// the ones that were retries after a failed renewal.
	RenewalsSent, RenewalRetries int
	ReceiveErrors                int // failed receive calls (retried with backoff unless fatal)
	// DispositionRetries counts disposition entries sent again after a retryable failure;
	// DispositionsFailed those that still failed (the lease ended, logged at Warn).
	DispositionRetries, DispositionsFailed int
	// LostWaiting counts dispositions that waited behind a renewal of their receipt and lost
	// the lease before their turn: the handler's result was not delivered to the queue.
	LostWaiting int
}

// eventsMax bounds the events waiting for the loop; senders block beyond it.
const eventsMax = 1024

// NewWorkerKit is exported for package sluicetest and is of no use to a program. sluicetest
// executes a worker's host in a simulated world, and with it runs cfg and handler as NewWorker
// does: the machine's configuration, the handler through cfg.Middleware with panics
// recovered, and the hooks. It refuses cfg as NewWorker does, naming the field.
func NewWorkerKit(cfg WorkerConfig, handler WorkerHandler) (workerkit.Kit, error) {
	if handler == nil {
		return workerkit.Kit{}, errors.New("sluice: NewWorkerKit: the handler is nil")
	}
	_, kit, err := newKit(cfg, handler)
	if err != nil {
		return kit, err
	}
	if err := kit.Config.Validate(); err != nil {
		return kit, configErr(err)
	}
	return kit, nil
}

// NewWorker returns a worker over t. It does nothing until Run.
func NewWorker(t Transport, cfg WorkerConfig, handler WorkerHandler) (*Worker, error) {
	return newWorker(t, cfg, handler, false)
}

// newWorker is NewWorker; stopHeld is worker.Config.StopHeld (the queue runner's: a handler
// its stop cancels keeps its lease, so its message is released at once).
func newWorker(t Transport, cfg WorkerConfig, handler WorkerHandler, stopHeld bool) (*Worker, error) {
	if t == nil || handler == nil {
		return nil, errors.New("sluice: NewWorker: the transport and the handler must not be nil")
	}
	cfg, kit, err := newKit(cfg, handler)
	if err != nil {
		return nil, err
	}
	kit.Config.StopHeld = stopHeld
	n, err := worker.NewNode(kit.Config)
	if err != nil {
		return nil, configErr(err)
	}
	return &Worker{t: t, cfg: cfg, kit: kit, log: cfg.Logger, clk: cfg.Clock, n: n,
		events: make(chan worker.Event, eventsMax), stopped: make(chan struct{})}, nil
}

// configErr names the WorkerConfig field of the machine's refusal.
func configErr(err error) error {
	var ce *worker.ConfigError
	if errors.As(err, &ce) {
		field := ce.Field
		if field == "RedriveMaxReceives" {
			field = "RedriveMax"
		}
		return fieldErr("WorkerConfig."+field, ce.Value, ce.Rule)
	}
	return wrapf(nil, err, "new worker")
}

// newKit fills cfg's defaults and makes the worker's executor-independent parts. The machine
// validates Kit.Config (configErr names the field it refuses).
func newKit(cfg WorkerConfig, handler WorkerHandler) (WorkerConfig, workerkit.Kit, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return cfg, workerkit.Kit{}, err
	}
	var decode func(core.Message) error
	if cfg.Decode != nil {
		decode = func(m core.Message) error { return cfg.Decode(messageOf(m)) }
	}
	mc := worker.Config{
		Window:             cfg.Window,
		Ceiling:            cfg.Ceiling,
		Wait:               cfg.Wait,
		Concurrency:        cfg.Concurrency,
		Prefetch:           cfg.Prefetch,
		Budget:             cfg.Budget,
		RedriveMaxReceives: cfg.RedriveMax,
		Retry:              retry.Policy{Attempts: cfg.Policy.Attempts, Base: cfg.Policy.Base, Cap: cfg.Policy.Cap, Deadline: cfg.Policy.Deadline},
		Rand:               rand.New(rand.NewSource(cfg.Seed)),
		Decode:             decode,
		Grace:              cfg.Grace,
		StopMargin:         cfg.StopMargin,
		Lease:              lease.Config{Logger: cfg.Logger},
		Logger:             cfg.Logger,
	}
	h := &workerHandle{h: handler, chain: chain(cfg.Middleware, innerCall)}
	return cfg, workerkit.Kit{
		Config: mc,
		Handle: h.run,
		Cause:  dropCause,
		Observe: func(rd worker.Ready) {
			reportLeaseEffects(&cfg, rd.Changes, rd.Deletes, rd.Cancel)
		},
		Received: func(msgs []core.Message) {
			for _, m := range msgs {
				cfg.OnReceived(MessageReceived{ID: m.ID, Receipt: m.Receipt, ReceiveCount: m.ReceiveCount})
			}
		},
	}, nil
}

func messageOf(m core.Message) Message {
	return Message{ID: m.ID, Body: m.Body, ReceiveCount: m.ReceiveCount, Attributes: m.Attributes, Typed: m.Typed}
}

// Heartbeat returns when the worker's loop last ran (the zero time before Run). A loop that
// stops moving for much longer than the long-poll wait is stuck.
func (w *Worker) Heartbeat() time.Time {
	if w == nil {
		return time.Time{}
	}
	n := w.heartbeat.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Stats returns the counters as of the loop's last iteration.
func (w *Worker) Stats() WorkerStats {
	if w == nil {
		return WorkerStats{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Run works the queue until ctx ends, then shuts down: it stops receiving, releases messages
// whose handler has not started with one ChangeMessageVisibilityBatch(0), keeps renewing
// running handlers' leases for up to Grace, then cancels those handlers (context.Cause is
// ErrShutdown) and lets their leases lapse. A receive in flight is cancelled once nothing
// else is left; whatever it still returns is released. Handlers that ignore their cancelled
// context are abandoned after another Grace (logged). It returns nil after a clean shutdown.
//
// A fatal error from a receive (the queue does not exist, access denied) ends Run the same
// way, without waiting for ctx, and Run returns an error wrapping ErrFatal that names the
// queue and the error code. Run may be called once; later calls return ErrStopped.
func (w *Worker) Run(ctx context.Context) error {
	if w == nil || w.n == nil {
		return notMade("Worker", "NewWorker")
	}
	if !w.running.CompareAndSwap(false, true) {
		select {
		case <-w.stopped:
			return ErrStopped
		default:
			return ErrRunning
		}
	}
	defer close(w.stopped)
	// Calls are not derived from ctx: the releases of the shutdown must still go out.
	calls, stopCalls := context.WithCancel(context.Background())
	defer stopCalls()
	l := &workerLoop{w: w, calls: calls, handlers: map[string]context.CancelCauseFunc{},
		leaseCalls: map[lease.CallID]context.CancelFunc{}}
	return l.run(ctx)
}

// workerLoop executes the worker's Node: it performs each Ready's effects on goroutines that
// report back as events stamped with the clock, and arms one timer for the Node's Wake.
type workerLoop struct {
	w          *Worker
	timer      *clock.Timer
	calls      context.Context
	recvCancel context.CancelFunc                  // the receive in flight's, nil when none
	handlers   map[string]context.CancelCauseFunc  // running handlers by receipt
	leaseCalls map[lease.CallID]context.CancelFunc // lease calls in flight
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
		rd := w.n.Ready()
		w.kit.Observe(rd)
		rd.Perform(l)
		next := w.n.Advance()
		w.publish(w.n.Status())
		if next.Exit {
			if next.Err != nil {
				return w.fatal(next.Err)
			}
			return nil
		}
		setTimer(l.timer, w.clk.Now(), next.Wake)
		var err error
		select {
		case ev := <-w.events:
			err = l.burst(ev)
		case <-l.timer.C:
			err = l.step(worker.Tick{Now: w.clk.Now()})
		case <-done:
			done = nil
			err = l.step(worker.Shutdown{Now: w.clk.Now()})
		}
		if err != nil {
			// Misuse of the Node is a driver bug: stop everything.
			l.cancelAll()
			return fmt.Errorf("sluice: worker: %w", err)
		}
	}
}

// burst steps ev, then lets finishing handlers report and takes what is already waiting, so
// their dispositions share batch calls.
func (l *workerLoop) burst(ev worker.Event) error {
	err := l.step(ev)
	runtime.Gosched()
	for i := 0; err == nil && i < eventsMax; i++ {
		select {
		case ev := <-l.w.events:
			err = l.step(ev)
			continue
		default:
		}
		break
	}
	return err
}

// fatal is Run's error for a fatal receive error: it names the queue and the code.
func (w *Worker) fatal(err error) error {
	queue := "the queue"
	if q, ok := w.t.(interface{ QueueURL() string }); ok {
		queue = q.QueueURL()
	}
	code := "no code"
	var te *core.TransportError
	if errors.As(err, &te) && te.Code != "" {
		code = te.Code
	}
	return fmt.Errorf("%w: receive from %s (%s); check the queue URL and the credentials: %w", ErrFatal, queue, code, err)
}

func (l *workerLoop) cancelAll() {
	for _, cancel := range l.handlers {
		cancel(ErrShutdown)
	}
	if l.recvCancel != nil {
		l.recvCancel()
	}
}

// step releases what the event's call or handler held, then steps the Node.
func (l *workerLoop) step(ev worker.Event) error {
	switch ev := ev.(type) {
	case worker.ReceiveDone:
		l.recvCancel()
		l.recvCancel = nil
		l.w.kit.Received(ev.Messages)
	case worker.HandlerDone:
		l.handlers[ev.Receipt](nil)
		delete(l.handlers, ev.Receipt)
	case worker.CallDone:
		if cancel := l.leaseCalls[ev.Call]; cancel != nil {
			cancel()
			delete(l.leaseCalls, ev.Call)
		}
	}
	l.w.heartbeat.Store(l.w.clk.Now().UnixNano())
	return l.w.n.Step(ev)
}

// dropCause maps why a lease was dropped to the cause a handler's context reports. The machine
// logged why the lease ended; the grace period's end is no loss.
func dropCause(r lease.DropReason) error {
	switch r {
	case lease.DropShutdown:
		return ErrShutdown
	case lease.DropGone:
		return ErrMessageGone
	}
	return fmt.Errorf("%w (%s)", ErrLeaseLost, r)
}

// The worker.Executor methods: each effect on its own goroutine, reporting back with the
// time it finished.

func (l *workerLoop) CancelHandler(c worker.CancelHandler) {
	l.handlers[c.Receipt](l.w.kit.Cause(c.Reason))
}

func (l *workerLoop) AbandonReceive(worker.CallID) { l.recvCancel() }

// AbandonCall cancels a lease call every receipt of which was dropped: nobody waits for it.
func (l *workerLoop) AbandonCall(id lease.CallID) {
	if cancel := l.leaseCalls[id]; cancel != nil {
		cancel()
		delete(l.leaseCalls, id)
	}
}

// ChangeVisibility and Delete run under a context ending at the call's deadline: no call
// about a receipt outlives its lease (Transport adapters make no retries of their own past it).
func (l *workerLoop) ChangeVisibility(c lease.ChangeVisibility) {
	w := l.w
	ctx, cancel := w.clk.WithDeadline(l.calls, c.Deadline)
	l.leaseCalls[c.Call] = cancel
	go func() {
		entries, err := w.t.ChangeVisibilityBatch(ctx, c.Entries)
		w.send(worker.CallDone{Call: c.Call, Now: w.clk.Now(), Entries: entries, Err: err})
	}()
}

func (l *workerLoop) Delete(d lease.Delete) {
	w := l.w
	ctx, cancel := w.clk.WithDeadline(l.calls, d.Deadline)
	l.leaseCalls[d.Call] = cancel
	go func() {
		entries, err := w.t.DeleteBatch(ctx, d.Receipts)
		w.send(worker.CallDone{Call: d.Call, Now: w.clk.Now(), Entries: entries, Err: err})
	}()
}

func (l *workerLoop) Receive(r worker.Receive) {
	w := l.w
	ctx, cancel := context.WithCancel(l.calls)
	l.recvCancel = cancel
	go func() {
		msgs, err := w.t.Receive(ctx, r.Max, r.Wait, r.Visibility)
		w.send(worker.ReceiveDone{Call: r.Call, Now: w.clk.Now(), Messages: msgs, Err: err})
	}()
}

func (l *workerLoop) StartHandler(s worker.StartHandler) {
	w := l.w
	// Not derived from Run's ctx: running handlers outlive it by the grace period.
	ctx, cancel := context.WithCancelCause(context.Background())
	l.handlers[s.Receipt] = cancel
	go func() {
		res := w.kit.Handle(ctx, s.Message)
		w.send(worker.HandlerDone{Receipt: s.Receipt, Now: w.clk.Now(), Result: res})
	}()
}

// send hands an event to the loop, or drops it once Run has returned (a handler abandoned
// for ignoring its cancellation).
func (w *Worker) send(ev worker.Event) {
	select {
	case w.events <- ev:
	case <-w.stopped:
	}
}

func (w *Worker) publish(st worker.Status) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats = WorkerStats{Received: st.Received, Started: st.Started, Succeeded: st.Succeeded,
		Released: st.Released, Permanent: st.Permanent, Terminal: st.Terminal, Retired: st.Retired,
		Poison: st.Poison, Dropped: st.Dropped, Cancelled: st.Cancelled, ReleasedAtEnd: st.ReleasedAtEnd, ReleasedExtra: st.ReleasedExtra,
		Running: st.Running, Waiting: st.Waiting, Held: st.Lease.Held,
		RenewalsSent: st.Lease.RenewalsSent, RenewalRetries: st.Lease.Retries, ReceiveErrors: st.ReceiveErrors,
		DispositionRetries: st.Lease.DisposeRetries, DispositionsFailed: st.Lease.DisposeFailed, LostWaiting: st.Lease.WaitLost}
}

// workerHandle is a WorkerHandler with its middleware, as the machine calls it.
type workerHandle struct {
	h     WorkerHandler
	chain CallHandler // WorkerConfig.Middleware around h; nil without middleware
}

// run calls the handler through the middleware, if any, and maps its error to the machine's
// result.
func (wh *workerHandle) run(ctx context.Context, m core.Message) worker.Result {
	msg := messageOf(m)
	return outcome.Worker(callThrough(ctx, wh.chain, messageCall(msg), func(ctx context.Context) error { return wh.h(ctx, msg) }))
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
