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
	// ExpectRefusal: the run damages synced data on purpose (at each crash, strictly before the
	// journal's last complete batch), and open must refuse the damaged journal with a clear
	// error instead of recovering (the bitflip profile; swarm's damage family).
	ExpectRefusal bool
	// LostSector: with ExpectRefusal, P(a damage loses a whole 512-byte sector, which then
	// reads back as zeros) rather than flipping one bit.
	LostSector float64
}

// Profiles lists the profile names in a fixed order.
var Profiles = []string{"swarm", "calm", "disk", "network", "bitflip", "fleet", "flow"}

// ProfileNotes says in one line what each profile pins.
var ProfileNotes = map[string]string{
	"swarm":   "the seed picks which fault kinds are on and their rates (default)",
	"calm":    "no faults: the machines alone, as a baseline",
	"disk":    "node crashes (also inside commits and compaction), torn writes, fsync and write errors",
	"network": "transport faults (fail before or after effect, throttling, stale receipts) and latency spikes",
	"bitflip": "a bit flips in synced journal data; open must refuse with a clear error",
	"fleet":   "the queue-backed runner's job layer on every worker: transport faults, stale receipts, worker crashes, long handlers",
	"flow":    "runner nodes only, with flow control always on (rates, keys, sequences, pauses, timeouts) and swarm's faults",
}

// ErrUnknownProfile is returned for a profile name not in Profiles.
var ErrUnknownProfile = fmt.Errorf("faults: unknown profile (want one of %s)", strings.Join(Profiles, ", "))

// Pick returns the fault mix of profile, drawing from r (the run's "swarm" stream) where the
// profile leaves a choice. Every profile consumes the same number of draws, so a seed's other
// choices do not depend on the profile.
func Pick(profile string, r *rand.Rand) (Set, error) {
	// Draw everything first, in a fixed order; profiles then select from the draws. Every
	// fault kind and every family switch has an index of its own (draws), so no two kinds are
	// correlated.
	var d drawn
	for i := range d {
		d[i] = r.Float64()
	}
	base := Set{Profile: profile}
	base.Transport.LatencyMin = 2 * time.Millisecond
	base.Transport.LatencyMax = time.Duration(d.scale(dLatency, 20, 200)) * time.Millisecond
	base.Transport.SpikeMin = 5 * time.Second
	base.Transport.SpikeMax = 40 * time.Second
	base.Process.RestartMin = 100 * time.Millisecond
	base.Process.RestartMax = time.Duration(d.scale(dRestart, 1, 20)) * time.Second
	base.Timing.LongFactor = 3
	base.Timing.BurstSize = 5 + int(d[dBurstSize]*40)

	switch profile {
	case "calm":
	case "disk":
		d.diskSet(&base)
	case "network", "fleet":
		d.netSet(&base)
		d.timeSet(&base)
	case "bitflip":
		// The world flips one bit at each crash itself, strictly before the last complete
		// batch (so a later batch proves the damage); Disk.BitFlip would also hit the last
		// batch, which no journal can tell from a torn write.
		base.Process.NodeCrash = d.scale(dNodeCrash, 0.005, 0.02)
		base.ExpectRefusal = true
	case "swarm", "flow":
		d.swarm(&base)
	default:
		return Set{}, fmt.Errorf("%w: %q", ErrUnknownProfile, profile)
	}
	if err := base.Validate(); err != nil {
		return Set{}, err
	}
	return base, nil
}

// drawn is Pick's draws, one per index.
type drawn [draws]float64

func (d *drawn) on(i int, p float64) bool            { return d[i] < p }
func (d *drawn) scale(i int, lo, hi float64) float64 { return lo + d[i]*(hi-lo) }

func (d *drawn) diskSet(s *Set) {
	s.Disk.WriteErr = d.scale(dWrite, 0, 0.01)
	s.Disk.SyncErr = d.scale(dSync, 0, 0.01)
	s.Disk.RenameErr = d.scale(dRename, 0, 0.05)
	s.Disk.SyncDirErr = d.scale(dSyncDir, 0, 0.01)
	s.Disk.DirPersist = d.scale(dDirPersist, 0, 0.5)
	s.Disk.CreateErr = d.scale(dCreate, 0, 0.01)
	s.Disk.RemoveErr = d.scale(dRemove, 0, 0.01)
	s.Disk.TruncateErr = d.scale(dTruncate, 0, 0.01)
	s.Process.NodeCrash = d.scale(dNodeCrash, 0.002, 0.02)
	s.Process.CommitCrash = d.scale(dCommitCrash, 0.005, 0.05)
}

