package lease

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/sluicehq/sluice/core"
)

// Defaults (docs/worker.md).
const (
	// CoalesceDefault is how early a scheduled renewal may ride along with a batch that is
	// going out anyway. 250 ms is under 1% of the default 30 s window, so riding early never
	// costs a meaningful share of the lease, while renewals received in the same batch (and
	// so due within a few milliseconds of each other) share one ChangeMessageVisibilityBatch.
	// The effective value for a receipt is min(Coalesce, window/10).
	CoalesceDefault = 250 * time.Millisecond
	// ReceiptsMaxDefault bounds the receipts one machine holds.
	ReceiptsMaxDefault = 1 << 20
	// StopMarginMax caps the default stop margin, min(StopMarginMax, W/20).
	StopMarginMax = time.Second
)

// StopMarginFor returns the default stop margin for a window: min(1 s, W/20). A handler is
// cancelled that long before the local deadline, so one that stops within it never overlaps
// the next consumer, and no call about the receipt runs past that point.
func StopMarginFor(window time.Duration) time.Duration { return min(StopMarginMax, window/20) }

// PacingDefault is the delay before each retry of a failed renewal; the last one repeats.
func PacingDefault() []time.Duration {
	return []time.Duration{200 * time.Millisecond, 500 * time.Millisecond, time.Second}
}

// Errors returned by Step for misuse by the driver.
var (
	ErrUnknownReceipt = errors.New("lease: unknown receipt")
	ErrDisposed       = errors.New("lease: receipt already has a disposition")
	ErrUnknownCall    = errors.New("lease: unknown call")
	ErrDuplicate      = errors.New("lease: receipt already held")
	ErrFull           = errors.New("lease: receipts limit reached")
	ErrBadEvent       = errors.New("lease: malformed event")
	// ErrConfig is wrapped by every New error.
	ErrConfig = errors.New("lease: invalid config")
)

// Config configures a Machine. Zero fields take their defaults.
type Config struct {
	Pacing      []time.Duration // retry delays after a retryable renewal failure; last repeats
	Coalesce    time.Duration   // see CoalesceDefault
	ReceiptsMax int             // receipts held at once; Received beyond it is refused (ErrFull)
	// StopMargin is how long before a receipt's local deadline its lease ends for us: its
	// handler is cancelled and no call about it runs past that point. 0: StopMarginFor(W).
	// It must be under W/10 for every window received (Received is refused otherwise).
	StopMargin time.Duration
	Logger     *slog.Logger // nil discards
}

