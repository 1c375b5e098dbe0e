package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/bench/extras"
)

func one(t extras.Table, err error) ([]extras.Table, error) { return []extras.Table{t}, err }

// runExtras prints the sluice-only figures (those named in only, comma-separated; all if
// empty); a failing step is reported and the others still run.
func runExtras(ctx context.Context, out io.Writer, scratch, only string) {
	steps := []struct {
		name string
		run  func() ([]extras.Table, error)
	}{
		{"journal replay", func() ([]extras.Table, error) {
			return one(extras.JournalReplay(scratch, []int{10_000, 100_000, 1_000_000}, 64, 1000))
		}},
		{"runner recovery and compaction", func() ([]extras.Table, error) {
			a, b, err := extras.RunnerRecovery(scratch, []int{10_000, 100_000, 1_000_000})
			return []extras.Table{a, b}, err
		}},
		{"simulator", func() ([]extras.Table, error) {
			return one(extras.SimSpeed(15*time.Second, runtime.NumCPU()))
		}},
		{"lease controller", func() ([]extras.Table, error) {
			return one(extras.LeaseCost([]int{10, 1_000, 10_000, 100_000}))
		}},
		// Last: its 1 GiB journals leave the process a heap the other figures would run in.
		{"a 1 GiB journal opened", func() ([]extras.Table, error) {
			return one(extras.OpenGiB(scratch, []int{64, 256, 1024}))
		}},
	}
	for _, s := range steps {
		if ctx.Err() != nil {
			return
		}
		if only != "" && !slices.Contains(strings.Split(only, ","), s.name) {
			continue
		}
		t0 := time.Now()
		ts, err := s.run()
		if err != nil {
			fmt.Fprintf(out, "\n### %s\n\nFAILED: %v\n", s.name, err)
			continue
		}
		for _, t := range ts {
			fmt.Fprintf(out, "\n### %s\n\n", t.Title)
			rows := make([][]string, len(t.Rows))
			for i, r := range t.Rows {
				rows[i] = r
			}
			writeAligned(out, rows)
			for _, n := range t.Notes {
				fmt.Fprintln(out, n)
			}
		}
		fmt.Fprintf(os.Stderr, "extras: %s took %s\n", s.name, time.Since(t0).Round(time.Millisecond))
	}
}
