package runner

import (
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/sim/disk"
)

// replayJournal writes a journal of jobs (32-byte payloads, EnqueueMany batches of 1,000, one
// target) to an in-memory disk: pending, each job's Enqueued record only (due in a day);
// finished, each job enqueued, started and succeeded (three records; the live state is
// the terminal jobs). It returns the disk and the records written.
func replayJournal(b *testing.B, jobs int, finished, compact bool) (*disk.Disk, int64) {
	d := disk.New(1)
	now := epoch
	e, err := Open(d, journalName, Config{Capacity: 64, CompactBytes: 1 << 40}, now)
	if err != nil {
		b.Fatal(err)
	}
	batch := perJobJobs(perJobBatch)
	due := now
	if !finished {
		due = now.Add(24 * time.Hour)
	}
	for i := range batch {
		batch[i].Due = due
	}
	if err := e.Dispatch(now, true); err != nil {
		b.Fatal(err)
	}
	for n := 0; n < jobs; n += perJobBatch {
		if _, _, err := e.EnqueueMany(now, batch[:min(perJobBatch, jobs-n)]); err != nil {
			b.Fatal(err)
		}
		res, err := e.Commit(now)
		for err == nil && finished && len(res.Starts) > 0 {
			for _, a := range res.Starts {
				if err := e.AttemptDone(now, a.Token, Success()); err != nil {
					b.Fatal(err)
				}
			}
			res, err = e.Commit(now)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if compact {
		if err := e.Compact(); err != nil {
			b.Fatal(err)
		}
	}
	records := e.Status().Records
	if err := e.Close(); err != nil {
		b.Fatal(err)
	}
	return d, records
}

// BenchmarkEngineReplay measures Open on an in-memory disk (no I/O: framing, CRCs, decoding
// and applying): a journal of 1,000,000 pending jobs, one of 300,000 jobs that each
// finished (900,000 records), and the pending journal compacted into a snapshot (records/s
// then counts one per job). It reports records per second of process CPU (GC included)
// and the heap bytes per job the open leaves live.
func BenchmarkEngineReplay(b *testing.B) {
	for _, c := range []struct {
		name     string
		jobs     int
		finished bool
		compact  bool
	}{{"pending", 1_000_000, false, false}, {"finished", 300_000, true, false}, {"snapshot", 1_000_000, false, true}} {
		b.Run(c.name, func(b *testing.B) {
			d, records := replayJournal(b, c.jobs, c.finished, c.compact)
			if c.compact {
				records = int64(c.jobs)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var cpu time.Duration
			for b.Loop() {
				c0 := cpuTime()
				e, err := Open(d, journalName, Config{Capacity: 64, CompactBytes: 1 << 40}, epoch)
				cpu += cpuTime() - c0
				if err != nil {
					b.Fatal(err)
				}
				if st := e.Status(); st.Waiting+st.Succeeded != c.jobs {
					b.Fatalf("replayed %d waiting and %d succeeded jobs, want %d", st.Waiting, st.Succeeded, c.jobs)
				}
				if err := e.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			e, err := Open(d, journalName, Config{Capacity: 64, CompactBytes: 1 << 40}, epoch)
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(e)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(c.jobs), "live-B/job")
			if size, err := d.Stat(journalName); err == nil {
				b.ReportMetric(float64(size)/float64(records), "B/record")
			}
			b.ReportMetric(float64(b.N)*float64(records)/cpu.Seconds(), "records/cpu-s")
			b.ReportMetric(float64(b.N)*float64(records)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// Replay counts each kind's waiting jobs as records change them (the count that sizes the
// kind's queue at replay's end): after a journal of three kinds' jobs enqueued, started,
// failed for a retry, succeeded and cancelled, every kind's count is its waiting jobs.
func TestReplayCountsEveryKindsWaitingJobs(t *testing.T) {
	d := disk.New(1)
	cfg := Config{Capacity: 8, CompactBytes: 1 << 40}
	e, err := Open(d, journalName, cfg, epoch)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []NewJob
	for i := range 30 {
		jobs = append(jobs, NewJob{Due: epoch, Target: "t", Opts: Opts{Kind: []string{"", "a", "b"}[i%3]}})
	}
	if _, _, err := e.EnqueueMany(epoch, jobs); err != nil {
		t.Fatal(err)
	}
	if err := e.Dispatch(epoch, true); err != nil {
		t.Fatal(err)
	}
	res, err := e.Commit(epoch)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range res.Starts {
		o := Success()
		if i%2 == 0 {
			o = Failure("again", true)
		}
		if err := e.AttemptDone(epoch, a.Token, o); err != nil {
			t.Fatal(err)
		}
	}
	for id := uint64(20); id <= 24; id++ {
		if _, err := e.Cancel(id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Commit(epoch); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	cfg, err = cfg.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(cfg.machine())
	if err != nil {
		t.Fatal(err)
	}
	m.replaying = true
	if _, err := journal.Read(d, journalName, cfg.journal(), func(r journal.Record) error {
		return m.Replay(r.Tag, r.Snapshot, r.Data)
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, j := range m.order {
		if j.State == Waiting {
			want[j.Opts.Kind]++
		}
	}
	if len(want) != 3 || want["a"] == 0 {
		t.Fatalf("the journal should leave waiting jobs of every kind: %v", want)
	}
	for _, k := range m.kindList {
		if k.replayWaiting != want[k.name] {
			t.Errorf("kind %q: %d waiting counted, %d waiting", k.name, k.replayWaiting, want[k.name])
		}
	}
}
