package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFlow runs the program: no tenant ran more than two syncs at once, the small tenant's
// three syncs all started among the first six (fair share: the big tenant's backlog, enqueued
// with it, does not come first), and the migration waited for its failed step's retry.
func TestFlow(t *testing.T) {
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a job that never starts fails
	defer cancel()
	rep, err := run(ctx, t.TempDir(), &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if rep.peak["big"] > 2 || rep.peak["small"] > 2 || len(rep.order) != 15 {
		t.Errorf("peaks %v over %d syncs, want at most 2 per tenant over 15", rep.peak, len(rep.order))
	}
	if n := strings.Count(strings.Join(rep.order[:6], " "), "small"); n != 3 {
		t.Errorf("the small tenant started %d of its 3 syncs among the first 6: %q", n, rep.order)
	}
	if want := []string{"add column", "add column", "backfill", "drop old column"}; !slices.Equal(rep.steps, want) {
		t.Errorf("migration steps ran %q, want %q", rep.steps, want)
	}
	if !strings.Contains(out.String(), "1 dead, 2 held") {
		t.Errorf("the report does not show the held migration:\n%s", out.String())
	}
}
