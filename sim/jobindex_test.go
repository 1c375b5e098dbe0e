package sim

import (
	"fmt"
	"slices"
	"testing"
)

// indexAgrees reports where node n's job index (byID) disagrees with the checker's map.
func (c *Checker) indexAgrees(n *nodeModel) error {
	for id, j := range n.byID {
		if m := c.jobs[jobKey{n.id, uint64(id)}]; j != m {
			return fmt.Errorf("node %d: the job index holds %p for id %d, the map %p", n.id, j, id, m)
		}
	}
	if !n.overflow && !slices.Equal(n.indexedKeys(), c.jobKeysOf(n.id)) {
		return fmt.Errorf("node %d: the job index lists %v, the map %v", n.id, n.indexedKeys(), c.jobKeysOf(n.id))
	}
	return nil
}

// TestJobIndexAgreesWithMap: after runs with crashes, recoveries and compactions, every
// node's job index holds exactly the jobs the checker's map holds, id by id.
func TestJobIndexAgreesWithMap(t *testing.T) {
	indexed := 0
	for _, profile := range []string{"swarm", "disk"} {
		for seed := int64(1); seed <= 8; seed++ {
			cfg, err := NewConfig(seed, profile)
			if err != nil {
				t.Fatal(err)
			}
			w := newWorld(cfg, nil)
			w.run()
			for id := range cfg.Nodes {
				n := w.chk.nodes[id+1]
				if n == nil {
					continue
				}
				indexed += len(n.byID)
				if err := w.chk.indexAgrees(n); err != nil {
					t.Errorf("seed %d %s: %v", seed, profile, err)
				}
			}
		}
	}
	if indexed < 100 {
		t.Fatalf("the runs indexed %d ids: the test checks nothing", indexed)
	}
}
