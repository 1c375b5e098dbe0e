package sluice

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/internal/runnerkit"
)

// NewRunnerKit is exported for package sluicetest and is of no use to a program. sluicetest
// executes a runner's host in a simulated world, and with it runs cfg as a Runner does: the
// engine's configuration with its defaults (AgeMax included), handler through cfg.Middleware
// with panics recovered, and every hook of cfg. kind names the handler's jobs (Job.Kind).
// The type it returns is internal: its fields are what the simulated executor calls.
func NewRunnerKit[A any](cfg Config, kind string, handler Handler[A]) (runnerkit.Kit, error) {
	if handler == nil {
		return runnerkit.Kit{}, errors.New("sluice: NewRunnerKit: the handler is nil")
	}
	cfg, ecfg, err := cfg.withDefaults()
	if err != nil {
		return runnerkit.Kit{}, err
	}
	k := kindEntry{name: kind, start: startOf(kind, handler)}
	mws := chain(cfg.Middleware, innerCall)
	return runnerkit.Kit{
		Engine:  ecfg,
		Attempt: func(ctx context.Context, a runner.Attempt) error { return runAttempt(ctx, mws, k, a) },
		Started: func(a runner.Attempt, now time.Time) { cfg.OnAttemptStarted(attemptStarted(a, now)) },
		Durable: func(rd runner.Effects, now time.Time) { reportDurable(&cfg, rd, now) },
	}, nil
}
