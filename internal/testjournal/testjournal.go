// Package testjournal writes a runner directory of five sample jobs for the tests of the
// tools that read one (cmd/sluice, sluiceui):
//
//	1 ok-1   succeeded            a.example
//	2 bad-1  dead (permanent)     a.example
//	3 ok-2   succeeded            b.example
//	4 later  pending (in an hour) a.example
//	5 bad-2  dead (permanent)     b.example
//
// Rules:
//
//  1. Only _test.go files import it.
//  2. Payloads are JSON strings; a payload starting with "bad" fails permanently with
//     "smtp 550: mailbox unavailable".
//  3. Every runner it opens is closed when the test ends.
package testjournal

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Open opens a runner in a new directory and leaves it holding the five jobs.
func Open(t testing.TB) (*sluice.Kind[string], string) {
	t.Helper()
	dir := t.TempDir()
	h := func(_ context.Context, j sluice.Job[string]) error {
		if strings.HasPrefix(j.Payload, "bad") {
			return sluice.Permanent(errors.New("smtp 550: mailbox unavailable"))
		}
		return nil
	}
	r, err := sluice.Open(dir, sluice.Config{Capacity: 2, Logger: slog.New(slog.DiscardHandler)}, sluice.JSON[string](), h)
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

// Closed writes the five jobs as Open does and closes the runner: a stopped directory.
func Closed(t testing.TB) string {
	t.Helper()
	r, dir := Open(t)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Reopen opens a runner on dir whose handler succeeds, for a test that needs the directory
// held or changed by a runner.
func Reopen(t testing.TB, dir string) *sluice.Kind[string] {
	t.Helper()
	r, err := sluice.Open(dir, sluice.Config{}, sluice.JSON[string](),
		func(context.Context, sluice.Job[string]) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}
