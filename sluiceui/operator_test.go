package sluiceui_test

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testjournal"
	"github.com/sluicehq/sluice/sluiceui"
)

// TestSchedulesAndKindsFromBothSources: the schedules page lists every schedule of a live
// runner and of a directory (they were visible only through the API), and a directory's jobs
// keep their kinds, so `sluice serve` filters by kind (FromDir dropped every kind).
func TestSchedulesAndKindsFromBothSources(t *testing.T) {
	r, dir := testjournal.OpenHostile(t)
	live := sluiceui.New(sluiceui.FromRunner(r), sluiceui.Options{Logger: quiet, PublicRead: true})
	n := len(testjournal.Hostile)
	if code, body := get(t, live, "/schedules"); code != 200 || strings.Count(body, "<tr data-name=") != n || !strings.Contains(body, "@every 1h") {
		t.Errorf("live schedules page = %d:\n%.3000s", code, body)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	src, err := sluiceui.FromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := sluiceui.New(src, sluiceui.Options{Logger: quiet, PublicRead: true})
	if code, body := get(t, h, "/schedules"); code != 200 || strings.Count(body, "<tr data-name=") != n {
		t.Errorf("directory schedules page = %d:\n%.3000s", code, body)
	}
	kind := testjournal.HostileKinds()[2]
	_, body := get(t, h, "/jobs?kind="+url.QueryEscape(kind))
	if got := ids(body); len(got) != 1 || got[0] != "3" {
		t.Errorf("directory jobs of kind %q = %v, want [3]", kind, got)
	}
}

// TestJobPageSaysWhyItWaits: a pending job says when it is due; a due job whose target's
// breaker is open says so; a succeeded job does not show an earlier attempt's error as its
// "last error" (its history does).
func TestJobPageSaysWhyItWaits(t *testing.T) {
	tries := 0
	h := func(_ context.Context, j sluice.Job[string]) error {
		if j.Target == "flaky.example" {
			if tries++; tries == 1 {
				return errors.New("interrupted")
			}
			return nil
		}
		return errors.New("503")
	}
	cfg := sluice.Config{Capacity: 1, Logger: quiet, Circuit: sluice.Circuit{Threshold: 2, Window: time.Minute, Cooldown: time.Hour},
		Policy: sluice.Policy{Base: time.Millisecond, Cap: time.Millisecond, Attempts: 5}}
	r, err := sluice.Open(t.TempDir(), cfg, sluice.JSON[string](), h)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	flaky, _ := r.Enqueue(ctx, time.Time{}, "flaky.example", "x")
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	// Two failures open down.example's breaker; a job due now for it then waits on it.
	for range 2 {
		_, _ = r.Enqueue(ctx, time.Time{}, "down.example", "x", sluice.WithAttempts(1))
	}
	if err := r.DrainDue(ctx); err != nil {
		t.Fatal(err)
	}
	down, _ := r.Enqueue(ctx, time.Time{}, "down.example", "x")
	later, _ := r.Enqueue(ctx, time.Now().Add(time.Hour), "a.example", "x")
	ui := sluiceui.New(sluiceui.FromRunner(r.Runner), sluiceui.Options{Logger: quiet, PublicRead: true})
	for _, tc := range []struct {
		id       uint64
		has, not string
	}{
		{later, "not due until", ""},
		{down, "breaker", ""},
		{flaky, "interrupted", `id="lasterr"`},
	} {
		_, body := get(t, ui, "/jobs/"+itoa(tc.id))
		if !strings.Contains(body, tc.has) || tc.not != "" && strings.Contains(body, tc.not) {
			t.Errorf("job %d page: want %q and not %q:\n%.4000s", tc.id, tc.has, tc.not, body)
		}
	}
	if _, body := get(t, ui, "/jobs"); strings.Contains(body, ">interrupted<") {
		t.Errorf("jobs list shows a succeeded job's earlier error")
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func TestWaitReason(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	open := []sluiceui.Breaker{{Target: "t", State: "open", Until: now.Add(time.Minute)}}
	for _, tc := range []struct {
		j    sluiceui.Job
		brs  []sluiceui.Breaker
		live bool
		want string
	}{
		{sluiceui.Job{State: sluice.StateDead}, nil, true, ""},
		{sluiceui.Job{State: sluice.StateRunning}, nil, true, ""},
		{sluiceui.Job{State: sluice.StatePending, Due: now.Add(time.Hour)}, nil, true, "not due until 2026-01-01T01:00:00Z"},
		{sluiceui.Job{State: sluice.StateWaiting, Attempts: 2, Due: now.Add(time.Second)}, nil, true, "backing off after attempt 2 failed"},
		{sluiceui.Job{State: sluice.StateDeferred, Due: now.Add(time.Second)}, nil, true, "deferred until"},
		{sluiceui.Job{State: sluice.StatePending, Target: "t", Due: now}, open, true, "breaker is open until 2026-01-01T00:01:00Z"},
		{sluiceui.Job{State: sluice.StatePending, Target: "u", Due: now}, open, true, "a unit is free"},
		{sluiceui.Job{State: sluice.StatePending, Due: now}, nil, false, "once a runner opens the directory"},
	} {
		if got := sluiceui.WaitReason(tc.j, tc.brs, now, tc.live); tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("WaitReason(%v due %v) = %q, want %q", tc.j.State, tc.j.Due, got, tc.want)
		}
	}
}
