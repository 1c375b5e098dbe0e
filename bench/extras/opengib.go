package extras

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/sluicehq/sluice/adapters/osfs"
	"github.com/sluicehq/sluice/bench/harness"
	"github.com/sluicehq/sluice/core/runner"
)

// timedOpen opens name rounds times (closing each), after a GC so that one open's garbage
// is not the next one's work, and returns the median wall and CPU time and the heap the
// last open left live.
func timedOpen(fsys *osfs.FS, cfg runner.Config, rounds int, check func(runner.Status) error) (wall, cpu time.Duration, live uint64, err error) {
	var walls, cpus []time.Duration
	for range rounds {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		t0, c0 := time.Now(), harness.CPUTime()
		e, err := runner.Open(fsys, "jobs.journal", cfg, epoch)
		walls, cpus = append(walls, time.Since(t0)), append(cpus, harness.CPUTime()-c0)
		if err != nil {
			return 0, 0, 0, err
		}
		if err := check(e.Status()); err != nil {
			return 0, 0, 0, err
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		live = after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
		if err := e.Close(); err != nil {
			return 0, 0, 0, err
		}
	}
	slices.Sort(walls)
	slices.Sort(cpus)
	return walls[rounds/2], cpus[rounds/2], live, nil
}

// OpenGiB writes journals of 1 GiB (the default JournalMax, less 2 MiB) of pending jobs (one
// target, no options) for each payload size, then times runner.Open of the journal and,
// compacted, of its snapshot: medians of three opens, wall and process CPU (GC included),
// warm page cache. SnapshotMax is raised so that the live state compacts.
func OpenGiB(scratch string, payloads []int) (Table, error) {
	t := Table{
		Title: "a 1 GiB journal opened (core/runner.Open over adapters/osfs: pending jobs, 1,000 per EnqueueMany; medians of 3 opens, warm page cache)",
		Rows:  []Row{{"payload B", "jobs", "file MB", "open s", "open CPU s", "records/CPU-s", "live MB", "snapshot MB", "snapshot open s", "snapshot open CPU s"}},
		Notes: []string{"open CPU s is the process's user+system time during Open, the GC's workers included; live MB is the heap the open left live."},
	}
	cfg := runnerCfg(8)
	cfg.SnapshotMax = 3 << 29
	for _, size := range payloads {
		dir := filepath.Join(scratch, fmt.Sprintf("open-gib-%d", size))
		fsys, err := osfs.New(dir)
		if err != nil {
			return t, err
		}
		jobs, err := fillMany(fsys, cfg, 1<<30-2<<20, size)
		if err != nil {
			return t, fmt.Errorf("filling jobs of %d bytes: %w", size, err)
		}
		file, err := fsys.Stat("jobs.journal")
		if err != nil {
			return t, err
		}
		check := func(st runner.Status) error {
			if st.Waiting != jobs {
				return fmt.Errorf("opened %d waiting jobs, want %d", st.Waiting, jobs)
			}
			return nil
		}
		wall, cpu, live, err := timedOpen(fsys, cfg, 3, check)
		if err != nil {
			return t, err
		}
		e, err := runner.Open(fsys, "jobs.journal", cfg, epoch)
		if err != nil {
			return t, err
		}
		if err := e.Compact(); err != nil {
			return t, err
		}
		if err := e.Close(); err != nil {
			return t, err
		}
		snap, err := fsys.Stat("jobs.journal")
		if err != nil {
			return t, err
		}
		swall, scpu, _, err := timedOpen(fsys, cfg, 3, check)
		if err != nil {
			return t, err
		}
		t.Rows = append(t.Rows, Row{
			fmt.Sprint(size), fmt.Sprint(jobs), fmt.Sprintf("%.0f", float64(file)/(1<<20)),
			fmt.Sprintf("%.3f", wall.Seconds()), fmt.Sprintf("%.3f", cpu.Seconds()), fmt.Sprintf("%.0f", float64(jobs)/cpu.Seconds()),
			fmt.Sprintf("%.0f", float64(live)/(1<<20)), fmt.Sprintf("%.0f", float64(snap)/(1<<20)),
			fmt.Sprintf("%.3f", swall.Seconds()), fmt.Sprintf("%.3f", scpu.Seconds()),
		})
		fsys.Close()
		os.RemoveAll(dir)
	}
	return t, nil
}

// fillMany writes pending jobs with payloads of size bytes, 1,000 per EnqueueMany and commit,
// until the journal holds bytes, closes the engine and returns the jobs it wrote.
func fillMany(fsys *osfs.FS, cfg runner.Config, bytes int64, size int) (int, error) {
	e, err := runner.Open(fsys, "jobs.journal", cfg, epoch)
	if err != nil {
		return 0, err
	}
	batch := make([]runner.NewJob, 1000)
	payload := make([]byte, size)
	for i := range batch {
		batch[i] = runner.NewJob{Due: epoch.Add(24 * time.Hour), Target: "bench", Payload: payload}
	}
	jobs := 0
	for per := len(batch); per > 0; {
		if _, _, err := e.EnqueueMany(epoch, batch[:per]); err != nil {
			return 0, err
		}
		if _, err := e.Commit(epoch); err != nil {
			return 0, err
		}
		jobs += per
		// The next batch fills what is left, at the bytes a job took so far.
		per = min(len(batch), int((bytes-e.Status().Bytes)*int64(jobs)/e.Status().Bytes))
	}
	return jobs, e.Close()
}
