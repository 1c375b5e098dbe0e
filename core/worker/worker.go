package worker

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"slices"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/lease"
	"github.com/sluicehq/sluice/core/retry"
)

// Defaults (SPEC 3).
const (
	WindowDefault      = 30 * time.Second
	CeilingDefault     = 12 * time.Hour
	WaitDefault        = 20 * time.Second
	ConcurrencyDefault = 10
	BudgetDefault      = 5
	GraceDefault       = 30 * time.Second
)

// IdleDelayDefault is the least time between two receives when the first returned nothing.
const IdleDelayDefault = time.Second

// ReceiveBackoffDefault is the delay before the next receive after the n-th consecutive failed
// receive (the last one repeats).
func ReceiveBackoffDefault() []time.Duration {
	return []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second}
}

var (
	// ErrConfig is wrapped by every New error.
	ErrConfig = errors.New("worker: invalid config")
	// ErrUnknownCall is returned for a reply naming no call in flight (driver misuse).
	ErrUnknownCall = errors.New("worker: unknown call")
	// ErrUnknownHandler is returned for HandlerDone naming no running handler (driver misuse).
	ErrUnknownHandler = errors.New("worker: unknown handler")
	// ErrNotStopping is returned for ReceiveAbandoned before Shutdown (driver misuse).
	ErrNotStopping = errors.New("worker: receive abandoned before shutdown")
	// ErrBadResult is returned for HandlerDone with an outcome outside the table (driver misuse).
	ErrBadResult = errors.New("worker: invalid handler outcome")
)

