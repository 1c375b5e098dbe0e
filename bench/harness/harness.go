// Package harness runs the same workloads against several job systems and
// summarises the rounds as medians.
//
// Rules:
//  1. A System opens a fresh Instance per run (its own directory, database or
//     journal); nothing carries over between runs.
//  2. Enqueue and EnqueueBatch return only once the job is durable in that
//     system's own sense (committed transaction, synced journal).
//  3. WaitCompleted returns once n jobs have durably reached "succeeded".
//  4. The handler is the harness's: it counts attempts per job, fails the first
//     Payload.Fail attempts and records the enqueue-to-start latency of the
//     first attempt. Systems only decode the payload and call it.
package harness

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Payload is the job's body. Seq indexes the harness's per-job counters, T is
// the enqueue instant as nanoseconds since the run's epoch (monotonic), and
// Fail is how many attempts fail before one succeeds.
type Payload struct {
	Seq  int64
	T    int64
	Fail int
}

// Handler is what a system's worker calls for each attempt.
type Handler func(ctx context.Context, p Payload) error

// ErrPlannedFailure is what the handler returns for a planned failed attempt.
var ErrPlannedFailure = errors.New("harness: planned failure")

// Instance is one fresh queue of one system.
type Instance interface {
	Enqueue(ctx context.Context, p Payload) error
	EnqueueBatch(ctx context.Context, ps []Payload) error
	// StartWorkers starts processing with the system's worker count.
	StartWorkers(ctx context.Context) error
	// WaitCompleted blocks until n jobs have durably succeeded.
	WaitCompleted(ctx context.Context, n int) error
	// Close stops workers and releases the instance's resources.
	Close(ctx context.Context) error
}

// Counters is optional: systems that can count their syncs report them.
type Counters interface {
	Syncs() int64
}

// System makes instances.
type System interface {
	Name() string
	// Settings describes the durability and polling settings in force.
	Settings() []string
	Open(ctx context.Context, dir string, workers int, h Handler) (Instance, error)
}

// Probe is the per-run handler state.
type Probe struct {
	Epoch    time.Time
	attempts []atomic.Int32
	started  []atomic.Int64 // latency of first start, ns; 0 = not started
	dups     atomic.Int64   // attempts beyond the planned ones
	Starts   atomic.Int64
}

// NewProbe makes counters for n jobs.
func NewProbe(n int) *Probe {
	return &Probe{Epoch: time.Now(), attempts: make([]atomic.Int32, n), started: make([]atomic.Int64, n)}
}

// Now is the payload timestamp for an enqueue happening now.
func (pr *Probe) Now() int64 { return int64(time.Since(pr.Epoch)) }

// Handle is the harness handler.
func (pr *Probe) Handle(_ context.Context, p Payload) error {
	now := int64(time.Since(pr.Epoch))
	pr.Starts.Add(1)
	if p.Seq < 0 || int(p.Seq) >= len(pr.attempts) {
		panic(fmt.Sprintf("harness: seq %d out of range", p.Seq))
	}
	n := pr.attempts[p.Seq].Add(1)
	if n == 1 {
		lat := now - p.T
		if lat < 1 {
			lat = 1
		}
		pr.started[p.Seq].Store(lat)
	}
	if int(n) > p.Fail+1 {
		pr.dups.Add(1)
	}
	if int(n) <= p.Fail {
		return ErrPlannedFailure
	}
	return nil
}

// Duplicates counts attempts that ran after the job had already succeeded once.
func (pr *Probe) Duplicates() int64 { return pr.dups.Load() }

// Latencies returns the first-start latencies of the first n jobs that started.
func (pr *Probe) Latencies(n int) []time.Duration {
	out := make([]time.Duration, 0, n)
	for i := 0; i < n && i < len(pr.started); i++ {
		if v := pr.started[i].Load(); v > 0 {
			out = append(out, time.Duration(v))
		}
	}
	return out
}
