package sim_test

import (
	"bytes"
	"testing"

	"github.com/sluicehq/sluice/sim"
	"github.com/sluicehq/sluice/sim/explain"
)

func TestRunSmoke(t *testing.T) {
	for _, prof := range []string{"calm", "network", "swarm"} {
		res, err := sim.Run(sim.Options{Seed: 1, Profile: prof})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		explain.Report(res, &b)
		t.Log(b.String())
		if !res.OK() {
			t.Errorf("%s: violation", prof)
		}
	}
}