// Config configures an Engine. Zero fields take their defaults.
type Config struct {
	Window      time.Duration // visibility timeout asked on receive; whole seconds
	Ceiling     time.Duration // the queue's limit on hiding a delivery (SQS: 12 h)
	Wait        time.Duration // long-poll wait of each receive (0 allowed: use WaitNone)
	WaitNone    bool          // receive with no long poll
	BatchMax    int           // messages per receive, 1..10 (default 10)
	Concurrency int           // handlers running at once
	Prefetch    int           // messages held waiting beyond Concurrency (default 0)
	// Budget: a delivery with ReceiveCount ≥ max(2, budget) is retired without running it;
	// an undecodable one is acked once ReceiveCount ≥ budget.
	Budget int
	// RedriveMaxReceives is the queue's redrive policy maxReceiveCount N (0: no redrive
	// policy). With one, the effective budget is at least N+1 and a permanent failure gets
	// a terminal backoff instead of a delete.
	RedriveMaxReceives int
	// Retry gives the release delay after a retryable failure: Wait(ReceiveCount−1, r, after)
	// (default retry.DefaultPolicy()). Rand draws r for the equal jitter; nil means no jitter
	// (Delay).
	Retry retry.Policy
	Rand  *rand.Rand
	// Decode reports whether a message can be handled; an error makes it poison. nil: all can.
	Decode func(core.Message) error
	// Grace is how long running handlers get after Shutdown before they are cancelled.
	Grace          time.Duration
	ReceiveBackoff []time.Duration
	// IdleDelay is the least time from one receive to the next when the first returned
	// nothing, so a short poll (Wait < IdleDelay) on an empty queue does not spin. Default 1 s.
	IdleDelay time.Duration
	Lease     lease.Config // Logger defaults to Logger
	Logger    *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Window == 0 {
		c.Window = WindowDefault
	}
	if c.Ceiling == 0 {
		c.Ceiling = CeilingDefault
	}
	if c.Wait == 0 && !c.WaitNone {
		// A long poll must end well inside the window: the lease counts from the stamp read
		// before the call, so a message delivered late in a long poll is already part spent.
		c.Wait = min(WaitDefault, (c.Window * 2 / 3).Truncate(time.Second))
		c.WaitNone = c.Wait == 0
	}
	if c.BatchMax == 0 {
		c.BatchMax = core.BatchMax
	}
	if c.Concurrency == 0 {
		c.Concurrency = ConcurrencyDefault
	}
	if c.Budget == 0 {
		c.Budget = BudgetDefault
	}
	if c.Retry == (retry.Policy{}) {
		c.Retry = retry.DefaultPolicy()
	}
	if c.Grace == 0 {
		c.Grace = GraceDefault
	}
	if c.IdleDelay == 0 {
		c.IdleDelay = IdleDelayDefault
	}
	if len(c.ReceiveBackoff) == 0 {
		c.ReceiveBackoff = ReceiveBackoffDefault()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Lease.Logger == nil {
		c.Lease.Logger = c.Logger
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Window < time.Second || c.Window%time.Second != 0:
		return fmt.Errorf("%w: Window must be whole seconds ≥ 1s, got %v", ErrConfig, c.Window)
	case c.Ceiling < c.Window:
		return fmt.Errorf("%w: Ceiling %v below Window %v", ErrConfig, c.Ceiling, c.Window)
	case c.Wait < 0:
		return fmt.Errorf("%w: negative Wait", ErrConfig)
	case c.Wait > c.Window*2/3:
		// Otherwise a message delivered late in the poll arrives with its lease (counted from
		// the stamp before the call) mostly or wholly spent, and is dropped on every delivery.
		return fmt.Errorf("%w: Wait %v must be at most two thirds of the Window %v", ErrConfig, c.Wait, c.Window)
	case c.BatchMax < 1 || c.BatchMax > core.BatchMax:
		return fmt.Errorf("%w: BatchMax must be 1..%d, got %d", ErrConfig, core.BatchMax, c.BatchMax)
	case c.Concurrency < 1 || c.Prefetch < 0:
		return fmt.Errorf("%w: Concurrency must be ≥ 1 and Prefetch ≥ 0", ErrConfig)
	case c.Budget < 1 || c.RedriveMaxReceives < 0:
		return fmt.Errorf("%w: Budget must be ≥ 1 and RedriveMaxReceives ≥ 0", ErrConfig)
	case c.Grace < 0:
		return fmt.Errorf("%w: negative Grace", ErrConfig)
	case c.IdleDelay < 0:
		return fmt.Errorf("%w: negative IdleDelay", ErrConfig)
	case c.Lease.ReceiptsMax != 0 && c.Lease.ReceiptsMax < c.Concurrency+c.Prefetch+c.BatchMax:
		return fmt.Errorf("%w: Lease.ReceiptsMax %d cannot hold Concurrency+Prefetch+BatchMax = %d",
			ErrConfig, c.Lease.ReceiptsMax, c.Concurrency+c.Prefetch+c.BatchMax)
	}
	for _, d := range c.ReceiveBackoff {
		if d <= 0 {
			return fmt.Errorf("%w: ReceiveBackoff delays must be positive", ErrConfig)
		}
	}
	if err := c.Retry.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// Budget returns the effective receive budget: Budget, raised to RedriveMaxReceives+1 when
// the queue has a redrive policy.
func (c Config) budget() int {
	if c.RedriveMaxReceives > 0 {
		return max(c.Budget, c.RedriveMaxReceives+1)
	}
	return c.Budget
}

// Outcome is how a handler ended.
type Outcome uint8

const (
	Success   Outcome = iota + 1 // ack: delete
	Retryable                    // release after the retry policy's backoff (or Result.After)
	Permanent                    // delete and log at Error; terminal backoff with a redrive policy
	Terminal                     // terminal backoff: hide 300 s so the redrive policy moves it
)

func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Retryable:
		return "retryable"
	case Permanent:
		return "permanent"
	case Terminal:
		return "terminal"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is a handler's verdict on one delivery.
type Result struct {
	Outcome Outcome
	Err     error
	After   *time.Duration // Retryable: a server-requested wait, replacing the backoff
}

// Event is the sealed set of inputs to Step.
type Event interface{ isEvent() }

// Tick: time has passed; do what is due. Also the first event, which starts the receive loop.
type Tick struct{ Now time.Time }

// ReceiveDone is the reply to a Receive effect; At is when it arrived.
type ReceiveDone struct {
	Call     CallID
	At       time.Time
	Messages []core.Message
	Err      error
}

// CallDone is the reply to a ChangeVisibility or Delete effect (lease.ChangeVisibility,
// lease.Delete): the batch call's per-entry errors in entry order, or Err for the whole call.
type CallDone struct {
	Call    lease.CallID
	At      time.Time
	Entries []error
	Err     error
}

// HandlerDone: the handler started for Receipt returned (also after it was cancelled; the
// result of a cancelled handler is ignored). Every StartHandler gets exactly one.
type HandlerDone struct {
	Receipt string
	At      time.Time
	Result  Result
}

// Shutdown stops receiving, releases waiting messages at once, and gives running handlers
// Grace before cancelling them.
type Shutdown struct{ Now time.Time }

// ReceiveAbandoned: after Shutdown, the driver stops waiting for the receive call in flight
// (a long poll it cannot cancel) so the engine can finish. The driver then owns whatever that
// call returns: it releases those messages itself with ChangeVisibility 0, and never feeds
// the call's ReceiveDone. Their receipts never reach the lease machine.
type ReceiveAbandoned struct {
	Call CallID
	At   time.Time
}

func (Tick) isEvent()             {}
func (ReceiveDone) isEvent()      {}
func (CallDone) isEvent()         {}
func (HandlerDone) isEvent()      {}
func (Shutdown) isEvent()         {}
func (ReceiveAbandoned) isEvent() {}

// CallID names a receive call.
type CallID uint64

// Receive asks the driver to call Transport.Receive(Max, Wait, Visibility) and feed the
// reply back as ReceiveDone with Call. Stamp is the time read before the call (t0): the
// driver issues the call right after Ready.
type Receive struct {
	Call       CallID
	Max        int
	Wait       time.Duration
	Visibility time.Duration
	Stamp      time.Time
}

// StartHandler asks the driver to run the handler for Message.
type StartHandler struct {
	Receipt string
	Message core.Message
}

// CancelHandler asks the driver to cancel a running handler (its lease is gone). The
// handler still reports HandlerDone when it returns.
type CancelHandler struct {
	Receipt string
	Reason  string
}

// Ready holds the effects produced since the last call to Ready. Perform Cancel first, then
// the calls (Changes, Deletes, Receive) and Start in any order; re-arm one timer for WakeAt
// (zero: none). Call Ready after a Step, or after a burst of Steps for events already
// waiting (their dispositions then share batch calls), before time moves on.
type Ready struct {
	Cancel  []CancelHandler
	Start   []StartHandler
	Changes []lease.ChangeVisibility
	Deletes []lease.Delete
	Receive *Receive
	WakeAt  time.Time
}

type state uint8

const (
	waiting   state = iota + 1 // received, handler not started
	running                    // handler started
	cancelled                  // handler started, lease dropped; waiting for HandlerDone
	finished                   // handler returned; disposition under way
)

type delivery struct {
	msg   core.Message
	state state
}

// Stats counts what the engine did.
type Stats struct {
	Received      int // deliveries received
	Started       int
	Succeeded     int
	Released      int // retryable failures released with backoff
	Permanent     int // permanent failures acked (no redrive policy)
	Terminal      int // terminal backoffs (explicit, or permanent with a redrive policy)
	Retired       int // over budget, acked without running
	Poison        int // undecodable deliveries
	PoisonAcked   int
	Dropped       int // leases dropped (handler cancelled or skipped)
	Cancelled     int // running handlers cancelled
	IgnoredDone   int // results of cancelled handlers
	ReleasedAtEnd int // waiting messages released at shutdown
	ReceiveErrors int
	// ReceivesAbandoned counts receive calls given up at shutdown (ReceiveAbandoned).
	ReceivesAbandoned int
	Running           int
	Waiting           int
	Budget            int
	Heartbeat         time.Time // the last time the engine processed an event: a liveness signal
	Stopping          bool
	Done              bool // stopping, and no handler, delivery or call is left
	Lease             lease.Stats
}

// Engine is the queue worker: a receive loop, a handler per message under its lease, and a
// disposition for each. It is single-owner and performs no I/O: every transport call and
// handler start leaves as an effect, every reply comes back as an event.
type Engine struct {
	cfg    Config
	log    *slog.Logger
	budget int
	lease  *lease.Machine
	// Invariant: now never decreases.
	now time.Time

	deliveries map[string]*delivery
	queue      []string // waiting receipts in order; entries no longer waiting are skipped
	// Invariant: running == number of deliveries in state running or cancelled ≤ Concurrency.
	running int
	waiting int

	recvCall     CallID // in flight, 0 when none
	recvStamp    time.Time
	lastRecv     CallID
	recvFailures int
	recvAfter    time.Time

	leaseCalls map[lease.CallID]lease.Purpose // in flight; Delete is recorded as Disposal

	stopping  bool
	graceEnd  time.Time
	leaseShut bool

	out   Ready
	stats Stats
}

// New returns an engine for cfg.
func New(cfg Config) (*Engine, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Engine{
		cfg:        cfg,
		log:        cfg.Logger,
		budget:     cfg.budget(),
		lease:      lease.New(cfg.Lease),
		deliveries: make(map[string]*delivery),
		leaseCalls: make(map[lease.CallID]lease.Purpose),
	}, nil
}

// Step applies one event. It returns an error only for driver misuse.
func (e *Engine) Step(ev Event) error {
	var t time.Time
	switch ev := ev.(type) {
	case Tick:
		t = ev.Now
	case ReceiveDone:
		t = ev.At
	case CallDone:
		t = ev.At
	case HandlerDone:
		t = ev.At
	case Shutdown:
		t = ev.Now
	case ReceiveAbandoned:
		t = ev.At
	}
	if t.IsZero() {
		return fmt.Errorf("worker: %T without a time", ev)
	}
	var err error
	switch ev := ev.(type) {
	case Tick:
		e.advance(ev.Now)
		err = e.stepLease(lease.Tick{Now: ev.Now})
	case ReceiveDone:
		err = e.onReceiveDone(ev)
	case CallDone:
		err = e.onCallDone(ev)
	case HandlerDone:
		err = e.onHandlerDone(ev)
	case Shutdown:
		e.advance(ev.Now)
		e.onShutdown()
	case ReceiveAbandoned:
		err = e.onReceiveAbandoned(ev)
	default:
		panic(fmt.Sprintf("worker: unknown event %T", ev))
	}
	e.drain()
	if err != nil {
		return err
	}
	e.maybeFinishGrace()
	e.pump()
	e.maybeReceive()
	return nil
}

func (e *Engine) advance(t time.Time) {
	if t.After(e.now) {
		e.now = t
	}
	e.stats.Heartbeat = e.now
}

// stepLease feeds the lease machine. Its effects are taken once per engine step (drain), so
// dispositions decided in one step leave in shared batch calls.
func (e *Engine) stepLease(ev lease.Event) error {
	if err := e.lease.Step(ev); err != nil {
		return fmt.Errorf("worker: lease step: %w", err)
	}
	return nil
}

// drain takes the lease machine's drops and ended leases: drops cancel or skip their
// handlers at once. The lease calls are taken by Ready, so dispositions decided in several
// steps before one Ready share batch calls.
func (e *Engine) drain() {
	cancels, ended := e.lease.TakeNotices()
	for _, c := range cancels {
		e.onDrop(c)
	}
	for _, end := range ended {
		if d := e.deliveries[end.Receipt]; d != nil && d.state == finished {
			e.forget(end.Receipt, d)
		}
	}
}

func (e *Engine) onDrop(c lease.CancelHandler) {
	d := e.deliveries[c.Receipt]
	if d == nil {
		return
	}
	e.stats.Dropped++
	switch d.state {
	case running:
		d.state = cancelled
		e.stats.Cancelled++
		e.out.Cancel = append(e.out.Cancel, CancelHandler{Receipt: c.Receipt, Reason: c.Reason.String()})
	case waiting, finished:
		e.forget(c.Receipt, d)
	}
}

func (e *Engine) forget(receipt string, d *delivery) {
	switch d.state {
	case waiting:
		e.waiting--
	case running, cancelled:
		e.running--
	}
	delete(e.deliveries, receipt)
}

func (e *Engine) onReceiveDone(ev ReceiveDone) error {
	if ev.Call == 0 || ev.Call != e.recvCall {
		return fmt.Errorf("%w: receive %d", ErrUnknownCall, ev.Call)
	}
	e.advance(ev.At)
	e.recvCall = 0
	if ev.Err != nil {
		e.stats.ReceiveErrors++
		delay := e.cfg.ReceiveBackoff[min(e.recvFailures, len(e.cfg.ReceiveBackoff)-1)]
		e.recvFailures++
		e.recvAfter = ev.At.Add(delay)
		if core.ClassOf(ev.Err) == core.Fatal {
			e.log.Error("worker: receive failed", "err", ev.Err, "retry_in", delay)
		} else {
			e.log.Warn("worker: receive failed", "err", ev.Err, "retry_in", delay)
		}
		return e.stepLease(lease.Tick{Now: ev.At})
	}
	e.recvFailures = 0
	if len(ev.Messages) == 0 {
		e.recvAfter = e.recvStamp.Add(e.cfg.IdleDelay)
	}
	if len(ev.Messages) > e.cfg.BatchMax {
		return fmt.Errorf("worker: receive %d returned %d messages, asked at most %d", ev.Call, len(ev.Messages), e.cfg.BatchMax)
	}
	if err := e.stepLease(lease.Received{Now: ev.At, Stamp: e.recvStamp, Window: e.cfg.Window,
		Ceiling: e.cfg.Ceiling, Messages: ev.Messages}); err != nil {
		return err
	}
	for _, msg := range ev.Messages {
		e.stats.Received++
		if !e.lease.Held(msg.Receipt) {
			continue // the window lapsed before the reply arrived: never held
		}
		e.deliveries[msg.Receipt] = &delivery{msg: msg, state: waiting}
		e.waiting++
		if err := e.admit(msg); err != nil {
			return err
		}
	}
	return nil
}

// admit decides what happens to a freshly received delivery: released at once during
// shutdown, poison, retired over budget, or queued to run.
func (e *Engine) admit(msg core.Message) error {
	if e.stopping {
		e.stats.ReleasedAtEnd++
		return e.dispose(msg.Receipt, lease.Disposition{Kind: lease.Release})
	}
	if e.cfg.Decode != nil {
		if err := e.cfg.Decode(msg); err != nil {
			e.stats.Poison++
			if msg.ReceiveCount >= e.budget {
				e.stats.PoisonAcked++
				e.log.Error("worker: poison message reached the receive budget; acking",
					"message", msg.ID, "receive_count", msg.ReceiveCount, "budget", e.budget, "err", err)
				return e.dispose(msg.Receipt, lease.Disposition{Kind: lease.Ack})
			}
			e.log.Warn("worker: poison message; leaving it to lapse",
				"message", msg.ID, "receive_count", msg.ReceiveCount, "budget", e.budget, "err", err)
			return e.dispose(msg.Receipt, lease.Disposition{Kind: lease.Abandon})
		}
	}
	if msg.ReceiveCount >= max(2, e.budget) {
		e.stats.Retired++
		e.log.Error("worker: receive budget spent; retiring the delivery without running it",
			"message", msg.ID, "receive_count", msg.ReceiveCount, "budget", e.budget)
		return e.dispose(msg.Receipt, lease.Disposition{Kind: lease.Ack})
	}
	e.queue = append(e.queue, msg.Receipt)
	return nil
}

// dispose hands a waiting delivery's disposition to the lease machine. A receipt the lease
// machine dropped earlier in this step is left to drain.
func (e *Engine) dispose(receipt string, disp lease.Disposition) error {
	if !e.lease.Held(receipt) {
		return nil
	}
	if d := e.deliveries[receipt]; d != nil && d.state == waiting {
		e.waiting--
		d.state = finished
	}
	return e.stepLease(lease.Dispose{Now: e.now, Receipt: receipt, Disposition: disp})
}

func (e *Engine) onReceiveAbandoned(ev ReceiveAbandoned) error {
	if ev.Call == 0 || ev.Call != e.recvCall {
		return fmt.Errorf("%w: receive %d", ErrUnknownCall, ev.Call)
	}
	if !e.stopping {
		return fmt.Errorf("%w: receive %d", ErrNotStopping, ev.Call)
	}
	e.advance(ev.At)
	e.recvCall = 0
	e.stats.ReceivesAbandoned++
	return e.stepLease(lease.Tick{Now: ev.At})
}

func (e *Engine) onCallDone(ev CallDone) error {
	p, ok := e.leaseCalls[ev.Call]
	if !ok {
		return fmt.Errorf("%w: lease call %d", ErrUnknownCall, ev.Call)
	}
	e.advance(ev.At)
	delete(e.leaseCalls, ev.Call)
	if p == lease.Renewal {
		return e.stepLease(lease.RenewResult{Call: ev.Call, At: ev.At, Entries: ev.Entries, Err: ev.Err})
	}
	return e.stepLease(lease.DisposeResult{Call: ev.Call, At: ev.At, Entries: ev.Entries, Err: ev.Err})
}

func (e *Engine) onHandlerDone(ev HandlerDone) error {
	d := e.deliveries[ev.Receipt]
	if d == nil || (d.state != running && d.state != cancelled) {
		return fmt.Errorf("%w: %q", ErrUnknownHandler, ev.Receipt)
	}
	if ev.Result.Outcome < Success || ev.Result.Outcome > Terminal {
		// Refused before anything changes: a misused Step leaves the engine as it was.
		return fmt.Errorf("%w: %v for %q", ErrBadResult, ev.Result.Outcome, ev.Receipt)
	}
	e.advance(ev.At)
	if d.state == cancelled {
		e.stats.IgnoredDone++
		e.log.Debug("worker: cancelled handler returned; result ignored", "message", d.msg.ID, "outcome", ev.Result.Outcome.String())
		e.forget(ev.Receipt, d)
		return e.stepLease(lease.Tick{Now: ev.At})
	}
	e.running--
	d.state = finished
	disp, err := e.disposition(d.msg, ev.Result)
	if err != nil {
		return err
	}
	return e.stepLease(lease.Dispose{Now: ev.At, Receipt: ev.Receipt, Disposition: disp})
}

// disposition is the table of SPEC 3.3.
func (e *Engine) disposition(msg core.Message, r Result) (lease.Disposition, error) {
	switch r.Outcome {
	case Success:
		e.stats.Succeeded++
		return lease.Disposition{Kind: lease.Ack}, nil
	case Retryable:
		e.stats.Released++
		n := max(0, msg.ReceiveCount-1)
		var wait time.Duration
		if e.cfg.Rand != nil || r.After != nil {
			var draw uint32
			if e.cfg.Rand != nil {
				draw = e.cfg.Rand.Uint32()
			}
			wait = e.cfg.Retry.Wait(n, draw, r.After)
		} else {
			wait = e.cfg.Retry.Delay(n)
		}
		e.log.Info("worker: handler failed, retryable; releasing", "message", msg.ID, "after", wait, "err", r.Err)
		return lease.Disposition{Kind: lease.Release, After: wait}, nil
	case Permanent:
		if e.cfg.RedriveMaxReceives > 0 {
			e.stats.Terminal++
			e.log.Warn("worker: handler failed permanently; hiding for the redrive policy", "message", msg.ID, "err", r.Err)
			return lease.Disposition{Kind: lease.TerminalBackoff}, nil
		}
		e.stats.Permanent++
		e.log.Error("worker: handler failed permanently; acking", "message", msg.ID, "err", r.Err)
		return lease.Disposition{Kind: lease.Ack}, nil
	case Terminal:
		e.stats.Terminal++
		e.log.Warn("worker: terminal backoff", "message", msg.ID, "err", r.Err)
		return lease.Disposition{Kind: lease.TerminalBackoff}, nil
	}
	return lease.Disposition{}, fmt.Errorf("worker: handler for %s returned outcome %v", msg.ID, r.Outcome)
}

func (e *Engine) onShutdown() {
	if e.stopping {
		return
	}
	e.stopping = true
	e.graceEnd = e.now.Add(e.cfg.Grace)
	e.log.Info("worker: shutting down", "running", e.running, "waiting", e.waiting, "grace", e.cfg.Grace)
	// Release every waiting message at once: their dispositions leave together in one Ready,
	// so the lease machine batches them into one ChangeMessageVisibilityBatch(0) per 10.
	for _, r := range e.queue {
		if d := e.deliveries[r]; d != nil && d.state == waiting {
			e.stats.ReleasedAtEnd++
			if err := e.dispose(r, lease.Disposition{Kind: lease.Release}); err != nil {
				panic(fmt.Sprintf("worker: releasing %s at shutdown: %v", r, err)) // engine bug
			}
		}
	}
	e.queue = nil
	e.maybeFinishGrace()
}

// maybeFinishGrace ends the grace period when it has passed or nothing runs: the lease
// machine drops what is still held, which cancels the running handlers.
func (e *Engine) maybeFinishGrace() {
	if !e.stopping || e.leaseShut || (e.running > 0 && e.now.Before(e.graceEnd)) {
		return
	}
	e.leaseShut = true
	if e.running > 0 {
		e.log.Warn("worker: grace period over; cancelling running handlers", "running", e.running)
	}
	if err := e.stepLease(lease.Shutdown{Now: e.now}); err != nil {
		panic(fmt.Sprintf("worker: lease shutdown: %v", err)) // engine bug
	}
	e.drain()
}

// pump starts waiting handlers while slots are free.
func (e *Engine) pump() {
	for e.running < e.cfg.Concurrency && len(e.queue) > 0 {
		r := e.queue[0]
		e.queue = e.queue[1:]
		d := e.deliveries[r]
		if d == nil || d.state != waiting {
			continue
		}
		d.state = running
		e.waiting--
		e.running++
		e.stats.Started++
		e.out.Start = append(e.out.Start, StartHandler{Receipt: r, Message: d.msg})
	}
	if len(e.queue) == 0 {
		e.queue = nil // let the backing array go
	}
}

func (e *Engine) maybeReceive() {
	if e.stopping || e.recvCall != 0 || e.now.Before(e.recvAfter) {
		return
	}
	room := e.cfg.Concurrency + e.cfg.Prefetch - e.running - e.waiting
	if room <= 0 {
		return
	}
	e.lastRecv++
	e.recvCall = e.lastRecv
	e.recvStamp = e.now
	e.out.Receive = &Receive{Call: e.recvCall, Max: min(e.cfg.BatchMax, room), Wait: e.cfg.Wait,
		Visibility: e.cfg.Window, Stamp: e.now}
}

// Ready returns the effects produced since the last call and forgets them.
func (e *Engine) Ready() Ready {
	rd := e.out
	e.out = Ready{}
	lr := e.lease.Ready()
	if len(lr.Cancel) > 0 || len(lr.Ended) > 0 {
		panic("worker: lease notices left undrained") // every Step drains them
	}
	for _, c := range lr.Changes {
		e.leaseCalls[c.Call] = c.Purpose
	}
	for _, d := range lr.Deletes {
		e.leaseCalls[d.Call] = lease.Disposal
	}
	rd.Changes, rd.Deletes = lr.Changes, lr.Deletes
	rd.WakeAt = lr.WakeAt
	consider := func(t time.Time) {
		if !t.IsZero() && (rd.WakeAt.IsZero() || t.Before(rd.WakeAt)) {
			rd.WakeAt = t
		}
	}
	if !e.stopping && e.recvCall == 0 && e.now.Before(e.recvAfter) {
		consider(e.recvAfter)
	}
	if e.stopping && !e.leaseShut {
		consider(e.graceEnd)
	}
	return rd
}

// Status returns a copy of the counters and gauges.
func (e *Engine) Status() Stats {
	s := e.stats
	s.Running, s.Waiting, s.Budget = e.running, e.waiting, e.budget
	s.Stopping = e.stopping
	s.Lease = e.lease.Status()
	s.Done = e.stopping && len(e.deliveries) == 0 && e.recvCall == 0 && len(e.leaseCalls) == 0 && s.Lease.Held == 0
	return s
}

// Deliveries returns the receipts the engine knows, sorted, with their state.
func (e *Engine) Deliveries() []string {
	out := make([]string, 0, len(e.deliveries))
	for r, d := range e.deliveries {
		out = append(out, r+" "+d.state.String())
	}
	slices.SortFunc(out, cmp.Compare[string])
	return out
}

func (s state) String() string {
	switch s {
	case waiting:
		return "waiting"
	case running:
		return "running"
	case cancelled:
		return "cancelled"
	case finished:
		return "finished"
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// Lease exposes the lease machine read-only, for checkers.
func (e *Engine) Lease(receipt string) (lease.Lease, bool) { return e.lease.Lease(receipt) }
