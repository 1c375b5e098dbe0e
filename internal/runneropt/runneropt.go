// Package runneropt holds the runner's internal seams, kept out of the public sluice.Config:
// the root package's tests set Config's field, the benchmarks call sluice.SetInternalOptions.
package runneropt

import (
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/runner"
)

// Options are the seams.
type Options struct {
	// FS, when set, is where the runner opens its journal instead of the directory (no lock
	// file is taken): tests pass sim/disk with faults.
	FS core.FS
	// SyncEveryRecord turns group commit off: every command and every outcome is committed
	// on its own, and the Started records of the attempts it admits in another commit: about
	// one fsync per record. The benchmark's baseline for what group commit saves.
	SyncEveryRecord bool
	// Observe, when set, sees every input the runner's Node takes and every Ready it returns
	// (runner.NodeConfig.Observe): tests that compare executors of the Node.
	Observe func(runner.Input, *runner.Effects)
}
