package sluice

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/internal/runnerkit"
)

// NewRunnerKit is exported for package sluicetest and is of no use to a program. sluicetest
// executes a runner's host in a simulated world, and with it runs cfg as a Runner does: the
// engine's configuration with its defaults (AgeMax included), handler through cfg.Middleware
// with panics recovered, and every hook of cfg. kind names the handler's jobs (Job.Kind).
// The type it returns is internal: its fields are what the simulated executor calls. Kind
// options (WithConcurrency, WithRate, WithAttemptTimeout...) register kind, which must then be
// named, with them; the kit's jobs carry it (Kit.Kind), and Kit.JobOpts applies a job's
// options as Kind.Enqueue does.
func NewRunnerKit[A any](cfg Config, kind string, handler Handler[A], opts ...KindOption) (runnerkit.Kit, error) {
	if handler == nil {
		return runnerkit.Kit{}, errors.New("sluice: NewRunnerKit: the handler is nil")
	}
	cfg, ecfg, err := cfg.withDefaults()
	if err != nil {
		return runnerkit.Kit{}, err
	}
	var s kindSettings
	for _, o := range opts {
		o(&s)
	}
	if s.err != nil {
		return runnerkit.Kit{}, fmt.Errorf("sluice: NewRunnerKit %s: %w", runner.QuoteCut(kind), s.err)
	}
	keyOf, err := keyFuncOf[A](s.flow)
	if err != nil {
		return runnerkit.Kit{}, fmt.Errorf("sluice: NewRunnerKit %s: %w", runner.QuoteCut(kind), err)
	}
	jobKind := ""
	if len(opts) > 0 {
		if err := runner.CheckName("kind name", kind, true); err != nil {
			return runnerkit.Kit{}, fmt.Errorf("sluice: NewRunnerKit: %w: kind options need a kind's name", err)
		}
		f := s.flow
		ecfg.Kinds = append(ecfg.Kinds, runner.KindConfig{Name: kind, Limit: s.limit, Rate: f.rate.core(),
			KeyRate: f.keyRate.core(), KeyLimit: f.keyLimit, Fair: f.fair, Timeout: f.timeout})
		jobKind = kind
	}
	k := kindEntry{name: kind, start: startOf(kind, handler)}
	mws := chain(cfg.Middleware, innerCall)
	return runnerkit.Kit{
		Engine:  ecfg,
		Attempt: func(ctx context.Context, a runner.Attempt) error { return runAttempt(ctx, mws, k, a) },
		Started: func(a runner.Attempt, now time.Time) { cfg.OnAttemptStarted(attemptStarted(a, now)) },
		Durable: func(rd runner.Effects, now time.Time) { reportDurable(&cfg, rd, now) },
		Kind:    jobKind,
		Context: attemptContext,
		JobOpts: func(payload, v any) (runner.Opts, error) {
			opts, ok := v.([]JobOption)
			if !ok && v != nil {
				return runner.Opts{}, fmt.Errorf("sluice: NewRunnerKit: a job's options are a []sluice.JobOption, not %T", v)
			}
			p, _ := payload.(A) // the kit's own payloads: A, or nil for an interface A
			js, err := kindJobOpts(jobKind, s.flow.hold, keyedBy(keyOf, p, opts))
			return js.o, err
		},
	}, nil
}
