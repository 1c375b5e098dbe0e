package sim

import (
	"bytes"
	"strings"
	"testing"
)

// The misuse probes, the unregistered kind and the forged copies run in a few swarm seeds, and
// every refusal they check holds (a seed with a violation fails the test).
func TestProbesAndForgedCopiesRunAndHold(t *testing.T) {
	want := []string{"probe: kinds checked", "probe: a late registration", "of unregistered kind retired waits", "forged copy refused"}
	seen := map[string]int{}
	for seed := int64(1); seed <= 12; seed++ {
		cfg, err := NewConfig(seed, "swarm")
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		w := newWorld(cfg, &out)
		w.run()
		if v := w.chk.Violation(); v != nil {
			t.Fatalf("seed %d: %v", seed, v)
		}
		for _, s := range want {
			seen[s] += strings.Count(out.String(), s)
		}
	}
	for _, s := range want {
		if seen[s] == 0 {
			t.Errorf("no %q in 12 swarm seeds (%v)", s, seen)
		}
	}
}
