package breaker

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/core"
)

// ErrInvalid is wrapped by every Validate error.
var ErrInvalid = errors.New("breaker: invalid circuit")

// Circuit configures a breaker.
type Circuit struct {
	Threshold int           // counted failures within Window that open the circuit; ≥ 1
	Window    time.Duration // how long a failure is remembered; > 0
	Cooldown  time.Duration // how long the circuit stays open; > 0
	Probes    int           // attempts admitted at once while half-open; ≥ 1
}

// DefaultCircuit is docs/runner.md's default: 5 failures in 30s open for 30s, 1 probe.
func DefaultCircuit() Circuit {
	return Circuit{Threshold: 5, Window: 30 * time.Second, Cooldown: 30 * time.Second, Probes: 1}
}

// WithDefaults returns c with each zero field set to DefaultCircuit's.
func (c Circuit) WithDefaults() Circuit {
	d := DefaultCircuit()
	if c.Threshold == 0 {
		c.Threshold = d.Threshold
	}
	if c.Window == 0 {
		c.Window = d.Window
	}
	if c.Cooldown == 0 {
		c.Cooldown = d.Cooldown
	}
	if c.Probes == 0 {
		c.Probes = d.Probes
	}
	return c
}

// FieldError is the error Validate returns, naming the field (Err is ErrInvalid).
type FieldError = core.FieldError

// Validate reports the first field out of range, naming it (a *FieldError).
func (c Circuit) Validate() error {
	switch {
	case c.Threshold < 1:
		return &FieldError{Err: ErrInvalid, Field: "Threshold", Value: c.Threshold, Rule: "must be ≥ 1"}
	case c.Window <= 0:
		return &FieldError{Err: ErrInvalid, Field: "Window", Value: c.Window, Rule: "must be > 0"}
	case c.Cooldown <= 0:
		return &FieldError{Err: ErrInvalid, Field: "Cooldown", Value: c.Cooldown, Rule: "must be > 0"}
	case c.Probes < 1:
		return &FieldError{Err: ErrInvalid, Field: "Probes", Value: c.Probes, Rule: "must be ≥ 1"}
	}
	return nil
}

// State is the circuit's state.
type State uint8

