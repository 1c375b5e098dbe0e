// Package flow measures what flow control costs the durable runner end to end: throughput at
// 64 workers with limits configured but not binding, against the same run without them, and
// CPU per job with a per-key limit binding across 1,000 keys, against the unlimited run.
// Both halves of each comparison run in the same benchmark, interleaved, on fresh journals
// (docs/BENCHMARKS.md, flow control).
//
//	cd bench && go test ./flow -run '^$' -bench . -benchtime 5x
package flow

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

const (
	workers = 64
	jobs    = 20_000
	batch   = 1_000
	keys    = 1_000
)

// runLimit bounds one run: a stuck runner fails the benchmark instead of hanging it.
var runLimit = 2 * time.Minute

// setup is one configuration of the kind and its jobs.
type setup struct {
	name string
	kind []sluice.KindOption
	key  func(i int) string // nil: no WithKey
}

// notBinding: every flow option on, each far above what the run reaches (a few 10⁴ jobs/s
// here): a kind and key rate of 10⁶ starts/s, 1,000 running per key, fair share among 64 keys.
var notBinding = setup{
	name: "limits-not-binding",
	kind: []sluice.KindOption{
		sluice.WithRate(sluice.Rate{Count: 1_000_000, Per: time.Second}),
		sluice.WithKeyRate(sluice.Rate{Count: 1_000_000, Per: time.Second}),
		sluice.WithKeyConcurrency(1_000),
		sluice.WithFairShare(),
	},
	key: func(i int) string { return "k" + strconv.Itoa(i%64) },
}

// notBindingNoFair is notBinding without the fair share, to tell the rounds' cost apart.
var notBindingNoFair = setup{
	name: "limits-not-binding-no-fair",
	kind: notBinding.kind[:3],
	key:  notBinding.key,
}

// binding: one attempt per key at a time, the jobs of a key enqueued together (20 in a row),
// so the head of the queue is always one key's and the rest of it must wait (parked).
var binding = setup{
	name: "key-limit-binding",
	kind: []sluice.KindOption{sluice.WithKeyConcurrency(1)},
	key:  func(i int) string { return "k" + strconv.Itoa(i*keys/jobs) },
}

var plain = setup{name: "no-limits"}

// result is one run's measurements of the processing phase (the enqueue before it excluded).
type result struct {
	wall  time.Duration
	cpu   time.Duration // user+system of the whole process
	syncs int64         // journal syncs in the processing phase
}

func (r result) perSec() float64      { return jobs / r.wall.Seconds() }
func (r result) cpuPerJob() float64   { return float64(r.cpu.Nanoseconds()) / jobs }
func (r result) jobsPerSync() float64 { return jobs / float64(max(r.syncs, 1)) }

