package retry

import (
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/sluicehq/sluice/core"
)

// ErrInvalid is wrapped by every Validate error.
var ErrInvalid = errors.New("retry: invalid policy")

// Policy bounds how often and how late a job is retried.
type Policy struct {
	// Attempts is the total number of attempts, the first included. Invariant: ≥ 1.
	Attempts int
	// Base is the first retry's delay before jitter. Invariant: 0 < Base ≤ Cap.
	Base time.Duration
	// Cap bounds every delay and every server-requested wait.
	Cap time.Duration
	// Deadline, when > 0, is the time after the job's first due at which no attempt may start.
	Deadline time.Duration
}

// DefaultPolicy is docs/runner.md's default: 5 attempts, 1s base, 5m cap, no deadline.
func DefaultPolicy() Policy {
	return Policy{Attempts: 5, Base: time.Second, Cap: 5 * time.Minute}
}

// WithDefaults returns p with each zero field set to DefaultPolicy's (Cap to at least Base, so
// a Base set above the default Cap is not blamed on the Cap nobody set).
func (p Policy) WithDefaults() Policy {
	d := DefaultPolicy()
	if p.Attempts == 0 {
		p.Attempts = d.Attempts
	}
	if p.Base == 0 {
		p.Base = d.Base
	}
	if p.Cap == 0 {
		p.Cap = max(d.Cap, p.Base)
	}
	return p
}

// FieldError is the error Validate returns, naming the field (Err is ErrInvalid).
type FieldError = core.FieldError

// Validate reports the first field out of range, naming it (a *FieldError).
func (p Policy) Validate() error {
	switch {
	case p.Attempts < 1:
		return &FieldError{Err: ErrInvalid, Field: "Attempts", Value: p.Attempts, Rule: "must be ≥ 1"}
	case p.Base <= 0:
		return &FieldError{Err: ErrInvalid, Field: "Base", Value: p.Base, Rule: "must be > 0"}
	case p.Cap < p.Base:
		return &FieldError{Err: ErrInvalid, Field: "Cap", Value: p.Cap, Rule: fmt.Sprintf("must be ≥ Base (%v)", p.Base)}
	case p.Deadline < 0:
		return &FieldError{Err: ErrInvalid, Field: "Deadline", Value: p.Deadline, Rule: "must be ≥ 0 (0 means none)"}
	}
	return nil
}

// Delay is min(Base·2^n, Cap) for the n-th retry (n = 0 after the first failure).
// It panics on n < 0 (misuse).
func (p Policy) Delay(n int) time.Duration {
	if n < 0 {
		panic(fmt.Sprintf("retry: Delay(%d): n must be ≥ 0", n))
	}
	if p.Base <= 0 {
		return 0
	}
	// Base·2^n overflows or exceeds Cap when n ≥ the number of leading zeros of Base, or when
	// Base > Cap>>n; both are checked before shifting.
	if n >= bits.LeadingZeros64(uint64(p.Base)) || p.Base > p.Cap>>uint(n) {
		return p.Cap
	}
	return min(p.Base<<uint(n), p.Cap)
}

// Wait is the time to wait before the n-th retry: the equal-jittered delay, or after (capped
// at Cap, floored at 0) when the server asked for a wait.
func (p Policy) Wait(n int, r uint32, after *time.Duration) time.Duration {
	if after != nil {
		return max(0, min(*after, p.Cap))
	}
	d := p.Delay(n)
	h := uint64(d) / 2
	return time.Duration(h + uint64(r)%(h+1))
}

// DeadlineAt is firstDue+Deadline, and false when the policy has no deadline.
func (p Policy) DeadlineAt(firstDue time.Time) (time.Time, bool) {
	if p.Deadline <= 0 {
		return time.Time{}, false
	}
	return firstDue.Add(p.Deadline), true
}

// Late reports whether an attempt starting at t would start at or after the deadline.
func (p Policy) Late(firstDue, t time.Time) bool {
	d, ok := p.DeadlineAt(firstDue)
	return ok && !t.Before(d)
}

// Spent reports whether attempts already made use up the budget.
func (p Policy) Spent(attempts int) bool { return attempts >= p.Attempts }

// Next decides what follows a retryable failure of attempt number attempt (1-based) at now:
// Retry with the next due time, or a dead verdict (DeadSpent when the budget is used up, DeadLate when
// the retry would land at or past the deadline).
func (p Policy) Next(firstDue, now time.Time, attempt int, r uint32, after *time.Duration) (time.Time, Verdict) {
	if attempt < 1 {
		panic(fmt.Sprintf("retry: Next(attempt=%d): attempt must be ≥ 1", attempt))
	}
	if p.Spent(attempt) {
		return time.Time{}, DeadSpent
	}
	due := now.Add(p.Wait(attempt-1, r, after))
	if p.Late(firstDue, due) {
		return time.Time{}, DeadLate
	}
	return due, Retry
}

// Verdict is the admission decision for one due job.
type Verdict uint8

const (
	// NoUnit: no pool unit is free; the job is not considered now.
	NoUnit Verdict = iota + 1
	// DeadLate: the deadline has passed.
	DeadLate
	// DeadSpent: every attempt has been used.
	DeadSpent
	// Defer: the breaker refused; no attempt is counted and the unit goes back.
	Defer
	// Start: run the next attempt (Admit only).
	Start
	// Retry: the retry is scheduled at the returned due (Next only).
	Retry
)

func (v Verdict) String() string {
	switch v {
	case NoUnit:
		return "no-unit"
	case DeadLate:
		return "dead-late"
	case DeadSpent:
		return "dead-spent"
	case Defer:
		return "defer"
	case Start:
		return "start"
	case Retry:
		return "retry"
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// Candidate is what admission knows about one due job.
type Candidate struct {
	UnitFree bool // a pool unit is free
	Late     bool // Policy.Late(firstDue, now)
	Spent    bool // Policy.Spent(attempts made)
}

// Admit is docs/runner.md's admission order. breakerAdmits is called only when every earlier check
// passed (it may take a probe), and never more than once.
func Admit(c Candidate, breakerAdmits func() bool) Verdict {
	switch {
	case !c.UnitFree:
		return NoUnit
	case c.Late:
		return DeadLate
	case c.Spent:
		return DeadSpent
	case !breakerAdmits():
		return Defer
	}
	return Start
}
