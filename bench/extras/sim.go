package extras

import (
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/bench/harness"
	"github.com/sluicehq/sluice/sim"
)

// SimSpeed runs seeds 1, 2, 3, ... of the default (swarm) profile on
// `parallel` goroutines until budget has passed (runs under way finish), and
// reports seeds per minute and simulated seconds per wall second.
func SimSpeed(budget time.Duration, parallel int) (Table, error) {
	t := Table{
		Title: fmt.Sprintf("simulator (sim.Run, swarm profile, seeds from 1, %d in parallel, ~%s budget)", parallel, budget),
		Rows: []Row{{"seeds", "violations", "wall s", "seeds/min", "events/s (all)", "simulated s/wall s (per run)", "simulated s/wall s (all)",
			"median simulated s/run"}},
	}
	var (
		mu        sync.Mutex
		next      int64 = 1
		seeds     int
		bad       int
		steps     int64
		simTotal  time.Duration
		wallRuns  time.Duration
		simPerRun []float64
		firstErr  error
	)
	start := time.Now()
	var wg sync.WaitGroup
	for p := 0; p < parallel; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if time.Since(start) >= budget || firstErr != nil {
					mu.Unlock()
					return
				}
				seed := next
				next++
				mu.Unlock()
				t0 := time.Now()
				res, err := sim.Run(sim.Options{Seed: seed})
				el := time.Since(t0)
				mu.Lock()
				if err != nil {
					firstErr = fmt.Errorf("sim seed %d: %w", seed, err)
				} else {
					seeds++
					if res.Violation != nil {
						bad++
					}
					steps += int64(res.Steps)
					simTotal += res.End
					wallRuns += el
					simPerRun = append(simPerRun, res.End.Seconds())
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	if firstErr != nil {
		return t, firstErr
	}
	if seeds == 0 {
		return t, fmt.Errorf("sim: no seed finished")
	}
	t.Rows = append(t.Rows, Row{
		fmt.Sprint(seeds), fmt.Sprint(bad), fmt.Sprintf("%.1f", wall.Seconds()),
		fmt.Sprintf("%.1f", float64(seeds)/wall.Minutes()),
		fmt.Sprintf("%.0f", float64(steps)/wall.Seconds()),
		fmt.Sprintf("%.0f", simTotal.Seconds()/wallRuns.Seconds()),
		fmt.Sprintf("%.0f", simTotal.Seconds()/wall.Seconds()),
		fmt.Sprintf("%.0f", harness.Median(simPerRun)),
	})
	t.Notes = append(t.Notes, "per run: simulated time / wall time of one single-threaded run; all: simulated time of every run / elapsed wall time.")
	return t, nil
}
