package sim

import (
	"errors"
	"io"
	"math/rand"

	"github.com/sluicehq/sluice/sim/disk"
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

// Injected says whether err is the work of a fault injected on a disk with faults d: an error
// the disk returned (disk.ErrInjected), or the journal's io.ErrShortWrite for a short count the
// disk reported without one.
func Injected(err error, d faults.Disk) bool {
	return errors.Is(err, disk.ErrInjected) || d.ShortWrite > 0 && errors.Is(err, io.ErrShortWrite)
}
