// Package runnerkit is the part of a sluice.Runner that does not depend on how its host is
// executed: the engine's configuration made from a sluice.Config (defaults, AgeMax, the
// policy), the attempt pipeline (middleware, the handler, panic capture) and the hooks.
// Package sluice builds a Kit for its own owner goroutine and, through sluice.NewRunnerKit,
// for sluicetest's simulated runner, so the two run a user's Config the same way and neither
// copies the other.
package runnerkit

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/core/runner"
)

// Kit is one runner's executor-independent parts.
type Kit struct {
	// Engine is the engine's configuration, defaults filled and checked as Open does.
	Engine runner.Config
	// Attempt runs the handler of a through the middleware and returns its error (a panic in
	// either is a *sluice.PanicError); internal/outcome.Runner makes the engine's outcome.
	Attempt func(ctx context.Context, a runner.Attempt) error
	// Started reports an attempt the executor starts at now (OnAttemptStarted).
	Started func(a runner.Attempt, now time.Time)
	// Durable reports what a Ready made durable, as the executor performs it: the landed batch
	// (OnCommitted, timed to now), the attempts' ends and deferrals (OnAttemptEnded,
	// OnDeferred) and the settled jobs (OnSettled).
	Durable func(rd runner.Effects, now time.Time)
	// Kind is the kind the kit's jobs carry (Opts.Kind): "" unless kind options registered it.
	Kind string
	// Context is the context a's handler runs under, as every executor builds it: parent,
	// ended by the returned cancel, and by a.Timeout (when set) with its cause, on the
	// executor's timer after (which returns a stop that the cancel calls).
	Context func(parent context.Context, timeout time.Duration, after func(d time.Duration, fire func()) (stop func())) (context.Context, context.CancelCauseFunc)
	// JobOpts applies the options of a job of payload (the kit's payload type) as the kit's
	// Kind.Enqueue does: the kind's name, the key of WithKeyFunc, opts (a []sluice.JobOption,
	// which this package cannot name), Hold for a sequence of a kind registered
	// WithHoldOnDead; an option refused is the error Enqueue returns.
	JobOpts func(payload, opts any) (runner.Opts, error)
}
