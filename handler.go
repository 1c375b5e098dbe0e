package sluice

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/outcome"
)

// Job is what a handler receives for one attempt.
type Job[A any] struct {
	// ID is the id Enqueue returned: never 0, and the same on every attempt and delivery of
	// the job, on the local runner and the queue runner alike (Runner.Retry keeps it too).
	// Key the side effects a handler asks of other services by it, not by Attempt, so that a
	// second run of the job (after a crash, a lost lease, a retry) repeats the same key:
	// fmt.Sprintf("billing-%s-%d", job.Kind, job.ID). Ids are unique within one runner's
	// directory or queue only, and a new directory counts from 1 again: let the prefix name
	// the directory or queue. docs/concepts.md says more.
	ID      uint64
	Kind    string // the kind's name (Register)
	Target  string
	Attempt int       // 1 for the first attempt
	Due     time.Time // the job's first due time (the start of its retry deadline)
	Payload A
}

// Handler runs one attempt of a job and returns what became of it, as an error (see
// docs/results.md): nil succeeds; Permanent(err) fails for good; RetryAfter(err, d) retries
// after d; Snooze(d) runs it again after d without spending an attempt; any other error is
// retried per the Policy. Its context is cancelled when the
// runner shuts down (after the grace period) and when the job is cancelled; the result of a
// cancelled job is ignored. A panic is recovered and recorded as a non-retryable failure
// (a *PanicError).
type Handler[A any] func(ctx context.Context, job Job[A]) error

// The wrappers a handler (or a middleware) returns to say more than "retry": every one wraps
// an error, which errors.Is and errors.As see through. A nil err is replaced by one saying a
// failure came without an error, never read as success.
type (
	// PermanentError is a failure that retrying cannot fix (Permanent).
	PermanentError = outcome.PermanentError
	// RetryAfterError is a retryable failure with the wait before the next try (RetryAfter).
	RetryAfterError = outcome.RetryAfterError
	// DeadLetterError sends a worker's message to the dead-letter queue (DeadLetter).
	DeadLetterError = outcome.DeadLetterError
	// SnoozeError moves a job's due time without spending an attempt (Snooze).
	SnoozeError = outcome.SnoozeError
	// PanicError is the error recorded for a handler or a middleware that panicked.
	PanicError = outcome.PanicError
)

// Permanent wraps err as a failure no retry can fix: the runner makes the job dead (reason
// permanent); the worker deletes the message, or dead-letters it with a redrive policy.
func Permanent(err error) error { return outcome.Permanent(err) }

// RetryAfter wraps err as a retryable failure whose next try comes after d (a server's
// Retry-After), instead of the policy's backoff: the runner caps d at Policy.Cap and still
// counts the attempt; the worker makes the message visible again after d (whole seconds).
func RetryAfter(err error, d time.Duration) error { return outcome.RetryAfter(err, d) }

// DeadLetter wraps err so that a worker hides the message for 300 s for the queue's redrive
// policy to move it to the dead-letter queue. The runner keeps dead jobs itself: there it is
// Permanent.
func DeadLetter(err error) error { return outcome.DeadLetter(err) }

// Snooze asks to run the job again after d without spending an attempt (River's JobSnooze):
// the runner journals the attempt as snoozed, not counted and not judged by the target's
// breaker, and the job is due again at now+d (its retry deadline still counts from its first
// due). The worker makes the message visible again after d (whole seconds), and the queue
// counts the redelivery against the receive budget; the queue runner retries the job after
// d, as RetryAfter does.
func Snooze(d time.Duration) error { return outcome.Snooze(d) }

// OutcomeName is the word hooks, logs and metrics use for a handler's returned error:
// "succeeded" (nil), "retry", "permanent", "panicked", "deadletter" or "snoozed".
func OutcomeName(err error) string {
	k, _ := outcome.Of(err)
	return k.String()
}
