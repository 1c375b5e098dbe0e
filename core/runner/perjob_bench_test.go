package runner

import (
	"log/slog"
	"math/rand"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/sim/disk"
)

// perJobBacklog is the waiting jobs kept queued while the per-job benchmarks run, as in a
// runner working through a batch-enqueued backlog.
const perJobBacklog = 10_000

// perJobBatch is the jobs one EnqueueMany adds.
const perJobBatch = 1000

// perJobPayload is the benchmarks' 32-byte payload.
var perJobPayload = []byte("0123456789abcdef0123456789abcdef")

// cpuTime is this process's user+system CPU time: on a shared machine the wall time per op
// also counts the time other processes held the cores, the CPU time does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process CPU time since c0 per job as cpu-ns/job.
func reportCPU(b *testing.B, c0 time.Duration, jobs int) {
	b.ReportMetric(float64((cpuTime()-c0).Nanoseconds())/float64(jobs), "cpu-ns/job")
}

func perJobJobs(n int) []NewJob {
	jobs := make([]NewJob, n)
	for i := range jobs {
		jobs[i] = NewJob{Target: "t", Payload: perJobPayload}
	}
	return jobs
}

// BenchmarkMachinePerJob measures the machine's cost of one job's whole life, without the
// journal: its share of an EnqueueMany of 1,000, the schedule that starts it, the Started and
// Finished records' encoding, the outcome and the acks, with 64 units and 10,000 jobs waiting.
// One op is one job; -benchmem gives allocations per job.
func BenchmarkMachinePerJob(b *testing.B) {
	machinePerJob(b, nil, perJobJobs(perJobBatch))
}

// machinePerJob runs BenchmarkMachinePerJob's loop on a machine with kinds registered,
// enqueuing batch whenever the backlog falls a batch short.
func machinePerJob(b *testing.B, kinds []KindConfig, batch []NewJob) {
	const capacity = 64
	m := mustMachine(MachineConfig{Policy: retry.DefaultPolicy(), Circuit: breaker.DefaultCircuit(), Capacity: capacity,
		RecordMax: 1 << 20, Logger: slog.New(slog.DiscardHandler), Rand: rand.New(rand.NewSource(1)), AgeMax: time.Minute,
		Kinds: kinds})
	now := epoch
	sync := func() Ready {
		m.Step(Synced{Through: m.seq})
		return m.Ready()
	}
	for range perJobBacklog / perJobBatch {
		if err := m.Step(EnqueueMany{Now: now, Jobs: batch}); err != nil {
			b.Fatal(err)
		}
	}
	now = now.Add(time.Millisecond) // rate buckets, empty at open, hold their burst
	m.Step(Tick{Now: now, Admit: true})
	starts := sync().Starts
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuTime()
	done := 0
	for done < b.N {
		if len(starts) == 0 {
			b.Fatalf("nothing started after %d jobs", done)
		}
		for _, a := range starts {
			m.Step(AttemptDone{Now: now, Token: a.Token, Outcome: Success()})
		}
		done += len(starts)
		if m.waiting() < perJobBacklog-perJobBatch {
			m.Step(EnqueueMany{Now: now, Jobs: batch})
		}
		m.Step(Tick{Now: now, Admit: true})
		starts = sync().Starts
		now = now.Add(time.Microsecond)
	}
	reportCPU(b, c0, done)
}

// BenchmarkEnginePerJob is BenchmarkMachinePerJob through the Engine over the simulator's
// in-memory disk: the journal's framing and CRCs included, the fsync free. One op is one job.
// The journal appends (no preallocation): the in-memory disk would copy its zeros, which the
// real disk does not, and that would be most of what this measures.
func BenchmarkEnginePerJob(b *testing.B) {
	d := disk.New(1)
	now := epoch
	e, err := Open(d, journalName, Config{Capacity: 64, CompactBytes: 1 << 40, PreallocBytes: -1}, now)
	if err != nil {
		b.Fatal(err)
	}
	batch := perJobJobs(perJobBatch)
	for range perJobBacklog / perJobBatch {
		if _, _, err := e.EnqueueMany(now, batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := e.Dispatch(now, true); err != nil {
		b.Fatal(err)
	}
	res, err := e.Commit(now)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuTime()
	done := 0
	for done < b.N {
		for _, a := range res.Starts {
			if err := e.AttemptDone(now, a.Token, Success()); err != nil {
				b.Fatal(err)
			}
		}
		done += len(res.Starts)
		if e.m.kindOf("").q.len() < perJobBacklog-perJobBatch {
			if _, _, err := e.EnqueueMany(now, batch); err != nil {
				b.Fatal(err)
			}
		}
		if res, err = e.Commit(now); err != nil {
			b.Fatal(err)
		}
		now = now.Add(time.Microsecond)
	}
	reportCPU(b, c0, done)
}

// BenchmarkMachinePerJobFlow is BenchmarkMachinePerJob on a registered kind whose jobs are
// spread over 1,000 flow keys, side by side: no flow control; a kind rate, a key rate and a
// key limit configured far above what runs (not binding); the same with fair share; and a
// binding key limit of 1 (at most 1,000 of the 10,000 waiting jobs may start, the rest park).
// One op is one job; cpu-ns/job is the process CPU time per job.
func BenchmarkMachinePerJobFlow(b *testing.B) {
	const capacity, keys = 64, 1000
	loose := Rate{Count: 1_000_000, Per: time.Millisecond, Burst: 1_000_000}
	batch := perJobJobs(perJobBatch)
	for i := range batch {
		batch[i].Opts = Opts{Kind: "k", Key: "key" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('0'+i%keys/676))}
	}
	for _, c := range []struct {
		name string
		kind KindConfig
	}{
		{"none", KindConfig{Name: "k"}},
		{"limits-not-binding", KindConfig{Name: "k", Rate: loose, KeyRate: loose, KeyLimit: capacity}},
		{"limits-not-binding-fair", KindConfig{Name: "k", Rate: loose, KeyRate: loose, KeyLimit: capacity, Fair: true}},
		{"key-limit-1-binding", KindConfig{Name: "k", KeyLimit: 1}},
	} {
		b.Run(c.name, func(b *testing.B) { machinePerJob(b, []KindConfig{c.kind}, batch) })
	}
}
