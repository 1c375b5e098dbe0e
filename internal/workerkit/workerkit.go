// Package workerkit is the part of a sluice.Worker that does not depend on how it is executed:
// the machine's configuration made from a WorkerConfig, the handler call (middleware, panic
// capture, the mapping of the error it returns), the cause a cancelled handler's context
// reports, and the hooks. Package sluice builds the Kit for its own Worker and, through
// sluice.NewWorkerKit, for sluicetest's simulated worker, so neither copies the other.
package workerkit

import (
	"context"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/lease"
	"github.com/sluicehq/sluice/core/worker"
)

// Kit is one worker's executor-independent parts.
type Kit struct {
	// Config is the machine's configuration, as NewWorker makes it (defaults, the policy,
	// the decoder, the logger, the jitter seeded from WorkerConfig.Seed).
	Config worker.Config
	// Handle runs the handler for msg through the middleware; a panic is a permanent
	// failure.
	Handle func(ctx context.Context, msg core.Message) worker.Result
	// Cause is the context cause of a handler cancelled because its lease ended for reason.
	Cause func(reason lease.DropReason) error
	// Observe reports a Ready's lease effects to the hooks (OnDropped, OnRenewed, OnDisposed)
	// as the executor performs them.
	Observe func(rd worker.Ready)
	// Received reports the deliveries a receive returned to the OnReceived hook.
	Received func(msgs []core.Message)
}
