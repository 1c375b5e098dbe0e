package sim_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/sluicehq/sluice/sim"
	"github.com/sluicehq/sluice/sim/explain"
)

func runBytes(t testing.TB, seed int64, profile string, trace bool) []byte {
	t.Helper()
	var b bytes.Buffer
	o := sim.Options{Seed: seed, Profile: profile}
	if trace {
		o.Trace = &b
	}
	res, err := sim.Run(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := explain.Report(res, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestSameSeedSameBytes runs seeds of every profile twice, trace included, and compares the
// output byte for byte (run it under -race too: the runs share nothing).
func TestSameSeedSameBytes(t *testing.T) {
	for _, profile := range []string{"swarm", "calm", "disk", "network", "bitflip"} {
		for _, seed := range []int64{1, 2, 42} {
			a := runBytes(t, seed, profile, true)
			b := runBytes(t, seed, profile, true)
			if !bytes.Equal(a, b) {
				t.Errorf("seed %d profile %s: two runs differ (%d vs %d bytes)", seed, profile, len(a), len(b))
			}
		}
	}
}

// TestSweep runs 200 seeds of the swarm and 25 of each pinned profile (ten times as many with
// SLUICE_LONG=1) and fails on any violation, printing each failing seed's report.
func TestSweep(t *testing.T) {
	scale := 1
	if os.Getenv("SLUICE_LONG") != "" {
		scale = 10
	}
	failed := 0
	for _, p := range []struct {
		profile string
		seeds   int
	}{{"swarm", 200}, {"calm", 25}, {"disk", 25}, {"network", 25}, {"bitflip", 25}} {
		for seed := int64(1); seed <= int64(p.seeds*scale); seed++ {
			res, err := sim.Run(sim.Options{Seed: seed, Profile: p.profile})
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK() {
				failed++
				var b bytes.Buffer
				explain.Report(res, &b)
				t.Errorf("seed %d profile %s: %v\n%s", seed, p.profile, res.Violation, b.String())
				if failed >= 3 {
					t.Fatalf("stopping after %d failing seeds", failed)
				}
			}
		}
	}
}
