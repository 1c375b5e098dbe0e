package flow

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestIntervalRoundsUp(t *testing.T) {
	for _, c := range []struct {
		r    Rate
		want int64
	}{
		{Rate{Count: 10, Per: time.Second}, int64(100 * time.Millisecond)},
		{Rate{Count: 3, Per: 10}, 4},
		{Rate{Count: 7, Per: 1}, 1},
	} {
		if got := c.r.Interval(); got != c.want {
			t.Errorf("%+v: Interval %d, want %d", c.r, got, c.want)
		}
	}
}

func TestFreshBucketWaitsOneInterval(t *testing.T) {
	r := Rate{Count: 2, Per: time.Second, Burst: 3}
	b := Fresh(r, 0)
	if got, want := b.ReadyAt(r), int64(500*time.Millisecond); got != want {
		t.Fatalf("fresh ReadyAt %d, want %d", got, want)
	}
	// After Burst intervals the whole burst is there: three starts back to back, not four.
	now := int64(3 * 500 * time.Millisecond)
	for i := range 3 {
		if b.ReadyAt(r) > now {
			t.Fatalf("start %d refused at %d", i, now)
		}
		b.Take(r, now)
	}
	if b.ReadyAt(r) <= now {
		t.Fatal("a fourth start allowed at once with Burst 3")
	}
}

func TestValidateNamesTheField(t *testing.T) {
	for _, r := range []Rate{{Count: -1, Per: 1}, {Count: 1}, {Count: 1, Per: 1, Burst: -1}, {Count: CountMax + 1, Per: 1}} {
		if r.Validate() == nil {
			t.Errorf("%+v accepted", r)
		}
	}
	if err := (Rate{}).Validate(); err != nil {
		t.Errorf("zero rate refused: %v", err)
	}
}

// TestBucketHoldsTheWindowBound: over any window, the starts a bucket allows (greedily, at
// random times) never exceed Allowed, also across a restart that makes a fresh bucket.
func TestBucketHoldsTheWindowBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := Rate{Count: rapid.IntRange(1, 5).Draw(t, "count"), Per: time.Duration(rapid.IntRange(1, 1000).Draw(t, "per")),
			Burst: rapid.IntRange(0, 4).Draw(t, "burst")}
		now := int64(0)
		b := Fresh(r, now)
		var starts []int64
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			now += int64(rapid.IntRange(0, 400).Draw(t, "gap"))
			if rapid.IntRange(0, 9).Draw(t, "restart") == 0 {
				b = Fresh(r, now)
			}
			for b.ReadyAt(r) <= now {
				b.Take(r, now)
				starts = append(starts, now)
			}
		}
		for i := range starts {
			for j := i; j < len(starts); j++ {
				if n := int64(j - i + 1); n > r.Allowed(time.Duration(starts[j]-starts[i])) {
					t.Fatalf("%d starts in [%d, %d] under %+v (allowed %d)", n, starts[i], starts[j], r, r.Allowed(time.Duration(starts[j]-starts[i])))
				}
			}
		}
	})
}
