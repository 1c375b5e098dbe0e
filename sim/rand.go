package sim

import (
	"math/rand"

	"github.com/sluicehq/sluice/sim/config"
)

// Stream returns the named random sub-stream of a run (config.Stream).
func Stream(seed int64, name string) *rand.Rand { return config.Stream(seed, name) }

func streamSeed(seed int64, name string) uint64 { return config.StreamSeed(seed, name) }
