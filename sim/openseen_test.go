package sim

import (
	"fmt"
	"testing"
	"time"
)

// openSeenAgrees reports a receipt model CheckWorker kept for a worker (valid while no
// Received came since) that is not the one the checker files under the receipt.
func (c *Checker) openSeenAgrees() error {
	for wk, seen := range c.openSeen {
		if c.openAt[wk] != c.received {
			continue // stale: CheckWorker looks every receipt up again
		}
		for _, ref := range seen {
			if ref.m != c.receipts[ref.r] {
				return fmt.Errorf("worker %d: the kept model of receipt %s is not the checker's", wk, ref.r)
			}
		}
	}
	return nil
}

// TestOpenSeenAgreesWithLookup: every quarter second of the safety phase of worker-heavy
// runs, the receipt models CheckWorker kept are the ones a lookup finds.
func TestOpenSeenAgreesWithLookup(t *testing.T) {
	kept := 0
	for _, profile := range []string{"network", "fleet"} {
		for seed := int64(1); seed <= 6; seed++ {
			cfg, err := NewConfig(seed, profile)
			if err != nil {
				t.Fatal(err)
			}
			w := newWorld(cfg, nil)
			var probe func()
			probe = func() {
				if err := w.chk.openSeenAgrees(); err != nil {
					t.Fatalf("seed %d %s at %s: %v", seed, profile, Offset(w.loop.Now()), err)
				}
				for wk, seen := range w.chk.openSeen {
					if w.chk.openAt[wk] == w.chk.received {
						kept += len(seen)
					}
				}
				if next := w.loop.Now() + 250*time.Millisecond; next < w.safetyEnd {
					w.loop.AtExact(next, probe)
				}
			}
			w.loop.AtExact(0, probe)
			w.run()
		}
	}
	if kept < 100 {
		t.Fatalf("the probes saw %d kept models: the test checks nothing", kept)
	}
}
