package runner

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Node is the runner's host: the one protocol every driver executes (the production owner,
// the simulator, sluicetest), over an Engine. It is synchronous and has a single owner, like
// raft's RawNode: the driver steps inputs (Step), asks what to do (HasReady, Ready), performs
// it, and says so (Advance). Node decides everything in between:
//
//  1. Group commit, pipelined: a batch is written (Effects.Sync) only when none is in flight;
//     while one flies, commands and outcomes are stepped and framed for the next one, never
//     written before SyncDone for the one in flight. Room bounds what one batch gathers.
//  2. Acknowledgement: a command is answered (Effects.Acks) once its record is durable, or at
//     once when refused; after a failure every pending and later command gets the failure.
//  3. Quiet reads: reads and waiters are answered only when quiet (every record produced is
//     durable), in a Ready that writes nothing, so they see acknowledged state only. While
//     one waits, or a compaction is due, or a stop is done, the flight in progress takes
//     nothing new (Room is 0), so its landing is quiet.
//  4. Admission (Admit) and the stop sequence: admission off, the machine's grace, its
//     cancels, its second grace, abandon; then, once closing, a flush of what is pending, a
//     compaction when asked (Effects.Compact), and Effects.Close.
//  5. Failure: a failed write, sync or compaction after its rename poisons the engine; Node
//     reports it once (Effects.Failed), answers every pending command with it, starts and
//     acknowledges nothing after the failed batch, and refuses everything later.
//
// A Ready that reports a landed batch writes nothing: the driver performs the landing first
// (a simulator arms its faults before the next write). Time enters only by Clock.
type Node struct {
	e   *Engine
	cfg NodeConfig
	now time.Time

	out      Effects // gathered for the next Ready
	readying bool    // between Ready and Advance
	landing  bool    // out holds a batch that landed: this Ready writes nothing

	// refs names the driver's ref of each command whose Ack is pending, by engine ticket.
	refs     map[Ticket]Ref
	assigned Ack   // LastProposal
	refused  error // LastProposal
	reads    []Ref
	waiters  []waiter

	// Invariant: flying ⇔ the engine has a batch in flight; nothing is written while flying.
	flying bool
	batch  Batch
	began  time.Time
	// dirty: something was stepped (or a wake fell due) since the last write.
	dirty bool
	// taken and bytes: commands and outcomes, and their payload bytes, taken since the last
	// write (Room).
	taken, bytes int
	// compactDue and holdWaiters: the last landing wants the next one quiet (Room is 0
	// meanwhile); stopped is the machine's Stopped as the last write or landing left it.
	compactDue, holdWaiters, stopped bool
	// wakeAt is Effects.WakeAt as last returned. Invariant: a wake time reached (wakeAt <= now)
	// leaves the Node dirty, so a driver never waits on a timer for what is due already
	// (unless flying, failed or closed).
	wakeAt time.Time

	closing        bool
	compactAtClose bool
	closed         bool  // Effects.Close was returned
	failed         error // the first failure; Invariant: failed ⇒ no command pending
}

// NodeConfig configures a Node. Zero fields take their defaults.
type NodeConfig struct {
	// GatherMax bounds the commands and outcomes one batch takes; 0: 4096.
	GatherMax int
	// GatherBytesMax bounds the payload bytes one batch takes; 0: 16 MiB.
	GatherBytesMax int
	// SyncEach gives every command or outcome a batch of its own, and the attempts it lets
	// start another one: about one fsync per record (a benchmark's baseline).
	SyncEach bool
	// Observe, when set, sees every input stepped (rd nil) and every Effects returned (in
	// nil), for tests that compare drivers. It must not call the Node.
	Observe func(in Input, rd *Effects)
}

// Defaults of NodeConfig.
const (
	GatherMaxDefault      = 4096
	GatherBytesMaxDefault = 16 << 20
)

// ErrClosed answers the commands and reads a Node had not answered when it closed.
var ErrClosed = errors.New("runner: closed")

// Ref is the driver's name for a command, a read or a waiter: it comes back in the effect
// that answers it.
type Ref uint64

