package main

import "github.com/sluicehq/sluice/bench/harness"

// sluiceSystems lists sluice's own modes, first the one the ratios use.
func sluiceSystems() []harness.System { return nil }
