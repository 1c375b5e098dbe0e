package sim

import (
	"sync/atomic"
	"testing"
)

// sweepVerifying runs seeds 1..seeds of each profile with verify set, failing on any fault (a
// verifying cache or index panics when it disagrees with the full computation: a fault).
func sweepVerifying(t *testing.T, verify *atomic.Bool, profiles []string, seeds int64) {
	t.Helper()
	verify.Store(true)
	defer verify.Store(false)
	for _, p := range profiles {
		for seed := int64(1); seed <= seeds; seed++ {
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

// The views built from the engine's jobs, reusing unchanged views and two buffers per node,
// equal the views of a full snapshot after every commit (liveViews panics otherwise: a fault).
func TestLiveViewsEqualSnapshotViews(t *testing.T) {
	sweepVerifying(t, &verifyViews, []string{"swarm", "disk", "calm"}, 15)
}

// CheckWorker's kept receipt models are the ones a lookup finds, at every check (it panics
// otherwise: a fault), over the worker-heavy profiles.
func TestOpenSeenEqualsLookup(t *testing.T) {
	sweepVerifying(t, &verifyOpenSeen, []string{"swarm", "network", "fleet"}, 40)
}

// The checker's per-node job index finds the job the map holds at every lookup (c.job panics
// otherwise: a fault), over profiles with crashes, recoveries and compactions.
func TestJobIndexEqualsMap(t *testing.T) {
	sweepVerifying(t, &verifyJobIndex, []string{"swarm", "disk", "calm"}, 30)
}