// Input is the sealed set of a Node's inputs (Node.Step).
type Input interface{ isInput() }

// Propose submits a command: Cmd is an Enqueue, EnqueueMany, Cancel, Retry, SetSchedule,
// RemoveSchedule, Pause or Resume (its Ticket and Now are the Node's to set). Its answer is an Ack for Ref.
type Propose struct {
	Ref Ref
	Cmd Event
}

// RegisterKind adds a kind before the first Admit; its answer is an Ack for Ref (Err set
// when the engine refuses it).
type RegisterKind struct {
	Ref  Ref
	Kind KindConfig
}

// Ended reports an attempt's outcome (the Node's now is its end).
type Ended struct {
	Token   Token
	Outcome Outcome
}

// Clock says the time is Now (time never goes back). A driver steps it whenever it wakes:
// before the commands it takes, and when its timer for Effects.WakeAt fires.
type Clock struct{ Now time.Time }

// SyncDone reports the sync of Effects.Sync's batch; Err is its result, never retried.
type SyncDone struct{ Err error }

// Read asks to answer a read of the state (Effects.Reads names it when quiet).
type Read struct{ Ref Ref }

// WaitFor is what a waiter waits for.
type WaitFor uint8

const (
	// WaitIdle: nothing waiting (due or not) or running.
	WaitIdle WaitFor = iota + 1
	// WaitDue: nothing due at or before Through waiting or running.
	WaitDue
	// WaitStopped: a graceful stop is done, or the Node failed.
	WaitStopped
)

// Wait asks to be woken (Effects.Wakes) when, quiet, the state satisfies For.
type Wait struct {
	Ref     Ref
	For     WaitFor
	Through time.Time // WaitDue's
}

// Admit turns admission on (Run, Drain) or off; off begins a graceful stop (the machine's
// Dispatch). Ignored once closing or failed.
type Admit struct{ On bool }

// Close begins the stop that ends in Effects.Close: admission off, the graceful stop, a flush,
// and a compaction when Compact.
type Close struct{ Compact bool }

func (Propose) isInput()      {}
func (RegisterKind) isInput() {}
func (Ended) isInput()        {}
func (Clock) isInput()        {}
func (SyncDone) isInput()     {}
func (Read) isInput()         {}
func (Wait) isInput()         {}
func (Admit) isInput()        {}
func (Close) isInput()        {}

// Answer acknowledges a command: Err nil means its record is durable (Ack's ids and
// duplicate flags; Ticket is the engine's). Err is a refusal, the failure, or ErrClosed.
type Answer struct {
	Ref Ref
	Ack
	Err error
}

// Landed is the batch whose sync returned (or that needed none) in this Ready.
type Landed struct {
	Records    int       // records it made durable
	Began      time.Time // when it was written
	Compacted  bool      // a compaction ran after it
	CompactErr error     // a failed one (kept: the old journal stands; lost: Failed is set)
}

// Effects is what the driver performs, in this order of fields (the ordering contract).
type Effects struct {
	// Sync is the batch written now (Empty: none): sync it once, on any goroutine, and step
	// SyncDone with the result. Nothing else is written until then. A Ready with a Sync
	// carries nothing quiet (Reads, Wakes, Close), and a Ready that lands writes nothing.
	Sync  Batch
	Began time.Time // when Sync's batch was written
	// Landed: a batch that landed in this Ready (Records 0 when nothing was written).
	Landed *Landed
	// Acks answer commands; every durable one's record is covered by a SyncDone.
	Acks []Answer
	// Transitions and Settled report what became durable, for hooks.
	Transitions []Transition
	Settled     []Settled
	// Cancels are running attempts whose handlers to cancel now.
	Cancels []CancelAttempt
	// Starts are attempts to start now; their Started records are durable.
	Starts []Attempt
	// Reads are to be answered now, from the state as it is: everything in it is durable.
	Reads []Ref
	// Wakes are waiters to wake now.
	Wakes []Ref
	// WakeAt is when to step Clock if nothing else happens; zero: never.
	WakeAt time.Time
	// Failed is the failure, reported once: every running handler is to be cancelled, and
	// every pending command got it in Acks.
	Failed error
	// Compact: snapshot now (Node.Compact), before Close; everything is durable.
	Compact bool
	// Close: the stop is complete; close the engine (Node.Close) and stop driving the Node.
	Close bool
}

