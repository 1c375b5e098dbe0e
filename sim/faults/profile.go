package faults

import (
	"fmt"
	"math/rand"
	"strings"
	"time"
)

// Set is one run's whole fault mix.
type Set struct {
	Profile   string
	Disk      Disk
	Transport Transport
	Process   Process
	Timing    Timing
	// ExpectRefusal: the profile corrupts synced data on purpose, and open must refuse the
	// damaged journal with a clear error instead of recovering (the bitflip profile).
	ExpectRefusal bool
}

// Profiles lists the profile names in a fixed order.
var Profiles = []string{"swarm", "calm", "disk", "network", "bitflip"}

// ProfileNotes says in one line what each profile pins.
var ProfileNotes = map[string]string{
	"swarm":   "the seed picks which fault kinds are on and their rates (default)",
	"calm":    "no faults: the machines alone, as a baseline",
	"disk":    "node crashes (also inside commits and compaction), torn writes, fsync and write errors",
	"network": "transport faults (fail before or after effect, throttling, stale receipts) and latency spikes",
	"bitflip": "a bit flips in synced journal data; open must refuse with a clear error",
}

// ErrUnknownProfile is returned for a profile name not in Profiles.
var ErrUnknownProfile = fmt.Errorf("faults: unknown profile (want one of %s)", strings.Join(Profiles, ", "))

// Pick returns the fault mix of profile, drawing from r (the run's "swarm" stream) where the
// profile leaves a choice. Every profile consumes the same number of draws, so a seed's other
// choices do not depend on the profile.
func Pick(profile string, r *rand.Rand) (Set, error) {
	// Draw everything first, in a fixed order; profiles then select from the draws.
	var d [25]float64
	for i := range d {
		d[i] = r.Float64()
	}
	on := func(i int, p float64) bool { return d[i] < p }
	scale := func(i int, lo, hi float64) float64 { return lo + d[i]*(hi-lo) }

	base := Set{Profile: profile}
	base.Transport.LatencyMin = 2 * time.Millisecond
	base.Transport.LatencyMax = time.Duration(scale(0, 20, 200)) * time.Millisecond
	base.Transport.SpikeMin = 5 * time.Second
	base.Transport.SpikeMax = 40 * time.Second
	base.Process.RestartMin = 100 * time.Millisecond
	base.Process.RestartMax = time.Duration(scale(1, 1, 20)) * time.Second
	base.Timing.LongFactor = 3
	base.Timing.BurstSize = 5 + int(d[2]*40)

	diskSet := func(s *Set) {
		s.Disk.WriteErr = scale(3, 0, 0.01)
		s.Disk.SyncErr = scale(4, 0, 0.01)
		s.Disk.RenameErr = scale(5, 0, 0.05)
		s.Disk.SyncDirErr = scale(6, 0, 0.01)
		s.Disk.DirPersist = scale(7, 0, 0.5)
		s.Disk.CreateErr = scale(3, 0, 0.01)
		s.Disk.RemoveErr = scale(4, 0, 0.01)
		s.Disk.TruncateErr = scale(5, 0, 0.01)
		s.Process.NodeCrash = scale(8, 0.002, 0.02)
		s.Process.CommitCrash = scale(9, 0.005, 0.05)
	}
	netSet := func(s *Set) {
		s.Transport.FailBefore = scale(10, 0, 0.05)
		s.Transport.FailAfter = scale(11, 0, 0.05)
		s.Transport.Throttle = scale(12, 0, 0.03)
		s.Transport.ServerError = scale(13, 0, 0.02)
		s.Transport.Stale = scale(14, 0, 0.005)
		s.Transport.Fatal = scale(15, 0, 0.002)
		s.Transport.Spike = scale(16, 0, 0.01)
		s.Process.WorkerCrash = scale(17, 0.001, 0.01)
	}
	timeSet := func(s *Set) {
		s.Timing.LongHandler = scale(18, 0, 0.2)
		s.Timing.Burst = scale(19, 0, 0.1)
		if d[18] < 0.3 {
			s.Timing.Marathon = scale(19, 0, 0.01)
		}
	}

	switch profile {
	case "calm":
	case "disk":
		diskSet(&base)
	case "network":
		netSet(&base)
		timeSet(&base)
	case "bitflip":
		// The world flips one bit at each crash itself, strictly before the last complete
		// batch (so a later batch proves the damage); Disk.BitFlip would also hit the last
		// batch, which no journal can tell from a torn write.
		base.Process.NodeCrash = scale(8, 0.005, 0.02)
		base.ExpectRefusal = true
	case "swarm":
		// Each family is on with probability 1/2, then each kind within it too.
		if on(20, 0.5) {
			diskSet(&base)
			zeroSome(&base.Disk.WriteErr, d[3] < 0.5)
			zeroSome(&base.Disk.SyncErr, d[4] < 0.5)
			zeroSome(&base.Disk.RenameErr, d[5] < 0.5)
		}
		if on(21, 0.5) {
			netSet(&base)
			zeroSome(&base.Transport.FailAfter, d[11] < 0.3)
			zeroSome(&base.Transport.Spike, d[16] < 0.5)
		}
		if on(22, 0.5) {
			timeSet(&base)
		}
		if on(23, 0.3) && base.Process.NodeCrash == 0 {
			base.Process.NodeCrash = scale(8, 0.001, 0.01)
		}
		if on(24, 0.25) {
			// A storm: every rate that is on, tripled.
			base.storm(3)
		}
	default:
		return Set{}, fmt.Errorf("%w: %q", ErrUnknownProfile, profile)
	}
	if err := base.Validate(); err != nil {
		return Set{}, err
	}
	return base, nil
}

func zeroSome(p *float64, zero bool) {
	if zero {
		*p = 0
	}
}

// Validate reports the first invalid model of the set.
func (s Set) Validate() error {
	if err := s.Disk.Validate(); err != nil {
		return err
	}
	if err := s.Transport.Validate(); err != nil {
		return err
	}
	if err := s.Process.Validate(); err != nil {
		return err
	}
	return s.Timing.Validate()
}

// storm multiplies every fault probability of s by k, keeping each a probability and the
// transport call faults' sum at most 1/2.
func (s *Set) storm(k float64) {
	for _, p := range []*float64{&s.Disk.WriteErr, &s.Disk.SyncErr, &s.Disk.RenameErr, &s.Disk.CreateErr,
		&s.Disk.RemoveErr, &s.Disk.TruncateErr, &s.Disk.SyncDirErr, &s.Process.NodeCrash,
		&s.Process.CommitCrash, &s.Process.WorkerCrash, &s.Transport.Spike, &s.Timing.LongHandler, &s.Timing.Burst,
		&s.Timing.Marathon} {
		*p = min(1, *p*k)
	}
	t := &s.Transport
	calls := []*float64{&t.FailBefore, &t.FailAfter, &t.Throttle, &t.ServerError, &t.Stale, &t.Fatal}
	sum := 0.0
	for _, p := range calls {
		*p *= k
		sum += *p
	}
	if sum > 0.5 {
		for _, p := range calls {
			*p *= 0.5 / sum
		}
	}
}
