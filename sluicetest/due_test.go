package sluicetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
)

// TestDrainDueWorksOnlyWhatIsDue: with a mock clock, DrainDue runs the job due now, leaves the
// one due in an hour, and runs it once the mock has moved past its due time.
func TestDrainDueWorksOnlyWhatIsDue(t *testing.T) {
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var (
		mu  sync.Mutex
		ran []string
	)
	r, err := sluice.Open(t.TempDir(), sluice.Config{Clock: mock, Capacity: 2, Seed: 1}, sluice.JSON[string](),
		func(ctx context.Context, j sluice.Job[string]) error {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, j.Payload)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.Enqueue(ctx, time.Time{}, "t", "now"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Enqueue(ctx, mock.Now().Add(time.Hour), "t", "later"); err != nil {
		t.Fatal(err)
	}
	if err := DrainDue(ctx, r.Runner, mock.Now()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := append([]string(nil), ran...)
	mu.Unlock()
	if diff := cmp.Diff([]string{"now"}, got); diff != "" {
		t.Fatalf("after the first DrainDue (-want +got):\n%s", diff)
	}
	mock.Add(time.Hour)
	if err := DrainDue(ctx, r.Runner, mock.Now()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got = append([]string(nil), ran...)
	mu.Unlock()
	if diff := cmp.Diff([]string{"now", "later"}, got); diff != "" {
		t.Fatalf("after the second DrainDue (-want +got):\n%s", diff)
	}
}
