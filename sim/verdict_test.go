package sim

import (
	"strings"
	"testing"
)

// A run stopped by the steps max is incomplete, not ok; a panic inside the simulator is a
// fault with its stack, not a crash of the caller.
func TestVerdicts(t *testing.T) {
	res, err := Run(Options{Seed: 1, Steps: 50})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict() != VerdictIncomplete || res.OK() {
		t.Errorf("steps max run: verdict %s, want %s", res.Verdict(), VerdictIncomplete)
	}
	res, err = Run(Options{Seed: 1, mutation: mutPanic})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict() != VerdictFault || !strings.Contains(res.Fault, "planted simulator fault") || !strings.Contains(res.Fault, "runSafely") {
		t.Errorf("panicking run: verdict %s, fault %q", res.Verdict(), res.Fault)
	}
	var b strings.Builder
	if err := res.Report(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SIMULATOR FAULT seed 1", "reproduce: go run ./cmd/simrun --seed 1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

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
