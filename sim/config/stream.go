package config

import (
	"math/rand"

	"github.com/sluicehq/sluice/sim/internal/lazyrand"
)

// Stream returns the named random sub-stream of a run: its seed is FNV-1a 64 of the name mixed
// with the root seed through splitmix64. Streams are independent, so adding draws to one
// ("workload") never shifts another ("disk/1", "network").
func Stream(seed int64, name string) *rand.Rand {
	return lazyrand.New(int64(StreamSeed(seed, name))) // most streams draw little or nothing
}

// StreamSeed is the seed of Stream(seed, name), for a source that is not a *rand.Rand.
func StreamSeed(seed int64, name string) uint64 {
	return splitmix64(uint64(seed) ^ splitmix64(fnv64a(name)))
}

// splitmix64 is Steele, Lea and Flood's finaliser: a bijective mix of all 64 bits.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// fnv64a is hash/fnv's New64a sum of s, without its allocations.
func fnv64a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
