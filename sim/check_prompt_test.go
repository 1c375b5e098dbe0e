package sim

import "testing"

// Each promptness invariant is shown to catch a defect planted in the real world (the driver or
// the engine's configuration), with the invariants that would report it first muted where
// another one catches it earlier. Each test returns at the first seed that catches it; the
// seeds searched are at most the sweep size stated (a 1,000-seed sweep catches every one).

// runPlanted runs seeds 1..seeds of profile with mutation m and the invariants mute turned
// off; it returns the first violation and its seed.
func runPlanted(t *testing.T, profile string, m mutation, seeds int, mute ...string) (*Violation, int64) {
	t.Helper()
	for seed := int64(1); seed <= int64(seeds); seed++ {
		cfg, err := NewConfig(seed, profile)
		if err != nil {
			t.Fatal(err)
		}
		w := newWorld(cfg, nil)
		w.mutation = m
		w.chk.mute(mute...)
		w.run()
		if v := w.chk.Violation(); v != nil {
			return v, seed
		}
	}
	return nil, 0
}

func wantPlanted(t *testing.T, v *Violation, seed int64, want ...string) {
	t.Helper()
	for _, w := range want {
		if v != nil && v.Invariant == w {
			t.Logf("seed %d: %v", seed, v)
			return
		}
	}
	t.Fatalf("violation %v (seed %d), want one of %v", v, seed, want)
}

// A runner driver that loses every fourth wake-up: the timer check sees it at the commit.
func TestPlantedLostWakeIsCaughtByWakeAt(t *testing.T) {
	v, seed := runPlanted(t, "calm", mutLostWake, 1000)
	wantPlanted(t, v, seed, InvWakeAtNotLate)
}

// The same lost wake-up, the timer check off: the due job starts only when something unrelated
// arrives, later than one commit cycle.
func TestPlantedLostWakeIsCaughtByWorkConserving(t *testing.T) {
	v, seed := runPlanted(t, "calm", mutLostWake, 1000, InvWakeAtNotLate)
	wantPlanted(t, v, seed, InvWorkConserving, InvRetryOnTime, InvDeferredOnTime)
}

// A runner engine given twice the configured backoff: with backoff-respected off (it sees the
// due itself out of policy), the retry starts after its computed due.
func TestPlantedDoubleBackoffIsCaughtByRetryOnTime(t *testing.T) {
	v, seed := runPlanted(t, "calm", mutDoubleBackoff, 1000, InvBackoff)
	wantPlanted(t, v, seed, InvRetryOnTime)
}

// A runner engine given half the configured pool leaves units the checker counts as free: a
// commit leaves a due job waiting beside them.
func TestPlantedHalfPoolIsCaughtByStartWhenFree(t *testing.T) {
	v, seed := runPlanted(t, "calm", mutHalfPool, 1000)
	wantPlanted(t, v, seed, InvStartWhenFree)
}

// The same, start-when-free off: the job is still waiting a commit cycle later.
func TestPlantedHalfPoolIsCaughtByWorkConserving(t *testing.T) {
	v, seed := runPlanted(t, "calm", mutHalfPool, 1000, InvStartWhenFree)
	wantPlanted(t, v, seed, InvWorkConserving, InvRetryOnTime, InvDeferredOnTime)
}

// A worker driver whose timer fires a second after the machine's WakeAt.
func TestPlantedLateTickIsCaughtByWakeAt(t *testing.T) {
	v, seed := runPlanted(t, "network", mutLateTick, 1000)
	wantPlanted(t, v, seed, InvWakeAtNotLate)
}

// The same late timer, the timer check off: renewals go out late.
func TestPlantedLateTickIsCaughtByRenewalOnTime(t *testing.T) {
	v, seed := runPlanted(t, "network", mutLateTick, 1000, InvWakeAtNotLate)
	wantPlanted(t, v, seed, InvRenewalOnTime)
}

// The same late timer, the timer and renewal checks off: receipts are dropped past their margin.
// stop-margin is off too: a handler cancelled late at the 12 h ceiling is the same defect seen
// from the handler's side (network seed 14 once the breach family was drawn), and so is a
// handler outliving its hiding (hidden-while-working, seed 23).
func TestPlantedLateTickIsCaughtByDropAtMargin(t *testing.T) {
	v, seed := runPlanted(t, "network", mutLateTick, 1000, InvWakeAtNotLate, InvRenewalOnTime, InvStopMargin, InvHiddenWhileWork)
	wantPlanted(t, v, seed, InvDropAtMargin)
}

// A worker driver that starts handlers a millisecond after the machine says.
func TestPlantedLateHandlerIsCaughtByHandlerPrompt(t *testing.T) {
	v, seed := runPlanted(t, "network", mutLateHandler, 1000)
	wantPlanted(t, v, seed, InvHandlerPrompt)
}

// A worker driver that sends deletes a millisecond after the machine says.
func TestPlantedLateDeleteIsCaughtByDispositionPrompt(t *testing.T) {
	v, seed := runPlanted(t, "network", mutLateDelete, 1000)
	wantPlanted(t, v, seed, InvDispositionPrompt)
}

// promptness lists the invariants that see a slow runner before liveness does.
var promptness = []string{InvStartWhenFree, InvWorkConserving, InvRetryOnTime, InvDeferredOnTime, InvWakeAtNotLate, InvBackoff}

// A runner engine given twice the configured backoff settles past the critical-path bound on
// some seed (every earlier check muted: liveness alone catches it).
func TestPlantedDoubleBackoffFailsLiveness(t *testing.T) {
	v, seed := runPlanted(t, "calm", mutDoubleBackoff, 1000, promptness...)
	wantPlanted(t, v, seed, InvLiveness)
}

// A runner engine given half the configured pool settles past the bound on some seed.
func TestPlantedHalfPoolFailsLiveness(t *testing.T) {
	v, seed := runPlanted(t, "calm", mutHalfPool, 1000, promptness...)
	wantPlanted(t, v, seed, InvLiveness)
}

// The summary's liveness line: the larger side's ratio, a side that did not settle named so.
func TestLivenessLineNamesEachSide(t *testing.T) {
	l := Liveness{Runner: Side{On: true, Settled: sec(9), Bound: sec(10)}, Queue: Side{On: true, Settled: sec(5), Bound: sec(100)}}
	if got, want := l.String(), "settled in 9.000s of 100.000s (runner 9.000s of 10.000s, queue 5.000s of 100.000s), ratio 0.9000"; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	l.Queue.Settled = -1
	if got, want := l.String(), "not settled of 100.000s (runner 9.000s of 10.000s, queue not settled of 100.000s), ratio 0.9000"; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}
