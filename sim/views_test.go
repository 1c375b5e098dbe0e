package sim

import "testing"

// The views built from the engine's jobs, reusing unchanged views and two buffers per node,
// equal the views of a full snapshot after every commit (liveViews panics otherwise: a fault).
func TestLiveViewsEqualSnapshotViews(t *testing.T) {
	verifyViews.Store(true)
	defer verifyViews.Store(false)
	for _, p := range []string{"swarm", "disk", "calm"} {
		for seed := int64(1); seed <= 15; seed++ {
			res, err := Run(Options{Seed: seed, Profile: p})
			if err != nil {
				t.Fatal(err)
			}
			if res.Fault != "" {
				t.Fatalf("seed %d %s: %s", seed, p, res.Fault)
			}
		}
	}
}

// CheckWorker's kept receipt models are the ones a lookup finds, at every check (it panics
// otherwise: a fault), over the worker-heavy profiles.
func TestOpenSeenEqualsLookup(t *testing.T) {
	verifyOpenSeen.Store(true)
	defer verifyOpenSeen.Store(false)
	for _, p := range []string{"swarm", "network", "fleet"} {
		for seed := int64(1); seed <= 40; seed++ {
			res, err := Run(Options{Seed: seed, Profile: p})
			if err != nil {
				t.Fatal(err)
			}
			if res.Fault != "" {
				t.Fatalf("seed %d %s: %s", seed, p, res.Fault)
			}
		}
	}
}

// The checker's per-node job index finds the job the map holds at every lookup (c.job panics
// otherwise: a fault), over profiles with crashes, recoveries and compactions.
func TestJobIndexEqualsMap(t *testing.T) {
	verifyJobIndex.Store(true)
	defer verifyJobIndex.Store(false)
	for _, p := range []string{"swarm", "disk", "calm"} {
		for seed := int64(1); seed <= 30; seed++ {
			res, err := Run(Options{Seed: seed, Profile: p})
			if err != nil {
				t.Fatal(err)
			}
			if res.Fault != "" {
				t.Fatalf("seed %d %s: %s", seed, p, res.Fault)
			}
		}
	}
}
