package sim

import (
	"testing"
)

// Swarm nodes draw the journal's preallocation (off on one node in four, else 64 to 8,255
// bytes), and crashes leave journals ending in spare zeros that recovery keeps; every such
// run passes every invariant (no acknowledged job lost, replay equals live).
func TestSwarmCrashesKeepPreallocatedSpareAndLoseNothing(t *testing.T) {
	spare, off, on := 0, 0, 0
	for seed := int64(1); seed <= 8; seed++ {
		cfg, err := NewConfig(seed, "swarm")
		if err != nil {
			t.Fatal(err)
		}
		w := newWorld(cfg, nil)
		w.run()
		if v := w.chk.Violation(); v != nil {
			t.Fatalf("seed %d: %v", seed, v)
		}
		spare += w.st.Faults.Get("spare-kept")
		for _, n := range w.nodes {
			if n.cfg.PreallocBytes < 0 {
				off++
			} else {
				on++
			}
		}
	}
	if spare == 0 || off == 0 || on == 0 {
		t.Errorf("8 swarm seeds: %d recoveries kept spare zeros, %d nodes without preallocation, %d with", spare, off, on)
	}
}
