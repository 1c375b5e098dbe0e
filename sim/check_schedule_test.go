package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sim/internal/runview"
)

// Histories fed to the period-once checker: a legal one passes, and each way of breaking the
// invariant is reported.
func TestPeriodOnceFiresOnViolatingHistories(t *testing.T) {
	s := time.Second
	sched := func(last, at, next time.Duration, job uint64) ScheduleView {
		return ScheduleView{Name: "s1", Spec: "@every 10s", Payload: "p", CatchUp: "one", Anchor: 0, Next: next, Last: last, LastAt: at, LastJob: job}
	}
	set := sched(-1, -1, 10*s, 0)
	job := func(id uint64, due time.Duration) JobView {
		return JobView{ID: id, State: "waiting", FirstDue: due, Due: due, Target: "t1", Payload: "p"}
	}
	for _, tc := range []struct {
		name string
		feed func(c *Checker)
		want string // "" for no violation, else a fragment of the detail
	}{
		{"on time, late within the period, and a catch-up", func(c *Checker) {
			c.ScheduleSubmitted(1, set)
			c.PeriodFired(1, sched(10*s, 10*s, 20*s, 1), true)
			c.PeriodFired(1, sched(20*s, 29*s, 30*s, 2), true)
			c.PeriodFired(1, sched(30*s, 75*s, 80*s, 3), true) // 40 s to 70 s missed: one job
		}, ""},
		{"a period skipped", func(c *Checker) {
			c.ScheduleSubmitted(1, set)
			c.PeriodFired(1, sched(20*s, 20*s, 30*s, 1), true)
		}, "waiting for period 10.000s"},
		{"moved past a period it should have fired", func(c *Checker) {
			c.ScheduleSubmitted(1, set)
			c.PeriodFired(1, sched(10*s, 10*s, 30*s, 1), true)
		}, "want the first period after it, 20.000s"},
		{"a missed period skipped under catch-up one", func(c *Checker) {
			c.ScheduleSubmitted(1, set)
			c.PeriodFired(1, sched(10*s, 25*s, 30*s, 0), true)
		}, "missed true, catch-up one"},
		{"a job durable without its advance, fired again", func(c *Checker) {
			c.ScheduleSubmitted(1, set)
			c.SchedulesCommitted(1, []ScheduleView{set})
			c.PeriodFired(1, sched(10*s, 10*s, 20*s, 1), false)
			c.SchedulesUnacked(1, []ScheduleView{sched(10*s, 10*s, 20*s, 1)})
			c.SchedulesRecovered(1, []ScheduleView{set}, []JobView{job(1, 10*s)})
			c.PeriodFired(1, sched(10*s, 11*s, 20*s, 2), true)
		}, "handled twice: job 1, then job 2"},
		{"a batch lost whole is handled again", func(c *Checker) {
			c.ScheduleSubmitted(1, set)
			c.SchedulesCommitted(1, []ScheduleView{set})
			c.PeriodFired(1, sched(10*s, 10*s, 20*s, 1), false)
			c.SchedulesRecovered(1, []ScheduleView{set}, nil)
			c.PeriodFired(1, sched(10*s, 11*s, 20*s, 1), true)
		}, ""},
		{"an advance durable without its job", func(c *Checker) {
			c.ScheduleSubmitted(1, set)
			c.SchedulesCommitted(1, []ScheduleView{set})
			c.PeriodFired(1, sched(10*s, 10*s, 20*s, 1), false)
			c.SchedulesUnacked(1, []ScheduleView{sched(10*s, 10*s, 20*s, 1)})
			c.SchedulesRecovered(1, []ScheduleView{sched(10*s, 10*s, 20*s, 1)}, nil)
		}, "but not its job 1"},
		{"a period skipped while its unique key is held", func(c *Checker) {
			c.ScheduleSubmitted(1, set)
			v := sched(10*s, 10*s, 20*s, 0)
			v.Unique, v.Held = "mail/k", true
			c.PeriodFired(1, v, true)
		}, ""},
		{"a period skipped for a unique key no job holds", func(c *Checker) {
			c.ScheduleSubmitted(1, set)
			v := sched(10*s, 10*s, 20*s, 0)
			v.Unique = "mail/k"
			c.PeriodFired(1, v, true)
		}, `unique key "mail/k" held false`},
		{"a set taken while the commit that handled a period is in flight (swarm seed 3675)", func(c *Checker) {
			c.ScheduleSubmitted(1, set)
			v := sched(10*s, 10*s, 20*s, 1)
			v.Payload = "p2" // the set changes the payload and keeps the period Begin advanced to
			c.ScheduleSubmitted(1, v)
			c.PeriodFired(1, sched(10*s, 10*s, 20*s, 1), true) // reported when the commit lands
			c.PeriodFired(1, sched(20*s, 20*s, 30*s, 2), true)
		}, ""},
		{"a period skipped before a set during the flight", func(c *Checker) {
			c.ScheduleSubmitted(1, set)
			c.ScheduleSubmitted(1, sched(20*s, 20*s, 30*s, 1))
			c.PeriodFired(1, sched(20*s, 20*s, 30*s, 1), true)
		}, "waiting for period 10.000s"},
		{"recovery loses a committed change", func(c *Checker) {
			c.SchedulesCommitted(1, []ScheduleView{set})
			c.SchedulesRecovered(1, nil, nil)
		}, "recovered schedules []"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecker()
			tc.feed(c)
			v := c.Violation()
			switch {
			case tc.want == "" && v != nil:
				t.Fatalf("violation %v", v)
			case tc.want != "" && (v == nil || v.Invariant != InvPeriodOnce || !strings.Contains(v.Detail, tc.want)):
				t.Fatalf("violation %v, want %s with %q", v, InvPeriodOnce, tc.want)
			}
		})
	}
}

