package config

import (
	"math/rand"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/core/worker"
)

// Zero means the default: a field drawn equal to its documented default is written as zero
// half the time (each field by its own draw, from the node's or worker's own stream), as a
// user relying on the default writes it. The checker keeps the drawn value, so a default
// that is not what its documentation says breaks a check.
func zeroIfDefault[T comparable](v *T, def T, r *rand.Rand) {
	if r.Intn(2) == 0 && *v == def {
		var zero T
		*v = zero
	}
}

// ZeroRunnerDefaults applies zeroIfDefault to the runner config's defaulted fields.
func ZeroRunnerDefaults(c *runner.Config, r *rand.Rand) {
	p, b := retry.DefaultPolicy(), breaker.DefaultCircuit()
	zeroIfDefault(&c.Policy.Attempts, p.Attempts, r)
	zeroIfDefault(&c.Policy.Base, p.Base, r)
	zeroIfDefault(&c.Circuit.Threshold, b.Threshold, r)
	zeroIfDefault(&c.Circuit.Window, b.Window, r)
	zeroIfDefault(&c.Circuit.Cooldown, b.Cooldown, r)
	zeroIfDefault(&c.Circuit.Probes, b.Probes, r)
	zeroIfDefault(&c.CompactBytes, runner.CompactBytesDefault, r)
	zeroIfDefault(&c.Retention, runner.RetentionDefault, r)
	zeroIfDefault(&c.Grace, runner.GraceDefault, r)
	if r.Intn(8) == 0 {
		c.Rand = nil // the engine's own fixed stream
	}
	zeroIfDefault(&c.Policy.Cap, p.Cap, r)
}

// ZeroWorkerDefaults applies zeroIfDefault to the worker config's defaulted fields.
func ZeroWorkerDefaults(c worker.Config, r *rand.Rand) worker.Config {
	if !c.WaitNone {
		zeroIfDefault(&c.Wait, min(worker.WaitDefault, (c.Window*2/3).Truncate(time.Second)), r)
	}
	zeroIfDefault(&c.Window, worker.WindowDefault, r)
	zeroIfDefault(&c.Ceiling, worker.CeilingDefault, r)
	zeroIfDefault(&c.BatchMax, core.BatchMax, r)
	zeroIfDefault(&c.Concurrency, worker.ConcurrencyDefault, r)
	zeroIfDefault(&c.Budget, worker.BudgetDefault, r)
	zeroIfDefault(&c.Grace, worker.GraceDefault, r)
	return c
}
