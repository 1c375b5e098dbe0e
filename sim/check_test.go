package sim

import (
	"testing"
	"time"
)

var testParams = RunnerParams{Capacity: 2, Attempts: 3, Deadline: time.Minute, Base: time.Second, Cap: 8 * time.Second,
	Threshold: 2, Window: 10 * time.Second, Cooldown: 5 * time.Second, Probes: 1, KindLimits: map[string]int{"mail": 1}}

func newTestChecker() *Checker {
	c := NewChecker()
	c.RunnerConfigured(1, testParams)
	c.LeaseConfigured(LeaseParams{Window: 30 * time.Second, Ceiling: 12 * time.Hour})
	return c
}

func sec(n float64) time.Duration { return time.Duration(n * float64(time.Second)) }

func enqueue(c *Checker, id uint64, target string) {
	c.JobAppended(1, id, c.now, target, "p")
	c.JobAcked(1, id)
}

func view(id uint64, state string, attempts int, due time.Duration, target string) JobView {
	return JobView{ID: id, State: state, Attempts: attempts, Due: due, Target: target, Payload: "p"}
}

// TestInvariantFires feeds each invariant a history that violates it and asserts the checker
// reports the violation by that invariant's name (and that no other fired first).
func TestInvariantFires(t *testing.T) {
	cases := []struct {
		name string
		feed func(c *Checker)
	}{
		{InvNoLostAck, func(c *Checker) {
			enqueue(c, 1, "a")
			c.Committed(1, []JobView{view(1, "due", 0, 0, "a")})
			c.NodeCrashed(1)
			c.NodeRecovered(1, nil)
		}},
		{InvNoLostAck + "/pruned", func(c *Checker) {
			c.JobAppended(1, 1, sec(100), "a", "p") // due long after now: it cannot have expired
			c.JobAcked(1, 1)
			c.Committed(1, nil)
			c.Compacted(1, nil) // pruned while waiting
		}},
		{InvReplayEqualsLive, func(c *Checker) {
			enqueue(c, 1, "a")
			c.Committed(1, []JobView{view(1, "due", 0, 0, "a")})
			c.NodeCrashed(1)
			c.NodeRecovered(1, []JobView{view(1, "due", 0, sec(5), "a")}) // due moved
		}},
		{InvNoPhantom, func(c *Checker) {
			c.NodeCrashed(1)
			c.NodeRecovered(1, []JobView{view(7, "due", 0, 0, "a")})
		}},
		{InvSingleRun, func(c *Checker) {
			enqueue(c, 1, "a")
			c.AttemptStarted(1, 1, 1)
			c.AttemptStarted(1, 1, 2)
		}},
		{InvCapacity, func(c *Checker) {
			for id := uint64(1); id <= 3; id++ {
				enqueue(c, id, "t")
				c.AttemptStarted(1, id, 1)
			}
		}},
		{InvAttemptsMax, func(c *Checker) {
			enqueue(c, 1, "a")
			for n := 1; n <= 4; n++ {
				c.AttemptStarted(1, 1, n)
				c.AttemptEnded(1, 1, n, false, true)
			}
		}},
		{InvNoStartAfterLate, func(c *Checker) {
			enqueue(c, 1, "a")
			c.SetTime(time.Minute)
			c.AttemptStarted(1, 1, 1)
		}},
		{InvBreakerRespected, func(c *Checker) {
			for id := uint64(1); id <= 3; id++ {
				enqueue(c, id, "t")
			}
			c.AttemptStarted(1, 1, 1)
			c.AttemptEnded(1, 1, 1, true, false)
			c.AttemptStarted(1, 2, 1)
			c.AttemptEnded(1, 2, 1, true, false) // threshold 2: open until 5s
			c.SetTime(sec(4.999))
			c.AttemptStarted(1, 3, 1)
		}},
		{InvBreakerRespected + "/probes", func(c *Checker) {
			for id := uint64(1); id <= 4; id++ {
				enqueue(c, id, "t")
			}
			c.AttemptStarted(1, 1, 1)
			c.AttemptEnded(1, 1, 1, true, false)
			c.AttemptStarted(1, 2, 1)
			c.AttemptEnded(1, 2, 1, true, false)
			c.SetTime(sec(5))
			c.AttemptStarted(1, 3, 1) // the one probe
			c.AttemptStarted(1, 4, 1) // a second one: refused by Probes=1
		}},
		{InvBackoff, func(c *Checker) {
			enqueue(c, 1, "a")
			c.AttemptStarted(1, 1, 1)
			c.SetTime(sec(2))
			c.AttemptFailed(1, 1, 1, nil)
			c.AttemptEnded(1, 1, 1, true, false)
			c.Committed(1, []JobView{view(1, "waiting", 1, sec(2.4), "a")}) // wait 0.4s < delay(0)/2
		}},
		{InvBackoff + "/retry-after", func(c *Checker) {
			enqueue(c, 1, "a")
			c.AttemptStarted(1, 1, 1)
			after := 20 * time.Second
			c.AttemptFailed(1, 1, 1, &after)
			c.AttemptEnded(1, 1, 1, true, false)
			c.Committed(1, []JobView{view(1, "waiting", 1, sec(1), "a")}) // server wait capped at 8s, not 1s
		}},
		{InvBackoff + "/interrupted", func(c *Checker) {
			enqueue(c, 1, "a")
			c.AttemptStarted(1, 1, 1)
			c.Committed(1, []JobView{view(1, "running", 1, 0, "a")})
			c.NodeCrashed(1)
			c.SetTime(sec(10))
			c.NodeRecovered(1, []JobView{view(1, "waiting", 1, sec(10), "a")}) // requeued with no wait
		}},
		{InvNoStartBeforeDue, func(c *Checker) {
			c.JobAppended(1, 1, sec(10), "a", "p")
			c.JobAcked(1, 1)
			c.SetTime(sec(9.999))
			c.AttemptStarted(1, 1, 1)
		}},
		{InvNoRestartTerminal, func(c *Checker) {
			enqueue(c, 1, "a")
			c.AttemptStarted(1, 1, 1)
			c.AttemptEnded(1, 1, 1, false, true)
			c.Committed(1, []JobView{view(1, "succeeded", 1, 0, "a")})
			c.AttemptStarted(1, 1, 2)
		}},
		{InvStopSpendsNothing, func(c *Checker) {
			enqueue(c, 1, "a")
			c.AttemptStarted(1, 1, 1)
			c.SetTime(sec(10))
			c.AttemptStopCut(1, 1, 1)
			c.AttemptEnded(1, 1, 1, true, false)
			c.Committed(1, []JobView{view(1, "dead", 1, 0, "a")}) // spent by the stop
		}},
		{InvStopSpendsNothing + "/counted", func(c *Checker) {
			enqueue(c, 1, "a")
			c.AttemptStarted(1, 1, 1)
			c.SetTime(sec(10))
			c.AttemptStopCut(1, 1, 1)
			c.AttemptEnded(1, 1, 1, true, false)
			c.Committed(1, []JobView{view(1, "waiting", 1, 0, "a")}) // attempt counted
		}},
		{InvNoRestartTerminal + "/cancelled", func(c *Checker) {
			enqueue(c, 1, "a")
			c.CancelAcked(1, 1)
			c.AttemptStarted(1, 1, 1)
		}},
		{InvCorruptionRefused, func(c *Checker) {
			c.Fail(InvCorruptionRefused, "journal opened after a bit flip in synced data")
		}},
		{InvRecoveryOpens, func(c *Checker) { c.Fail(InvRecoveryOpens, "open failed: journal: corrupt") }},
		{InvRecordLimit, func(c *Checker) { c.Fail(InvRecordLimit, "an enqueue of 5000 bytes was accepted") }},
		{InvConfigRefused, func(c *Checker) { c.Fail(InvConfigRefused, "fleet/1: qjobs.New with a bad Attempts: <nil>") }},
		{InvMachine, func(c *Checker) { c.Fail(InvMachine, "runner: checkInvariants: boom") }},
		{InvUniqueRespected, func(c *Checker) {
			enqueue(c, 1, "a")
			enqueue(c, 2, "a")
			a, b := view(1, "waiting", 0, 0, "a"), view(2, "running", 1, 0, "a")
			a.Unique, b.Unique = "/order-7", "/order-7"
			c.Committed(1, []JobView{a, b})
		}},
		{InvUniqueRespected + "/window", func(c *Checker) {
			enqueue(c, 1, "a")
			c.JobOptions(1, 1, "mail", "k")
			v := view(1, "succeeded", 1, 0, "a")
			v.Unique, v.WindowUntil = "mail/k", sec(10)
			c.Committed(1, []JobView{v})
			c.SetTime(sec(9))
			enqueue(c, 2, "a")
			c.JobOptions(1, 2, "mail", "k") // inside job 1's window
		}},
		{InvKindLimit, func(c *Checker) {
			for id := uint64(1); id <= 2; id++ {
				enqueue(c, id, "a")
				c.JobOptions(1, id, "mail", "")
			}
			c.AttemptStarted(1, 1, 1)
			c.AttemptStarted(1, 2, 1) // mail's limit is 1
		}},
		{InvUniqueRespected + "/recovered", func(c *Checker) {
			enqueue(c, 1, "a")
			enqueue(c, 2, "a")
			a, b := view(1, "waiting", 0, 0, "a"), view(2, "waiting", 0, 0, "a")
			a.Unique, b.Unique = "sms/k", "sms/k"
			c.NodeCrashed(1)
			c.NodeRecovered(1, []JobView{a, b})
		}},
		{InvPeriodOnce, func(c *Checker) {
			// A period's job durable without its schedule's advance, fired again (more histories
			// in check_schedule_test.go).
			set := ScheduleView{Name: "s1", Spec: "@every 10s", CatchUp: "one", Next: 10 * time.Second, Last: -1, LastAt: -1}
			fired := set
			fired.Last, fired.LastAt, fired.Next, fired.LastJob = 10*time.Second, 10*time.Second, 20*time.Second, 1
			c.ScheduleSubmitted(1, set)
			c.SchedulesCommitted(1, []ScheduleView{set})
			c.PeriodFired(1, fired, false)
			c.SchedulesRecovered(1, []ScheduleView{set}, []JobView{{ID: 1, State: "waiting", FirstDue: 10 * time.Second}})
			fired.LastJob = 2
			c.PeriodFired(1, fired, true)
		}},
		{InvLeaseNoRenewAfter, func(c *Checker) {
			c.Received(1, "m1", "r1", 0)
			c.HandlerStarted("r1")
			c.HandlerEnded("r1")
			c.DispositionBegan("r1")
			c.SetTime(sec(10))
			c.RenewSent("r1", sec(30))
		}},
		{InvLeaseNoCallAfter, func(c *Checker) {
			c.Received(1, "m1", "r1", 0)
			c.Dropped("r1")
			c.DispositionSent("r1", "delete")
		}},
		{InvLeaseRequestExact, func(c *Checker) {
			c.Received(1, "m1", "r1", 0)
			c.SetTime(sec(10))
			c.RenewSent("r1", sec(20)) // request(10s) = 30s
		}},
		{InvLeaseRequestExact + "/ceiling", func(c *Checker) {
			c.Received(1, "m1", "r1", 0)
			c.SetTime(12*time.Hour - sec(0.5))
			c.RenewSent("r1", 0) // under 1 s left: nothing may be sent
		}},
		{InvLeaseNoOverlap, func(c *Checker) {
			c.Received(1, "m1", "r1", 0)
			c.SetTime(sec(10))
			c.RenewSent("r1", sec(30))
			c.DispositionSent("r1", "delete")
		}},
		{InvCallWithinLease, func(c *Checker) {
			c.Received(1, "m1", "r1", 0)
			c.SetTime(sec(29.5))
			c.CallAtQueue("r1", sec(29)) // a delete past its stop point
		}},
		{InvSingleDisposition + "/retry-after-success", func(c *Checker) {
			c.Received(1, "m1", "r1", 0)
			c.DispositionSent("r1", "delete")
			c.DispositionFailed("r1")
			c.DispositionSent("r1", "delete") // a retry: fine
			c.DispositionSent("r1", "delete") // no failure in between
		}},
		{InvStopMargin, func(c *Checker) {
			c.Received(1, "m1", "r1", 0)
			c.HandlerStarted("r1")
			c.SetTime(sec(29.5))
			c.StopMarginKept("r1", "expired", false)
		}},
		{InvHiddenWhileWork, func(c *Checker) {
			c.Received(1, "m1", "r1", 0)
			c.HandlerStarted("r1")
			c.SetTime(sec(31))
			c.CheckHidden(func(*receiptModel, string) bool { return false })
		}},
		{InvHiddenWhileWork + "/until-end", func(c *Checker) {
			c.Received(1, "m1", "r1", 0)
			c.HandlerStarted("r1")
			c.SetTime(sec(40))
			c.CheckHiddenUntilEnd("r1", false) // lapsed at 30 s, no step in between
		}},
		{InvNoConcurrent, func(c *Checker) {
			c.Received(1, "m1", "r1", 0)
			c.HandlerStarted("r1")
			c.Received(2, "m1", "r2", sec(1))
			c.HandlerStarted("r2")
		}},
		{InvSingleDisposition, func(c *Checker) {
			c.Received(1, "m1", "r1", 0)
			c.DispositionSent("r1", "delete")
			c.DispositionSent("r1", "delete")
		}},
		{InvWorkConserving, func(c *Checker) {
			c.NodeRecovered(1, nil)
			enqueue(c, 1, "a")
			c.Committed(1, []JobView{view(1, "waiting", 0, 0, "a")})
			c.SetTime(sec(1)) // due at 0 with both units free: a lost wake-up
			c.CheckPrompt()
		}},
		{InvRetryOnTime, func(c *Checker) {
			c.NodeRecovered(1, nil)
			enqueue(c, 1, "a")
			c.AttemptStarted(1, 1, 1)
			c.AttemptFailed(1, 1, 1, nil)
			c.AttemptEnded(1, 1, 1, true, false)
			c.Committed(1, []JobView{view(1, "waiting", 1, sec(1), "a")}) // wait in [0.5 s, 1 s]
			c.SetTime(sec(3))
			c.CheckPrompt()
		}},
		{InvRetryOnTime + "/twice-the-backoff", func(c *Checker) {
			c.mute(InvBackoff) // the due itself is out of policy; the start is late by the model's
			c.NodeRecovered(1, nil)
			enqueue(c, 1, "a")
			c.AttemptStarted(1, 1, 1)
			c.AttemptFailed(1, 1, 1, nil)
			c.AttemptEnded(1, 1, 1, true, false)
			c.Committed(1, []JobView{view(1, "waiting", 1, sec(2), "a")})
			c.SetTime(sec(1.5))
			c.CheckPrompt()
		}},
		{InvDeferredOnTime, func(c *Checker) {
			c.NodeRecovered(1, nil)
			enqueue(c, 1, "a")
			enqueue(c, 2, "a")
			c.AttemptStarted(1, 1, 1)
			c.AttemptStarted(1, 2, 1)
			c.AttemptEnded(1, 1, 1, true, false)
			c.AttemptEnded(1, 2, 1, true, false) // threshold 2: open until 5 s
			v := view(1, "waiting", 1, sec(5), "a")
			v.Deferred = true
			c.Committed(1, []JobView{v, view(2, "dead", 1, 0, "a")})
			c.SetTime(sec(7))
			c.CheckPrompt()
		}},
		{InvHandlerPrompt, func(c *Checker) {
			c.Received(1, "m1", "r1", 0)
			c.CheckWorker(1, true, []string{"r1"}, 0, 1, sec(10), sec(10))
		}},
		{InvDispositionPrompt, func(c *Checker) {
			c.Received(1, "m1", "r1", 0)
			c.HandlerStarted("r1")
			c.HandlerEnded("r1")
			c.DispositionBegan("r1")
			c.CheckWorker(1, true, []string{"r1"}, 0, 1, sec(10), sec(10))
		}},
		{InvRenewalOnTime, func(c *Checker) {
			c.Received(1, "m1", "r1", 0) // W 30 s: renew at 10 s
			c.HandlerStarted("r1")
			c.SetTime(sec(10.5))
			c.CheckWorker(1, true, []string{"r1"}, 1, 1, sec(10), sec(10))
		}},
		{InvRenewalOnTime + "/early", func(c *Checker) {
			c.Received(1, "m1", "r1", 0)
			c.HandlerStarted("r1")
			c.SetTime(sec(9.7)) // more than the 250 ms coalescing window early
			c.RenewSent("r1", sec(30))
		}},
		{InvDropAtMargin, func(c *Checker) {
			c.Received(1, "m1", "r1", 0)
			c.HandlerStarted("r1")
			c.SetTime(sec(10))
			c.RenewSent("r1", sec(30))
			c.SetTime(sec(29.5)) // unanswered past the stop point (29 s): it must be dropped there
			c.CheckWorker(1, true, []string{"r1"}, 1, 1, sec(29), sec(29))
		}},
		{InvWakeAtNotLate, func(c *Checker) {
			c.NodeRecovered(1, nil)
			enqueue(c, 1, "a")
			c.Committed(1, []JobView{view(1, "waiting", 0, sec(10), "a")})
			c.RunnerWake(1, sec(10), 0) // the driver armed no timer
		}},
		{InvWakeAtNotLate + "/worker", func(c *Checker) {
			c.Received(1, "m1", "r1", 0)
			c.HandlerStarted("r1")
			c.CheckWorker(1, true, []string{"r1"}, 1, 1, sec(11), sec(11))
		}},
		{InvReadsMatch, func(c *Checker) {
			enqueue(c, 1, "a")
			c.AttemptStarted(1, 1, 1)
			c.JobRead(1, ReadView{ID: 1, State: "running", Attempts: 1}, "Get") // the newest attempt dropped
		}},
		{InvReadsMatch + "/cap", func(c *Checker) {
			enqueue(c, 1, "a")
			c.JobRead(1, ReadView{ID: 1, State: "dead", Attempts: 1, History: make([]ReadAttempt, 11)}, "List")
		}},
		{InvReadsMatch + "/outcome", func(c *Checker) {
			enqueue(c, 1, "a")
			c.AttemptStarted(1, 1, 1)
			c.OutcomeFed(1, 1, 1, "failed", "boom")
			c.AttemptEnded(1, 1, 1, false, false)
			c.JobRead(1, ReadView{ID: 1, State: "dead", Attempts: 1, LastErr: "boom", History: []ReadAttempt{{1, "succeeded"}}}, "Get")
		}},
		{InvReadsMatch + "/lasterr", func(c *Checker) {
			enqueue(c, 1, "a")
			c.AttemptStarted(1, 1, 1)
			c.OutcomeFed(1, 1, 1, "failed", "boom")
			c.AttemptEnded(1, 1, 1, false, false)
			c.JobRead(1, ReadView{ID: 1, State: "dead", Attempts: 1, LastErr: "other", History: []ReadAttempt{{1, "failed"}}}, "Get")
		}},
		{InvStartWhenFree, func(c *Checker) {
			c.NodeRecovered(1, nil)
			enqueue(c, 1, "a")
			c.CommitDispatched(1, []JobView{view(1, "waiting", 0, 0, "a")}) // due, a unit free, not started
		}},
		{InvAckPrompt, func(c *Checker) {
			c.SetSyncDelay(5 * time.Millisecond)
			c.SetTime(time.Second)
			c.CommandAnswered(1, time.Second-6*time.Millisecond) // taken one commit cycle and 1 ms ago
		}},
		{InvLiveness, func(c *Checker) { c.Liveness(false, "job 3 still waiting at the bound") }},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestChecker()
			tc.feed(c)
			v := c.Violation()
			want := tc.name
			if i := indexByte(want, '/'); i >= 0 {
				want = want[:i]
			}
			covered[want] = true
			if v == nil {
				t.Fatalf("no violation reported, want %s", want)
			}
			if v.Invariant != want {
				t.Fatalf("violation %v, want invariant %s", v, want)
			}
		})
	}
	for _, inv := range Invariants {
		if !covered[inv.Name] && firedElsewhere[inv.Name] == "" {
			t.Errorf("invariant %s has no test showing it fires", inv.Name)
		}
	}
}

