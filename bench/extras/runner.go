package extras

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/adapters/osfs"
	"github.com/sluicehq/sluice/core/runner"
)

// runnerCfg never compacts on its own, so a journal keeps every record.
func runnerCfg(capacity int) runner.Config {
	return runner.Config{Capacity: capacity, CompactBytes: 1 << 50, Retention: 1 << 30}
}

// fillPending enqueues n jobs (64-byte payloads), committing every batch.
func fillPending(e *runner.Engine, n, batch int, now time.Time) error {
	payload := make([]byte, 64)
	for i := 0; i < n; i++ {
		if _, _, err := e.Enqueue(now, now, "bench", payload); err != nil {
			return err
		}
		if (i+1)%batch == 0 || i == n-1 {
			if _, err := e.Commit(now); err != nil {
				return err
			}
		}
	}
	return nil
}

// fillDone enqueues n jobs and runs each to success with a wide pool, so
// the journal holds Enqueued, Started and Finished for every job.
func fillDone(e *runner.Engine, n, batch int, now time.Time) error {
	if err := e.Dispatch(now, true); err != nil {
		return err
	}
	payload := make([]byte, 64)
	for done := 0; done < n; {
		for i := done; i < min(n, done+batch); i++ {
			if _, _, err := e.Enqueue(now, now, "bench", payload); err != nil {
				return err
			}
		}
		res, err := e.Commit(now)
		if err != nil {
			return err
		}
		for len(res.Starts) > 0 {
			for _, a := range res.Starts {
				if err := e.AttemptDone(now, a.Token, runner.Success()); err != nil {
					return err
				}
			}
			if res, err = e.Commit(now); err != nil {
				return err
			}
		}
		done = min(n, done+batch)
	}
	return nil
}

// RunnerRecovery builds runner journals through core/runner.Engine over
// adapters/osfs (commits of 1,000 jobs), then times runner.Open (replay into
// the machine, orphans requeued, one sync; the median of three, wall and
// process CPU), Compact on the reopened engine, and Open of the compacted
// journal. Warm page cache.
func RunnerRecovery(scratch string, sizes []int) (Table, Table, error) {
	rec := Table{
		Title: "runner recovery (core/runner.Open over adapters/osfs: journal replay into the machine; 64-byte payloads, 1,000 jobs per commit, warm page cache; medians of 3 opens)",
		Rows:  []Row{{"journal", "records", "file MB", "open s", "records/s", "open CPU s", "records/CPU-s"}},
	}
	cmp := Table{
		Title: "compaction against live state (core/runner.Engine.Compact: snapshot encode, write, fsync, rename, dir fsync; live = pending jobs)",
		Rows:  []Row{{"live jobs", "journal MB before", "snapshot MB", "compact s", "live jobs/s", "reopen from snapshot s"}},
	}
	now := epoch
	for _, kind := range []string{"pending", "done"} {
		for _, n := range sizes {
			if kind == "done" && n > sizes[len(sizes)-2] {
				continue // 3 records per job: the largest size adds little but time
			}
			dir := filepath.Join(scratch, fmt.Sprintf("runner-%s-%d", kind, n))
			fsys, err := osfs.New(dir)
			if err != nil {
				return rec, cmp, err
			}
			capacity := 8
			if kind == "done" {
				capacity = 1000
			}
			e, err := runner.Open(fsys, "jobs.journal", runnerCfg(capacity), now)
			if err != nil {
				return rec, cmp, err
			}
			if kind == "pending" {
				err = fillPending(e, n, 1000, now)
			} else {
				err = fillDone(e, n, 1000, now)
			}
			if err != nil {
				return rec, cmp, fmt.Errorf("filling %d %s jobs: %w", n, kind, err)
			}
			records := uint64(e.Status().Durable)
			if err := e.Close(); err != nil {
				return rec, cmp, err
			}
			size, err := fsys.Stat("jobs.journal")
			if err != nil {
				return rec, cmp, err
			}
			open, cpu, _, err := timedOpen(fsys, runnerCfg(capacity), 3, func(st runner.Status) error {
				if kind == "pending" && st.Waiting != n || kind == "done" && st.Succeeded != n {
					return fmt.Errorf("reopened %d %s jobs: %+v", n, kind, st)
				}
				return nil
			})
			if err != nil {
				return rec, cmp, err
			}
			rec.Rows = append(rec.Rows, Row{
				fmt.Sprintf("%d jobs %s", n, kind), fmt.Sprint(records), fmt.Sprintf("%.1f", float64(size)/(1<<20)),
				fmt.Sprintf("%.3f", open.Seconds()), fmt.Sprintf("%.0f", float64(records)/open.Seconds()),
				fmt.Sprintf("%.3f", cpu.Seconds()), fmt.Sprintf("%.0f", float64(records)/cpu.Seconds()),
			})
			if e, err = runner.Open(fsys, "jobs.journal", runnerCfg(capacity), now); err != nil {
				return rec, cmp, err
			}
			if kind == "pending" {
				t1 := time.Now()
				if err := e.Compact(); err != nil {
					return rec, cmp, err
				}
				compact := time.Since(t1)
				snap, err := fsys.Stat("jobs.journal")
				if err != nil {
					return rec, cmp, err
				}
				if err := e.Close(); err != nil {
					return rec, cmp, err
				}
				t2 := time.Now()
				e, err = runner.Open(fsys, "jobs.journal", runnerCfg(capacity), now)
				reopen := time.Since(t2)
				if err != nil {
					return rec, cmp, err
				}
				if w := e.Status().Waiting; w != n {
					return rec, cmp, fmt.Errorf("after compaction: %d waiting, want %d", w, n)
				}
				cmp.Rows = append(cmp.Rows, Row{
					fmt.Sprint(n), fmt.Sprintf("%.1f", float64(size)/(1<<20)), fmt.Sprintf("%.1f", float64(snap)/(1<<20)),
					fmt.Sprintf("%.3f", compact.Seconds()), fmt.Sprintf("%.0f", float64(n)/compact.Seconds()),
					fmt.Sprintf("%.3f", reopen.Seconds()),
				})
			}
			e.Close()
			fsys.Close()
			os.RemoveAll(dir)
		}
	}
	return rec, cmp, nil
}
