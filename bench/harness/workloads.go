package harness

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Metric names one number a workload reports.
type Metric struct {
	Key          string
	Title        string
	HigherBetter bool
	// Compare marks the metric the ratio column is computed on.
	Compare bool
}

// Result is one run of one workload on one system.
type Result map[string]float64

// Workload is one benchmark shape.
type Workload struct {
	ID      string
	Title   string
	Metrics []Metric
	Run     func(ctx context.Context, sys System, dir string) (Result, error)
}

// Params sizes the workloads.
type Params struct {
	Jobs       int           // workload 1
	BatchJobs  int           // workload 2
	Producers  int           // workload 1 and 3
	Workers    int           // all
	Batch      int           // workload 2
	SteadyFor  time.Duration // workload 3
	SteadyRate int           // workload 3, jobs per second offered in total
	RetryJobs  int           // workload 4
	Timeout    time.Duration // per run
}

func openFresh(ctx context.Context, sys System, dir string, workers int, pr *Probe) (Instance, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return sys.Open(ctx, dir, workers, pr.Handle)
}

func closeInst(inst Instance) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return inst.Close(ctx)
}

// CPUTime is this process's user+system CPU time so far (the GC's workers included).
func CPUTime() time.Duration {
	user, sys := CPUTimes()
	return user + sys
}

// CPUTimes is the process's user and system CPU time so far (zeros if it cannot be read).
func CPUTimes() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

func syncsPerJob(inst Instance, jobs int, r Result) {
	if c, ok := inst.(Counters); ok {
		r["syncs/job"] = float64(c.Syncs()) / float64(jobs)
	}
}

// Workloads returns the four workloads sized by p.
func Workloads(p Params) []Workload {
	thr := []Metric{
		{Key: "enqueue/s", Title: "enqueue jobs/s", HigherBetter: true},
		{Key: "process/s", Title: "process jobs/s", HigherBetter: true},
		{Key: "e2e/s", Title: "end-to-end jobs/s", HigherBetter: true, Compare: true},
		{Key: "syncs/job", Title: "syncs/job"},
		{Key: "cpu", Title: "proc CPU cores"},
		{Key: "cpu µs/job", Title: "CPU µs/job (processing)"},
	}
	return []Workload{
		{
			ID:      "W1",
			Title:   fmt.Sprintf("%d no-op jobs enqueued one at a time by %d producers, then processed by %d workers", p.Jobs, p.Producers, p.Workers),
			Metrics: thr,
			Run: func(ctx context.Context, sys System, dir string) (Result, error) {
				return enqueueThenProcess(ctx, sys, dir, p, p.Jobs, 0, func(ctx context.Context, inst Instance, pr *Probe) error {
					return produceParallel(ctx, inst, pr, p.Jobs, p.Producers, 0)
				})
			},
		},
		{
			ID:      "W2",
			Title:   fmt.Sprintf("%d no-op jobs enqueued in batches of %d, then processed by %d workers", p.BatchJobs, p.Batch, p.Workers),
			Metrics: thr,
			Run: func(ctx context.Context, sys System, dir string) (Result, error) {
				return enqueueThenProcess(ctx, sys, dir, p, p.BatchJobs, 0, func(ctx context.Context, inst Instance, pr *Probe) error {
					return produceBatches(ctx, inst, pr, p.BatchJobs, p.Batch, 0)
				})
			},
		},
		{
			ID: "W3",
			Title: fmt.Sprintf("steady state: %d producers offering %d jobs/s in total for %s while %d workers run; latency = enqueue call to handler start",
				p.Producers, p.SteadyRate, p.SteadyFor, p.Workers),
			Metrics: []Metric{
				{Key: "done/s", Title: "completed jobs/s", HigherBetter: true},
				{Key: "p50ms", Title: "p50 latency ms"},
				{Key: "p99ms", Title: "p99 latency ms", Compare: true},
				{Key: "syncs/job", Title: "syncs/job"},
				{Key: "cpu", Title: "proc CPU cores"},
			},
			Run: func(ctx context.Context, sys System, dir string) (Result, error) {
				return steady(ctx, sys, dir, p)
			},
		},
		{
			ID:    "W4",
			Title: fmt.Sprintf("%d jobs that fail twice then succeed (3 attempts each, backoff ~1 ms), enqueued in batches of %d, then processed by %d workers", p.RetryJobs, p.Batch, p.Workers),
			Metrics: []Metric{
				{Key: "e2e/s", Title: "end-to-end jobs/s", HigherBetter: true, Compare: true},
				{Key: "attempts/s", Title: "attempts/s", HigherBetter: true},
				{Key: "syncs/job", Title: "syncs/job"},
				{Key: "cpu", Title: "proc CPU cores"},
				{Key: "cpu µs/job", Title: "CPU µs/job (processing)"},
			},
			Run: func(ctx context.Context, sys System, dir string) (Result, error) {
				r, err := enqueueThenProcess(ctx, sys, dir, p, p.RetryJobs, 2, func(ctx context.Context, inst Instance, pr *Probe) error {
					return produceBatches(ctx, inst, pr, p.RetryJobs, p.Batch, 2)
				})
				if err != nil {
					return nil, err
				}
				out := Result{"e2e/s": r["e2e/s"], "attempts/s": r["e2e/s"] * 3, "dups": r["dups"], "cpu": r["cpu"], "cpu µs/job": r["cpu µs/job"]}
				for _, k := range []string{"proc jobs/sync", "proc syncs/s"} {
					if v, ok := r[k]; ok {
						out[k] = v
					}
				}
				if v, ok := r["syncs/job"]; ok {
					out["syncs/job"] = v
				}
				return out, nil
			},
		},
	}
}