const (
	Closed State = iota
	Open
	HalfOpen
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Result is how an attempt ended, as far as the breaker cares.
type Result uint8

const (
	Success Result = iota + 1
	RetryableFailure
	PermanentFailure
	Panic
)

// Counts reports whether r counts as a failure of the target (rule 5).
func (r Result) Counts() bool { return r == RetryableFailure || r == Panic }

// Probe names the half-open phase an attempt was admitted as a probe in; 0 means not a probe.
type Probe uint64

// Verdict is Admit's answer.
type Verdict uint8

const (
	Refused Verdict = iota + 1
	Normal
	AsProbe
)

func (v Verdict) String() string {
	switch v {
	case Refused:
		return "refused"
	case Normal:
		return "normal"
	case AsProbe:
		return "probe"
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// Decision is the result of Admit.
type Decision struct {
	Verdict Verdict
	Until   time.Time // Refused: when to ask again (always after now)
	Probe   Probe     // AsProbe: pass back to Record or Release
}

// Config configures a Breaker.
type Config struct {
	Circuit Circuit
	// PhaseAfter numbers the breaker's half-open phases after it, so that no probe admitted by
	// a breaker its owner forgot (see Idle) is ever current in this one. 0 for a first breaker.
	PhaseAfter uint64
}

// Event is the sealed set of inputs to Breaker.Step.
type Event interface{ isEvent() }

// Admit asks whether an attempt may start at Now; Ready().Decision answers.
type Admit struct{ Now time.Time }

// Record feeds the outcome of an admitted attempt that ended at Now.
type Record struct {
	Now    time.Time
	Result Result
	Probe  Probe
}

// Release gives back a probe that ended without an outcome (rule 6).
type Release struct{ Probe Probe }

func (Admit) isEvent()   {}
func (Record) isEvent()  {}
func (Release) isEvent() {}

// Ready is the answer to the last Admit (nil if none since the last Ready); it counts as done
// once read.
type Ready struct {
	Decision *Decision
}

// Status is a read-only copy of the breaker's state.
type Status struct {
	State    State
	Until    time.Time // Open: when it may half-open; zero otherwise
	InFlight int       // HalfOpen: probes in flight
	Phase    uint64    // the latest half-open phase (0 before the first)
	Failures int       // Closed: failures remembered within the Window
}

// Breaker is one target's circuit.
type Breaker struct {
	c     Circuit
	state State
	// Invariant (Closed): ascending, len < Threshold.
	failures []time.Time
	// Invariant (Open): non-zero.
	until time.Time
	// Invariant (HalfOpen): 0 ≤ inFlight ≤ Probes.
	inFlight int
	// phase numbers half-open phases; a probe is current only when its Probe equals it.
	phase uint64
	ready Ready
}

// New returns a closed breaker, or an error naming the first bad field of the circuit.
func New(cfg Config) (*Breaker, error) {
	if err := cfg.Circuit.Validate(); err != nil {
		return nil, err
	}
	return &Breaker{c: cfg.Circuit, phase: cfg.PhaseAfter}, nil
}

// Step applies one event.
func (b *Breaker) Step(ev Event) {
	switch ev := ev.(type) {
	case Admit:
		d := b.admit(ev.Now)
		b.ready.Decision = &d
	case Record:
		b.record(ev.Now, ev.Result, ev.Probe)
	case Release:
		b.release(ev.Probe)
	default:
		panic(fmt.Sprintf("breaker: unknown event %T", ev))
	}
}

// Ready returns the answer to the last Admit and resets it.
func (b *Breaker) Ready() Ready {
	rd := b.ready
	b.ready = Ready{}
	return rd
}

// WakeAt is when an open circuit may half-open; zero unless Open.
func (b *Breaker) WakeAt() time.Time {
	if b.state != Open {
		return time.Time{}
	}
	return b.until
}

// Status returns a copy of the state without advancing it.
func (b *Breaker) Status() Status {
	return Status{State: b.state, Until: b.WakeAt(), InFlight: b.inFlight, Phase: b.phase, Failures: len(b.failures)}
}

// Idle reports whether the breaker would decide everything from now on exactly as a new one:
// it is Closed and every failure it remembers is older than the Window. Its owner may then
// forget it, and later make a new one with PhaseAfter: Status().Phase, which keeps memory
// bounded by the targets that failed recently rather than every target ever seen.
func (b *Breaker) Idle(now time.Time) bool {
	if b.state != Closed {
		return false
	}
	n := len(b.failures)
	return n == 0 || b.failures[n-1].Before(now.Add(-b.c.Window))
}

func (b *Breaker) admit(now time.Time) Decision {
	switch b.state {
	case Closed:
		return Decision{Verdict: Normal}
	case Open:
		if now.Before(b.until) {
			return Decision{Verdict: Refused, Until: b.until}
		}
		b.becomeHalfOpen()
	}
	if b.inFlight < b.c.Probes {
		b.inFlight++
		return Decision{Verdict: AsProbe, Probe: Probe(b.phase)}
	}
	return Decision{Verdict: Refused, Until: now.Add(b.c.Cooldown)}
}

func (b *Breaker) record(now time.Time, r Result, p Probe) {
	switch b.state {
	case Closed:
		if !r.Counts() {
			b.failures = b.failures[:0]
			return
		}
		b.failures = append(b.failures, now)
		cut := now.Add(-b.c.Window)
		i := 0
		for i < len(b.failures) && b.failures[i].Before(cut) {
			i++
		}
		b.failures = append(b.failures[:0], b.failures[i:]...)
		if len(b.failures) >= b.c.Threshold {
			b.becomeOpen(now)
		}
	case HalfOpen:
		if !b.current(p) {
			return
		}
		b.inFlight--
		if r.Counts() {
			b.becomeOpen(now)
		} else {
			b.becomeClosed()
		}
	}
}

func (b *Breaker) release(p Probe) {
	if b.state == HalfOpen && b.current(p) {
		b.inFlight--
	}
}

func (b *Breaker) current(p Probe) bool { return p != 0 && uint64(p) == b.phase }

func (b *Breaker) becomeOpen(now time.Time) {
	b.state, b.until, b.inFlight = Open, now.Add(b.c.Cooldown), 0
	b.failures = b.failures[:0]
}

func (b *Breaker) becomeHalfOpen() {
	b.phase++
	b.state, b.until, b.inFlight = HalfOpen, time.Time{}, 0
}

func (b *Breaker) becomeClosed() {
	b.state, b.inFlight = Closed, 0
	b.failures = b.failures[:0]
}

// checkInvariants states the invariants of the Breaker type in code: closed with fewer failures
// than the threshold, in ascending time order, and no probe; open with a reopen time and nothing
// else; half-open with at most Probes probes. One report shows the whole state, whichever broke.
func (b *Breaker) checkInvariants() error {
	ascending := true
	for i := 1; i < len(b.failures); i++ {
		ascending = ascending && !b.failures[i].Before(b.failures[i-1])
	}
	var ok bool
	switch b.state {
	case Closed:
		ok = len(b.failures) < b.c.Threshold && ascending && b.inFlight == 0
	case Open:
		ok = !b.until.IsZero() && len(b.failures) == 0 && b.inFlight == 0
	case HalfOpen:
		ok = b.inFlight >= 0 && b.inFlight <= b.c.Probes
	}
	if !ok {
		return fmt.Errorf("breaker: %v with %d failures (ascending %v, threshold %d), %d probes in flight (max %d), until %v",
			b.state, len(b.failures), ascending, b.c.Threshold, b.inFlight, b.c.Probes, b.until)
	}
	return nil
}

// CheckInvariants is checkInvariants for other packages' checkers.
func (b *Breaker) CheckInvariants() error { return b.checkInvariants() }
