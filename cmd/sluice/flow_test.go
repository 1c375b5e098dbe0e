package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testjournal"
)

// openCounting opens dir as a runner of the default kind whose handler counts its calls, and
// enqueues one job due now (so a runner that may start it does at once).
func openCounting(t *testing.T, dir string, calls *atomic.Int64) *sluice.Kind[string] {
	t.Helper()
	r, err := sluice.Open(dir, sluice.Config{Logger: slog.New(slog.DiscardHandler)}, sluice.JSON[string](),
		func(context.Context, sluice.Job[string]) error { calls.Add(1); return nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	if _, err := r.Enqueue(context.Background(), time.Time{}, "a.example", "now"); err != nil {
		t.Fatal(err)
	}
	return r
}

// runFor runs r for d and returns what Run returned.
func runFor(r *sluice.Kind[string], d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := r.Run(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// TestPauseWithTheCLIHoldsTheRunner: a kind paused with the CLI stays paused in the next
// runner (a job due now does not start), the read commands say so, and resume lets it start.
func TestPauseWithTheCLIHoldsTheRunner(t *testing.T) {
	dir := testjournal.Closed(t)
	runCases(t, []cmdCase{
		{[]string{"pause", "--dir", dir}, 2, nil, []string{"pause takes one kind's name, got 0"}},
		{[]string{"pause", "--dir", dir, "nope"}, 1, nil, []string{"sluice: pause nope: no job or schedule in", "names this kind; the journal's kinds: default; nothing was written"}},
		{[]string{"resume", "--dir", dir, "default"}, 0, []string{"kind default was not paused (nothing written)"}, nil},
		{[]string{"pause", "--dir", dir, "default"}, 0, []string{"kind default is paused: its jobs start no attempt"}, nil},
		{[]string{"pause", "--dir", dir, "default"}, 0, []string{"kind default was paused already (nothing written)"}, nil},
		{[]string{"stats", "--dir", dir}, 0, []string{"paused kinds  1", "paused: default: their jobs start no attempt until resumed (`sluice resume --dir " + dir + " default`)"}, nil},
		{[]string{"stats", "--dir", dir, "--json"}, 0, []string{`"paused": [` + "\n    \"default\""}, nil},
		{[]string{"show", "--dir", dir, "4"}, 0, []string{"blocked    its kind is paused"}, nil},
		{[]string{"show", "--dir", dir, "4", "--json"}, 0, []string{`"blocked": "its kind is paused"`}, nil},
		{[]string{"jobs", "--dir", dir, "--state", "pending"}, 0, []string{"BLOCKED", "its kind is paused"}, nil},
	})

	var calls atomic.Int64
	r := openCounting(t, dir, &calls)
	if err := runFor(r, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("a kind paused with the CLI started %d attempts in the next runner", n)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	runCases(t, []cmdCase{
		{[]string{"resume", "--dir", dir, "default"}, 0, []string{"kind default is resumed: its jobs start when the runner next runs"}, nil},
		{[]string{"stats", "--dir", dir, "--json"}, 0, []string{`"paused": []`}, nil},
	})
	if r := runArgs("show", "--dir", dir, "4"); r.code != 0 || strings.Contains(r.stdout, "blocked") {
		t.Errorf("show after resume: exit %d, still blocked:\n%s", r.code, r.stdout)
	}
	r2, err := sluice.Open(dir, sluice.Config{Logger: slog.New(slog.DiscardHandler)}, sluice.JSON[string](),
		func(context.Context, sluice.Job[string]) error { calls.Add(1); return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if err := r2.DrainDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("after resume the runner started %d attempts, want the one job due now", n)
	}
}

// TestPauseRefusesWhileARunnerHoldsTheDirectory: pause and resume write nothing beside a
// live runner and say to use its API or UI.
func TestPauseRefusesWhileARunnerHoldsTheDirectory(t *testing.T) {
	dir := testjournal.Closed(t)
	testjournal.Reopen(t, dir)
	before := snapshotDir(t, dir)
	check(t, "pause locked", runArgs("pause", "--dir", dir, "default"), 3, nil,
		[]string{"sluice: pause: a running runner holds " + dir + ", so nothing was written: pause the kind through that runner (Runner.Pause) or the UI"})
	check(t, "resume locked", runArgs("resume", "--dir", dir, "default"), 3, nil,
		[]string{"sluice: resume: a running runner holds " + dir, "(Runner.Resume)"})
	if diff := cmp.Diff(before, snapshotDir(t, dir)); diff != "" {
		t.Errorf("a refused pause changed the directory (-before +after):\n%.2000s", diff)
	}
}

// TestShowSaysWhichJobHoldsASequence: a later job of a sequence waits for the earlier one,
// and show and jobs name it.
func TestShowSaysWhichJobHoldsASequence(t *testing.T) {
	dir := t.TempDir()
	r, err := sluice.Open(dir, sluice.Config{Logger: slog.New(slog.DiscardHandler)}, sluice.JSON[string](),
		func(context.Context, sluice.Job[string]) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	for range 2 {
		if _, err := r.Enqueue(context.Background(), later, "a.example", "p", sluice.WithGroup("invoices"), sluice.WithKey("acme")); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	runCases(t, []cmdCase{
		{[]string{"show", "--dir", dir, "2"}, 0, []string{`blocked    sequence "invoices" is held by job 1`, "sequence   invoices",
			"key        acme (0 of its kind's attempts with this key running at the last write)"}, nil},
		{[]string{"jobs", "--dir", dir}, 0, []string{"BLOCKED", `sequence "invoices" is held by job 1`}, nil},
	})
	if r := runArgs("show", "--dir", dir, "1"); strings.Contains(r.stdout, "blocked") {
		t.Errorf("show 1, the head of its sequence, says it is blocked:\n%s", r.stdout)
	}
}

// TestShowADeadJobHoldingItsSequence: show says that a dead job of a WithHoldOnDead kind holds
// its sequence, and for the job held behind it says what holds it, not that it starts once a
// runner opens the directory.
func TestShowADeadJobHoldingItsSequence(t *testing.T) {
	dir := t.TempDir()
	r, err := sluice.New(dir, sluice.Config{Logger: slog.New(slog.DiscardHandler), Policy: sluice.Policy{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	k, err := sluice.Register(r, "migrate", sluice.JSON[string](), func(_ context.Context, j sluice.Job[string]) error {
		return errors.New("lock timeout")
	}, sluice.WithHoldOnDead())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := k.Enqueue(context.Background(), time.Time{}, "db", "step", sluice.WithGroup("schema")); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	runCases(t, []cmdCase{
		{[]string{"show", "--dir", dir, "1"}, 0, []string{"schema (dead, it holds the sequence: its later jobs wait until it is retried or cancelled)"}, nil},
		{[]string{"show", "--dir", dir, "2"}, 0, []string{"blocked", `sequence "schema" is held by dead job 1 (retry or cancel it)`}, nil},
	})
	if r := runArgs("show", "--dir", dir, "2"); strings.Contains(r.stdout, "starts once a runner opens") {
		t.Errorf("show 2 says the held job starts once a runner opens:\n%s", r.stdout)
	}
}

// TestSchedulesShowTheirKeyAndSequence: a schedule's flow key (here from WithKeyFunc) and
// sequence are in schedules' table and JSON.
func TestSchedulesShowTheirKeyAndSequence(t *testing.T) {
	dir := t.TempDir()
	r, err := sluice.New(dir, sluice.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	k, err := sluice.Register(r, "sync", sluice.JSON[string](), func(context.Context, sluice.Job[string]) error { return nil },
		sluice.WithKeyFunc(func(tenant string) string { return tenant }))
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Schedule(context.Background(), "nightly", "@every 1h", "crm", "initech", sluice.ScheduleJob(sluice.WithGroup("night"))); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	runCases(t, []cmdCase{
		{[]string{"schedules", "--dir", dir}, 0, []string{"sync key initech sequence night"}, nil},
		{[]string{"schedules", "--dir", dir, "--json"}, 0, []string{`"key": "initech"`, `"sequence": "night"`}, nil},
	})
}
