package sim

import (
	"errors"
	"io"

	"github.com/sluicehq/sluice/sim/config"
	"github.com/sluicehq/sluice/sim/disk"
	"github.com/sluicehq/sluice/sim/faults"
)

// What sim shares with sluicetest's worlds, which run on Loop with the same fault presets.

// FaultSet is seed's fault mix under profile exactly as simrun draws it: faults.Pick from the
// seed's "swarm" stream, then the later families from their own streams.
func FaultSet(seed int64, profile string) (faults.Set, error) {
	return config.PickFaults(Stream(seed, "swarm"), seed, profile)
}

// Injected says whether err is the work of a fault injected on a disk with faults d: an error
// the disk returned (disk.ErrInjected), or the journal's io.ErrShortWrite for a short count the
// disk reported without one.
func Injected(err error, d faults.Disk) bool {
	return errors.Is(err, disk.ErrInjected) || d.ShortWrite > 0 && errors.Is(err, io.ErrShortWrite)
}
