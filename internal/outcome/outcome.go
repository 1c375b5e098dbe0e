// Package outcome is the one result vocabulary of sluice's handlers, the part that needs no
// type of package sluice: the error wrappers a handler returns (package sluice re-exports
// them), how an error is classified, the panic capture, and the translation of a handler's
// error into the runner's and the worker's machine outcomes. Package sluice and sluicetest
// both call it, so the simulated runner judges a handler's error exactly as production does.
package outcome

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/core/worker"
)

// ErrNil stands in for a nil error given to a wrapper: a failure always carries an error.
var ErrNil = errors.New("sluice: handler reported a failure without an error")

// PermanentError marks an error that retrying cannot fix.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// RetryAfterError is a retryable failure whose server asked to wait After before the next try.
type RetryAfterError struct {
	Err   error
	After time.Duration
}

func (e *RetryAfterError) Error() string { return fmt.Sprintf("retry after %v: %v", e.After, e.Err) }
func (e *RetryAfterError) Unwrap() error { return e.Err }

// SnoozeError asks to run the job again after After, without spending an attempt.
type SnoozeError struct{ After time.Duration }

func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %v", e.After) }

// DeadLetterError asks a worker to hide its message for the queue's redrive policy.
type DeadLetterError struct{ Err error }

func (e *DeadLetterError) Error() string { return "dead letter: " + e.Err.Error() }
func (e *DeadLetterError) Unwrap() error { return e.Err }

// PanicError is the error recorded for a handler (or a middleware) that panicked.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("sluice: handler panicked: %v", e.Value) }

// Permanent, RetryAfter and DeadLetter wrap err; a nil err is replaced by one saying so.
func Permanent(err error) error { return &PermanentError{Err: orNil(err)} }

func RetryAfter(err error, d time.Duration) error {
	return &RetryAfterError{Err: orNil(err), After: max(d, 0)}
}

func DeadLetter(err error) error { return &DeadLetterError{Err: orNil(err)} }

func Snooze(d time.Duration) error { return &SnoozeError{After: max(d, 0)} }

func orNil(err error) error {
	if err == nil {
		return ErrNil
	}
	return err
}

// Kind is how a handler's call ended, by the error it returned.
type Kind uint8

const (
	KindSucceeded  Kind = iota + 1 // nil
	KindRetry                      // any other error, or RetryAfter
	KindPermanent                  // Permanent
	KindPanicked                   // the handler or a middleware panicked
	KindDeadLetter                 // DeadLetter
	KindSnooze                     // Snooze
)

// Names are the words hooks and metrics use for each Kind.
func (k Kind) String() string {
	switch k {
	case KindSucceeded:
		return "succeeded"
	case KindRetry:
		return "retry"
	case KindPermanent:
		return "permanent"
	case KindPanicked:
		return "panicked"
	case KindDeadLetter:
		return "deadletter"
	case KindSnooze:
		return "snoozed"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Of classifies err; after is the wait a RetryAfter or a Snooze asked for (nil otherwise).
// A wrapper anywhere in err's chain decides, in the order panic, dead letter, permanent,
// snooze, retry-after.
func Of(err error) (k Kind, after *time.Duration) {
	if err == nil {
		return KindSucceeded, nil
	}
	var pe *PanicError
	var dl *DeadLetterError
	var pm *PermanentError
	var ra *RetryAfterError
	var sn *SnoozeError
	switch {
	case errors.As(err, &pe):
		return KindPanicked, nil
	case errors.As(err, &dl):
		return KindDeadLetter, nil
	case errors.As(err, &pm):
		return KindPermanent, nil
	case errors.As(err, &sn):
		d := sn.After
		return KindSnooze, &d
	case errors.As(err, &ra):
		d := ra.After
		return KindRetry, &d
	}
	return KindRetry, nil
}

// Call runs fn and turns a panic into a *PanicError.
func Call(ctx context.Context, fn func(context.Context) error) (err error) {
	defer Recover(&err)
	return fn(ctx)
}

// Recover, deferred, turns a panic of its caller into a *PanicError in *err.
func Recover(err *error) {
	if v := recover(); v != nil {
		*err = &PanicError{Value: v, Stack: debug.Stack()}
	}
}

// Runner is a handler's error as the runner's machine takes it. A dead letter makes the job
// dead as a permanent failure: the runner keeps dead jobs itself.
func Runner(err error) runner.Outcome {
	k, after := Of(err)
	switch k {
	case KindSucceeded:
		return runner.Success()
	case KindPanicked:
		var pe *PanicError
		errors.As(err, &pe)
		return runner.Panicked(fmt.Sprint(pe.Value))
	case KindSnooze:
		return runner.Snoozed(*after)
	case KindRetry:
		o := runner.Failure(Text(err), true)
		o.After = after
		return o
	}
	return runner.Failure(Text(err), false)
}

// Text is err's text as the journal keeps it: a wrapper of this package returned as is says
// nothing the job's reason does not, so its inner error's text is kept.
func Text(err error) string {
	for range 4 { // a wrapper in a wrapper is rare; bounded all the same
		switch e := err.(type) {
		case *PermanentError:
			err = e.Err
		case *RetryAfterError:
			err = e.Err
		case *DeadLetterError:
			err = e.Err
		default:
			return err.Error()
		}
	}
	return err.Error()
}

// Worker is a handler's error as the worker's machine takes it. A panic is a permanent
// failure; a snooze makes the message visible again after its wait (a redelivery, which the
// queue counts).
func Worker(err error) worker.Result {
	k, after := Of(err)
	switch k {
	case KindSucceeded:
		return worker.Result{Outcome: worker.Success}
	case KindRetry, KindSnooze:
		return worker.Result{Outcome: worker.Retryable, Err: err, After: after}
	case KindDeadLetter:
		return worker.Result{Outcome: worker.Terminal, Err: err}
	}
	return worker.Result{Outcome: worker.Permanent, Err: err}
}
