package sim

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/sim/faults"
)

// The scheduling families only ever delay an event, by at most LateMax, then round it up to the
// bunching grain, and reorder it behind at most ReorderSpan later events.
func TestShiftDelaysWithinTheSlack(t *testing.T) {
	cfg, err := NewConfig(1, "calm")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Faults.Timing = faults.Timing{Late: 0.5, LateMax: 100 * time.Millisecond, Bunch: 10 * time.Millisecond, Reorder: 0.5}
	w := newWorld(cfg, nil)
	late, reordered := 0, 0
	for i := 0; i < 2000; i++ {
		at := time.Duration(i) * 7 * time.Millisecond
		got, extra := w.shift(at)
		if got < at || got > at+cfg.Faults.Timing.Slack() || got%(10*time.Millisecond) != 0 {
			t.Fatalf("shift(%v) = %v: outside [at, at+slack] or off the grain", at, got)
		}
		if extra > faults.ReorderSpan {
			t.Fatalf("shift(%v) reorders behind %d events, more than %d", at, extra, faults.ReorderSpan)
		}
		if got-at >= 10*time.Millisecond {
			late++
		}
		if extra > 0 {
			reordered++
		}
	}
	if late < 500 || reordered < 500 {
		t.Errorf("%d late and %d reordered of 2000 at P=0.5", late, reordered)
	}
	w.faultsOn = false
	if got, extra := w.shift(time.Second); got != time.Second || extra != 0 {
		t.Errorf("shift in the liveness phase = %v, %d; want the event untouched", got, extra)
	}
}

// A loop's Shift applies to events scheduled in the future, not to AtExact or to now.
func TestLoopShiftOnlyFutureEvents(t *testing.T) {
	var l Loop
	l.Shift = func(at time.Duration) (time.Duration, uint64) { return at + time.Second, 0 }
	var order []string
	l.At(0, func() { order = append(order, "now") })
	l.AtExact(500*time.Millisecond, func() { order = append(order, "exact") })
	l.At(100*time.Millisecond, func() { order = append(order, "shifted") })
	for l.Step(time.Hour) {
	}
	if got, want := order, []string{"now", "exact", "shifted"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("order %v, want %v", got, want)
	}
	if l.Now() != 1100*time.Millisecond {
		t.Errorf("the shifted event ran at %v, want 1.1s", l.Now())
	}
}

// Lost sectors and crash points run, and open refuses every damaged journal.
func TestLostSectorsRefusedAndCrashPointsArmed(t *testing.T) {
	lost, points, refused := 0, 0, 0
	for seed := int64(1); seed <= 12; seed++ {
		cfg, err := NewConfig(seed, "bitflip")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Faults.LostSector = 1
		cfg.Faults.Process.CrashPoint = 0.1
		w := newWorld(cfg, nil)
		w.run()
		if v := w.chk.Violation(); v != nil {
			t.Fatalf("seed %d: %v", seed, v)
		}
		lost += w.st.Faults.Get("lost-sector")
		points += w.st.Faults.Get("crash-point")
		refused += w.chk.Checks()[invIndex[InvCorruptionRefused]]
	}
	if lost == 0 || points == 0 || refused == 0 {
		t.Errorf("lost sectors %d, crash points %d, refusals checked %d: want each above zero", lost, points, refused)
	}
}

// Under the scheduling families a handler may run past its visibility by the slack and no more;
// without them, not at all.
func TestHiddenWhileWorkingAllowsOnlyTheSlack(t *testing.T) {
	for _, c := range []struct {
		slack, ran time.Duration
		fires      bool
	}{
		{0, time.Millisecond, true},
		{time.Second, 900 * time.Millisecond, false},
		{time.Second, 1100 * time.Millisecond, true},
	} {
		k := NewChecker()
		k.SetHiddenSlack(c.slack)
		k.Received(1, "q-1", "q/1/1", 0)
		k.HandlerStarted("q/1/1")
		k.SetTime(10 * time.Second)
		k.CheckHidden(func(*receiptModel, string) bool { return false }) // first seen visible
		k.SetTime(10*time.Second + c.ran)
		k.CheckHidden(func(*receiptModel, string) bool { return false })
		if v := k.Violation(); (v != nil) != c.fires || v != nil && v.Invariant != InvHiddenWhileWork {
			t.Errorf("slack %v, visible for %v: violation %v, want fired=%t", c.slack, c.ran, v, c.fires)
		}
	}
}
