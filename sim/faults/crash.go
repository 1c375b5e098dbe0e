package faults

import (
	"fmt"
	"math/rand"
	"time"
)

// Process is the crash model of runner nodes and worker processes.
type Process struct {
	// NodeCrash: P(a runner node crashes at a given step), crashing its disk in place.
	NodeCrash float64
	// CommitCrash: P(a commit is cut by a crash after a drawn number of its disk operations),
	// which lands between write and fsync, or inside compaction before or after the rename and
	// before the directory fsync, depending on where the count runs out.
	CommitCrash float64
	// CrashPoint: P(a commit is cut by a crash at its k-th mutating disk operation, k drawn
	// uniformly in 1..CrashPointOps): a systematic sweep over every operation of a batch and
	// of a compaction's swap, independent of CommitCrash's aim.
	CrashPoint float64
	// ClosePoint: P(a graceful stop's Close is cut by a crash at its k-th mutating disk
	// operation, k drawn in 1..ClosePointOps: the clean-close mark's write, or its sync).
	ClosePoint float64
	// WorkerCrash: P(a worker process crashes at a given step), often while renewals are in
	// flight; its handlers die with it and its receipts lapse at the queue.
	WorkerCrash float64
	// Restart delay after a crash, drawn uniformly.
	RestartMin, RestartMax time.Duration
}

// On reports whether any crash is injected.
func (p Process) On() bool {
	return p.NodeCrash+p.CommitCrash+p.CrashPoint+p.ClosePoint+p.WorkerCrash > 0
}

// ClosePointOps is the range of a close point's k: Close writes the mark, then syncs it.
const ClosePointOps = 2

// CrashPointOps is the range of a crash point's k: more mutating disk operations than a commit
// that compacts makes (batch write and sync, snapshot create, write, sync, close, rename,
// directory sync, then the next batch), so no operation of the swap is left out.
const CrashPointOps = 14

// Point draws a crash point k in 1..CrashPointOps; it consumes one value of r.
func (p Process) Point(r *rand.Rand) int { return 1 + r.Intn(CrashPointOps) }

// Hit draws one Bernoulli trial with probability prob, consuming exactly one value of r.
func Hit(r *rand.Rand, prob float64) bool { return r.Float64() < prob }

// Restart draws a restart delay; it consumes one value of r.
func (p Process) Restart(r *rand.Rand) time.Duration {
	return between(r.Float64(), p.RestartMin, p.RestartMax)
}

// Validate reports the first probability or range out of bounds.
func (p Process) Validate() error {
	for _, q := range []struct {
		name string
		v    float64
	}{{"NodeCrash", p.NodeCrash}, {"CommitCrash", p.CommitCrash}, {"CrashPoint", p.CrashPoint}, {"ClosePoint", p.ClosePoint}, {"WorkerCrash", p.WorkerCrash}} {
		if err := checkP("process", q.name, q.v); err != nil {
			return err
		}
	}
	return checkRange("process restart", p.RestartMin, p.RestartMax)
}

// Timing is the model of time faults: slow handlers and bursts of work.
type Timing struct {
	// LongHandler: P(a handler runs longer than the visibility window), drawn in
	// [1, LongFactor] windows.
	LongHandler float64
	LongFactor  float64
	// Marathon: P(a handler runs past the queue's 12 h visibility ceiling), drawn in
	// [12 h, 13 h]: its lease is renewed up to the ceiling, with shrinking requests, then dropped.
	Marathon float64
	// Burst: P(a producer tick sends a burst of BurstSize items at one instant).
	Burst     float64
	BurstSize int

	// Late: P(an event the world schedules in the future fires late: a timer after a scheduler
	// hiccup or a GC pause, a reply held in a socket buffer), by a delay drawn in [0, LateMax].
	Late    float64
	LateMax time.Duration
	// Bunch: when above zero, scheduled events are rounded up to a multiple of Bunch, so replies
	// and timer expiries that fall in one grain arrive together and are stepped back to back.
	Bunch time.Duration
	// Reorder: P(an event is stepped after up to ReorderSpan events scheduled later for the
	// same instant), so replies to different calls arrive out of order.
	Reorder float64
}

// ReorderSpan bounds how many later events a reordered one can be overtaken by.
const ReorderSpan = 16

// Slack is the most an event can be delayed by the scheduling families: a handler's local
// deadline can fire this late, so the hidden-while-working promise holds only up to it.
func (t Timing) Slack() time.Duration {
	s := time.Duration(0)
	if t.Late > 0 {
		s += t.LateMax
	}
	return s + t.Bunch
}

// Scheduled reports whether any scheduling family is on.
func (t Timing) Scheduled() bool { return t.Late > 0 || t.Bunch > 0 || t.Reorder > 0 }

// On reports whether any time fault is injected.
func (t Timing) On() bool {
	return t.LongHandler+t.Burst+t.Marathon+t.Late+t.Reorder > 0 || t.Bunch > 0
}

// Validate reports the first probability out of bounds.
func (t Timing) Validate() error {
	if err := checkP("timing", "LongHandler", t.LongHandler); err != nil {
		return err
	}
	if err := checkP("timing", "Marathon", t.Marathon); err != nil {
		return err
	}
	if err := checkP("timing", "Late", t.Late); err != nil {
		return err
	}
	if err := checkP("timing", "Reorder", t.Reorder); err != nil {
		return err
	}
	if t.LateMax < 0 || t.Bunch < 0 {
		return fmt.Errorf("faults: timing: LateMax %v and Bunch %v must not be negative", t.LateMax, t.Bunch)
	}
	return checkP("timing", "Burst", t.Burst)
}
