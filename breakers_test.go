package sluice

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestBreakersReportsOpenTargetsWithCooldown: two counted failures open a target's breaker
// (Threshold 2); Breakers lists it open until the cooldown's end, a target that only succeeds
// is not listed, and one failure leaves a closed breaker that remembers it.
func TestBreakersReportsOpenTargetsWithCooldown(t *testing.T) {
	dir := t.TempDir()
	h := func(_ context.Context, j Job[string]) error {
		if j.Payload == "fail" {
			return errors.New("503")
		}
		return nil
	}
	cfg := Config{Capacity: 1, Circuit: Circuit{Threshold: 2, Window: time.Minute, Cooldown: time.Hour}}
	r, err := Open(dir, cfg, JSON[string](), h)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	for _, j := range []struct{ target, payload string }{
		{"down.example", "fail"}, {"down.example", "fail"}, {"up.example", "ok"}, {"flaky.example", "fail"},
	} {
		if _, err := r.Enqueue(ctx, time.Time{}, j.target, j.payload, WithAttempts(1)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := r.DrainDue(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := r.Breakers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []BreakerInfo{
		{Target: "down.example", State: "open"},
		{Target: "flaky.example", State: "closed", Failures: 1},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(BreakerInfo{}, "Until")); diff != "" {
		t.Errorf("Breakers (-want +got):\n%s", diff)
	}
	if len(got) == 2 {
		if until := got[0].Until; until.Before(start.Add(time.Hour)) || until.After(time.Now().Add(time.Hour)) {
			t.Errorf("down.example open until %v, want an hour after its second failure (between %v and %v)", until, start.Add(time.Hour), time.Now().Add(time.Hour))
		}
		if !got[1].Until.IsZero() {
			t.Errorf("closed breaker has Until %v, want zero", got[1].Until)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Breakers(ctx); got != nil || !errors.Is(err, ErrClosed) {
		t.Errorf("Breakers after Close = %v, %v; want nil, ErrClosed", got, err)
	}
}
