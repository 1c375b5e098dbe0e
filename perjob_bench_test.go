package sluice

import (
	"context"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// processCPU is this process's user+system CPU time: on a shared machine the wall time per op
// also counts the time other processes held the cores, the CPU time does not.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkOwnerPerJob measures the driver's whole cost of one job, the disk taken out: a
// runner on tmpfs (/dev/shm: the real file system adapter, fsync free), Capacity 64, jobs
// enqueued by EnqueueMany in batches of 1,000 while Run processes them with a no-op handler,
// until the last one's success is durable. One op is one job; cpu-ns/job is the process CPU
// time per job and -benchmem gives allocations per job. (The simulator's in-memory disk is
// not used: its copies of a growing file would be most of what this measures.)
func BenchmarkOwnerPerJob(b *testing.B) {
	const batch = 1000
	var settled atomic.Int64
	want := int64(b.N)
	all := make(chan struct{})
	cfg := Config{Logger: quiet, Capacity: 64, OnSettled: func(Settled) {
		if settled.Add(1) == want {
			close(all)
		}
	}}
	dir, err := os.MkdirTemp("/dev/shm", "sluice-bench-")
	if err != nil {
		b.Skipf("no tmpfs at /dev/shm: %v", err)
	}
	defer os.RemoveAll(dir)
	r, err := Open(dir, cfg, Bytes(), func(context.Context, Job[[]byte]) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	payload := []byte("0123456789abcdef0123456789abcdef")
	jobs := make([]NewJob[[]byte], batch)
	for i := range jobs {
		jobs[i] = NewJob[[]byte]{Target: "t", Payload: payload}
	}
	b.ReportAllocs()
	b.ResetTimer()
	c0 := processCPU()
	go func() { ran <- r.Run(ctx) }()
	for n := 0; n < b.N; n += batch {
		if _, err := r.EnqueueMany(ctx, jobs[:min(batch, b.N-n)]); err != nil {
			b.Fatal(err)
		}
	}
	<-all
	b.ReportMetric(float64((processCPU()-c0).Nanoseconds())/float64(b.N), "cpu-ns/job")
	b.StopTimer()
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
}