// waiter is a Wait not yet woken.
type waiter struct {
	ref     Ref
	what    WaitFor
	through time.Time
}

// NewNode hosts e, opened with Open (its orphans requeued, admission off) and not stepped
// since.
func NewNode(e *Engine, cfg NodeConfig) *Node {
	if cfg.GatherMax <= 0 {
		cfg.GatherMax = GatherMaxDefault
	}
	if cfg.GatherBytesMax <= 0 {
		cfg.GatherBytesMax = GatherBytesMaxDefault
	}
	n := &Node{e: e, cfg: cfg, refs: map[Ticket]Ref{}, now: e.m.now}
	// What Open's own batch made durable (orphans requeued) is the first Ready's.
	res, err := e.finish(Batch{}, nil)
	n.land(res, err, false)
	return n
}

// Engine returns the hosted engine, for reads (Get, List, Status, State...) and checkers.
// Stepping it behind the Node's back is misuse.
func (n *Node) Engine() *Engine { return n.e }

// Now is the latest time the Node was told.
func (n *Node) Now() time.Time { return n.now }

// Room is how many more commands and outcomes the driver may take now, for the batch being
// gathered: 0 while the flight in progress must land quiet, or once the batch is full.
func (n *Node) Room() int {
	if n.closed {
		return 0
	}
	if n.flying && (len(n.reads) > 0 || n.compactDue || n.holdWaiters || n.closing && n.stopped) {
		return 0
	}
	if n.bytes >= n.cfg.GatherBytesMax {
		return 0
	}
	limit := n.cfg.GatherMax
	if n.cfg.SyncEach {
		limit = 1
	}
	return max(0, limit-n.taken)
}

// WakeAt is the last Effects.WakeAt, for a driver whose timer fired early (nothing to do).
func (n *Node) WakeAt() time.Time { return n.wakeAt }

// Flying reports that a batch's sync is in flight (SyncDone not stepped yet).
func (n *Node) Flying() bool { return n.flying }

// Step takes one input. Misuse (stepping after Close, a SyncDone with nothing in flight, a
// command that is no command) panics; refusals come back as Acks.
func (n *Node) Step(in Input) {
	if n.closed {
		panic(fmt.Sprintf("runner: Node.Step(%T) after Close", in))
	}
	if n.cfg.Observe != nil {
		n.cfg.Observe(in, nil)
	}
	switch in := in.(type) {
	case Propose:
		n.propose(in)
	case RegisterKind:
		err := n.failed
		if err == nil {
			err = n.e.Register(in.Kind)
		}
		n.out.Acks = append(n.out.Acks, Answer{Ref: in.Ref, Err: err})
	case Ended:
		n.ended(in)
	case Clock:
		if in.Now.After(n.now) {
			n.now = in.Now
		}
		if !n.wakeAt.IsZero() && !n.now.Before(n.wakeAt) {
			n.dirty = true
		}
	case SyncDone:
		n.syncDone(in.Err)
	case Read:
		n.reads = append(n.reads, in.Ref)
	case Wait:
		n.waiters = append(n.waiters, waiter{ref: in.Ref, what: in.For, through: in.Through})
	case Admit:
		if n.closing || n.failed != nil {
			return
		}
		_ = n.e.Dispatch(n.now, in.On) // refused only when poisoned: the next write reports it
		n.dirty = true
	case Close:
		if n.closing {
			return
		}
		n.closing, n.compactAtClose = true, in.Compact
		if n.failed == nil {
			_ = n.e.Dispatch(n.now, false)
		}
		n.dirty = true
	default:
		panic(fmt.Sprintf("runner: unknown Node input %T", in))
	}
}

