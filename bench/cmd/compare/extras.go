package main

import (
	"context"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/bench/extras"
)

func runExtras(ctx context.Context, out io.Writer, scratch string) {
	steps := []struct {
		name string
		run  func() (extras.Table, error)
	}{
		{"journal replay", func() (extras.Table, error) {
			return extras.JournalReplay(scratch, []int{10_000, 100_000, 1_000_000}, 64, 1000)
		}},
	}
	for _, s := range steps {
		if ctx.Err() != nil {
			return
		}
		t, err := s.run()
		if err != nil {
			fmt.Fprintf(out, "\n### %s\n\nFAILED: %v\n", s.name, err)
			continue
		}
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
}
