package sluice

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adapters/osfs"
	"github.com/sluicehq/sluice/core/runner"
)

// endToEnd enqueues jobs from producers concurrent callers into a fresh runner on the real
// disk while Run dispatches them to a no-op handler, and returns the time until the last one
// succeeded (durably) and the fsyncs spent.
func endToEnd(b *testing.B, syncEvery bool, jobs, producers int) (time.Duration, int64) {
	b.Helper()
	var settled atomic.Int64
	all := make(chan struct{})
	cfg := Config{Logger: quiet, Capacity: 8, OnSettled: func(Settled) {
		if settled.Add(1) == int64(jobs) {
			close(all)
		}
	}}
	cfg.opts.SyncEveryRecord = syncEvery
	r, err := Open(b.TempDir(), cfg, Bytes(), func(context.Context, Job[[]byte]) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	syncs0 := readStats(b, r).Syncs
	payload := []byte("0123456789abcdef0123456789abcdef") // 32 bytes
	t0 := time.Now()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := p; i < jobs; i += producers {
				if _, err := r.Enqueue(ctx, time.Time{}, "t", payload); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	<-all
	d := time.Since(t0)
	syncs := readStats(b, r).Syncs - syncs0
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	return d, syncs
}

// BenchmarkDurableJobs measures durable jobs per second end to end (enqueue → no-op handler →
// succeeded, every transition fsynced) with group commit, against the same runner committing
// every command and every outcome on its own (SyncEveryRecord), in the same run. 64 producers
// enqueue one job per call; 8 handlers.
func BenchmarkDurableJobs(b *testing.B) {
	const jobs, baselineJobs, producers = 4000, 1000, 64
	var group, every time.Duration
	var groupSyncs, everySyncs int64
	for b.Loop() {
		d, s := endToEnd(b, false, jobs, producers)
		group, groupSyncs = group+d, groupSyncs+s
		d, s = endToEnd(b, true, baselineJobs, producers)
		every, everySyncs = every+d, everySyncs+s
	}
	n := float64(b.N)
	groupRate := n * jobs / group.Seconds()
	everyRate := n * baselineJobs / every.Seconds()
	b.ReportMetric(groupRate, "jobs/s")
	b.ReportMetric(everyRate, "baseline-jobs/s")
	b.ReportMetric(groupRate/everyRate, "x-vs-sync-every-record")
	b.ReportMetric(float64(groupSyncs)/(n*jobs), "fsyncs/job")
	b.ReportMetric(float64(everySyncs)/(n*baselineJobs), "baseline-fsyncs/job")
}

// BenchmarkReplay measures replay speed: records per second when opening a journal of one
// million Enqueued records (32-byte payloads, jobs due in the far future so nothing starts).
func BenchmarkReplay(b *testing.B) {
	const records, batch = 1_000_000, 10_000
	dir := b.TempDir()
	fsys, err := osfs.New(dir)
	if err != nil {
		b.Fatal(err)
	}
	ecfg := runner.Config{Capacity: 8, CompactBytes: 1 << 40}
	now := time.Now()
	e, err := runner.Open(fsys, journalName, ecfg, now)
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte("0123456789abcdef0123456789abcdef")
	later := now.Add(24 * time.Hour)
	for i := 0; i < records; i += batch {
		for j := 0; j < batch; j++ {
			if _, _, err := e.Enqueue(now, later, fmt.Sprint("t", j%16), payload); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := e.Flush(now); err != nil {
			b.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		b.Fatal(err)
	}
	_ = fsys.Close()
	size, _ := osfsSize(dir)
	b.SetBytes(size)
	cfg := Config{Logger: quiet, CompactBytes: 1 << 40}
	var total, cpu time.Duration
	for b.Loop() {
		t0, c0 := time.Now(), processCPU()
		r, err := Open(dir, cfg, Bytes(), func(context.Context, Job[[]byte]) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		total, cpu = total+time.Since(t0), cpu+processCPU()-c0
		if st := readStats(b, r); st.Waiting != records {
			b.Fatalf("replayed %d waiting jobs, want %d", st.Waiting, records)
		}
		if err := r.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*records/total.Seconds(), "records/s")
	// Per second of process CPU (GC included): on a shared machine wall time also counts the
	// time other processes held the cores.
	b.ReportMetric(float64(b.N)*records/cpu.Seconds(), "records/cpu-s")
}

func osfsSize(dir string) (int64, error) {
	fsys, err := osfs.New(dir)
	if err != nil {
		return 0, err
	}
	defer fsys.Close()
	return fsys.Stat(journalName)
}

// BenchmarkWorkerThroughput measures the worker driver's cost per message: receive → no-op
// handler → delete through the in-memory queue (no network), 10 handlers, deletes batched.
func BenchmarkWorkerThroughput(b *testing.B) {
	const messages = 20_000
	var total time.Duration
	var deletes int
	for b.Loop() {
		mq := newMemQueue()
		for range messages {
			mq.send("x")
		}
		var acked atomic.Int64
		all := make(chan struct{})
		w, err := NewWorker(mq, WorkerConfig{Window: 30 * time.Second, Wait: time.Second, Logger: quiet},
			func(context.Context, Message) error {
				if acked.Add(1) == messages {
					close(all)
				}
				return nil
			})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		t0 := time.Now()
		go func() { ran <- w.Run(ctx) }()
		<-all
		for w.Stats().Succeeded < messages || w.Stats().Held > 0 {
			time.Sleep(100 * time.Microsecond)
		}
		total += time.Since(t0)
		cancel()
		if err := <-ran; err != nil {
			b.Fatal(err)
		}
		deletes += mq.count("delete")
	}
	n := float64(b.N)
	b.ReportMetric(n*messages/total.Seconds(), "msgs/s")
	b.ReportMetric(float64(deletes)/(n*messages), "delete-calls/msg")
}

// BenchmarkEnqueueMany measures enqueueing 1,000 jobs on the real disk two ways in the same run:
// one EnqueueMany call (one record batch, one fsync) against 1,000 concurrent Enqueue calls
// (group commit gathers them into as few batches as the syncs allow). No handler runs.
func BenchmarkEnqueueMany(b *testing.B) {
	const jobs = 1000
	payload := []byte("0123456789abcdef0123456789abcdef") // 32 bytes
	open := func() *Kind[[]byte] {
		r, err := Open(b.TempDir(), Config{Logger: quiet, Capacity: 8}, Bytes(),
			func(context.Context, Job[[]byte]) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	ctx := context.Background()
	var many, single time.Duration
	var manySyncs, singleSyncs int64
	batch := make([]NewJob[[]byte], jobs)
	for i := range batch {
		batch[i] = NewJob[[]byte]{Target: "t", Payload: payload}
	}
	for b.Loop() {
		r := open()
		s0 := readStats(b, r).Syncs
		t0 := time.Now()
		if _, err := r.EnqueueMany(ctx, batch); err != nil {
			b.Fatal(err)
		}
		many += time.Since(t0)
		manySyncs += readStats(b, r).Syncs - s0
		r.Close()

		r = open()
		s0 = readStats(b, r).Syncs
		t0 = time.Now()
		var wg sync.WaitGroup
		for range jobs {
			wg.Go(func() {
				if _, err := r.Enqueue(ctx, time.Time{}, "t", payload); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		single += time.Since(t0)
		singleSyncs += readStats(b, r).Syncs - s0
		r.Close()
	}
	n := float64(b.N)
	b.ReportMetric(float64(many.Microseconds())/n, "many-µs/1000")
	b.ReportMetric(float64(single.Microseconds())/n, "concurrent-µs/1000")
	b.ReportMetric(float64(single)/float64(many), "x-faster")
	b.ReportMetric(float64(manySyncs)/n, "many-fsyncs")
	b.ReportMetric(float64(singleSyncs)/n, "concurrent-fsyncs")
}