// propose steps a command into the engine with the Node's now, or answers it at once.
func (n *Node) propose(p Propose) {
	if n.failed != nil {
		n.assigned, n.refused = Ack{}, n.failed
		n.out.Acks = append(n.out.Acks, Answer{Ref: p.Ref, Err: n.failed})
		return
	}
	size := 0
	switch c := p.Cmd.(type) {
	case Enqueue:
		c.Now = n.now
		p.Cmd, size = c, len(c.Payload)
	case EnqueueMany:
		c.Now = n.now
		p.Cmd = c
		for _, j := range c.Jobs {
			size += len(j.Payload)
		}
	case Retry:
		c.Now = n.now
		p.Cmd = c
	case SetSchedule:
		c.Now = n.now
		p.Cmd, size = c, len(c.Schedule.Payload)
	case Pause:
		c.Now = n.now
		p.Cmd = c
	case Resume:
		c.Now = n.now
		p.Cmd = c
	case Cancel, RemoveSchedule:
	default:
		panic(fmt.Sprintf("runner: Propose of %T, which is not a command", p.Cmd))
	}
	n.assigned, n.refused = Ack{}, nil
	t, err := n.e.step(p.Cmd)
	if err != nil {
		n.refused = err
		n.out.Acks = append(n.out.Acks, Answer{Ref: p.Ref, Err: err})
		return
	}
	switch p.Cmd.(type) {
	case Enqueue, EnqueueMany:
		n.assigned = n.e.m.answer
	}
	n.refs[t] = p.Ref
	n.took(size)
}

// LastProposal is what the last Propose did at once: the ids an enqueue took (Ack.ID, IDs,
// Duplicate; zero for other commands), or its refusal. Its Ack in Effects says the same, later;
// this is for checkers that track records before they are acknowledged.
func (n *Node) LastProposal() (Ack, error) { return n.assigned, n.refused }

func (n *Node) ended(d Ended) {
	if n.failed != nil {
		return // the failure cancelled every handler; outcomes go nowhere
	}
	_ = n.e.AttemptDone(n.now, d.Token, d.Outcome) // refused only when poisoned, reported at the next write
	n.took(0)
}

// took counts one command or outcome into the batch being gathered; during a flight its
// records are framed now (the overlap that pipelining buys), written after SyncDone.
func (n *Node) took(size int) {
	n.dirty = true
	n.taken++
	n.bytes += size
	if n.flying {
		_ = n.e.stageHeld() // a refusal poisons the engine: the landing reports it
	}
}

func (n *Node) syncDone(err error) {
	if !n.flying {
		panic("runner: SyncDone with no batch in flight")
	}
	n.flying = false
	res, ferr := n.e.finish(n.batch, err)
	n.batch = Batch{}
	n.land(res, ferr, true)
}

// land takes a finished batch's result into the next Ready.
func (n *Node) land(res Result, err error, wrote bool) {
	n.out.Landed = &Landed{Records: res.Records, Began: n.began, Compacted: res.Compacted, CompactErr: res.CompactErr}
	n.landing = n.landing || wrote
	n.hold(res)
	if err == nil {
		err = n.e.Poisoned() // a compaction lost after its rename
	}
	if err != nil {
		n.becomeFailed(err)
		return
	}
	n.compactDue = res.CompactDue
	n.stopped = res.Stopped
	n.holdWaiters = n.waitersDue(false)
	// A job fell due while the batch flew: write the next one at once.
	if w := n.e.m.WakeAt(); wrote && !w.IsZero() && !w.After(n.now) {
		n.dirty = true
	}
}

// hold adds a result's effects to the next Ready, naming each Ack by the driver's ref.
func (n *Node) hold(res Result) {
	for _, a := range res.Acks {
		ref, ok := n.refs[a.Ticket]
		if !ok {
			panic(fmt.Sprintf("runner: an Ack for ticket %d, which no pending command holds", a.Ticket))
		}
		delete(n.refs, a.Ticket)
		n.out.Acks = append(n.out.Acks, Answer{Ref: ref, Ack: a})
	}
	o := &n.out
	o.Transitions = adopt(o.Transitions, res.Transitions)
	o.Settled = adopt(o.Settled, res.Settled)
	o.Cancels = adopt(o.Cancels, res.Cancels)
	o.Starts = adopt(o.Starts, res.Starts)
}

