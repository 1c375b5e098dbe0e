package sim

import (
	"testing"
	"time"
)

// Every seed of every profile draws a valid configuration, and the profiles pin what they say.
func TestNewConfigValidAndPinned(t *testing.T) {
	for _, profile := range []string{"swarm", "calm", "disk", "network", "bitflip"} {
		for seed := int64(0); seed < 500; seed++ {
			c, err := NewConfig(seed, profile)
			if err != nil {
				t.Fatalf("seed %d profile %s: %v", seed, profile, err)
			}
			limit := max(time.Second, (c.Visibility * 2 / 3).Truncate(time.Second))
			if c.Workers > 0 && (c.PollWait < 0 || c.PollWait > limit) {
				t.Fatalf("seed %d profile %s: wait %v outside [0, %v]", seed, profile, c.PollWait, limit)
			}
			switch profile {
			case "network":
				if c.Nodes != 0 || c.Workers == 0 {
					t.Fatalf("network seed %d: nodes %d workers %d", seed, c.Nodes, c.Workers)
				}
			case "disk", "bitflip":
				if c.Workers != 0 || c.Nodes == 0 {
					t.Fatalf("%s seed %d: nodes %d workers %d", profile, seed, c.Nodes, c.Workers)
				}
			case "calm":
				if c.PCrashHandle != 0 || c.Faults.Process.On() || c.Faults.Transport.On() {
					t.Fatalf("calm seed %d injects faults", seed)
				}
			}
			w := newWorld(c, nil)
			w.setupRunner()
			w.setupQueue()
			w.beginLiveness()
			if b := w.bound - w.loop.Now(); b < 0 {
				t.Fatalf("seed %d profile %s: liveness bound %v", seed, profile, b)
			}
		}
	}
}

// A profile changes the fault mix, not the workload: the same seed draws the same jobs.
func TestProfilesShareTheWorkload(t *testing.T) {
	for seed := int64(1); seed < 50; seed++ {
		a, _ := NewConfig(seed, "swarm")
		b, _ := NewConfig(seed, "calm")
		if a.JobsMax != b.JobsMax || a.MsgsMax != b.MsgsMax || a.Capacity != b.Capacity || a.Visibility != b.Visibility {
			t.Fatalf("seed %d: swarm and calm draw different workloads", seed)
		}
	}
}
