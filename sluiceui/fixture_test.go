package sluiceui_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// fixture opens a runner in a new directory and leaves it with jobs in every terminal state
// and a pending one: payloads starting with "bad" fail permanently (dead), "slow" jobs are
// due in an hour (pending, then cancelled for id 4 only when cancel is set).
//
//	1 ok-1        succeeded
//	2 bad-1       dead (permanent)
//	3 ok-2        succeeded (target b.example)
//	4 later       pending (due in an hour)
//	5 bad-2       dead (target b.example)
func fixture(t *testing.T) (*sluice.Kind[string], string) {
	t.Helper()
	dir := t.TempDir()
	h := func(_ context.Context, j sluice.Job[string]) sluice.Outcome {
		if strings.HasPrefix(j.Payload, "bad") {
			return sluice.Failed(errors.New("smtp 550: mailbox unavailable"), false)
		}
		return sluice.Succeeded()
	}
	r, err := sluice.Open(dir, sluice.Config{Capacity: 2}, sluice.JSON[string](), h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	ctx := context.Background()
	for _, j := range []struct {
		target, payload string
		due             time.Time
	}{
		{"a.example", "ok-1", time.Time{}},
		{"a.example", "bad-1", time.Time{}},
		{"b.example", "ok-2", time.Time{}},
		{"a.example", "later", time.Now().Add(time.Hour)},
		{"b.example", "bad-2", time.Time{}},
	} {
		if _, err := r.Enqueue(ctx, j.due, j.target, j.payload); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.DrainDue(ctx); err != nil {
		t.Fatal(err)
	}
	return r, dir
}

// quiet drops the handler's logs in tests.
var quiet = slog.New(slog.DiscardHandler)
