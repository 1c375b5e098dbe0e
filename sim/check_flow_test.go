package sim

import (
	"os"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim/internal/flowcheck"
)

func init() {
	for _, p := range flowcheck.Promises {
		firedElsewhere[p.Name] = "TestFlowInvariantsFire"
	}
}

// flowDefects pairs each flow-control defect core/runner can plant with the invariant that
// must catch it.
var flowDefects = []struct {
	d   runner.Defect
	inv string
}{
	{runner.DefectPauseIgnored, flowcheck.InvPaused},
	{runner.DefectBurstAtOpen, flowcheck.InvRate},
	{runner.DefectKeyLimitPlusOne, flowcheck.InvKeyLimit},
	{runner.DefectGroupUnordered, flowcheck.InvSequence},
	{runner.DefectHoldIgnored, flowcheck.InvSequence},
	{runner.DefectFairOff, flowcheck.InvFair},
	{runner.DefectTimeoutTriple, flowcheck.InvTimeout},
	{runner.DefectKindRateIgnored, flowcheck.InvRate},
}

// TestFlowInvariantsFire plants each flow-control defect in the runner nodes of the flow
// profile and shows a seed breaking its invariant (TestFlowProfileClean: the same seeds pass
// without it). SIM_FLOW_DEFECT_SEEDS=N runs N seeds per defect and logs how many broke it.
func TestFlowInvariantsFire(t *testing.T) {
	count, _ := strconv.Atoi(os.Getenv("SIM_FLOW_DEFECT_SEEDS"))
	for _, tc := range flowDefects {
		t.Run(strconv.Itoa(int(tc.d))+"/"+tc.inv, func(t *testing.T) {
			fired, others := 0, map[string]int{}
			n := max(count, 60)
			for seed := int64(1); seed <= int64(n); seed++ {
				res, err := Run(Options{Seed: seed, Profile: "flow", mutation: mutFlow + mutation(tc.d)})
				if err != nil {
					t.Fatal(err)
				}
				switch f := res.Failure(); {
				case f == tc.inv:
					fired++
					if count == 0 {
						return
					}
				case f != "":
					others[f]++
				}
			}
			if count > 0 {
				t.Logf("defect %d: %s broke on %d of %d seeds; other failures %v", tc.d, tc.inv, fired, n, others)
			}
			if fired == 0 {
				t.Fatalf("no seed in 1..%d broke %s with defect %d (other failures: %v)", n, tc.inv, tc.d, others)
			}
		})
	}
}

// TestFlowProfileClean: the flow profile's first seeds end ok.
func TestFlowProfileClean(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		res, err := Run(Options{Seed: seed, Profile: "flow"})
		if err != nil {
			t.Fatal(err)
		}
		if !res.OK() {
			t.Errorf("seed %d: %s: %v", seed, res.Failure(), res.Violation)
		}
	}
}