func (d *drawn) netSet(s *Set) {
	s.Transport.FailBefore = d.scale(dFailBefore, 0, 0.05)
	s.Transport.FailAfter = d.scale(dFailAfter, 0, 0.05)
	s.Transport.Throttle = d.scale(dThrottle, 0, 0.03)
	s.Transport.ServerError = d.scale(dServerError, 0, 0.02)
	s.Transport.Stale = d.scale(dStale, 0, 0.005)
	s.Transport.Fatal = d.scale(dFatal, 0, 0.002)
	s.Transport.Spike = d.scale(dSpike, 0, 0.01)
	s.Process.WorkerCrash = d.scale(dWorkerCrash, 0.001, 0.01)
}

func (d *drawn) timeSet(s *Set) {
	s.Timing.LongHandler = d.scale(dLongHandler, 0, 0.2)
	s.Timing.Burst = d.scale(dBurst, 0, 0.1)
	if d.on(dMarathonOn, 0.3) {
		s.Timing.Marathon = d.scale(dMarathon, 0, 0.01)
	}
}

// Production's timing: late timers, bunched arrivals, reordering (the world's scheduler
// applies them to every event it schedules in the future during the safety phase).
func (d *drawn) schedSet(s *Set) {
	if d.on(dLateOn, 0.5) {
		s.Timing.Late = d.scale(dLate, 0.01, 0.2)
		s.Timing.LateMax = time.Duration(d.scale(dLateMax, 1, 1500)) * time.Millisecond
	}
	if d.on(dBunchOn, 0.5) {
		s.Timing.Bunch = time.Duration(d.scale(dBunch, 1, 250)) * time.Millisecond
	}
	if d.on(dReorderOn, 0.5) {
		s.Timing.Reorder = d.scale(dReorder, 0.05, 0.5)
	}
}

// swarm turns each family on with its own draw, then each kind within it with its own too.
func (d *drawn) swarm(s *Set) {
	if d.on(dDiskOn, 0.5) {
		d.diskSet(s)
		for _, k := range []struct {
			p *float64
			i int
		}{{&s.Disk.WriteErr, dWriteOn}, {&s.Disk.SyncErr, dSyncOn}, {&s.Disk.RenameErr, dRenameOn},
			{&s.Disk.SyncDirErr, dSyncDirOn}, {&s.Disk.DirPersist, dDirPersistOn}, {&s.Disk.CreateErr, dCreateOn},
			{&s.Disk.RemoveErr, dRemoveOn}, {&s.Disk.TruncateErr, dTruncateOn}} {
			zeroSome(k.p, d[k.i] < 0.5)
		}
	}
	if d.on(dNetOn, 0.5) {
		d.netSet(s)
		zeroSome(&s.Transport.FailAfter, d[dFailAfterOn] < 0.3)
		zeroSome(&s.Transport.Spike, d[dSpikeOn] < 0.5)
	}
	if d.on(dTimeOn, 0.5) {
		d.timeSet(s)
	}
	if d.on(dSchedOn, 0.5) {
		d.schedSet(s)
	}
	if d.on(dCrashOn, 0.3) && s.Process.NodeCrash == 0 {
		s.Process.NodeCrash = d.scale(dNodeCrash, 0.001, 0.01)
	}
	if d.on(dCrashPointOn, 0.3) {
		s.Process.CrashPoint = d.scale(dCrashPoint, 0.01, 0.1)
	}
	if d.on(dDamageOn, 0.2) {
		// Damage to synced data: at each crash a bit flips before the last complete batch,
		// and every later open must refuse the journal with a clear error.
		s.ExpectRefusal = true
		s.LostSector = d.scale(dLostSector, 0, 1)
		s.Process.NodeCrash = max(s.Process.NodeCrash, d.scale(dNodeCrash, 0.005, 0.02))
	}
	if d.on(dStorm, 0.25) {
		// A storm: every rate that is on, tripled.
		s.storm(3)
	}
}

