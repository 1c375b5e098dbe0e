// Package runnermut plants deliberate defects in core/runner, so that the simulator's tests
// can show its checkers catch them. Production code never sets them; users cannot reach them.
package runnermut

// SplitFiring, installed by core/runner, makes the engine opened with cfg (a *runner.Config)
// write the ScheduleFired records of a commit in a batch of their own, after the batch holding
// their jobs, calling between once the first batch is durable: the defect the one-batch rule
// of periodic jobs exists to prevent.
var SplitFiring func(cfg any, between func())
