package qjobs

import (
	"fmt"
	"math/rand"
	"sort"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/retry"
)

// Queue limits of Amazon SQS, the defaults of Config.
const (
	// VisibilityMaxDefault: a message can stay hidden at most 12 h after its receive.
	VisibilityMaxDefault = 12 * time.Hour
	// DelayMaxDefault: a sent message can be delayed at most 15 min.
	DelayMaxDefault = 15 * time.Minute
	// MessageMaxDefault: a message (body and attributes) is at most 256 KiB.
	MessageMaxDefault = 256 << 10
)

// The worker under the job layer keeps leases only: the job layer counts attempts and
// dead-letters, so the worker's budget never retires a message and it has no redrive; its
// backoff is never used (every Hide carries its visibility), up to the visibility limit.
const (
	WorkerBudget     = 1 << 30
	WorkerHideMax    = VisibilityMaxDefault
	WorkerRetryBase  = time.Second
	WorkerAttemptMax = 1
)

// Config configures a Machine.
type Config struct {
	Policy  retry.Policy    // defaults filled by WithDefaults
	Circuit breaker.Circuit // per target, per process
	// VisibilityMax is how long after a receive the queue lets its message stay hidden;
	// Margin is kept under it (handler time is counted from Delivery.ReceivedAt).
	VisibilityMax, Margin time.Duration
	// DelayMax is the longest delay a send may ask for.
	DelayMax time.Duration
	// MessageMax is the largest message the queue takes, counted as Size counts it.
	MessageMax int
	// Rand draws backoff jitter; nil means no jitter (the full delay).
	Rand *rand.Rand
	// IDs draws job ids (63 bits, never 0) at Enqueue; required. Each process needs a
	// source of its own, independent of every other's (production seeds it from
	// crypto/rand): ids are unique across a fleet by chance alone, without coordination.
	IDs *rand.Rand
	// LostMax is how many deliveries a job may lose without a handler outcome (crashes, lost
	// leases, lost receive answers, stops) before it is dead-lettered; 0 means LostFloor
	// plus LostPerAttempt per attempt of the job's budget.
	LostMax int
	// FIFO: the queues are FIFO queues. Every send carries a deduplication id (the job id on
	// enqueue) and a group id, and no delay (a FIFO queue takes none per message): a job
	// waiting for its not-before time is hidden instead of re-sent.
	FIFO bool
	// WaitMax is how many flow waits (Flow) a job may make in the queue before it is
	// dead-lettered with ReasonWaits; 0 means WaitMaxDefault.
	WaitMax int
	// Defect plants one known flow-control bug (tests and the simulator only).
	Defect Defect
}

// The default delivery budget: LostFloor plus LostPerAttempt per attempt.
const (
	LostFloor      = 5
	LostPerAttempt = 3
)

// delivery is one delivery of a job message, as the decisions need it.
type delivery struct {
	Attrs        Attrs
	ReceiveCount int       // ≥ 1
	ReceivedAt   time.Time // when the handler started: the visibility limit counts from here
	// Unregistered: this process has no handler for the job's kind; the job waits (re-sent
	// with the longest delay, no attempt spent) for a process that has one.
	Unregistered bool
	// Early is how many earlier receives of this message may have been waits for its
	// not-before time (FIFO: a wait is a hide, which the receive count cannot tell apart).
	Early int
}

// Attempt is the number this delivery's attempt has if it runs: every earlier attempt
// reported an outcome, which its message's successor carries.
func (d delivery) Attempt() int { return d.Attrs.Attempts + 1 }

// Lost is the number of the job's deliveries that ended without an outcome before this one:
// the ones its message carries, and every earlier receive of this message (a delivery that
// reports an outcome, defers or sends the job on deletes its message), less its waits.
func (d delivery) Lost() int { return d.Attrs.Lost + max(0, d.ReceiveCount-1-d.Early) }

// action is what a decision does with a delivery.
type action uint8