// becomeFailed records the first failure: every pending command gets it, in ticket order.
func (n *Node) becomeFailed(err error) {
	if n.failed != nil {
		return
	}
	n.failed = err
	n.out.Failed = err
	tickets := make([]Ticket, 0, len(n.refs))
	for t := range n.refs {
		tickets = append(tickets, t)
	}
	slices.Sort(tickets)
	for _, t := range tickets {
		n.out.Acks = append(n.out.Acks, Answer{Ref: n.refs[t], Err: err})
		delete(n.refs, t)
	}
	n.dirty, n.compactDue, n.holdWaiters = false, false, false
}

// quiet reports that every record produced is durable (or nothing will be again).
func (n *Node) quiet() bool { return n.failed != nil || n.e.quiet() }

// HasReady reports that Ready has something to return.
func (n *Node) HasReady() bool {
	if n.closed || n.readying {
		return false
	}
	o := &n.out
	if o.Landed != nil || o.Failed != nil || len(o.Acks)+len(o.Starts)+len(o.Cancels)+len(o.Settled)+len(o.Transitions) > 0 {
		return true
	}
	if n.flying {
		return false
	}
	if n.dirty && n.failed == nil {
		return true
	}
	return n.quiet() && (len(n.reads) > 0 || n.waitersDue(true) || n.closeDue())
}

// closeDue reports that a closing Node may close: everything durable and the stop done.
func (n *Node) closeDue() bool {
	return n.closing && !n.flying && n.quiet() && (n.failed != nil || n.e.m.Status().Stopped)
}

// Ready returns the effects to perform now; Advance must follow before the next Ready.
func (n *Node) Ready() Effects {
	if n.readying {
		panic("runner: Node.Ready twice without Advance")
	}
	if n.closed {
		panic("runner: Node.Ready after Close")
	}
	n.readying = true
	if !n.landing && !n.flying && n.dirty && n.failed == nil && !(n.quiet() && (len(n.reads) > 0 || n.waitersDue(true))) {
		n.write()
	}
	rd := n.out
	n.out = Effects{}
	n.landing = false
	if !rd.Sync.Empty() {
		rd.WakeAt = n.e.m.WakeAt()
		n.wakeAt = rd.WakeAt
		n.observe(&rd)
		return rd
	}
	if !n.flying && n.quiet() {
		n.answerQuiet(&rd)
	}
	if n.failed == nil && !rd.Close {
		rd.WakeAt = n.e.m.WakeAt()
	}
	n.wakeAt = rd.WakeAt
	n.observe(&rd)
	return rd
}

func (n *Node) observe(rd *Effects) {
	if n.cfg.Observe != nil {
		n.cfg.Observe(nil, rd)
	}
}

// write begins a batch at now: admission (unless SyncEach's commands and outcomes go first on
// their own), then every record stepped so far, written. An empty one lands at once.
func (n *Node) write() {
	admit := !(n.cfg.SyncEach && n.taken > 0) && !(n.closing && n.e.m.Status().Stopped)
	n.dirty = !admit && !n.closing // SyncEach: the admission batch follows
	n.taken, n.bytes = 0, 0
	n.began = n.now
	b, err := n.e.begin(n.now, admit)
	if err != nil {
		n.out.Landed = &Landed{Began: n.now}
		n.becomeFailed(err)
		return
	}
	if n.closing {
		n.stopped = n.e.m.Status().Stopped // O(attempts): only a stop reads it
	}
	if b.Empty() {
		res, err := n.e.finish(b, nil)
		n.land(res, err, false)
		return
	}
	n.flying, n.batch = true, b
	n.out.Sync, n.out.Began = b, n.now
}

// answerQuiet adds to rd what waits for a quiet Node: reads, waiters, and the close.
func (n *Node) answerQuiet(rd *Effects) {
	rd.Reads, n.reads = n.reads, nil
	n.holdWaiters = false
	keep := n.waiters[:0]
	for _, w := range n.waiters {
		if n.waiterDue(w) {
			rd.Wakes = append(rd.Wakes, w.ref)
			continue
		}
		keep = append(keep, w)
	}
	n.waiters = keep
	if !n.closeDue() {
		return
	}
	rd.Compact = n.compactAtClose && n.failed == nil
	rd.Close = true
	n.closed = true
	n.waiters = nil // their callers see the driver end
}

