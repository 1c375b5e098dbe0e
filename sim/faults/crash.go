package faults

import (
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
	// WorkerCrash: P(a worker process crashes at a given step), often while renewals are in
	// flight; its handlers die with it and its receipts lapse at the queue.
	WorkerCrash float64
	// Restart delay after a crash, drawn uniformly.
	RestartMin, RestartMax time.Duration
}

// On reports whether any crash is injected.
func (p Process) On() bool { return p.NodeCrash+p.CommitCrash+p.WorkerCrash > 0 }

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
	}{{"NodeCrash", p.NodeCrash}, {"CommitCrash", p.CommitCrash}, {"WorkerCrash", p.WorkerCrash}} {
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
}

// On reports whether any time fault is injected.
func (t Timing) On() bool { return t.LongHandler+t.Burst+t.Marathon > 0 }

// Validate reports the first probability out of bounds.
func (t Timing) Validate() error {
	if err := checkP("timing", "LongHandler", t.LongHandler); err != nil {
		return err
	}
	if err := checkP("timing", "Marathon", t.Marathon); err != nil {
		return err
	}
	return checkP("timing", "Burst", t.Burst)
}
