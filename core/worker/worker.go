package worker

import (
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

// Defaults (docs/worker.md).
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
	// ErrBadResult is returned for HandlerDone with an outcome outside the table (driver misuse).
	ErrBadResult = errors.New("worker: invalid handler outcome")
)

// Config configures a Machine. Zero fields take their defaults.
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
	Grace time.Duration
	// StopMargin: a handler whose lease is ending is cancelled this long before the local
	// deadline, and no call about its receipt runs past that point, so a handler that stops
	// within the margin never overlaps the next consumer (the queue's own deadline is later
	// by at most the one-way latency of the receive). 0: min(1 s, Window/20). Under Window/10.
	StopMargin     time.Duration
	ReceiveBackoff []time.Duration
	// IdleDelay is the least time from one receive to the next when the first returned
	// nothing, so a short poll (Wait < IdleDelay) on an empty queue does not spin. Default 1 s.
	IdleDelay time.Duration
	Lease     lease.Config // Logger defaults to Logger
	// StopHeld: at the grace period's end, running handlers are cancelled (Held) while their
	// leases are kept, and the result of each that returns within a second Grace is disposed
	// as any other (the queue runner releases its message at once, spending no attempt);
	// the leases of the rest are then dropped as without it.
	StopHeld bool
	Logger   *slog.Logger
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
	if c.StopMargin == 0 {
		c.StopMargin = lease.StopMarginFor(c.Window)
	}
	c.Lease.StopMargin = c.StopMargin
	return c
}

// ConfigError names the Config field at fault; it wraps ErrConfig.
type ConfigError = core.FieldError

func bad(field string, value any, rule string) error {
	return &ConfigError{Err: ErrConfig, Field: field, Value: value, Rule: rule}
}

// validateSet checks what only the fields as given can tell: which of Window and Ceiling is
// at fault when the window is longer than the default ceiling.
func (c Config) validateSet() error {
	if c.Ceiling == 0 && c.Window > CeilingDefault {
		return bad("Window", c.Window, fmt.Sprintf("must be at most the Ceiling (default %v)", CeilingDefault))
	}
	return nil
}

