package extras

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
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

// FreshOpenEnv, set in a child's environment to a directory, makes the bench's binary open
// that directory's journal (FreshOpen), print what it cost and exit: a fresh process pays for
// the pages of the state it builds, which an open after others in one process reuses.
const FreshOpenEnv = "SLUICE_BENCH_FRESH_OPEN"

// FreshOpen is the child's side: it opens dir's journal and prints the waiting jobs, then the
// wall, user and system seconds of the open.
func FreshOpen(dir string) error {
	fsys, err := osfs.New(dir)
	if err != nil {
		return err
	}
	defer fsys.Close()
	t0 := time.Now()
	u0, s0 := harness.CPUTimes()
	e, err := runner.Open(fsys, "jobs.journal", openCfg(), epoch)
	wall := time.Since(t0)
	u1, s1 := harness.CPUTimes()
	if err != nil {
		return err
	}
	fmt.Printf("%d %.3f %.3f %.3f\n", e.Status().Waiting, wall.Seconds(), (u1 - u0).Seconds(), (s1 - s0).Seconds())
	return e.Close()
}

// freshOpens opens dir in rounds fresh processes of this binary and returns the median CPU
// (user + system) and the system part of that run; each must open jobs waiting jobs.
func freshOpens(dir string, rounds, jobs int) (cpu, sys time.Duration, err error) {
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	type run struct{ cpu, sys time.Duration }
	var runs []run
	for range rounds {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), FreshOpenEnv+"="+dir)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			return 0, 0, fmt.Errorf("fresh open of %s: %w: %s", dir, err, stderr.Bytes())
		}
		var waiting int
		var w, u, s float64
		if _, err := fmt.Sscan(out.String(), &waiting, &w, &u, &s); err != nil {
			return 0, 0, fmt.Errorf("fresh open of %s printed %q: %w", dir, out.String(), err)
		}
		if waiting != jobs {
			return 0, 0, fmt.Errorf("fresh open of %s: %d waiting jobs, want %d", dir, waiting, jobs)
		}
		runs = append(runs, run{time.Duration((u + s) * 1e9), time.Duration(s * 1e9)})
	}
	slices.SortFunc(runs, func(a, b run) int { return int(a.cpu - b.cpu) })
	m := runs[rounds/2]
	return m.cpu, m.sys, nil
}

// openTimes are what opens measures of one journal file.
type openTimes struct {
	wall, cpu       time.Duration // medians of the opens in this process
	live            uint64        // the heap the last of them left live
	fresh, freshSys time.Duration // median CPU of the opens in fresh processes, and its system part
}

// opens times three opens of dir's journal in this process (timedOpen), then three in fresh
// processes (freshOpens); each must find jobs waiting jobs.
func opens(fsys *osfs.FS, dir string, cfg runner.Config, jobs int) (openTimes, error) {
	var o openTimes
	check := func(st runner.Status) error {
		if st.Waiting != jobs {
			return fmt.Errorf("opened %d waiting jobs, want %d", st.Waiting, jobs)
		}
		return nil
	}
	var err error
	if o.wall, o.cpu, o.live, err = timedOpen(fsys, cfg, 3, check); err != nil {
		return o, err
	}
	o.fresh, o.freshSys, err = freshOpens(dir, 3, jobs)
	return o, err
}

// openCfg is the configuration OpenGiB writes and opens with: SnapshotMax is raised so that
// the live state compacts.
func openCfg() runner.Config {
	cfg := runnerCfg(8)
	cfg.SnapshotMax = 3 << 29
	return cfg
}

// OpenGiB writes journals of 1 GiB (the default JournalMax, less 2 MiB) of pending jobs (one
// target, no options) for each payload size, then times runner.Open of the journal and,
// compacted, of its snapshot: medians of three opens in this process, wall and process CPU
// (GC included), warm page cache, and medians of three opens each in a fresh process.
func OpenGiB(scratch string, payloads []int) (Table, error) {
	t := Table{
		Title: "a 1 GiB journal opened (core/runner.Open over adapters/osfs: pending jobs, 1,000 per EnqueueMany; medians of 3 opens, warm page cache)",
		Rows: []Row{{"payload B", "jobs", "file MB", "open s", "open CPU s", "records/CPU-s", "fresh CPU s (sys)", "live MB",
			"snapshot MB", "snapshot open s", "snapshot open CPU s", "snapshot fresh CPU s (sys)"}},
		Notes: []string{"open CPU s is the process's user+system time during Open, the GC's workers included, the median of three opens in this process after others (so on memory the process already has); live MB is the heap the open left live.",
			"fresh CPU s is the same for an Open that is its process's first (the median of three processes, each its own): it also pays the kernel for first touching every page of the state it builds, the (sys) part."},
	}
	cfg := openCfg()
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
		journal, err := opens(fsys, dir, cfg, jobs)
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
		snapshot, err := opens(fsys, dir, cfg, jobs)
		if err != nil {
			return t, err
		}
		t.Rows = append(t.Rows, Row{
			fmt.Sprint(size), fmt.Sprint(jobs), fmt.Sprintf("%.0f", float64(file)/(1<<20)),
			fmt.Sprintf("%.3f", journal.wall.Seconds()), fmt.Sprintf("%.3f", journal.cpu.Seconds()),
			fmt.Sprintf("%.0f", float64(jobs)/journal.cpu.Seconds()),
			fmt.Sprintf("%.3f (%.3f)", journal.fresh.Seconds(), journal.freshSys.Seconds()),
			fmt.Sprintf("%.0f", float64(journal.live)/(1<<20)), fmt.Sprintf("%.0f", float64(snap)/(1<<20)),
			fmt.Sprintf("%.3f", snapshot.wall.Seconds()), fmt.Sprintf("%.3f", snapshot.cpu.Seconds()),
			fmt.Sprintf("%.3f (%.3f)", snapshot.fresh.Seconds(), snapshot.freshSys.Seconds()),
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