// waitersDue reports whether a waiter would be woken by the state as it is; quietOnly: only
// when quiet (else by the live state, to hold the next flight).
func (n *Node) waitersDue(quietOnly bool) bool {
	if quietOnly && (n.flying || !n.quiet()) {
		return false
	}
	for _, w := range n.waiters {
		if n.waiterDue(w) {
			return true
		}
	}
	return false
}

func (n *Node) waiterDue(w waiter) bool {
	if n.failed != nil {
		return w.what == WaitStopped
	}
	switch w.what {
	case WaitIdle:
		return n.e.Idle()
	case WaitDue:
		return n.e.IdleThrough(w.through)
	case WaitStopped:
		return n.e.m.Status().Stopped
	}
	panic(fmt.Sprintf("runner: unknown WaitFor %d", w.what))
}

// Advance says the driver performed the last Ready's effects.
func (n *Node) Advance() {
	if !n.readying {
		panic("runner: Node.Advance without Ready")
	}
	n.readying = false
}

// Compact performs Effects.Compact: a snapshot of the durable state. A kept failure leaves the
// old journal (the engine logs it); a lost one poisons the engine, which is closing anyway.
func (n *Node) Compact() error { return n.e.Compact() }

// Close performs Effects.Close: it closes the engine's journal.
func (n *Node) Close() error { return n.e.Close() }

// NodeStatus is a read-only summary of the Node, for drivers' tests and checkers.
type NodeStatus struct {
	Flying, Closing, Closed, Quiet bool
	Dirty                          bool // the next Ready writes a batch, unless it lands one
	Pending, Reads, Waiters        int
	Room                           int
	Failed                         error
}

// Status summarises the Node.
func (n *Node) Status() NodeStatus {
	return NodeStatus{Flying: n.flying, Dirty: n.dirty && n.failed == nil, Closing: n.closing, Closed: n.closed, Quiet: n.quiet(),
		Pending: len(n.refs), Reads: len(n.reads), Waiters: len(n.waiters), Room: n.Room(), Failed: n.failed}
}

// CheckInvariants states the Node's invariants in code, with the engine's.
func (n *Node) CheckInvariants() error {
	var errs []error
	if n.flying != n.e.flying {
		errs = append(errs, fmt.Errorf("runner: node flying %v, engine flying %v", n.flying, n.e.flying))
	}
	if n.failed != nil && len(n.refs) > 0 {
		errs = append(errs, fmt.Errorf("runner: failed with %d commands pending", len(n.refs)))
	}
	if n.closed && (len(n.refs) > 0 || len(n.reads) > 0 || n.flying) {
		errs = append(errs, fmt.Errorf("runner: closed with %d commands, %d reads pending, flying %v", len(n.refs), len(n.reads), n.flying))
	}
	if n.flying != n.e.j.Flying() {
		errs = append(errs, fmt.Errorf("runner: node flying %v, journal flying %v", n.flying, n.e.j.Flying()))
	}
	if n.flying && n.landing {
		errs = append(errs, errors.New("runner: a batch was written in the Ready of a landing"))
	}
	if n.closed && n.failed == nil && !n.e.quiet() {
		errs = append(errs, errors.New("runner: closed with records not durable (the stop's flush skipped)"))
	}
	if n.flying && n.failed != nil {
		errs = append(errs, errors.New("runner: a batch flies after the failure"))
	}
	if w := n.wakeAt; !w.IsZero() && !n.now.Before(w) && !n.flying && !n.dirty && n.failed == nil && !n.closed {
		errs = append(errs, fmt.Errorf("runner: wake time %s reached at %s, and the next Ready writes nothing", w.Format(time.RFC3339Nano), n.now.Format(time.RFC3339Nano)))
	}
	if n.failed == nil {
		errs = append(errs, n.e.CheckInvariants())
	}
	return errors.Join(errs...)
}