const (
	// actRun: run the handler (plan.Attempt, plan.Probe), then finish or abandon.
	actRun action = iota + 1
	// actAck: delete the message.
	actAck
	// actHide: change the message's visibility to plan.Visibility; the next delivery is the
	// next attempt.
	actHide
	// actResend: send plan.Send (same payload) to the queue, then delete the original. Used
	// for a defer (no attempt spent) and for a retry beyond what one visibility change holds.
	actResend
	// actDeadLetter: send plan.Send (same payload) to the dead-letter queue, then delete.
	actDeadLetter
)

func (a action) String() string {
	switch a {
	case actRun:
		return "run"
	case actAck:
		return "ack"
	case actHide:
		return "hide"
	case actResend:
		return "resend"
	case actDeadLetter:
		return "dead-letter"
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// outgoing is a message to send: the job's new attributes and the send's delay.
type outgoing struct {
	Attrs Attrs
	Delay time.Duration // whole seconds, ≤ DelayMax
}

// plan is one decision for one delivery.
type plan struct {
	Action     action
	Attempt    int           // actRun: this attempt's number (1-based)
	Probe      breaker.Probe // actRun: pass back to finish or abandon
	Visibility time.Duration // actHide: whole seconds
	Send       outgoing      // actResend, actDeadLetter
	Deferred   bool          // actResend: a defer (no attempt was made)
	Wait       string        // actResend, actHide: a flow wait (no attempt was made), and why
	Timeout    time.Duration // actRun: the attempt's bound; 0: none
	Delay      time.Duration // actRun: held in the process this long for a rate's token (≤ HoldMax)
}

// Result is how an attempt ended.
type Result uint8

const (
	Success Result = iota + 1
	Retryable
	Permanent
	Panicked
)

// Outcome is a handler's outcome for Finish.
type Outcome struct {
	Result Result
	Err    string
	After  *time.Duration // Retryable: a server-requested wait instead of the backoff
}

// Stats counts the machine's decisions.
type Stats struct {
	Runs, Deferred, Acked, Hidden, Resent, DeadLettered, Abandoned int
	Enqueued                                                       int // jobs sent by Enqueue
	NotJobs                                                        int // messages that were not jobs, sent to the dead-letter queue
	SendsFailed                                                    int // re-sends and dead letters that failed (their original comes back)
	Unsendable                                                     int // successors that could not fit the queue even cut (their original comes back)
	FlowWaits                                                      int // deliveries over a flow limit, sent back to wait (no attempt)
	FlowHeld                                                       int // deliveries held in the process for a rate's next token (Run.Delay)
	TimedOut                                                       int // attempts that ran past their timeout and did not succeed
}

// Machine is the job layer of one process: a host with New, Step, Ready, WakeAt and Status.
// It is not safe for concurrent use.
type Machine struct {
	cfg      Config
	breakers map[string]*breaker.Breaker
	// phaseHigh is the highest half-open phase of any breaker forgotten, so a new breaker's
	// phases never match a probe of a forgotten one.
	phaseHigh uint64
	stats     Stats
	kinds     map[string]bool     // registered
	warned    map[string]bool     // unregistered kinds warned about; at most warnedMax
	pending   map[string]*pending // by receipt; Invariant: at most deliveriesMax
	ready     Ready
	now       time.Time // the latest Now of an event

	flows       map[string]*kindFlow // by kind: the registered kinds with limits
	keys        map[keyID]*keyFlow   // Invariant: at most keysMax
	keysSweepAt int                  // keys kept at which idle ones are next forgotten
	flowStarted bool
	flowStart   int64 // UnixNano of the first delivery: buckets are as if made empty then
}

// WithDefaults fills the zero fields of c.
func (c Config) WithDefaults() Config {
	c.Policy = c.Policy.WithDefaults()
	c.Circuit = c.Circuit.WithDefaults()
	if c.VisibilityMax == 0 {
		c.VisibilityMax = VisibilityMaxDefault
	}
	if c.DelayMax == 0 {
		c.DelayMax = DelayMaxDefault
	}
	if c.MessageMax == 0 {
		c.MessageMax = MessageMaxDefault
	}
	return c
}

// New returns a machine, or an error naming the first bad field of cfg (after defaults).
func New(cfg Config) (*Machine, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Circuit.Validate(); err != nil {
		return nil, err
	}
	switch {
	case cfg.VisibilityMax < time.Second:
		return nil, &core.FieldError{Err: ErrInvalid, Field: "VisibilityMax", Value: cfg.VisibilityMax, Rule: "must be ≥ 1s"}
	case cfg.Margin < 0 || cfg.Margin >= cfg.VisibilityMax:
		return nil, &core.FieldError{Err: ErrInvalid, Field: "Margin", Value: cfg.Margin, Rule: "must be in [0, VisibilityMax)"}
	case cfg.DelayMax < 0:
		return nil, &core.FieldError{Err: ErrInvalid, Field: "DelayMax", Value: cfg.DelayMax, Rule: "must be ≥ 0"}
	case cfg.MessageMax < 0:
		return nil, &core.FieldError{Err: ErrInvalid, Field: "MessageMax", Value: cfg.MessageMax, Rule: "must be ≥ 0"}
	case cfg.LostMax < 0:
		return nil, &core.FieldError{Err: ErrInvalid, Field: "LostMax", Value: cfg.LostMax, Rule: "must be ≥ 0"}
	case cfg.WaitMax < 0:
		return nil, &core.FieldError{Err: ErrInvalid, Field: "WaitMax", Value: cfg.WaitMax, Rule: "must be ≥ 0 (0: WaitMaxDefault)"}
	case cfg.IDs == nil:
		return nil, &core.FieldError{Err: ErrInvalid, Field: "IDs", Value: "nil", Rule: "must be a random source of this process's own"}
	}
	return &Machine{cfg: cfg, breakers: map[string]*breaker.Breaker{}, kinds: map[string]bool{},
		warned: map[string]bool{}, pending: map[string]*pending{}, flows: map[string]*kindFlow{}, keys: map[keyID]*keyFlow{}}, nil
}

// ErrInvalid is wrapped by New's own field errors.
var ErrInvalid = fmt.Errorf("qjobs: invalid config")

// policy is the machine's policy with the job's own attempts and deadline.
func (m *Machine) policy(a Attrs) retry.Policy {
	p := m.cfg.Policy
	if a.AttemptsMax > 0 {
		p.Attempts = a.AttemptsMax
	}
	if a.Deadline > 0 {
		p.Deadline = a.Deadline
	}
	return p
}

// lostMax is the job's delivery budget: deliveries it may lose without an outcome.
func (m *Machine) lostMax(p retry.Policy) int {
	if m.cfg.LostMax > 0 {
		return m.cfg.LostMax
	}
	return LostFloor + LostPerAttempt*p.Attempts
}

// admit decides what a fresh delivery does at now: run, re-send (a defer), or dead-letter.
func (m *Machine) admit(now time.Time, d delivery) plan {
	a := d.Attrs
	a.Lost = d.Lost()
	made := a.Attempts // handler outcomes before this delivery
	if d.Unregistered {
		return m.deferUntil(now, d, a, now.Add(m.cfg.DelayMax))
	}
	if now.Before(a.NotBefore) {
		return m.deferUntil(now, d, a, a.NotBefore)
	}
	p := m.policy(a)
	if a.Lost > m.lostMax(p) {
		why := a.LastErr
		if why == "" {
			why = fmt.Sprintf("%d deliveries ended without an outcome (crashes, lost leases, stops); no attempt reported", a.Lost)
		}
		return m.dead(a, made, ReasonLost, why)
	}
	var dec breaker.Decision
	var wait plan
	var waits bool
	var start int64
	v := retry.Admit(retry.Candidate{UnitFree: true, Late: p.Late(a.FirstDue, now), Spent: p.Spent(made)}, func() bool {
		// Flow limits before the breaker: a delivery that waits spends no probe.
		if wait, start, waits = m.flowWait(now, d, a); waits {
			return false
		}
		b := m.breaker(a.Target)
		b.Step(breaker.Admit{Now: now})
		dec = *b.Ready().Decision
		return dec.Verdict != breaker.Refused
	})
	switch v {
	case retry.DeadLate:
		why := a.LastErr
		if why == "" {
			why = fmt.Sprintf("the deadline passed before attempt %d could start", made+1)
		}
		return m.dead(a, made, ReasonLate, why)
	case retry.DeadSpent:
		// Finish dead-letters a failure that spends the budget: a message found spent is a
		// duplicate's, or its budget was lowered since. It carries the last error.
		why := a.LastErr
		if why == "" {
			why = fmt.Sprintf("%d attempts made, the budget is %d", made, p.Attempts)
		}
		return m.dead(a, made, ReasonSpent, why)
	case retry.Defer:
		if waits {
			return wait
		}
		return m.deferUntil(now, d, a, dec.Until)
	}
	m.stats.Runs++
	m.flowTake(start, a)
	delay := time.Duration(start - now.UnixNano())
	return plan{Action: actRun, Attempt: made + 1, Probe: dec.Probe, Delay: delay, Timeout: m.timeout(now.Add(delay), d)}
}

// deferUntil re-sends the job with the attempts made and deliveries lost, not before until;
// on a FIFO queue (no per-message delay) it hides the message instead, as long as the
// visibility limit allows.
func (m *Machine) deferUntil(now time.Time, d delivery, a Attrs, until time.Time) plan {
	m.stats.Deferred++
	if m.cfg.FIFO && until.Equal(a.NotBefore) {
		if v := m.hideFor(now, d, until.Sub(now)); v > 0 {
			return plan{Action: actHide, Visibility: v, Deferred: true}
		}
	}
	a.NotBefore = until
	return plan{Action: actResend, Deferred: true, Send: outgoing{Attrs: a, Delay: m.delay(until.Sub(now))}}
}

// hideFor is wait in whole seconds, cut to what the visibility limit still allows the
// delivery; 0 when it allows less than a second.
func (m *Machine) hideFor(now time.Time, d delivery, wait time.Duration) time.Duration {
	left := m.cfg.VisibilityMax - m.cfg.Margin - now.Sub(d.ReceivedAt)
	return min(ceilSecond(min(wait, left)), left.Truncate(time.Second))
}

func (m *Machine) dead(a Attrs, made int, r Reason, lastErr string) plan {
	m.stats.DeadLettered++
	a.Attempts, a.Reason, a.LastErr, a.NotBefore = made, r, lastErr, time.Time{}
	return plan{Action: actDeadLetter, Send: outgoing{Attrs: a}}
}

// finish decides how the message of an attempt admit ran leaves, given its outcome at now.
// attempt and probe are the run plan's. Every outcome but a success sends the job on (a
// retry or a dead letter) carrying the attempt and its error, so the next delivery knows
// both, and tells a reported attempt from a lost delivery.
func (m *Machine) finish(now time.Time, d delivery, attempt int, probe breaker.Probe, o Outcome) plan {
	a := d.Attrs
	a.Lost = d.Lost()
	br := breaker.Success
	switch o.Result {
	case Retryable:
		br = breaker.RetryableFailure
	case Permanent:
		br = breaker.PermanentFailure
	case Panicked:
		br = breaker.Panic
	case Success:
	default:
		panic(fmt.Sprintf("qjobs: finish with result %d", o.Result))
	}
	m.record(now, a.Target, br, probe)
	switch o.Result {
	case Success:
		m.stats.Acked++
		return plan{Action: actAck}
	case Permanent, Panicked:
		return m.dead(a, attempt, ReasonPermanent, o.Err)
	}
	p := m.policy(a)
	var draw uint32
	if m.cfg.Rand != nil {
		draw = m.cfg.Rand.Uint32()
	}
	after := o.After
	if m.cfg.Rand == nil && after == nil {
		full := p.Delay(attempt - 1) // no jitter: the full delay
		after = &full
	}
	due, v := p.Next(a.FirstDue, now, attempt, draw, after)
	switch v {
	case retry.DeadSpent:
		return m.dead(a, attempt, ReasonSpent, o.Err)
	case retry.DeadLate:
		return m.dead(a, attempt, ReasonLate, o.Err)
	}
	m.stats.Resent++
	a.Attempts, a.LastErr = attempt, o.Err
	a.NotBefore = time.Time{}
	if due.After(now) {
		a.NotBefore = due
	}
	return plan{Action: actResend, Send: outgoing{Attrs: a, Delay: m.delay(due.Sub(now))}}
}

// abandon gives back the probe of an attempt that ended without an outcome (its lease was
// lost, or the process is stopping); the queue redelivers the message.
func (m *Machine) abandon(target string, probe breaker.Probe) {
	m.stats.Abandoned++
	if b, ok := m.breakers[target]; ok {
		b.Step(breaker.Release{Probe: probe})
	}
}

func (m *Machine) breaker(target string) *breaker.Breaker {
	b, ok := m.breakers[target]
	if !ok {
		var err error
		if b, err = breaker.New(breaker.Config{Circuit: m.cfg.Circuit, PhaseAfter: m.phaseHigh}); err != nil {
			panic(fmt.Sprintf("qjobs: circuit validated in New: %v", err))
		}
		m.breakers[target] = b
	}
	return b
}

// record feeds an outcome to the target's breaker, and forgets the breaker once it is idle.
func (m *Machine) record(now time.Time, target string, r breaker.Result, probe breaker.Probe) {
	b := m.breaker(target)
	b.Step(breaker.Record{Now: now, Result: r, Probe: probe})
	if b.Idle(now) {
		m.phaseHigh = max(m.phaseHigh, b.Status().Phase)
		delete(m.breakers, target)
	}
}

// delay is d in whole seconds (rounded up), within [0, DelayMax]; 0 on a FIFO queue, which
// takes no delay per message. d is clamped before it is rounded: a wait to a far-future time
// saturates near the largest Duration, and rounding that up would overflow to a negative
// delay (a re-send at once, again and again).
func (m *Machine) delay(d time.Duration) time.Duration {
	if m.cfg.FIFO {
		return 0
	}
	return ceilSecond(min(d, m.cfg.DelayMax.Truncate(time.Second)))
}

// newID draws a job id: 63 random bits, never 0.
func (m *Machine) newID() uint64 {
	if id := uint64(m.cfg.IDs.Int63()); id != 0 {
		return id
	}
	return 1
}

func ceilSecond(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Second - 1) / time.Second * time.Second
}

// Breaker returns the status of target's breaker (Closed for a target with none).
func (m *Machine) Breaker(target string) breaker.Status {
	if b, ok := m.breakers[target]; ok {
		return b.Status()
	}
	return breaker.Status{State: breaker.Closed, Phase: m.phaseHigh}
}

// Targets returns the targets with a breaker, sorted.
func (m *Machine) Targets() []string {
	out := make([]string, 0, len(m.breakers))
	for t := range m.breakers {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// CheckInvariants checks the host's bounds and every breaker's invariants, in target order.
func (m *Machine) CheckInvariants() error {
	if n := len(m.pending); n > deliveriesMax {
		return fmt.Errorf("qjobs: %d deliveries in flight, more than %d", n, deliveriesMax)
	}
	if n := len(m.warned); n > warnedMax {
		return fmt.Errorf("qjobs: %d kinds warned about, more than %d", n, warnedMax)
	}
	for _, t := range m.Targets() {
		if err := m.breakers[t].CheckInvariants(); err != nil {
			return fmt.Errorf("qjobs: target %q: %w", t, err)
		}
	}
	return m.checkFlow()
}