func TestSpecNextOracle(t *testing.T) {
	s := time.Second
	sc := runview.SpecCache{}
	for _, tc := range []struct {
		spec          string
		anchor, after time.Duration
		want          time.Duration
	}{
		{"@every 10s", 3 * s, 0, 13 * s},
		{"@every 10s", 3 * s, 13 * s, 23 * s},
		{"@every 10s", 3 * s, 42 * s, 43 * s},
		{"*/15 * * * * *", 0, 15 * s, 30 * s},
		{"0 * * * * *", 0, 59 * s, 60 * s},
		{"0 0 30 2 *", 0, 0, -1},
	} {
		if got := runview.SpecNext(tc.spec, tc.anchor, tc.after); got != tc.want {
			t.Errorf("runview.SpecNext(%q, %v, %v) = %v, want %v", tc.spec, tc.anchor, tc.after, got, tc.want)
		}
		for range 2 { // the second call finds the spec in the cache
			if got := sc.Next(tc.spec, tc.anchor, tc.after); got != tc.want {
				t.Errorf("cached next(%q, %v, %v) = %v, want %v", tc.spec, tc.anchor, tc.after, got, tc.want)
			}
		}
	}
}

// An engine that journals a period's job and its schedule's advance in two batches, with a
// crash between, runs the period twice: period-once catches it.
func TestMutationSplitFiringIsCaught(t *testing.T) {
	v := runMutated(t, "calm", mutSplitFiring, 20)
	if v == nil || v.Invariant != InvPeriodOnce {
		t.Fatalf("violation %v, want %s", v, InvPeriodOnce)
	}
	t.Log(v)
}

// A job's own AttemptsMax, below the policy's, bounds its attempts: the second attempt of a job
// allowed one is an attempts-max violation, though the policy allows three.
func TestAttemptsMaxFollowsTheJobsOwn(t *testing.T) {
	c := newTestChecker()
	enqueue(c, 1, "a")
	c.JobAttemptsMax(1, 1, 1)
	c.AttemptStarted(1, 1, 1)
	c.AttemptEnded(1, 1, 1, false, true)
	if v := c.Violation(); v != nil {
		t.Fatalf("violation %v after the one attempt allowed", v)
	}
	c.AttemptStarted(1, 1, 2)
	if v := c.Violation(); v == nil || v.Invariant != InvAttemptsMax {
		t.Fatalf("violation %v, want %s", v, InvAttemptsMax)
	}
}
