package sim

import "testing"

func init() { firedElsewhere[InvMisuseRefused] = "TestMisuseRefusedFires" }

// TestMisuseRefusedFires plants a probe that makes a legitimate call and expects it refused:
// the machine takes it, and the misuse invariant reports so.
func TestMisuseRefusedFires(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		res, err := Run(Options{Seed: seed, Profile: "calm", mutation: mutProbeTakes})
		if err != nil {
			t.Fatal(err)
		}
		if res.Violation != nil && res.Violation.Invariant == InvMisuseRefused {
			return
		}
	}
	t.Fatal("no seed in 1..20 broke misuse-refused with a probe that expects a legitimate Tick refused")
}
