package sim

import (
	"math/rand"

	"github.com/sluicehq/sluice/sim/faults"
)

// What sim shares with sluicetest's worlds, which run on Loop with the same fault presets.

// FaultSet is seed's fault mix under profile exactly as simrun draws it: faults.Pick from the
// seed's "swarm" stream, then the later families from their own streams.
func FaultSet(seed int64, profile string) (faults.Set, error) {
	return pickFaults(Stream(seed, "swarm"), seed, profile)
}

// pickFaults draws the fault mix from r (the seed's "swarm" stream, which NewConfig goes on
// drawing from) and the later families' streams.
func pickFaults(r *rand.Rand, seed int64, profile string) (faults.Set, error) {
	fs, err := faults.Pick(profile, r)
	if err != nil {
		return faults.Set{}, err
	}
	if err := fs.PickMore(Stream(seed, "swarm-more")); err != nil {
		return faults.Set{}, err
	}
	if err := fs.PickJournal(Stream(seed, "swarm-journal")); err != nil {
		return faults.Set{}, err
	}
	return fs, nil
}