// PickMore draws the families added after Pick's, from their own stream r (the run's
// "swarm-more" stream), so that a seed's earlier choices stay what they were. It consumes
// the same number of draws under every profile.
func (s *Set) PickMore(r *rand.Rand) error {
	var d [moreDraws]float64
	for i := range d {
		d[i] = r.Float64()
	}
	switch s.Profile {
	case "disk", "swarm", "flow":
		// The read side of the disk, with the rest of the disk family: each kind on by its own
		// switch, then at its own rate.
		if s.Profile != "disk" && s.Disk == (Disk{}) {
			break
		}
		for _, k := range []struct {
			p      *float64
			on, at int
		}{{&s.Disk.OpenErr, mOpenOn, mOpen}, {&s.Disk.StatErr, mStatOn, mStat}, {&s.Disk.SizeErr, mSizeOn, mSize},
			{&s.Disk.ReadErr, mReadOn, mRead}, {&s.Disk.CloseErr, mCloseOn, mClose}} {
			if d[k.on] < 0.5 {
				*k.p = d[k.at] * 0.03
			}
		}
	}
	if s.Transport.On() && d[mBreachOn] < 0.5 {
		// Contract breaches, with the rest of the network family.
		s.Transport.Breach = d[mBreach] * 0.02
	}
	return s.Validate()
}

// PickJournal draws the journal families, from their own stream r (the run's "swarm-journal"
// stream), so that a seed's earlier choices stay what they were. It consumes the same number
// of draws under every profile. With the rest of the disk family: writes that report a short
// count without an error, failing removals of a leftover compaction file, and crashes inside a
// graceful stop's Close.
func (s *Set) PickJournal(r *rand.Rand) error {
	var d [journalDraws]float64
	for i := range d {
		d[i] = r.Float64()
	}
	if s.Profile == "disk" || (s.Profile == "swarm" || s.Profile == "flow") && s.Disk != (Disk{}) {
		if d[jShortOn] < 0.3 {
			s.Disk.ShortWrite = d[jShort] * 0.01
		}
		if d[jLeftoverOn] < 0.9 {
			s.Disk.LeftoverErr = 0.5 + 0.5*d[jLeftover] // per open that finds one: they are rare
		}
		if d[jClosePointOn] < 0.5 {
			s.Process.ClosePoint = 0.1 + 0.4*d[jClosePoint] // per graceful stop
		}
	}
	return s.Validate()
}

// Indices of PickJournal's draws, one per value and per switch.
const (
	jShortOn = iota
	jShort
	jLeftoverOn
	jLeftover
	jClosePointOn
	jClosePoint
	journalDraws
)

// Indices of PickMore's draws, one per value and per switch.
const (
	mBreachOn = iota
	mBreach
	mOpenOn
	mOpen
	mStatOn
	mStat
	mSizeOn
	mSize
	mReadOn
	mRead
	mCloseOn
	mClose
	moreDraws
)

// Indices of Pick's draws: one per value and one per on/off switch, never shared.
const (
	dLatency = iota
	dRestart
	dBurstSize
	dWrite
	dSync
	dRename
	dSyncDir
	dDirPersist
	dCreate
	dRemove
	dTruncate
	dNodeCrash
	dCommitCrash
	dFailBefore
	dFailAfter
	dThrottle
	dServerError
	dStale
	dFatal
	dSpike
	dWorkerCrash
	dLongHandler
	dBurst
	dMarathonOn
	dMarathon
	dLate
	dLateOn
	dLateMax
	dBunchOn
	dBunch
	dReorderOn
	dReorder
	dDiskOn
	dWriteOn
	dSyncOn
	dRenameOn
	dSyncDirOn
	dDirPersistOn
	dCreateOn
	dRemoveOn
	dTruncateOn
	dNetOn
	dFailAfterOn
	dSpikeOn
	dTimeOn
	dSchedOn
	dCrashOn
	dCrashPointOn
	dCrashPoint
	dDamageOn
	dStorm
	dLostSector
	draws
)

func zeroSome(p *float64, zero bool) {
	if zero {
		*p = 0
	}
}

// Validate reports the first invalid model of the set.
func (s Set) Validate() error {
	if err := checkP("set", "LostSector", s.LostSector); err != nil {
		return err
	}
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

// Storm is storm for sluicetest, whose runs make a few dozen disk operations where simrun's
// make thousands.
func (s *Set) Storm(k float64) { s.storm(k) }

// storm multiplies every fault probability of s by k, keeping each a probability and the
// transport call faults' sum at most 1/2.
func (s *Set) storm(k float64) {
	for _, p := range []*float64{&s.Disk.WriteErr, &s.Disk.SyncErr, &s.Disk.RenameErr, &s.Disk.CreateErr,
		&s.Disk.RemoveErr, &s.Disk.TruncateErr, &s.Disk.SyncDirErr, &s.Process.NodeCrash,
		&s.Process.CommitCrash, &s.Process.CrashPoint, &s.Process.WorkerCrash, &s.Transport.Spike,
		&s.Timing.LongHandler, &s.Timing.Burst, &s.Timing.Marathon, &s.Timing.Late, &s.Timing.Reorder} {
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