func enqueueThenProcess(ctx context.Context, sys System, dir string, p Params, n, fail int,
	produce func(context.Context, Instance, *Probe) error) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	pr := NewProbe(n)
	inst, err := openFresh(ctx, sys, dir, p.Workers, pr)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", sys.Name(), err)
	}
	defer closeInst(inst)
	c0 := CPUTime()
	t0 := time.Now()
	if err := produce(ctx, inst, pr); err != nil {
		return nil, fmt.Errorf("enqueue on %s: %w", sys.Name(), err)
	}
	t1 := time.Now()
	c1 := CPUTime()
	counter, counts := inst.(Counters)
	var s1 int64
	if counts {
		s1 = counter.Syncs()
	}
	if err := inst.StartWorkers(ctx); err != nil {
		return nil, fmt.Errorf("start workers on %s: %w", sys.Name(), err)
	}
	if err := inst.WaitCompleted(ctx, n); err != nil {
		return nil, fmt.Errorf("wait for %d jobs on %s (started %d): %w", n, sys.Name(), pr.Starts.Load(), err)
	}
	t2 := time.Now()
	c2 := CPUTime()
	var s2 int64
	if counts {
		s2 = counter.Syncs()
	}
	r := Result{
		"enqueue/s": float64(n) / t1.Sub(t0).Seconds(),
		"process/s": float64(n) / t2.Sub(t1).Seconds(),
		"e2e/s":     float64(n) / t2.Sub(t0).Seconds(),
		"dups":      float64(pr.Duplicates()),
		"cpu":       (c2 - c0).Seconds() / t2.Sub(t0).Seconds(),
		// The processing phase's process CPU time per job (the server's CPU not included).
		"cpu µs/job": float64((c2 - c1).Microseconds()) / float64(n),
	}
	if counts && s2 > s1 {
		// The processing phase alone: how many jobs each fsync carried, and
		// how many fsyncs per second the runner achieved.
		r["proc jobs/sync"] = float64(n) / float64(s2-s1)
		r["proc syncs/s"] = float64(s2-s1) / t2.Sub(t1).Seconds()
	}
	syncsPerJob(inst, n, r)
	return r, nil
}

func produceParallel(ctx context.Context, inst Instance, pr *Probe, n, producers, fail int) error {
	var wg sync.WaitGroup
	errs := make([]error, producers)
	for w := 0; w < producers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += producers {
				if err := inst.Enqueue(ctx, Payload{Seq: int64(i), T: pr.Now(), Fail: fail}); err != nil {
					errs[w] = err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func produceBatches(ctx context.Context, inst Instance, pr *Probe, n, batch, fail int) error {
	for start := 0; start < n; start += batch {
		end := min(start+batch, n)
		ps := make([]Payload, 0, end-start)
		t := pr.Now()
		for i := start; i < end; i++ {
			ps = append(ps, Payload{Seq: int64(i), T: t, Fail: fail})
		}
		if err := inst.EnqueueBatch(ctx, ps); err != nil {
			return err
		}
	}
	return nil
}

func steady(ctx context.Context, sys System, dir string, p Params) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	total := int(float64(p.SteadyRate)*p.SteadyFor.Seconds()) + p.Producers
	pr := NewProbe(total)
	inst, err := openFresh(ctx, sys, dir, p.Workers, pr)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", sys.Name(), err)
	}
	defer closeInst(inst)
	if err := inst.StartWorkers(ctx); err != nil {
		return nil, fmt.Errorf("start workers on %s: %w", sys.Name(), err)
	}
	// Each producer owns the sequence numbers w, w+P, w+2P, ... and the
	// instants start + seq/rate: an open-loop schedule that does not slow down
	// when the system does (a late producer enqueues at once).
	interval := time.Second / time.Duration(p.SteadyRate)
	c0 := CPUTime()
	start := time.Now()
	deadline := start.Add(p.SteadyFor)
	var wg sync.WaitGroup
	counts := make([]int, p.Producers)
	errs := make([]error, p.Producers)
	for w := 0; w < p.Producers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for seq := w; seq < total; seq += p.Producers {
				at := start.Add(time.Duration(seq) * interval)
				if !at.Before(deadline) {
					return
				}
				if d := time.Until(at); d > 0 {
					time.Sleep(d)
				}
				if err := inst.Enqueue(ctx, Payload{Seq: int64(seq), T: pr.Now()}); err != nil {
					errs[w] = err
					return
				}
				counts[w]++
			}
		}(w)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("enqueue on %s: %w", sys.Name(), err)
		}
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	if err := inst.WaitCompleted(ctx, n); err != nil {
		return nil, fmt.Errorf("wait for %d jobs on %s: %w", n, sys.Name(), err)
	}
	elapsed := time.Since(start)
	lat := pr.Latencies(total)
	if len(lat) != n {
		return nil, fmt.Errorf("%s: %d jobs enqueued but %d started", sys.Name(), n, len(lat))
	}
	r := Result{
		"done/s": float64(n) / elapsed.Seconds(),
		"p50ms":  Percentile(lat, 50).Seconds() * 1000,
		"p99ms":  Percentile(lat, 99).Seconds() * 1000,
		"dups":   float64(pr.Duplicates()),
		"cpu":    (CPUTime() - c0).Seconds() / elapsed.Seconds(),
	}
	syncsPerJob(inst, n, r)
	return r, nil
}

// Percentile is the nearest-rank percentile of ds (sorted in place).
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(q/100*float64(len(ds))+0.999999) - 1
	rank = max(0, min(rank, len(ds)-1))
	return ds[rank]
}

// Median of xs (copied, not modified).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