// run enqueues jobs no-op jobs under s in batches, then runs them at Capacity 64 until every
// one succeeded.
func run(b testing.TB, s setup) result {
	b.Helper()
	var done atomic.Int64
	all := make(chan struct{})
	r, err := sluice.New(b.TempDir(), sluice.Config{
		Capacity: workers,
		Logger:   slog.New(slog.DiscardHandler),
		OnSettled: func(st sluice.Settled) {
			if st.State == sluice.StateSucceeded && done.Add(1) == jobs {
				close(all)
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	k, err := sluice.Register(r, "bench", sluice.Bytes(), func(context.Context, sluice.Job[[]byte]) error { return nil }, s.kind...)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	payload := make([]byte, 16)
	for i := 0; i < jobs; i += batch {
		nj := make([]sluice.NewJob[[]byte], batch)
		for j := range nj {
			nj[j] = sluice.NewJob[[]byte]{Target: "t", Payload: payload}
			if s.key != nil {
				nj[j].Options = []sluice.JobOption{sluice.WithKey(s.key(i + j))}
			}
		}
		if _, err := k.EnqueueMany(ctx, nj); err != nil {
			b.Fatal(err)
		}
	}
	st0, err := r.Stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	cpu0, t0 := cpuTime(b), time.Now()
	go func() { ran <- r.Run(rctx) }()
	select {
	case <-all:
	case err := <-ran:
		b.Fatalf("%s: Run returned before every job succeeded (%d of %d): %v", s.name, done.Load(), jobs, err)
	case <-time.After(runLimit):
		b.Fatalf("%s: %d of %d jobs succeeded in %s", s.name, done.Load(), jobs, runLimit)
	}
	res := result{wall: time.Since(t0), cpu: cpuTime(b) - cpu0}
	st, err := r.Stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	res.syncs = st.Syncs - st0.Syncs
	cancel()
	if err := <-ran; err != nil && err != context.Canceled {
		b.Fatal(err)
	}
	return res
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pair runs a and z alternately, b.N times each (a first on even rounds, z first on odd).
func pair(b *testing.B, a, z setup) (ra, rz []result) {
	for i := range b.N {
		if i%2 == 0 {
			ra, rz = append(ra, run(b, a)), append(rz, run(b, z))
		} else {
			rz, ra = append(rz, run(b, z)), append(ra, run(b, a))
		}
		x, y := ra[i], rz[i]
		b.Logf("round %d: %s %.0f jobs/s %.0f cpu-ns/job %.1f jobs/sync; %s %.0f jobs/s %.0f cpu-ns/job %.1f jobs/sync",
			i+1, a.name, x.perSec(), x.cpuPerJob(), x.jobsPerSync(), z.name, y.perSec(), y.cpuPerJob(), y.jobsPerSync())
	}
	return ra, rz
}

// median is the median of metric over rs.
func median(rs []result, metric func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = metric(r)
	}
	return medianOf(v)
}

func medianOf(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// ratios is the median over rounds of a's metric over z's in the same round (the rounds are
// interleaved pairs, so a drift of the shared machine's load cancels within each).
func ratios(a, z []result, metric func(result) float64) float64 {
	v := make([]float64, len(a))
	for i := range a {
		v[i] = metric(a[i]) / metric(z[i])
	}
	return medianOf(v)
}

// notBindingBench: jobs/s at 64 workers with the flow options of lim configured far above the
// load, against none; ratio = limited / plain (1: free; the target is ≥ 0.9), and CPU per
// job, which the shared machine's load moves less than the wall clock.
func notBindingBench(b *testing.B, lim setup) {
	l, p := pair(b, lim, plain)
	perSec := func(rs []result) float64 { return median(rs, result.perSec) }
	b.ReportMetric(perSec(l), "jobs/s-limits")
	b.ReportMetric(perSec(p), "jobs/s-plain")
	b.ReportMetric(ratios(l, p, result.perSec), "ratio")
	b.ReportMetric(median(l, result.cpuPerJob), "cpu-ns/job-limits")
	b.ReportMetric(median(p, result.cpuPerJob), "cpu-ns/job-plain")
	b.ReportMetric(ratios(l, p, result.cpuPerJob), "cpu-ratio")
	b.ReportMetric(median(l, result.jobsPerSync), "jobs/sync-limits")
	b.ReportMetric(median(p, result.jobsPerSync), "jobs/sync-plain")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkNotBinding: kind rate, key rate, key concurrency and fair share, none binding.
func BenchmarkNotBinding(b *testing.B) { notBindingBench(b, notBinding) }

// BenchmarkNotBindingNoFair: the same without the fair share.
func BenchmarkNotBindingNoFair(b *testing.B) { notBindingBench(b, notBindingNoFair) }

// BenchmarkKeyLimitBinding: CPU per job (user+system, the whole process) with
// WithKeyConcurrency(1) over 1,000 keys of 20 jobs each, against no limit; and jobs/s.
func BenchmarkKeyLimitBinding(b *testing.B) {
	l, p := pair(b, binding, plain)
	cpu := func(rs []result) float64 { return median(rs, result.cpuPerJob) }
	b.ReportMetric(cpu(l), "cpu-ns/job-keys")
	b.ReportMetric(cpu(p), "cpu-ns/job-plain")
	b.ReportMetric(ratios(l, p, result.cpuPerJob), "cpu-ratio")
	b.ReportMetric(median(l, result.perSec), "jobs/s-keys")
	b.ReportMetric(median(p, result.perSec), "jobs/s-plain")
	b.ReportMetric(median(l, result.jobsPerSync), "jobs/sync-keys")
	b.ReportMetric(median(p, result.jobsPerSync), "jobs/sync-plain")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkProfileLimits and BenchmarkProfilePlain run one setup alone, b.N runs, for
// -cpuprofile: the difference of their profiles is what the not-binding limits cost.
func BenchmarkProfileLimits(b *testing.B) { profile(b, notBinding) }
func BenchmarkProfilePlain(b *testing.B)  { profile(b, plain) }

func profile(b *testing.B, s setup) {
	var rs []result
	for range b.N {
		rs = append(rs, run(b, s))
	}
	b.ReportMetric(median(rs, result.perSec), "jobs/s")
	b.ReportMetric(median(rs, result.cpuPerJob), "cpu-ns/job")
	b.ReportMetric(0, "ns/op")
}