func (c Config) validate() error {
	switch {
	case c.Window < time.Second || c.Window%time.Second != 0:
		return bad("Window", c.Window, "must be whole seconds ≥ 1s")
	case c.Ceiling < c.Window:
		return bad("Ceiling", c.Ceiling, fmt.Sprintf("must be at least the Window (%v)", c.Window))
	case c.Wait < 0:
		return bad("Wait", c.Wait, "must be ≥ 0")
	case c.Wait > c.Window*2/3:
		// Otherwise a message delivered late in the poll arrives with its lease (counted from
		// the stamp before the call) mostly or wholly spent, and is dropped on every delivery.
		return bad("Wait", c.Wait, fmt.Sprintf("must be at most two thirds of the Window (%v): a message's window counts from before the receive call", c.Window))
	case c.BatchMax < 1 || c.BatchMax > core.BatchMax:
		return bad("BatchMax", c.BatchMax, fmt.Sprintf("must be 1..%d", core.BatchMax))
	case c.Concurrency < 1:
		return bad("Concurrency", c.Concurrency, "must be ≥ 1")
	case c.Prefetch < 0:
		return bad("Prefetch", c.Prefetch, "must be ≥ 0")
	case c.Budget < 1:
		return bad("Budget", c.Budget, "must be ≥ 1")
	case c.RedriveMaxReceives < 0:
		return bad("RedriveMaxReceives", c.RedriveMaxReceives, "must be ≥ 0")
	case c.Grace < 0:
		return bad("Grace", c.Grace, "must be ≥ 0")
	case c.IdleDelay < 0:
		return bad("IdleDelay", c.IdleDelay, "must be ≥ 0")
	case c.StopMargin < 0 || c.StopMargin >= c.Window/10:
		// Renewals stop at retryUntil = deadline − Window/10; the margin must leave room after
		// it for a disposition waiting behind the last renewal.
		return bad("StopMargin", c.StopMargin, fmt.Sprintf("must be ≥ 0 and under a tenth of the Window (%v)", c.Window/10))
	case c.Lease.ReceiptsMax != 0 && c.Lease.ReceiptsMax < c.Concurrency+c.Prefetch+c.BatchMax:
		return bad("Lease.ReceiptsMax", c.Lease.ReceiptsMax,
			fmt.Sprintf("cannot hold Concurrency+Prefetch+BatchMax = %d", c.Concurrency+c.Prefetch+c.BatchMax))
	}
	for _, d := range c.ReceiveBackoff {
		if d <= 0 {
			return bad("ReceiveBackoff", d, "delays must be positive")
		}
	}
	var fe *retry.FieldError
	if err := c.Retry.Validate(); errors.As(err, &fe) {
		return bad("Retry."+fe.Field, fe.Value, fe.Rule)
	} else if err != nil {
		return fmt.Errorf("%w: Retry: %w", ErrConfig, err)
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

// Event is the sealed set of inputs to Step. Every event carries the time it happened as
// Now (for a reply: when it arrived).
type Event interface{ isEvent() }

// Tick: time has passed; do what is due. Also the first event, which starts the receive loop.
type Tick struct{ Now time.Time }

// ReceiveDone is the reply to a Receive effect, also after AbandonReceive cancelled it (Err
// is then the context's error, or the call returned messages first: they are released).
type ReceiveDone struct {
	Call     CallID
	Now      time.Time
	Messages []core.Message
	Err      error
}

// CallDone is the reply to a ChangeVisibility or Delete effect (lease.ChangeVisibility,
// lease.Delete): the batch call's per-entry errors in entry order, or Err for the whole call.
// A reply with the wrong number of entries is taken as a retryable failure of every entry.
type CallDone struct {
	Call    lease.CallID
	Now     time.Time
	Entries []error
	Err     error
}

// HandlerDone: the handler started for Receipt returned (also after it was cancelled; the
// result of a cancelled handler is ignored). Every StartHandler gets exactly one.
type HandlerDone struct {
	Receipt string
	Now     time.Time
	Result  Result
}

// Shutdown stops receiving, releases waiting messages at once, and gives running handlers
// Grace before cancelling them.
type Shutdown struct{ Now time.Time }

func (Tick) isEvent()        {}
func (ReceiveDone) isEvent() {}
func (CallDone) isEvent()    {}
func (HandlerDone) isEvent() {}
func (Shutdown) isEvent()    {}

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

// CancelHandler asks the driver to cancel a running handler: its lease is gone, for Reason
// (lease.DropShutdown when the grace period ended). The handler still reports HandlerDone
// when it returns.
type CancelHandler struct {
	Receipt string
	Reason  lease.DropReason
	// Held (Config.StopHeld): the lease is kept; the handler's result will be disposed.
	Held bool
}

// Ready holds the effects produced since the last call to Ready, and forgets them as it
// hands them out. The order (Perform follows it): Cancel first, so a dropped handler's
// context ends before anything else is sent; then AbandonReceive and AbandonCalls, so calls
// nobody waits for stop; then the calls Changes, Deletes and Receive; Start last; then
// re-arm one timer for WakeAt (zero: none; Node.Advance reports it). An effect counts as
// done once handed out: the machine then waits for its reply event (ReceiveDone, CallDone,
// HandlerDone), which every call and handler must produce exactly once. Call Ready after a
// Step, or after a burst of Steps for events already waiting, before time moves on.
//
// AbandonCalls names lease calls in flight about receipts no longer held (all dropped): the
// driver cancels their contexts and nothing waits for them (a CallDone may still follow and
// is accepted).
type Ready struct {
	Cancel       []CancelHandler
	AbandonCalls []lease.CallID
	// AbandonReceive names the receive call in flight that is no longer wanted (shutdown,
	// with nothing else left): cancel its context. Its ReceiveDone still follows.
	AbandonReceive CallID
	Start          []StartHandler
	Changes        []lease.ChangeVisibility
	Deletes        []lease.Delete
	Receive        *Receive
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

// Status counts what the machine did and reports where it is.
type Status struct {
	Received      int // deliveries received and held (extra ones from an over-full reply too)
	Started       int // handlers started
	Succeeded     int // handlers that succeeded: acked
	Released      int // retryable failures released with backoff
	Permanent     int // permanent failures acked (no redrive policy)
	Terminal      int // terminal backoffs (explicit, or permanent with a redrive policy)
	Retired       int // over budget, acked without running
	Poison        int // undecodable deliveries
	PoisonAcked   int // undecodable deliveries acked at the budget
	Dropped       int // leases dropped (handler cancelled or skipped)
	Cancelled     int // running handlers cancelled
	IgnoredDone   int // results of cancelled handlers
	ReleasedAtEnd int // messages released at once because the worker was stopping
	ReleasedExtra int // messages beyond the receive's Max, released at once
	ReceiveErrors int // failed receive calls (retried with backoff unless fatal)
	BadReplies    int // batch replies with the wrong number of entries
	// ReceivesAbandoned counts receive calls cancelled at shutdown (AbandonReceive).
	ReceivesAbandoned int
	// HandlersAbandoned counts cancelled handlers still running when the second grace ended:
	// the machine is Done without them.
	HandlersAbandoned int
	Running           int
	Waiting           int
	Budget            int
	Heartbeat         time.Time // the last time the machine processed an event: a liveness signal
	Stopping          bool
	// Err is the fatal receive error that stopped the worker (nil after a requested Shutdown).
	Err   error
	Done  bool // stopping, and nothing is left: no delivery, no call, no handler waited for
	Lease lease.Status
}

// Machine is the queue worker: a receive loop, a handler per message under its lease, and a
// disposition for each. It is single-owner and performs no I/O: every transport call and
// handler start leaves as an effect, every reply comes back as an event.
type Machine struct {
	cfg      Config
	log      *slog.Logger
	budget   int
	leaseMax int
	lease    *lease.Machine
	// Invariant: now never decreases.
	now time.Time

	deliveries map[string]*delivery
	queue      []string // waiting receipts in order; entries no longer waiting are skipped
	// Invariant: running == number of deliveries in state running or cancelled ≤ Concurrency.
	running int
	waiting int

	recvCall      CallID // in flight, 0 when none
	recvMax       int
	recvStamp     time.Time
	recvAbandoned bool // AbandonReceive went out for recvCall
	lastRecv      CallID
	recvFailures  int
	recvAfter     time.Time

	leaseCalls map[lease.CallID]leaseCall // in flight
	// Invariant: liveCalls == number of leaseCalls not abandoned.
	liveCalls int

	stopping  bool
	fatal     error
	graceEnd  time.Time
	leaseShut bool
	abandonAt time.Time // leaseShut: when cancelled handlers stop being waited for
	abandoned bool
	holdEnd   time.Time // StopHeld: when handlers cancelled with their leases held stop being waited for

	out   Ready
	stats Status

	queued map[string]bool // checkInvariants' scratch
}

// leaseCall is a lease call in flight: which reply event it expects and how many entries.
type leaseCall struct {
	purpose   lease.Purpose // Delete is recorded as Disposal
	entries   int
	abandoned bool // no receipt of it is held: nothing waits for its reply
}

// Validate reports what New would refuse in c, without logging.
func (c Config) Validate() error {
	_, _, err := c.check()
	return err
}

// check defaults and validates c, and builds its lease machine.
func (c Config) check() (Config, *lease.Machine, error) {
	if err := c.validateSet(); err != nil {
		return c, nil, err
	}
	c = c.withDefaults()
	if err := c.validate(); err != nil {
		return c, nil, err
	}
	lm, err := lease.New(c.Lease)
	if err != nil {
		return c, nil, fmt.Errorf("%w: Lease: %w", ErrConfig, err)
	}
	return c, lm, nil
}

// New returns a machine for cfg, or an error wrapping ErrConfig naming the field at fault.
func New(cfg Config) (*Machine, error) {
	cfg, lm, err := cfg.check()
	if err != nil {
		return nil, err
	}
	if b := cfg.budget(); b != cfg.Budget {
		cfg.Logger.Info("worker: Budget raised above the redrive policy's maxReceiveCount, so the queue dead-letters before the worker retires",
			"budget", cfg.Budget, "max_receive_count", cfg.RedriveMaxReceives, "effective_budget", b)
	}
	leaseMax := cfg.Lease.ReceiptsMax
	if leaseMax == 0 {
		leaseMax = lease.ReceiptsMaxDefault
	}
	return &Machine{
		cfg:        cfg,
		log:        cfg.Logger,
		budget:     cfg.budget(),
		leaseMax:   leaseMax,
		lease:      lm,
		deliveries: make(map[string]*delivery),
		leaseCalls: make(map[lease.CallID]leaseCall),
	}, nil
}

// Step applies one event. It returns an error only for driver misuse.
func (e *Machine) Step(ev Event) error {
	var t time.Time
	switch ev := ev.(type) {
	case Tick:
		t = ev.Now
	case ReceiveDone:
		t = ev.Now
	case CallDone:
		t = ev.Now
	case HandlerDone:
		t = ev.Now
	case Shutdown:
		t = ev.Now
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
	default:
		panic(fmt.Sprintf("worker: unknown event %T", ev))
	}
	if err != nil {
		return err
	}
	e.decide()
	return nil
}

// decide makes the decisions that follow any change: the end of the grace period, giving up
// on handlers and on the receive in flight, starting handlers, the next receive. Step and
// Ready both run it (Ready after taking the lease machine's drops, which may free room).
func (e *Machine) decide() {
	e.maybeFinishGrace()
	e.maybeAbandonHandlers()
	e.pump()
	e.maybeReceive()
	e.maybeAbandonReceive()
}

func (e *Machine) advance(t time.Time) {
	if t.After(e.now) {
		e.now = t
	}
	e.stats.Heartbeat = e.now
}

// stepLease feeds the lease machine; Ready takes its effects (drain).
func (e *Machine) stepLease(ev lease.Event) error {
	if err := e.lease.Step(ev); err != nil {
		return fmt.Errorf("worker: lease step: %w", err)
	}
	return nil
}

// drain takes the lease machine's effects, once per Ready (its one channel), so the calls of
// dispositions decided in a burst of steps share batches: drops cancel or skip their
// handlers, ended leases forget their deliveries, and the calls join this machine's Ready.
// Until then a delivery whose lease was dropped keeps its state here; every decision in
// between asks the lease machine whether it is held (pump, onHandlerDone, dispose).
func (e *Machine) drain() {
	lr := e.lease.Ready()
	for _, c := range lr.Cancel {
		e.onDrop(c)
	}
	for _, end := range lr.Ended {
		if d := e.deliveries[end.Receipt]; d != nil && d.state == finished {
			e.forget(end.Receipt, d)
		}
	}
	for _, c := range lr.Changes {
		e.leaseCalls[c.Call] = leaseCall{purpose: c.Purpose, entries: len(c.Entries)}
	}
	e.liveCalls += len(lr.Changes) + len(lr.Deletes)
	for _, d := range lr.Deletes {
		e.leaseCalls[d.Call] = leaseCall{purpose: lease.Disposal, entries: len(d.Receipts)}
	}
	for _, id := range lr.Abandon {
		if c, ok := e.leaseCalls[id]; ok && !c.abandoned {
			c.abandoned = true
			e.leaseCalls[id] = c
			e.liveCalls--
			e.out.AbandonCalls = append(e.out.AbandonCalls, id)
		}
	}
	e.out.Changes = append(e.out.Changes, lr.Changes...)
	e.out.Deletes = append(e.out.Deletes, lr.Deletes...)
}

func (e *Machine) onDrop(c lease.CancelHandler) {
	d := e.deliveries[c.Receipt]
	if d == nil {
		return
	}
	e.stats.Dropped++
	switch d.state {
	case running:
		if i := slices.IndexFunc(e.out.Start, func(s StartHandler) bool { return s.Receipt == c.Receipt }); i >= 0 {
			// Started in this burst, before the drop: the start was never handed out, so
			// withdraw it (a Cancel beside it would name a handler the driver never ran).
			e.out.Start = slices.Delete(e.out.Start, i, i+1)
			e.stats.Started--
			e.forget(c.Receipt, d)
			return
		}
		d.state = cancelled
		e.stats.Cancelled++
		e.out.Cancel = append(e.out.Cancel, CancelHandler{Receipt: c.Receipt, Reason: c.Reason})
	case waiting, finished:
		e.forget(c.Receipt, d)
	}
}

func (e *Machine) forget(receipt string, d *delivery) {
	switch d.state {
	case waiting:
		e.waiting--
	case running, cancelled:
		e.running--
	}
	delete(e.deliveries, receipt)
}

func (e *Machine) onReceiveDone(ev ReceiveDone) error {
	if ev.Call == 0 || ev.Call != e.recvCall {
		return fmt.Errorf("%w: receive %d", ErrUnknownCall, ev.Call)
	}
	if e.out.AbandonReceive == ev.Call {
		// The reply arrived before the abandon was handed out (stepped in one burst): withdraw
		// it, as a start is withdrawn; nothing is in flight to cancel any more.
		e.out.AbandonReceive = 0
		e.stats.ReceivesAbandoned--
	}
	if ev.Err != nil {
		e.advance(ev.Now)
		e.recvCall = 0
		return e.onReceiveFailed(ev)
	}
	msgs, extra := ev.Messages, []core.Message(nil)
	if len(msgs) > e.recvMax {
		// The transport broke its contract. The extra deliveries are leased like the rest and
		// released at once, through the same batched calls as any disposition.
		msgs, extra = msgs[:e.recvMax], msgs[e.recvMax:]
		e.log.Error("worker: transport returned more messages than asked for; releasing the extra",
			"asked", e.recvMax, "got", len(ev.Messages))
	}
	held, disposing := e.lease.Holding()
	if room := e.leaseMax - held - disposing - len(msgs); len(extra) > room {
		// Beyond what the lease machine may hold: no call names them, so they lapse.
		e.log.Error("worker: no room to lease the extra messages; they reappear when their window lapses",
			"extra", len(extra)-max(room, 0))
		extra = extra[:max(room, 0)]
	}
	all := append(slices.Clip(msgs), extra...)
	if err := e.stepLease(lease.Received{Now: ev.Now, Stamp: e.recvStamp, Window: e.cfg.Window,
		Ceiling: e.cfg.Ceiling, Messages: all}); err != nil {
		return err // refused (a receipt twice, or one already held): nothing changed
	}
	e.advance(ev.Now)
	e.recvCall = 0
	e.recvFailures = 0
	if len(ev.Messages) == 0 {
		e.recvAfter = e.recvStamp.Add(e.cfg.IdleDelay)
	}
	for i, msg := range all {
		e.stats.Received++
		if !e.lease.Held(msg.Receipt) {
			continue // the window lapsed before the reply arrived: never held
		}
		e.deliveries[msg.Receipt] = &delivery{msg: msg, state: waiting}
		e.waiting++
		var err error
		if i >= len(msgs) {
			e.stats.ReleasedExtra++
			err = e.dispose(msg.Receipt, lease.Disposition{Kind: lease.Release})
		} else {
			err = e.admit(msg)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// onReceiveFailed decides what a failed receive means: nothing while stopping (the call was
// abandoned, or its result no longer matters), the end of the worker when fatal (the queue
// does not exist, access denied: retrying cannot help, and a worker that keeps trying would
// look healthy), else a retry after the receive backoff.
func (e *Machine) onReceiveFailed(ev ReceiveDone) error {
	switch {
	case e.stopping:
		e.log.Debug("worker: receive ended while stopping", "err", ev.Err)
	case core.ClassOf(ev.Err) == core.Fatal:
		e.stats.ReceiveErrors++
		e.fatal = ev.Err
		e.log.Error("worker: receive failed with a fatal error; stopping", "err", ev.Err)
		e.onShutdown()
	default:
		e.stats.ReceiveErrors++
		delay := e.cfg.ReceiveBackoff[min(e.recvFailures, len(e.cfg.ReceiveBackoff)-1)]
		e.recvFailures++
		e.recvAfter = ev.Now.Add(delay)
		e.log.Warn("worker: receive failed", "err", ev.Err, "retry_in", delay)
	}
	return e.stepLease(lease.Tick{Now: ev.Now})
}

// admit decides what happens to a freshly received delivery: released at once during
// shutdown, poison, retired over budget, or queued to run.
func (e *Machine) admit(msg core.Message) error {
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
func (e *Machine) dispose(receipt string, disp lease.Disposition) error {
	if !e.lease.Held(receipt) {
		return nil
	}
	if d := e.deliveries[receipt]; d != nil && d.state == waiting {
		e.waiting--
		d.state = finished
	}
	return e.stepLease(lease.Dispose{Now: e.now, Receipt: receipt, Disposition: disp})
}

// errBadBatchReply marks a batch reply that broke the Transport contract.
var errBadBatchReply = errors.New("worker: transport broke the batch contract")

func (e *Machine) onCallDone(ev CallDone) error {
	c, ok := e.leaseCalls[ev.Call]
	if !ok {
		return fmt.Errorf("%w: lease call %d", ErrUnknownCall, ev.Call)
	}
	e.advance(ev.Now)
	delete(e.leaseCalls, ev.Call)
	if !c.abandoned {
		e.liveCalls--
	}
	whole, entries := ev.Err, ev.Entries
	if whole == nil && len(entries) != c.entries {
		// One result per entry is the Transport contract. A reply that breaks it costs each
		// entry a retryable failure (a renewal retry, or a disposition), not the worker.
		e.stats.BadReplies++
		e.log.Error("worker: transport returned the wrong number of batch results",
			"call", uint64(ev.Call), "results", len(entries), "entries", c.entries)
		whole, entries = &core.TransportError{Class: core.Retryable, Op: "batch",
			Err: fmt.Errorf("%w: %d results for %d entries", errBadBatchReply, len(entries), c.entries)}, nil
	}
	if c.purpose == lease.Renewal {
		return e.stepLease(lease.RenewResult{Call: ev.Call, Now: ev.Now, Entries: entries, Err: whole})
	}
	return e.stepLease(lease.DisposeResult{Call: ev.Call, Now: ev.Now, Entries: entries, Err: whole})
}

func (e *Machine) onHandlerDone(ev HandlerDone) error {
	d := e.deliveries[ev.Receipt]
	if d == nil || (d.state != running && d.state != cancelled) {
		return fmt.Errorf("%w: %q", ErrUnknownHandler, ev.Receipt)
	}
	if ev.Result.Outcome < Success || ev.Result.Outcome > Terminal {
		// Refused before anything changes: a misused Step leaves the machine as it was.
		return fmt.Errorf("%w: %v for %q", ErrBadResult, ev.Result.Outcome, ev.Receipt)
	}
	e.advance(ev.Now)
	if d.state == running && !e.lease.Held(ev.Receipt) {
		// The lease machine dropped it earlier in this burst; Ready has not told us yet.
		d.state = cancelled
		e.stats.Dropped++
	}
	if d.state == cancelled {
		e.stats.IgnoredDone++
		e.log.Debug("worker: cancelled handler returned; result ignored", "message", d.msg.ID, "outcome", ev.Result.Outcome.String())
		e.forget(ev.Receipt, d)
		return e.stepLease(lease.Tick{Now: ev.Now})
	}
	disp := e.disposition(d.msg, ev.Result)
	e.running--
	d.state = finished
	return e.stepLease(lease.Dispose{Now: ev.Now, Receipt: ev.Receipt, Disposition: disp})
}

// disposition is the table of docs/worker.md. The outcome is one of the table's:
// onHandlerDone refused any other before this.
func (e *Machine) disposition(msg core.Message, r Result) lease.Disposition {
	switch r.Outcome {
	case Success:
		e.stats.Succeeded++
		return lease.Disposition{Kind: lease.Ack}
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
		return lease.Disposition{Kind: lease.Release, After: wait}
	case Permanent:
		if e.cfg.RedriveMaxReceives > 0 {
			e.stats.Terminal++
			e.log.Warn("worker: handler failed permanently; hiding for the redrive policy", "message", msg.ID, "err", r.Err)
			return lease.Disposition{Kind: lease.TerminalBackoff}
		}
		e.stats.Permanent++
		e.log.Error("worker: handler failed permanently; acking", "message", msg.ID, "err", r.Err)
		return lease.Disposition{Kind: lease.Ack}
	default: // Terminal
		e.stats.Terminal++
		e.log.Warn("worker: terminal backoff", "message", msg.ID, "err", r.Err)
		return lease.Disposition{Kind: lease.TerminalBackoff}
	}
}

func (e *Machine) onShutdown() {
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
				panic(fmt.Sprintf("worker: releasing %s at shutdown: %v", r, err)) // machine bug
			}
		}
	}
	e.queue = nil
	e.maybeFinishGrace()
}

// maybeFinishGrace ends the grace period when it has passed or nothing runs: the lease
// machine drops what is still held, which cancels the running handlers. Handlers that
// ignore their cancellation are waited for one more Grace (maybeAbandonHandlers).
func (e *Machine) maybeFinishGrace() {
	if !e.stopping || e.leaseShut || (e.running > 0 && e.now.Before(e.graceEnd)) {
		return
	}
	if e.cfg.StopHeld && e.running > 0 && e.maybeCancelHeld() {
		return
	}
	e.leaseShut = true
	e.abandonAt = e.now.Add(e.cfg.Grace)
	if e.running > 0 {
		e.log.Warn("worker: grace period over; cancelling running handlers", "running", e.running)
	}
	if err := e.stepLease(lease.Shutdown{Now: e.now}); err != nil {
		panic(fmt.Sprintf("worker: lease shutdown: %v", err)) // machine bug
	}
}

// maybeCancelHeld (StopHeld) cancels the running handlers at the grace period's end, keeping
// their leases, and reports whether it still waits for them (a second Grace at most).
func (e *Machine) maybeCancelHeld() bool {
	if e.holdEnd.IsZero() {
		e.holdEnd = e.now.Add(e.cfg.Grace)
		var rs []string
		for r, d := range e.deliveries {
			started := !slices.ContainsFunc(e.out.Start, func(s StartHandler) bool { return s.Receipt == r })
			if d.state == running && started {
				rs = append(rs, r)
			}
		}
		slices.Sort(rs) // map order must not reach the effects
		e.log.Warn("worker: grace period over; cancelling running handlers, leases held until they return", "running", e.running)
		for _, r := range rs {
			e.out.Cancel = append(e.out.Cancel, CancelHandler{Receipt: r, Reason: lease.DropShutdown, Held: true})
		}
	}
	return e.now.Before(e.holdEnd)
}

// maybeAbandonHandlers gives up on cancelled handlers still running a second Grace after
// they were cancelled at the end of the grace period: their leases are gone, so nothing is
// left to protect, and a handler that ignores its context must not hold the worker forever.
func (e *Machine) maybeAbandonHandlers() {
	if !e.leaseShut || e.abandoned || e.running == 0 || e.now.Before(e.abandonAt) {
		return
	}
	e.abandoned = true
	e.stats.HandlersAbandoned = e.running
	e.log.Warn("worker: stopping with handlers that ignored their cancelled context", "handlers", e.running)
}

// maybeAbandonReceive cancels the receive in flight once it is all that keeps a stopping
// worker from being done with the queue: nothing held, waiting or being disposed. Whatever
// it still returns is released (admit).
func (e *Machine) maybeAbandonReceive() {
	if !e.stopping || e.recvCall == 0 || e.recvAbandoned || e.waiting > 0 || e.liveCalls > 0 {
		return
	}
	if held, disposing := e.lease.Holding(); held > 0 || disposing > 0 {
		return
	}
	if r := e.out.Receive; r != nil && r.Call == e.recvCall {
		// Decided but not yet handed out (events stepped before Ready was read): withdraw it;
		// there is nothing to cancel and no reply will come.
		e.out.Receive, e.recvCall = nil, 0
		return
	}
	e.recvAbandoned = true
	e.stats.ReceivesAbandoned++
	e.out.AbandonReceive = e.recvCall
	e.log.Debug("worker: cancelling the receive in flight; whatever it returns is released", "call", uint64(e.recvCall))
}

// pump starts waiting handlers while slots are free.
func (e *Machine) pump() {
	for e.running < e.cfg.Concurrency && len(e.queue) > 0 {
		r := e.queue[0]
		e.queue = e.queue[1:]
		d := e.deliveries[r]
		if d == nil || d.state != waiting || !e.lease.Held(r) {
			continue // gone, or dropped by the lease machine (Ready's drain forgets it)
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

func (e *Machine) maybeReceive() {
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
	e.recvMax = min(e.cfg.BatchMax, room)
	e.recvAbandoned = false
	e.out.Receive = &Receive{Call: e.recvCall, Max: e.recvMax, Wait: e.cfg.Wait,
		Visibility: e.cfg.Window, Stamp: e.now}
}

// Ready returns the effects produced since the last call and forgets them.
func (e *Machine) Ready() Ready {
	e.drain()
	e.decide()
	rd := e.out
	e.out = Ready{}
	return rd
}

// WakeAt returns when the machine next needs a Tick, or zero when only an event can make
// progress: the lease machine's next action, the next receive after an idle or failed one,
// the end of the grace period, or the end of the wait for cancelled handlers.
func (e *Machine) WakeAt() time.Time {
	wake := e.lease.WakeAt()
	consider := func(t time.Time) {
		if !t.IsZero() && (wake.IsZero() || t.Before(wake)) {
			wake = t
		}
	}
	if !e.stopping && e.recvCall == 0 && e.now.Before(e.recvAfter) {
		consider(e.recvAfter)
	}
	if e.stopping && !e.leaseShut {
		if e.holdEnd.IsZero() {
			consider(e.graceEnd)
		} else {
			consider(e.holdEnd)
		}
	}
	if e.leaseShut && !e.abandoned && e.running > 0 {
		consider(e.abandonAt)
	}
	return wake
}

// Status returns a copy of the counters and gauges.
func (e *Machine) Status() Status {
	s := e.stats
	s.Running, s.Waiting, s.Budget = e.running, e.waiting, e.budget
	s.Stopping = e.stopping
	s.Err = e.fatal
	s.Lease = e.lease.Status()
	s.Done = e.Done()
	return s
}

// Done reports Status().Done without copying the counters: the worker stopped, and nothing it
// waits for is left (a driver reads it after every step).
func (e *Machine) Done() bool {
	left := len(e.deliveries)
	if e.abandoned {
		left -= e.running // cancelled handlers no longer waited for
	}
	held, disposing := e.lease.Holding()
	return e.stopping && left == 0 && e.recvCall == 0 && e.liveCalls == 0 && held == 0 && disposing == 0
}

// Err is Status().Err: the fatal receive error that ended Run, nil when none.
func (e *Machine) Err() error { return e.fatal }

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
func (e *Machine) Lease(receipt string) (lease.Lease, bool) { return e.lease.Lease(receipt) }

// Leased reports whether the lease machine still holds receipt: Lease's second result, without
// building the Lease.
func (e *Machine) Leased(receipt string) bool { return e.lease.Knows(receipt) }
