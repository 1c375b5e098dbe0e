package sim

import "testing"

// A perturbed run (other heap and map capacities) prints the same bytes.
func TestPerturbedRunSameDigest(t *testing.T) {
	for seed := int64(1); seed <= 5; seed++ {
		a, _ := Run(Options{Seed: seed})
		b, _ := Run(Options{Seed: seed, Perturb: true})
		if a.Digest != b.Digest {
			t.Errorf("seed %d: digest %s, perturbed %s", seed, a.Digest, b.Digest)
		}
	}
}
