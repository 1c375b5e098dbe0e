package breaker

import (
	"errors"
	"fmt"
	"time"
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

// DefaultCircuit is SPEC 2.3's default: 5 failures in 30s open for 30s, 1 probe.
func DefaultCircuit() Circuit {
	return Circuit{Threshold: 5, Window: 30 * time.Second, Cooldown: 30 * time.Second, Probes: 1}
}

// Validate reports the first field out of range, naming it.
func (c Circuit) Validate() error {
	switch {
	case c.Threshold < 1:
		return fmt.Errorf("%w: Threshold must be ≥ 1, got %d", ErrInvalid, c.Threshold)
	case c.Window <= 0:
		return fmt.Errorf("%w: Window must be > 0, got %v", ErrInvalid, c.Window)
	case c.Cooldown <= 0:
		return fmt.Errorf("%w: Cooldown must be > 0, got %v", ErrInvalid, c.Cooldown)
	case c.Probes < 1:
		return fmt.Errorf("%w: Probes must be ≥ 1, got %d", ErrInvalid, c.Probes)
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
}

// New returns a closed breaker. It panics on an invalid circuit (validate configs first).
func New(c Circuit) *Breaker { return NewAfter(c, 0) }

// NewAfter returns a closed breaker whose half-open phases are numbered after phase, so that
// no probe admitted by a breaker its owner forgot (see Idle) is ever current in this one.
func NewAfter(c Circuit, phase uint64) *Breaker {
	if err := c.Validate(); err != nil {
		panic(err)
	}
	return &Breaker{c: c, phase: phase}
}

// Idle reports whether the breaker would decide everything from now on exactly as a new one:
// it is Closed and every failure it remembers is older than the Window. Its owner may then
// forget it, and later make a new one with NewAfter(c, Phase()), which keeps memory bounded by
// the targets that failed recently rather than every target ever seen.
func (b *Breaker) Idle(now time.Time) bool {
	if b.state != Closed {
		return false
	}
	n := len(b.failures)
	return n == 0 || b.failures[n-1].Before(now.Add(-b.c.Window))
}

// Phase returns the number of the latest half-open phase (0 before the first).
func (b *Breaker) Phase() uint64 { return b.phase }

// State returns the current state without advancing it.
func (b *Breaker) State() State { return b.state }

// Until returns when an open circuit may half-open (zero unless Open).
func (b *Breaker) Until() time.Time {
	if b.state != Open {
		return time.Time{}
	}
	return b.until
}

// InFlight returns the probes in flight (HalfOpen only).
func (b *Breaker) InFlight() int { return b.inFlight }

// Admit asks whether an attempt may start at now.
func (b *Breaker) Admit(now time.Time) Decision {
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

// Record feeds the outcome of an admitted attempt that ended at now.
func (b *Breaker) Record(now time.Time, r Result, p Probe) {
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

// Release gives back a probe that ended without an outcome.
func (b *Breaker) Release(p Probe) {
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

// checkInvariants states the invariants of the Breaker type in code.
func (b *Breaker) checkInvariants() error {
	switch b.state {
	case Closed:
		if len(b.failures) >= b.c.Threshold {
			return fmt.Errorf("breaker: closed with %d failures ≥ threshold %d", len(b.failures), b.c.Threshold)
		}
		for i := 1; i < len(b.failures); i++ {
			if b.failures[i].Before(b.failures[i-1]) {
				return fmt.Errorf("breaker: failure times not ascending at %d", i)
			}
		}
		if b.inFlight != 0 {
			return fmt.Errorf("breaker: closed with %d probes in flight", b.inFlight)
		}
	case Open:
		if b.until.IsZero() || len(b.failures) != 0 || b.inFlight != 0 {
			return fmt.Errorf("breaker: open with until=%v failures=%d inFlight=%d", b.until, len(b.failures), b.inFlight)
		}
	case HalfOpen:
		if b.inFlight < 0 || b.inFlight > b.c.Probes {
			return fmt.Errorf("breaker: half-open with %d probes in flight, max %d", b.inFlight, b.c.Probes)
		}
	default:
		return fmt.Errorf("breaker: unknown state %d", b.state)
	}
	return nil
}

// CheckInvariants is checkInvariants for other packages' checkers.
func (b *Breaker) CheckInvariants() error { return b.checkInvariants() }
