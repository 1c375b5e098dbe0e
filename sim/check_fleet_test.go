package sim

import "testing"

// firedElsewhere names invariants whose firing test lives outside TestInvariantFires (they
// are checked by the world, not the Checker alone).
var firedElsewhere = map[string]string{
	InvFleetTerminal:     "TestFleetInvariantsFire",
	InvFleetAttempts:     "TestFleetInvariantsFire",
	InvFleetBreaker:      "TestFleetInvariantsFire",
	InvFleetSingleHolder: "TestFleetInvariantsFire",
	InvFleetNotJob:       "TestFleetInvariantsFire",
	InvFleetResends:      "TestFleetInvariantsFire",
	InvFleetAbandon:      "TestFleetInvariantsFire",
	InvFleetStop:         "TestFleetInvariantsFire",
	InvFleetDeadLetter:   "TestFleetInvariantsFire",
	InvFleetOneJob:       "TestFleetInvariantsFire",
	InvFleetSendBackoff:  "TestFleetInvariantsFire",
}

// TestFleetInvariantsFire plants one defect per fleet invariant and shows a seed of the fleet
// profile breaks it; TestFleetProfileClean shows the same seeds pass without it.
func TestFleetInvariantsFire(t *testing.T) {
	for _, tc := range []struct {
		inv string
		mut mutation
	}{
		{InvFleetAttempts, mutFleetOverrun},
		{InvFleetBreaker, mutFleetIgnoreBreaker},
		{InvFleetTerminal, mutFleetLoseDead},
		{InvFleetSingleHolder, mutFleetDoubleSend},
		{InvFleetNotJob, mutFleetDropNotJob},
		{InvFleetResends, mutFleetHopShort},
		{InvFleetAbandon, mutFleetCancelFlip},
		{InvFleetStop, mutFleetStopSpends},
		{InvFleetDeadLetter, mutFleetDeadDropsTyped},
		{InvFleetOneJob, mutFleetBlindResend},
		{InvFleetSendBackoff, mutFleetFlatBackoff},
		{InvFleetAttempts, mutFleetKillSpends},
	} {
		t.Run(tc.inv, func(t *testing.T) {
			for seed := int64(1); seed <= 60; seed++ {
				res, err := Run(Options{Seed: seed, Profile: "fleet", mutation: tc.mut})
				if err != nil {
					t.Fatal(err)
				}
				// A defect may break another invariant first on some seeds (a copied message
				// that does not overlap its original spends an attempt too): look further.
				if res.Violation != nil && res.Violation.Invariant == tc.inv {
					return
				}
			}
			t.Fatalf("no seed in 1..60 broke %s with the planted defect", tc.inv)
		})
	}
}

// TestFleetProfileClean: the fleet profile's first seeds end ok.
func TestFleetProfileClean(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		res, err := Run(Options{Seed: seed, Profile: "fleet"})
		if err != nil {
			t.Fatal(err)
		}
		if !res.OK() {
			t.Errorf("seed %d: %s", seed, res.Failure())
		}
	}
}

// TestSwarmFleetFamilyRunsJobLayerOnlyWhenDrawn: in swarm, a seed whose fleet family is drawn
// on runs the job layer with the fleet invariants (a planted overrun breaks fleet-attempts on
// one of them), and a seed whose family is off never reaches it (the same defect leaves its
// digest unchanged).
func TestSwarmFleetFamilyRunsJobLayerOnlyWhenDrawn(t *testing.T) {
	fired, off := false, 0
	for seed := int64(1); seed <= 60 && (!fired || off < 5); seed++ {
		c, err := NewConfig(seed, "swarm")
		if err != nil {
			t.Fatal(err)
		}
		if c.Fleet && fired || !c.Fleet && off >= 5 {
			continue
		}
		mut, err := Run(Options{Seed: seed, mutation: mutFleetOverrun})
		if err != nil {
			t.Fatal(err)
		}
		if c.Fleet {
			fired = mut.Violation != nil && mut.Violation.Invariant == InvFleetAttempts
			continue
		}
		off++
		res, err := Run(Options{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if res.Digest != mut.Digest {
			t.Errorf("seed %d (fleet off): the fleet's planted defect moved the digest", seed)
		}
	}
	if !fired {
		t.Error("no swarm seed in 1..60 with the fleet family on broke fleet-attempts with the planted overrun")
	}
	if off < 5 {
		t.Errorf("only %d swarm seeds in 1..60 with the fleet family off", off)
	}
}