func (c Config) withDefaults() Config {
	if len(c.Pacing) == 0 {
		c.Pacing = PacingDefault()
	}
	if c.Coalesce == 0 {
		c.Coalesce = CoalesceDefault
	}
	if c.ReceiptsMax == 0 {
		c.ReceiptsMax = ReceiptsMaxDefault
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// CallID names one transport call the machine asked for; its reply event carries it back.
type CallID uint64

// Event is the sealed set of inputs to Step.
type Event interface{ isEvent() }

// Received: a receive call returned messages. Stamp is the time read before the receive call
// was issued (t0); Now is when the reply arrived. Window is the visibility timeout granted
// (whole seconds, ≥ 1 s) and Ceiling the queue's limit on total hiding from receipt (SQS: 12 h).
type Received struct {
	Now      time.Time
	Stamp    time.Time
	Window   time.Duration
	Ceiling  time.Duration
	Messages []core.Message
}

// Tick: time has passed; perform what is due.
type Tick struct{ Now time.Time }

// RenewResult is the reply to a ChangeVisibility effect with Purpose Renewal. Now is when the
// reply arrived. Err is a failure of the whole call (every entry gets its class); otherwise
// Entries holds one error per entry, in the effect's entry order (nil for success).
type RenewResult struct {
	Call    CallID
	Now     time.Time
	Entries []error
	Err     error
}

// DisposeResult is the reply to a Delete effect or a ChangeVisibility effect with Purpose
// Disposal, shaped like RenewResult.
type DisposeResult struct {
	Call    CallID
	Now     time.Time
	Entries []error
	Err     error
}

// Dispose gives a held receipt its disposition (docs/worker.md).
type Dispose struct {
	Now         time.Time
	Receipt     string
	Disposition Disposition
}

// Shutdown drops every receipt that has no disposition yet: their handlers are cancelled and
// nothing more is sent for them (their windows lapse). Dispositions already begun complete.
// The machine stays usable: receipts received later are held as usual.
type Shutdown struct{ Now time.Time }

func (Received) isEvent()      {}
func (Tick) isEvent()          {}
func (RenewResult) isEvent()   {}
func (DisposeResult) isEvent() {}
func (Dispose) isEvent()       {}
func (Shutdown) isEvent()      {}

// Kind is what a disposition does.
type Kind uint8

const (
	// Ack deletes the message (DeleteMessage, batched).
	Ack Kind = iota + 1
	// Release makes the message visible again after Disposition.After (0: at once).
	Release
	// TerminalBackoff hides the message TerminalBackoffDuration so a redrive policy moves it.
	TerminalBackoff
	// Abandon ends the lease without any call: the message reappears when its window lapses.
	Abandon
)

// TerminalBackoffDuration is the visibility timeout of a terminal backoff (docs/worker.md).
const TerminalBackoffDuration = 300 * time.Second

func (k Kind) String() string {
	switch k {
	case Ack:
		return "ack"
	case Release:
		return "release"
	case TerminalBackoff:
		return "terminal-backoff"
	case Abandon:
		return "abandon"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Disposition is a handler's verdict on one delivery.
type Disposition struct {
	Kind  Kind
	After time.Duration // Release only; rounded up to whole seconds, clipped to the ceiling
}

// Purpose says which reply event a ChangeVisibility effect expects.
type Purpose uint8

const (
	Renewal  Purpose = iota + 1 // reply with RenewResult
	Disposal                    // reply with DisposeResult
)

func (p Purpose) String() string {
	if p == Renewal {
		return "renew"
	}
	return "release"
}

// ChangeVisibility asks the driver to call ChangeVisibilityBatch with Entries (1..10) and to
// feed the reply back with Call.
//
// Deadline is when the call's context must end (the driver applies it with
// context.WithDeadline): no call about a receipt outlives its lease. For a disposal it is the
// earliest entry's stop point (local deadline minus the stop margin); for a renewal the
// earliest entry's retryUntil, so a disposition waiting behind a slow renewal still gets its
// turn between retryUntil and the stop point.
type ChangeVisibility struct {
	Call     CallID
	Purpose  Purpose
	Entries  []core.VisibilityChange
	Deadline time.Time
}

// Delete asks the driver to call DeleteBatch with Receipts (1..10) and to feed the reply back
// as a DisposeResult with Call. Deadline is as for a disposal ChangeVisibility.
type Delete struct {
	Call     CallID
	Receipts []string
	Deadline time.Time
}

// DropReason says why a receipt was dropped.
type DropReason uint8

const (
	DropMargin   DropReason = iota + 1 // renewals failed until retryUntil
	DropGone                           // the queue said the receipt is invalid or not in flight
	DropFatal                          // a fatal transport fault
	DropCeiling                        // under 1 s left before the ceiling
	DropLate                           // a success arrived at or after the local deadline
	DropExpired                        // the stop point passed with a renewal unanswered
	DropShutdown                       // Shutdown
)

func (d DropReason) String() string {
	switch d {
	case DropMargin:
		return "margin"
	case DropGone:
		return "gone"
	case DropFatal:
		return "fatal"
	case DropCeiling:
		return "ceiling"
	case DropLate:
		return "late"
	case DropExpired:
		return "expired"
	case DropShutdown:
		return "shutdown"
	}
	return fmt.Sprintf("DropReason(%d)", int(d))
}

// CancelHandler reports a dropped receipt: its handler must be cancelled if running and
// never started if not. Nothing more will name the receipt.
type CancelHandler struct {
	Receipt string
	Reason  DropReason
}

// Ended reports a receipt whose disposition is complete (its call returned, or it needed none).
// Err is the call's error, already logged at Warn; the lease ended either way.
type Ended struct {
	Receipt string
	Kind    Kind
	Err     error
}

// Ready holds the effects produced since the last call to Ready: the machine's one channel
// for them. Perform Cancel first (a dropped receipt's handler must stop as soon as possible),
// then issue the calls in any order, each reply fed back with its CallID; Ended needs no
// action beyond forgetting the receipt. The effects count as done once handed out: the
// machine expects a reply event for every call, and re-arming one timer for WakeAt.
// Call Ready after a Step, or after a burst of Steps for events already waiting, before time
// moves on: a renewal's request was computed at the step's time and should leave at once.
//
// Abandon names calls in flight none of whose receipts is held any more (all dropped): the
// driver may cancel their contexts, and nothing waits for their replies (a reply that still
// comes is accepted and ignored).
type Ready struct {
	Abandon []CallID
	Cancel  []CancelHandler
	Changes []ChangeVisibility
	Deletes []Delete
	Ended   []Ended
}

type phase uint8

const (
	phaseHeld     phase = iota + 1 // in the heap, keyed at the next renewal send
	phaseRenewing                  // renewal queued (call 0) or in flight; heap key = deadline
	phaseWaiting                   // disposition waits for the in-flight renewal; heap key = deadline
	// phaseDisposing: disposition queued (call 0, not in the heap), in flight, or waiting in
	// the heap at its retry time after a retryable failure.
	phaseDisposing
)

func (p phase) String() string {
	switch p {
	case phaseHeld:
		return "held"
	case phaseRenewing:
		return "renewing"
	case phaseWaiting:
		return "waiting"
	case phaseDisposing:
		return "disposing"
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// receipt is one held delivery. Times are nanosecond offsets from Machine.base.
type receipt struct {
	key     string
	msgID   string
	seq     uint64 // order of receipt; breaks heap ties
	t0      int64
	window  time.Duration
	ceiling time.Duration
	margin  time.Duration // stop margin
	// Invariant: deadline <= t0 + ceiling, and deadline > now while phase is held, renewing
	// or waiting.
	deadline  int64
	next      int64 // heap key
	idx       int   // heap index, -1 when not in the heap
	sentAt    int64 // the renewal in flight: when it was decided
	requested time.Duration
	call      CallID // the call in flight for this receipt; 0 when queued or none
	attempt   int    // consecutive failed sends in this round (renewal, then disposal)
	phase     phase
	removed   bool
	disp      Disposition
	timeout   time.Duration // disposal ChangeVisibility timeout
	err       error         // the last failed disposal's error, while its retry waits
	// hiddenUntil: a release or terminal backoff is retried only before it (see startDisposal).
	hiddenUntil int64
}

type call struct {
	purpose  Purpose
	del      bool
	receipts []*receipt
	live     int // receipts still naming this call; 0: abandoned
}

// Status counts what the machine did and what it holds.
type Status struct {
	Received      int
	RenewalsSent  int // entries sent, retries included
	Retries       int
	Drops         map[DropReason]int
	Disposed      map[Kind]int
	DisposeFailed int // disposition calls that failed for good (the lease ended)
	// DisposeRetries counts disposal entries sent again after a retryable failure.
	DisposeRetries int
	// WaitLost counts dispositions that waited behind a renewal and lost the lease before
	// their turn (the stop point passed, or the renewal said gone or fatal): no call went out.
	WaitLost int
	// AbandonedCalls counts calls abandoned in flight (Ready.Abandon).
	AbandonedCalls int
	CallsRenew     int
	CallsDispose   int
	StaleReplies   int // reply entries for receipts dropped meanwhile
	Held           int // receipts in held, renewing or waiting phases
	Disposing      int
	InFlightCalls  int
	HeapLen        int
}

// Machine is the lease controller: it keeps every held receipt's visibility window renewed
// from receipt until its disposition. It is single-owner and performs no I/O.
type Machine struct {
	cfg   Config
	log   *slog.Logger
	base  time.Time
	based bool
	// Invariant: now never decreases.
	now int64

	receipts map[string]*receipt
	// Invariant: disposing == number of receipts in phaseDisposing.
	disposing int
	heap      timerHeap
	calls     map[CallID]*call
	lastCall  CallID
	seq       uint64

	renewQ   []*receipt
	disposeQ []*receipt
	cancels  []CancelHandler
	ended    []Ended
	abandon  []CallID

	stats Status

	inCall map[*receipt]CallID // checkInvariants' scratch
}

// New returns a machine for cfg, or an error wrapping ErrConfig naming the field at fault.
func New(cfg Config) (*Machine, error) {
	cfg = cfg.withDefaults()
	for _, p := range cfg.Pacing {
		if p <= 0 {
			return nil, fmt.Errorf("%w: Pacing delays must be positive, got %v", ErrConfig, p)
		}
	}
	if cfg.Coalesce < 0 {
		return nil, fmt.Errorf("%w: negative Coalesce %v", ErrConfig, cfg.Coalesce)
	}
	if cfg.ReceiptsMax < 0 {
		return nil, fmt.Errorf("%w: negative ReceiptsMax %d", ErrConfig, cfg.ReceiptsMax)
	}
	if cfg.StopMargin < 0 {
		return nil, fmt.Errorf("%w: negative StopMargin %v", ErrConfig, cfg.StopMargin)
	}
	return &Machine{
		cfg:      cfg,
		log:      cfg.Logger,
		receipts: make(map[string]*receipt),
		calls:    make(map[CallID]*call),
		stats:    Status{Drops: map[DropReason]int{}, Disposed: map[Kind]int{}},
	}, nil
}

// at converts t to an offset from the machine's base instant.
func (m *Machine) at(t time.Time) int64 {
	if !m.based {
		m.base, m.based = t, true
	}
	return int64(t.Sub(m.base))
}

func (m *Machine) time(off int64) time.Time { return m.base.Add(time.Duration(off)) }

// Step applies one event. It returns an error only for misuse (an unknown call or receipt, a
// second disposition, a malformed event); the machine is unchanged then.
func (m *Machine) Step(ev Event) error {
	if eventTime(ev).IsZero() {
		return fmt.Errorf("%w: %T without a time", ErrBadEvent, ev)
	}
	switch ev := ev.(type) {
	case Received:
		return m.onReceived(ev)
	case Tick:
		m.advance(m.at(ev.Now))
	case RenewResult:
		return m.onRenewResult(ev)
	case DisposeResult:
		return m.onDisposeResult(ev)
	case Dispose:
		return m.onDispose(ev)
	case Shutdown:
		m.onShutdown(ev)
	default:
		panic(fmt.Sprintf("lease: unknown event %T", ev))
	}
	return nil
}

func eventTime(ev Event) time.Time {
	switch ev := ev.(type) {
	case Received:
		if ev.Stamp.IsZero() {
			return time.Time{}
		}
		return ev.Now
	case Tick:
		return ev.Now
	case RenewResult:
		return ev.Now
	case DisposeResult:
		return ev.Now
	case Dispose:
		return ev.Now
	case Shutdown:
		return ev.Now
	}
	panic(fmt.Sprintf("lease: unknown event %T", ev))
}

func (m *Machine) onReceived(ev Received) error {
	if ev.Window < time.Second || ev.Window%time.Second != 0 || ev.Ceiling < ev.Window {
		return fmt.Errorf("%w: window %v must be whole seconds ≥ 1s and ≤ ceiling %v", ErrBadEvent, ev.Window, ev.Ceiling)
	}
	if ev.Stamp.After(ev.Now) {
		return fmt.Errorf("%w: stamp after reply", ErrBadEvent)
	}
	if len(m.receipts)+len(ev.Messages) > m.cfg.ReceiptsMax {
		return fmt.Errorf("%w: %d held, %d received, max %d", ErrFull, len(m.receipts), len(ev.Messages), m.cfg.ReceiptsMax)
	}
	for i, msg := range ev.Messages {
		if _, ok := m.receipts[msg.Receipt]; ok || msg.Receipt == "" {
			return fmt.Errorf("%w: %q", ErrDuplicate, msg.Receipt)
		}
		for _, o := range ev.Messages[:i] {
			if o.Receipt == msg.Receipt {
				return fmt.Errorf("%w: %q twice in one batch", ErrDuplicate, msg.Receipt)
			}
		}
	}
	margin := m.cfg.StopMargin
	if margin == 0 {
		margin = StopMarginFor(ev.Window)
	}
	if margin >= ev.Window/10 {
		return fmt.Errorf("%w: stop margin %v must be under a tenth of the window %v", ErrBadEvent, margin, ev.Window)
	}
	t0 := m.at(ev.Stamp)
	now := m.at(ev.Now)
	for _, msg := range ev.Messages {
		m.seq++
		r := &receipt{
			key: msg.Receipt, msgID: msg.ID, seq: m.seq, t0: t0,
			window: ev.Window, ceiling: ev.Ceiling, margin: margin,
			deadline: t0 + int64(ev.Window), idx: -1, phase: phaseHeld,
		}
		m.receipts[r.key] = r
		m.stats.Received++
		if now >= r.stop() {
			// The window (less the stop margin) lapsed before the reply arrived: never held,
			// and nothing, not even a release, is sent for it.
			m.log.Warn("lease: receive reply arrived after the window lapsed", "receipt", r.key, "message", r.msgID)
			m.drop(r, DropLate)
			continue
		}
		r.next = min(renewAt(now, r.deadline), r.stop())
		m.heap.push(r)
	}
	m.advance(now)
	return nil
}

func (m *Machine) onRenewResult(ev RenewResult) error {
	c, err := m.takeCall(ev.Call, ev.Entries, ev.Err, false)
	if err != nil {
		return err
	}
	at := m.at(ev.Now)
	for i, r := range c.receipts {
		e := entryErr(ev.Err, ev.Entries, i)
		if r.removed || r.call != ev.Call {
			m.stats.StaleReplies++
			continue
		}
		r.call = 0
		// Success is a nil error; a class this code does not know counts as retryable, as
		// core.ClassOf does for unclassified errors.
		class := core.ClassOf(e)
		if e != nil && class != core.Gone && class != core.Fatal {
			class = core.Retryable
		}
		switch class {
		case 0:
			// Late if the reply came after the stop point, or after the one the grant
			// buys (shorter when the ceiling clipped it).
			if at >= r.stop() || at >= r.sentAt+int64(r.requested)-int64(r.margin) {
				m.log.Warn("lease: renewal succeeded after the stop point; lease lost",
					"receipt", r.key, "message", r.msgID, "late", time.Duration(at-r.stop()))
				m.dropRenewing(r, DropLate)
				continue
			}
			m.heap.remove(r)
			r.deadline = r.sentAt + int64(r.requested)
			r.attempt = 0
			if r.phase == phaseWaiting {
				m.startDisposal(r, at)
				continue
			}
			r.phase = phaseHeld
			// Never later than the stop point: a receipt too near it to renew is dropped there.
			r.next = min(renewAt(at, r.deadline), r.stop())
			m.heap.push(r)
		case core.Retryable:
			m.heap.remove(r)
			if r.phase == phaseWaiting {
				if at >= r.stop() {
					m.dropRenewing(r, DropExpired) // the lease lapsed while the disposition waited
				} else {
					m.startDisposal(r, at)
				}
				continue
			}
			next := at + int64(m.pacing(r.attempt))
			r.attempt++
			if next >= retryUntil(r.window, r.deadline) {
				m.log.Warn("lease: renewals failed until the margin; dropping",
					"receipt", r.key, "message", r.msgID, "attempts", r.attempt, "err", e)
				m.drop(r, DropMargin)
				continue
			}
			r.phase = phaseHeld
			r.next = next
			m.heap.push(r)
		case core.Gone:
			m.log.Warn("lease: receipt gone", "receipt", r.key, "message", r.msgID, "err", e)
			m.dropRenewing(r, DropGone)
		case core.Fatal:
			m.log.Error("lease: fatal transport fault on renewal", "receipt", r.key, "message", r.msgID, "err", e)
			m.dropRenewing(r, DropFatal)
		}
	}
	m.advance(at)
	return nil
}

func (m *Machine) onDisposeResult(ev DisposeResult) error {
	c, err := m.takeCall(ev.Call, ev.Entries, ev.Err, true)
	if err != nil {
		return err
	}
	at := m.at(ev.Now)
	for i, r := range c.receipts {
		e := entryErr(ev.Err, ev.Entries, i)
		r.call = 0
		if e != nil {
			class := core.ClassOf(e)
			next := at + int64(m.pacing(r.attempt))
			// A delete that took effect leaves nothing to redeliver, so its retries are safe;
			// a release's only while its first call, had it taken effect, still hides the
			// message (a release at once is therefore not retried: it lapses instead).
			safe := r.disp.Kind == Ack || next < r.hiddenUntil
			if class != core.Gone && class != core.Fatal && safe && next < retryUntil(r.window, r.deadline) {
				// Retried with the renewal pacing while the lease allows; renewal stays stopped.
				r.attempt++
				r.next = next
				r.err = e
				m.heap.push(r)
				m.log.Debug("lease: disposition call failed; retrying", "receipt", r.key,
					"message", r.msgID, "disposition", r.disp.Kind.String(), "attempt", r.attempt, "err", e)
				continue
			}
			r.attempt++
		}
		m.end(r, e)
	}
	m.advance(at)
	return nil
}

// takeCall validates a reply and forgets its call.
func (m *Machine) takeCall(id CallID, entries []error, whole error, dispose bool) (*call, error) {
	c := m.calls[id]
	if c == nil || (c.purpose == Disposal) != dispose {
		return nil, fmt.Errorf("%w: %d", ErrUnknownCall, id)
	}
	if whole == nil && len(entries) != len(c.receipts) {
		return nil, fmt.Errorf("%w: call %d has %d entries, reply %d", ErrBadEvent, id, len(c.receipts), len(entries))
	}
	delete(m.calls, id)
	return c, nil
}

// entryErr is receipt i's outcome in a reply: the whole call's error, else its own entry.
func entryErr(whole error, entries []error, i int) error {
	if whole != nil {
		return whole
	}
	return entries[i]
}

func (m *Machine) onDispose(ev Dispose) error {
	r := m.receipts[ev.Receipt]
	if r == nil {
		return fmt.Errorf("%w: %q", ErrUnknownReceipt, ev.Receipt)
	}
	if r.phase == phaseWaiting || r.phase == phaseDisposing {
		return fmt.Errorf("%w: %q", ErrDisposed, ev.Receipt)
	}
	switch ev.Disposition.Kind {
	case Ack, Release, TerminalBackoff, Abandon:
	default:
		return fmt.Errorf("%w: disposition %v", ErrBadEvent, ev.Disposition.Kind)
	}
	if ev.Disposition.After < 0 {
		return fmt.Errorf("%w: negative release delay", ErrBadEvent)
	}
	now := m.at(ev.Now)
	r.disp = ev.Disposition
	switch {
	case now >= r.stop():
		// The handler finished after the lease lapsed: no disposition (docs/worker.md).
		m.drop(r, DropExpired)
	case r.disp.Kind == Abandon:
		// Nothing is sent, so nothing can overlap an in-flight renewal.
		m.remove(r)
		m.stats.Disposed[Abandon]++
		m.ended = append(m.ended, Ended{Receipt: r.key, Kind: Abandon})
	case r.phase == phaseRenewing && r.call != 0:
		r.phase = phaseWaiting // keeps its heap entry at the deadline
	default:
		// Held, or a renewal decided but not yet handed out by Ready (Ready skips it).
		m.heap.remove(r)
		m.startDisposal(r, now)
	}
	m.advance(now)
	return nil
}

func (m *Machine) onShutdown(ev Shutdown) {
	now := m.at(ev.Now)
	var drop []*receipt
	for _, r := range m.receipts {
		if r.phase == phaseHeld || r.phase == phaseRenewing {
			drop = append(drop, r)
		}
	}
	slices.SortFunc(drop, func(a, b *receipt) int { return cmp.Compare(a.seq, b.seq) })
	for _, r := range drop {
		m.drop(r, DropShutdown)
	}
	m.advance(now)
}

func (m *Machine) pacing(attempt int) time.Duration {
	return m.cfg.Pacing[min(attempt, len(m.cfg.Pacing)-1)]
}

// advance moves time to now and performs every due action.
func (m *Machine) advance(now int64) {
	m.now = max(m.now, now)
	sent := false
	for m.heap.len() > 0 && m.heap.top().next <= m.now {
		r := m.heap.pop()
		switch r.phase {
		case phaseHeld:
			if m.maybeRenew(r) {
				sent = true
			}
		case phaseDisposing: // a disposal retry is due
			if m.now >= retryUntil(r.window, r.deadline) {
				m.end(r, r.err) // woken too late to send it in time
				continue
			}
			m.stats.DisposeRetries++
			m.queueDisposal(r, m.now)
		default: // renewing or waiting: the stop point passed with the renewal unanswered
			m.log.Warn("lease: stop point passed with a renewal unanswered; lease lost",
				"receipt", r.key, "message", r.msgID)
			m.dropRenewing(r, DropExpired)
		}
	}
	if !sent {
		return
	}
	// Riders: renewals (not retries, whose pacing is kept) due shortly join this batch.
	for m.heap.len() > 0 {
		r := m.heap.top()
		if r.phase != phaseHeld || r.attempt != 0 || r.next > m.now+int64(min(m.cfg.Coalesce, r.window/10)) {
			break
		}
		m.heap.pop()
		m.maybeRenew(r)
	}
}

// maybeRenew queues a renewal of r (just popped from the heap) at m.now, or drops it when no
// renewal may be sent. It reports whether it queued one.
func (m *Machine) maybeRenew(r *receipt) bool {
	req, ok := request(r.t0, r.window, r.ceiling, m.now)
	if ok && m.now >= retryUntil(r.window, r.deadline) {
		if r.deadline == r.t0+int64(r.ceiling) || (r.requested != 0 && r.requested < r.window) {
			// The margin was reached because the ceiling clipped the last grant.
			ok = false
		} else {
			m.log.Warn("lease: renewal margin reached; dropping", "receipt", r.key, "message", r.msgID)
			m.drop(r, DropMargin)
			return false
		}
	}
	if !ok {
		m.log.Info("lease: ceiling reached; dropping", "receipt", r.key, "message", r.msgID)
		m.drop(r, DropCeiling)
		return false
	}
	r.phase = phaseRenewing
	r.sentAt = m.now
	r.requested = req
	r.call = 0
	r.next = r.stop()
	m.heap.push(r)
	m.renewQ = append(m.renewQ, r)
	return true
}

// stop is the receipt's stop point: the local deadline minus the stop margin. Its handler is
// cancelled by then and no call about it runs past it.
func (r *receipt) stop() int64 { return r.deadline - int64(r.margin) }

// dropRenewing drops r, counting a disposition that waited behind its renewal as lost.
func (m *Machine) dropRenewing(r *receipt, why DropReason) {
	if r.phase == phaseWaiting {
		m.stats.WaitLost++
		m.log.Warn("lease: disposition waited behind a renewal and lost the lease",
			"receipt", r.key, "message", r.msgID, "disposition", r.disp.Kind.String(), "reason", why.String())
	}
	m.drop(r, why)
}

func (m *Machine) startDisposal(r *receipt, now int64) {
	r.phase = phaseDisposing
	m.disposing++
	r.call = 0
	r.attempt = 0
	m.queueDisposal(r, now)
	// A release's first call hides the message until at least now + timeout if it took
	// effect (its answer may be lost): retries sent before then cannot touch a redelivery.
	r.hiddenUntil = now + int64(r.timeout)
}

// queueDisposal queues r's disposal call (again, for a retry), its timeout clipped to the
// ceiling left at now.
func (m *Machine) queueDisposal(r *receipt, now int64) {
	if r.disp.Kind == Release || r.disp.Kind == TerminalBackoff {
		after := r.disp.After
		if r.disp.Kind == TerminalBackoff {
			after = TerminalBackoffDuration
		}
		if rem := after % time.Second; rem != 0 {
			after += time.Second - rem
		}
		left := max(0, time.Duration(r.t0+int64(r.ceiling)-now).Truncate(time.Second))
		r.timeout = min(after, left)
	}
	m.disposeQ = append(m.disposeQ, r)
}

// end completes r's disposition; e is its call's final error, logged once at Warn.
func (m *Machine) end(r *receipt, e error) {
	if e != nil {
		m.stats.DisposeFailed++
		m.log.Warn("lease: disposition call failed; the lease ends anyway",
			"receipt", r.key, "message", r.msgID, "disposition", r.disp.Kind.String(),
			"attempts", r.attempt, "err", e)
	}
	m.remove(r)
	m.stats.Disposed[r.disp.Kind]++
	m.ended = append(m.ended, Ended{Receipt: r.key, Kind: r.disp.Kind, Err: e})
}

func (m *Machine) drop(r *receipt, why DropReason) {
	m.remove(r)
	m.stats.Drops[why]++
	m.cancels = append(m.cancels, CancelHandler{Receipt: r.key, Reason: why})
}

func (m *Machine) remove(r *receipt) {
	if r.phase == phaseDisposing {
		m.disposing--
	}
	if c := m.calls[r.call]; r.call != 0 && c != nil {
		c.live--
		if c.live == 0 {
			// Nothing held is left in it: nobody waits for its reply.
			m.stats.AbandonedCalls++
			m.abandon = append(m.abandon, r.call)
		}
	}
	m.heap.remove(r)
	r.removed = true
	delete(m.receipts, r.key)
}

// Ready returns the effects produced since the last call and forgets them.
func (m *Machine) Ready() Ready {
	rd := Ready{Abandon: m.abandon, Cancel: m.cancels, Ended: m.ended}
	m.abandon, m.cancels, m.ended = nil, nil, nil

	var batch []*receipt
	flush := func(p Purpose, del bool) {
		if len(batch) == 0 {
			return
		}
		m.lastCall++
		id := m.lastCall
		m.calls[id] = &call{purpose: p, del: del, receipts: batch, live: len(batch)}
		until := int64(math.MaxInt64)
		for _, r := range batch {
			if p == Renewal {
				until = min(until, retryUntil(r.window, r.deadline))
			} else {
				until = min(until, r.stop())
			}
		}
		if del {
			d := Delete{Call: id, Receipts: make([]string, len(batch)), Deadline: m.time(until)}
			for i, r := range batch {
				r.call = id
				d.Receipts[i] = r.key
			}
			rd.Deletes = append(rd.Deletes, d)
			m.stats.CallsDispose++
		} else {
			cv := ChangeVisibility{Call: id, Purpose: p, Entries: make([]core.VisibilityChange, len(batch)), Deadline: m.time(until)}
			for i, r := range batch {
				r.call = id
				t := r.requested
				if p == Disposal {
					t = r.timeout
					m.stats.CallsDispose++
				}
				cv.Entries[i] = core.VisibilityChange{Receipt: r.key, Timeout: t}
			}
			if p == Renewal {
				m.stats.CallsRenew++
			}
			rd.Changes = append(rd.Changes, cv)
		}
		batch = nil
	}
	for _, r := range m.renewQ {
		if r.removed || r.phase != phaseRenewing || r.call != 0 {
			continue
		}
		m.stats.RenewalsSent++
		if r.attempt > 0 {
			m.stats.Retries++
		}
		batch = append(batch, r)
		if len(batch) == core.BatchMax {
			flush(Renewal, false)
		}
	}
	flush(Renewal, false)
	m.renewQ = m.renewQ[:0]
	for _, del := range []bool{false, true} {
		for _, r := range m.disposeQ {
			if (r.disp.Kind == Ack) != del || r.call != 0 || r.removed || r.idx >= 0 {
				continue
			}
			batch = append(batch, r)
			if len(batch) == core.BatchMax {
				flush(Disposal, del)
			}
		}
		flush(Disposal, del)
	}
	m.disposeQ = m.disposeQ[:0]
	return rd
}

// Lease is a read-only view of one receipt.
type Lease struct {
	Receipt  string
	Message  string
	Phase    string // held, renewing, waiting, disposing
	Stamp    time.Time
	Deadline time.Time // the local deadline: the last granted window's end
	Next     time.Time // next action (renewal send, or the deadline while a renewal is out)
	Attempt  int
}

// Lease returns the state of one receipt, or false when the machine no longer holds it.
func (m *Machine) Lease(receipt string) (Lease, bool) {
	r := m.receipts[receipt]
	if r == nil {
		return Lease{}, false
	}
	l := Lease{Receipt: r.key, Message: r.msgID, Phase: r.phase.String(), Stamp: m.time(r.t0),
		Deadline: m.time(r.deadline), Attempt: r.attempt}
	if r.idx >= 0 {
		l.Next = m.time(r.next)
	}
	return l, true
}

// Knows reports whether the machine still holds receipt, in any phase: Lease's second
// result, without building the Lease (O(1)).
func (m *Machine) Knows(receipt string) bool { return m.receipts[receipt] != nil }

// Held reports whether receipt is held: known and without a disposition call sent.
func (m *Machine) Held(receipt string) bool {
	r := m.receipts[receipt]
	return r != nil && r.phase != phaseDisposing
}

// Status returns a copy of the counters. O(1) in the receipts held.
func (m *Machine) Status() Status {
	s := m.stats
	s.Drops = maps.Clone(m.stats.Drops)
	s.Disposed = maps.Clone(m.stats.Disposed)
	s.Disposing = m.disposing
	s.Held = len(m.receipts) - m.disposing
	s.InFlightCalls = len(m.calls)
	s.HeapLen = m.heap.len()
	return s
}

// Holding returns Status's Held and Disposing without copying its maps (the worker reads them
// on every receive and after every step).
func (m *Machine) Holding() (held, disposing int) {
	return len(m.receipts) - m.disposing, m.disposing
}

// WakeAt returns when the machine next needs a Tick (a renewal to send, or a deadline to
// hold a renewal in flight to), or zero when nothing is scheduled. O(1).
func (m *Machine) WakeAt() time.Time {
	if m.heap.len() == 0 {
		return time.Time{}
	}
	return m.time(m.heap.top().next)
}
