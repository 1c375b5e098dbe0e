package sim

import (
	"bytes"
	"testing"
)

func TestRunSmoke(t *testing.T) {
	for _, prof := range []string{"calm", "network", "swarm"} {
		res, err := Run(Options{Seed: 1, Profile: prof})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		res.Report(&b)
		t.Log(b.String())
		if !res.OK() {
			t.Errorf("%s: violation", prof)
		}
	}
}
