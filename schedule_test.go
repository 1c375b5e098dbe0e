package sluice

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/sim/disk"
)

// TestScheduleIsDurableAcrossReopen: a schedule, its fired period and its removal survive a
// close and a reopen; a period handled before the close is not handled again after it.
func TestScheduleIsDurableAcrossReopen(t *testing.T) {
	d := disk.New(1)
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var runs atomic.Int64
	h := func(context.Context, Job[string]) error { runs.Add(1); return nil }
	ctx := context.Background()
	r := openOn(t, d, Config{Capacity: 1, Clock: clk}, h)
	if err := r.Schedule(ctx, "tick", Every(time.Minute), "a", "p", SkipMissed()); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Minute)
	if err := r.DrainDue(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	r = openOn(t, d, Config{Capacity: 1, Clock: clk}, h)
	if err := r.DrainDue(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := r.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	want := []ScheduleInfo{{Name: "tick", Spec: "@every 1m0s", Kind: DefaultKind, Target: "a", SkipMissed: true,
		Next: t0.Add(2 * time.Minute), Last: t0.Add(time.Minute), LastJob: 1, Fired: 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("schedules after reopen (-want +got)\n%s", diff)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1 (the period is not handled again after the reopen)", n)
	}
	if err := r.Unschedule(ctx, "tick"); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = openOn(t, d, Config{Capacity: 1, Clock: clk}, h)
	defer r.Close()
	if got, err := r.Schedules(ctx); err != nil || len(got) != 0 {
		t.Fatalf("schedules after the removal and a reopen: %v, %v", got, err)
	}
}

// TestScheduleRefusesBadInput: bad names, specs and jobs are refused with sentinels naming
// what is wrong, before anything is written.
func TestScheduleRefusesBadInput(t *testing.T) {
	r := openOn(t, disk.New(1), Config{Capacity: 1}, succeedString)
	defer r.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		name, spec, target string
		opts               []ScheduleOption
		want               error
	}{
		{"", "@every 1m", "a", nil, ErrInvalidSchedule},
		{"s", "@every 1ms", "a", nil, ErrInvalidSchedule},
		{"s", "every minute", "a", nil, ErrInvalidSchedule},
		{"s", "@every 1m", "", nil, ErrInvalidJob},
		{"s", "@every 1m", "a", []ScheduleOption{ScheduleJob(WithPriority(5000))}, ErrInvalidJob},
	} {
		if err := r.Schedule(ctx, tc.name, tc.spec, tc.target, "p", tc.opts...); !errors.Is(err, tc.want) {
			t.Errorf("Schedule(%q, %q, %q) = %v, want %v", tc.name, tc.spec, tc.target, err, tc.want)
		}
	}
	if err := r.Unschedule(ctx, "nope"); !errors.Is(err, ErrNoSchedule) {
		t.Errorf("Unschedule of an unknown name = %v, want ErrNoSchedule", err)
	}
	if got, err := r.Schedules(ctx); err != nil || len(got) != 0 {
		t.Fatalf("schedules after refusals: %v, %v", got, err)
	}
}
