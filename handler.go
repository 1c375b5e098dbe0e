package sluice

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// Job is what a handler receives for one attempt.
type Job[A any] struct {
	ID      uint64
	Kind    string // the kind's name (Register)
	Target  string
	Attempt int       // 1 for the first attempt
	Due     time.Time // the job's first due time (the start of its retry deadline)
	Payload A
}

// Handler runs one attempt of a job. Its context is cancelled when the runner shuts down (after
// the grace period) and when the job is cancelled; the outcome of a cancelled job is ignored.
// A panic is recovered and recorded as a non-retryable failure (Panicked).
type Handler[A any] func(ctx context.Context, job Job[A]) Outcome

// OutcomeKind says how an attempt ended (docs/runner.md).
type OutcomeKind uint8

const (
	// KindSucceeded: the job is done.
	KindSucceeded OutcomeKind = iota + 1
	// KindFailed: the attempt failed; Retryable says whether the policy may try again.
	KindFailed
	// KindPanicked: the handler panicked; treated as a non-retryable failure.
	KindPanicked
)

func (k OutcomeKind) String() string {
	switch k {
	case KindSucceeded:
		return "succeeded"
	case KindFailed:
		return "failed"
	case KindPanicked:
		return "panicked"
	}
	return fmt.Sprintf("OutcomeKind(%d)", uint8(k))
}

// Outcome is how one attempt ended. Build it with Succeeded, Failed, FailedAfter or OutcomeOf;
// the zero Outcome is invalid and is recorded as a non-retryable failure.
type Outcome struct {
	Kind      OutcomeKind
	Err       error          // the failure (KindFailed, KindPanicked)
	Retryable bool           // KindFailed only
	After     *time.Duration // a server-requested wait (Retry-After); replaces the jittered backoff, capped at Policy.Cap
}

// Succeeded reports a successful attempt.
func Succeeded() Outcome { return Outcome{Kind: KindSucceeded} }

// Failed reports a failed attempt. A retryable failure is retried per the Policy and counts
// against the target's breaker; a non-retryable one makes the job dead at once. A nil err is
// recorded as a failure saying so, never as a success.
func Failed(err error, retryable bool) Outcome {
	if err == nil {
		err = errNilFailure
	}
	return Outcome{Kind: KindFailed, Err: err, Retryable: retryable}
}

// FailedAfter reports a retryable failure whose server asked to wait after before the next try.
func FailedAfter(err error, after time.Duration) Outcome {
	o := Failed(err, true)
	if after < 0 {
		after = 0
	}
	o.After = &after
	return o
}

// OutcomeOf maps an error to an outcome: nil succeeds, an error wrapping a *PermanentError
// fails for good, anything else is a retryable failure.
func OutcomeOf(err error) Outcome {
	if err == nil {
		return Succeeded()
	}
	var pe *PermanentError
	if errors.As(err, &pe) {
		return Failed(err, false)
	}
	return Failed(err, true)
}

// PermanentError marks an error that retrying cannot fix (see OutcomeOf).
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so that OutcomeOf reports a non-retryable failure.
func Permanent(err error) error { return &PermanentError{Err: err} }

// PanicError is the error recorded for a handler that panicked.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("sluice: handler panicked: %v", e.Value) }

// runHandler calls h and turns a panic into a Panicked outcome and a zero Outcome into a
// non-retryable failure.
func runHandler[A any](ctx context.Context, h Handler[A], job Job[A]) (out Outcome) {
	defer func() {
		if v := recover(); v != nil {
			out = Outcome{Kind: KindPanicked, Err: &PanicError{Value: v, Stack: debug.Stack()}}
		}
	}()
	out = h(ctx, job)
	switch out.Kind {
	case KindSucceeded, KindPanicked:
	case KindFailed:
		if out.Err == nil {
			out.Err = errNilFailure
		}
	default:
		out = Outcome{Kind: KindFailed, Err: fmt.Errorf("sluice: handler returned an invalid outcome (kind %d)", out.Kind)}
	}
	return out
}