func indexByte(s string, b byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return i
		}
	}
	return -1
}

// TestInvariantsHoldOnValidHistory feeds a history that respects every invariant (including
// the edges: a probe at exactly the cooldown's end, a renewal request at the ceiling, a
// recovery showing a written-but-unacknowledged commit) and asserts nothing fires.
func TestInvariantsHoldOnValidHistory(t *testing.T) {
	c := newTestChecker()
	enqueue(c, 1, "t")
	enqueue(c, 2, "t")
	enqueue(c, 3, "t")
	c.AttemptStarted(1, 1, 1)
	c.AttemptStarted(1, 2, 1)
	c.AttemptEnded(1, 1, 1, true, false)
	c.AttemptEnded(1, 2, 1, true, false) // opens until 5s
	c.SetTime(sec(5))
	c.AttemptStarted(1, 3, 1) // probe
	c.AttemptEnded(1, 3, 1, false, true)
	c.AttemptStarted(1, 1, 2) // closed again
	c.AttemptEnded(1, 1, 2, false, true)
	c.SetTime(sec(5.5))
	c.AttemptStarted(1, 2, 2)
	after := 3 * time.Second
	c.AttemptFailed(1, 2, 2, &after)
	c.AttemptEnded(1, 2, 2, false, true) // not a breaker failure here, to keep it closed
	c.Committed(1, []JobView{view(1, "succeeded", 2, 0, "t"), view(2, "waiting", 2, sec(8.5), "t"), view(3, "succeeded", 1, 0, "t")})
	c.SetTime(sec(6))
	live := []JobView{view(1, "succeeded", 2, 0, "t"), view(2, "waiting", 2, sec(8.5), "t"), view(3, "succeeded", 1, 0, "t")}
	c.Committed(1, live)
	c.JobAppended(1, 4, sec(5), "u", "p")
	c.CommitUnacked(1, append(append([]JobView(nil), live...), view(4, "due", 0, sec(5), "u")))
	c.NodeCrashed(1)
	c.NodeRecovered(1, []JobView{view(2, "waiting", 2, sec(8.5), "t"), view(4, "due", 0, sec(5), "u")})
	c.CheckPrompt() // job 4 is due, and due only since the open: on time
	c.RunnerWake(1, sec(8.5), sec(8.5))
	c.CommitDispatched(1, []JobView{view(2, "waiting", 2, sec(8.5), "t"), view(4, "running", 1, sec(5), "u")})
	// A cancel taken while a commit is in flight: the commit's durable state still shows job 2
	// waiting, the live one (and its WakeAt: none) has it cancelled (swarm seed 2025).
	c.CancelSubmitted(1, 2)
	c.RunnerWake(1, 0, 0)

	c.Received(1, "m1", "r1", 0)
	c.HandlerStarted("r1")
	c.CheckWorker(1, true, []string{"r1"}, 1, 1, sec(14), sec(14))
	c.SetTime(sec(14)) // received at 6 s with 24 s left: a third of it later
	c.RenewSent("r1", sec(30))
	c.RenewReplied("r1", nil)
	c.CheckHidden(func(*receiptModel, string) bool { return true })
	c.HandlerEnded("r1")
	c.DispositionBegan("r1")
	c.DispositionSent("r1", "delete")
	c.Received(2, "m2", "r2", 0)
	// Renewed on time, each at a third of what is left, until the ceiling clips the request.
	for l := c.receipts["r2"].lease; ; {
		c.SetTime(l.next)
		left := 12*time.Hour - l.next
		c.RenewSent("r2", min(30*time.Second, left.Truncate(time.Second)))
		if left < 30*time.Second {
			break
		}
		c.RenewReplied("r2", nil)
	}
	if v := c.Violation(); v != nil {
		t.Fatalf("unexpected violation: %v", v)
	}
	if c.ChecksTotal() == 0 {
		t.Fatal("no checks counted")
	}
}
