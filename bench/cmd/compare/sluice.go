package main

import (
	"github.com/sluicehq/sluice/bench/harness"
	"github.com/sluicehq/sluice/bench/systems"
)

// sluiceSystems lists sluice's own modes, first the one the ratios use.
func sluiceSystems() []harness.System {
	return []harness.System{systems.Sluice{GroupCommit: true}, systems.Sluice{GroupCommit: false}}
}
