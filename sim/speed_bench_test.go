package sim

import (
	"testing"
)

// BenchmarkSweep runs the default sweep's seeds one after another on one goroutine (the swarm
// profile, every invariant on), as simrun --count does per worker. One op is one seed.
func BenchmarkSweep(b *testing.B) {
	seed := int64(1)
	for b.Loop() {
		res, err := Run(Options{Seed: seed})
		if err != nil {
			b.Fatal(err)
		}
		if res.Violation != nil || res.Fault != "" {
			b.Fatalf("seed %d: %v %s", seed, res.Violation, res.Fault)
		}
		seed++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "seeds/s")
}
