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
	// Rand draws backoff jitter; nil means no jitter (the full delay).
	Rand *rand.Rand
}

// Delivery is one delivery of a job message, as the machine needs it.
type Delivery struct {
	Attrs        Attrs
	ReceiveCount int       // ≥ 1
	ReceivedAt   time.Time // when the receive that returned it was sent
	// Unregistered: this process has no handler for the job's kind; the job waits (re-sent
	// with the longest delay, no attempt spent) for a process that has one.
	Unregistered bool
}

// Attempt is the number this delivery's attempt has if it runs.
func (d Delivery) Attempt() int { return d.Attrs.Attempts + max(1, d.ReceiveCount) }

// Action is what the driver does with a delivery.
type Action uint8

const (
	// Run the handler (Plan.Attempt, Plan.Probe), then call Finish or Abandon.
	Run Action = iota + 1
	// Ack: delete the message.
	Ack
	// Hide: change the message's visibility to Plan.Visibility; the next delivery is the next
	// attempt.
	Hide
	// Resend: send Plan.Send (same payload) to the queue, then delete the original. Used for
	// a defer (no attempt spent) and for a retry beyond what one visibility change holds.
	Resend
	// DeadLetter: send Plan.Send (same payload) to the dead-letter queue, then delete.
	DeadLetter
)

func (a Action) String() string {
	switch a {
	case Run:
		return "run"
	case Ack:
		return "ack"
	case Hide:
		return "hide"
	case Resend:
		return "resend"
	case DeadLetter:
		return "dead-letter"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Outgoing is a message to send: the job's new attributes and the send's delay.
type Outgoing struct {
	Attrs Attrs
	Delay time.Duration // whole seconds, ≤ DelayMax
}

// Plan is the machine's decision for one delivery.
type Plan struct {
	Action     Action
	Attempt    int           // Run: this attempt's number (1-based)
	Probe      breaker.Probe // Run: pass back to Finish or Abandon
	Visibility time.Duration // Hide: whole seconds
	Send       Outgoing      // Resend, DeadLetter
	Deferred   bool          // Resend: a defer (no attempt was made)
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
}

// Machine is the job layer of one process. It is not safe for concurrent use.
type Machine struct {
	cfg      Config
	breakers map[string]*breaker.Breaker
	// phaseHigh is the highest half-open phase of any breaker forgotten, so a new breaker's
	// phases never match a probe of a forgotten one.
	phaseHigh uint64
	stats     Stats
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
	}
	return &Machine{cfg: cfg, breakers: map[string]*breaker.Breaker{}}, nil
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

// Admit decides what a fresh delivery does at now: Run, Resend (a defer), or DeadLetter.
func (m *Machine) Admit(now time.Time, d Delivery) Plan {
	a := d.Attrs
	made := d.Attempt() - 1 // attempts made before this delivery
	if d.Unregistered {
		return m.deferUntil(now, a, made, now.Add(m.cfg.DelayMax))
	}
	if now.Before(a.NotBefore) {
		return m.deferUntil(now, a, made, a.NotBefore)
	}
	p := m.policy(a)
	var dec breaker.Decision
	v := retry.Admit(retry.Candidate{UnitFree: true, Late: p.Late(a.FirstDue, now), Spent: p.Spent(made)}, func() bool {
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
		// Finish dead-letters a failure that spends the budget, so a delivery finding it spent
		// follows an attempt that never reported: its error is unknown.
		return m.dead(a, made, ReasonSpent, fmt.Sprintf("attempt %d ended without an outcome (its process stopped or lost the lease)", made))
	case retry.Defer:
		return m.deferUntil(now, a, made, dec.Until)
	}
	m.stats.Runs++
	return Plan{Action: Run, Attempt: made + 1, Probe: dec.Probe}
}

// deferUntil re-sends the job with the attempts actually made, not before until.
func (m *Machine) deferUntil(now time.Time, a Attrs, made int, until time.Time) Plan {
	m.stats.Deferred++
	a.Attempts, a.NotBefore = made, until
	return Plan{Action: Resend, Deferred: true, Send: Outgoing{Attrs: a, Delay: m.delay(until.Sub(now))}}
}

func (m *Machine) dead(a Attrs, made int, r Reason, lastErr string) Plan {
	m.stats.DeadLettered++
	a.Attempts, a.Reason, a.LastErr, a.NotBefore = made, r, lastErr, time.Time{}
	return Plan{Action: DeadLetter, Send: Outgoing{Attrs: a}}
}

// Finish decides how the message of an attempt Admit ran leaves, given its outcome at now.
// attempt and probe are the Run plan's.
func (m *Machine) Finish(now time.Time, d Delivery, attempt int, probe breaker.Probe, o Outcome) Plan {
	a := d.Attrs
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
		panic(fmt.Sprintf("qjobs: Finish with result %d", o.Result))
	}
	m.record(now, a.Target, br, probe)
	switch o.Result {
	case Success:
		m.stats.Acked++
		return Plan{Action: Ack}
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
	wait := ceilSecond(due.Sub(now))
	// The visibility set now must end within VisibilityMax of the receive.
	if now.Sub(d.ReceivedAt)+wait <= m.cfg.VisibilityMax-m.cfg.Margin {
		m.stats.Hidden++
		return Plan{Action: Hide, Visibility: wait}
	}
	m.stats.Resent++
	a.Attempts, a.NotBefore, a.LastErr = attempt, due, o.Err
	return Plan{Action: Resend, Send: Outgoing{Attrs: a, Delay: m.delay(due.Sub(now))}}
}

// Abandon gives back the probe of an attempt that ended without an outcome (its lease was
// lost, or the process is stopping); the queue redelivers the message.
func (m *Machine) Abandon(target string, probe breaker.Probe) {
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

// delay is d in whole seconds (rounded up), within [0, DelayMax].
func (m *Machine) delay(d time.Duration) time.Duration {
	return min(max(0, ceilSecond(d)), m.cfg.DelayMax/time.Second*time.Second)
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

// Stats returns a copy of the counters.
func (m *Machine) Stats() Stats { return m.stats }

// CheckInvariants checks every breaker's invariants, in target order.
func (m *Machine) CheckInvariants() error {
	for _, t := range m.Targets() {
		if err := m.breakers[t].CheckInvariants(); err != nil {
			return fmt.Errorf("qjobs: target %q: %w", t, err)
		}
	}
	return nil
}
