package sim

import (
	"sort"
	"time"

	"github.com/sluicehq/sluice/sim/internal/runview"
)

// period-once, the model: per node, the next period each schedule must handle (from the last
// set or handled period the node reported), and every period handled, with its job, until a
// recovery shows whether the commit that handled it was durable.
type schedNode struct {
	expect  map[string]time.Duration // schedule name -> its next period
	periods map[periodKey]*periodFact
	live    []ScheduleView // the schedules after the last acknowledged commit
	pending []ScheduleView // after a commit written but not acknowledged, if any
	// ahead holds, per schedule, a period that a set already showed handled (its Last) before
	// the checker heard of it: a commit's Begin handled it and the set came during the flight;
	// its report follows when the commit lands, and the set's next period stands after it.
	ahead map[string]aheadFact
}

// aheadFact is a period a set showed handled early, and the period expected before the set.
type aheadFact struct{ last, want time.Duration }

type periodKey struct {
	name   string
	period time.Duration
}

type periodFact struct {
	job     uint64 // 0: skipped by the catch-up policy
	payload string
	durable bool // its commit was acknowledged, or a recovery showed it
}

func (c *Checker) schedNode(node int) *schedNode {
	if c.scheds == nil {
		c.scheds = map[int]*schedNode{}
	}
	sn := c.scheds[node]
	if sn == nil {
		sn = &schedNode{expect: map[string]time.Duration{}, periods: map[periodKey]*periodFact{}, ahead: map[string]aheadFact{}}
		c.scheds[node] = sn
	}
	return sn
}

// ScheduleSubmitted: node's runner took a set (add or change) of a schedule; v is it now.
func (c *Checker) ScheduleSubmitted(node int, v ScheduleView) {
	sn := c.schedNode(node)
	if exp, ok := sn.expect[v.Name]; ok && v.Last >= 0 && v.Last >= exp && sn.periods[periodKey{v.Name, v.Last}] == nil {
		sn.ahead[v.Name] = aheadFact{last: v.Last, want: exp}
	}
	sn.expect[v.Name] = v.Next
}

// ScheduleRemoveSubmitted: node's runner took the removal of schedule name.
func (c *Checker) ScheduleRemoveSubmitted(node int, name string) {
	sn := c.schedNode(node)
	delete(sn.expect, name)
	delete(sn.ahead, name)
}

// PeriodFired: a commit of node handled the period v.Last of schedule v (v as after the commit,
// at v.LastAt): enqueued job v.LastJob, or skipped it. acked says the commit succeeded. The
// period must be the one the schedule was waiting for (none skipped, none repeated), not be
// handled before, and the next period must be the spec's first after the handling; the job is
// skipped exactly when the period was missed (the next one was due too) and the policy skips,
// or when a job not yet terminal held the schedule's unique key (v.Held).
func (c *Checker) PeriodFired(node int, v ScheduleView, acked bool) {
	sn := c.schedNode(node)
	key := periodKey{v.Name, v.Last}
	if f := sn.periods[key]; f != nil {
		c.check(InvPeriodOnce, false, "node %d: period %s of schedule %s handled twice: job %d, then job %d (%v)",
			node, Offset(v.Last), v.Name, f.job, v.LastJob, v)
		return
	}
	exp, ok := sn.expect[v.Name]
	a, early := sn.ahead[v.Name]
	if early = early && a.last == v.Last; early {
		exp = a.want // the set that came after it moved the expectation on already
		delete(sn.ahead, v.Name)
	}
	if ok && exp != v.Last {
		c.check(InvPeriodOnce, false, "node %d: schedule %s handled period %s, but it was waiting for period %s (%v)",
			node, v.Name, Offset(v.Last), Offset(exp), v)
		return
	}
	want := c.specs.Next(v.Spec, v.Anchor, max(v.Last, v.LastAt))
	if !c.check(InvPeriodOnce, v.Next == want, "node %d: schedule %s handled period %s at %s and moved to %s, want the first period after it, %s (%v)",
		node, v.Name, Offset(v.Last), Offset(v.LastAt), Offset(v.Next), Offset(want), v) {
		return
	}
	missed := c.specs.Next(v.Spec, v.Anchor, v.Last) <= v.LastAt
	wantJob := !missed || v.CatchUp != "skip"
	// A period whose job would be a duplicate (its unique key held) is skipped.
	held := wantJob && v.LastJob == 0 && v.Unique != "" && v.Held
	if !c.check(InvPeriodOnce, (v.LastJob != 0) == wantJob || held, "node %d: schedule %s period %s handled at %s (missed %v, catch-up %s, unique key %q held %v) with job %d",
		node, v.Name, Offset(v.Last), Offset(v.LastAt), missed, v.CatchUp, v.Unique, v.Held, v.LastJob) {
		return
	}
	sn.periods[key] = &periodFact{job: v.LastJob, payload: v.Payload, durable: acked}
	if !early {
		sn.expect[v.Name] = v.Next
	}
}

// SchedulesCommitted: node's runner acknowledged a commit; views are its schedules after it.
func (c *Checker) SchedulesCommitted(node int, views []ScheduleView) {
	sn := c.schedNode(node)
	sn.live, sn.pending = views, nil
}

// SchedulesUnacked: node's runner wrote a commit that was not acknowledged; views are the
// schedules it would have had.
func (c *Checker) SchedulesUnacked(node int, views []ScheduleView) { c.schedNode(node).pending = views }

// SchedulesRecovered: node's runner reopened with schedules views and jobs. They must be the
// schedules of the last acknowledged commit or of the unacknowledged one after it. A period
// handled by an unacknowledged commit is durable if its advance or its job was recovered, and
// then both must be (the one-batch rule); otherwise it is forgotten, to be handled again.
func (c *Checker) SchedulesRecovered(node int, views []ScheduleView, jobs []JobView) {
	sn := c.schedNode(node)
	if !runview.SameSchedules(sn.live, views) && (sn.pending == nil || !runview.SameSchedules(sn.pending, views)) {
		c.check(InvPeriodOnce, false, "node %d recovered schedules %v, committed %v (written since: %v)", node, views, sn.live, sn.pending)
		return
	}
	byName := map[string]ScheduleView{}
	for _, v := range views {
		byName[v.Name] = v
	}
	byID := runview.IndexOf(jobs)
	keys := make([]periodKey, 0, len(sn.periods))
	for k, f := range sn.periods {
		if !f.durable {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].name != keys[b].name {
			return keys[a].name < keys[b].name
		}
		return keys[a].period < keys[b].period
	})
	for _, k := range keys {
		f := sn.periods[k]
		v, ok := byName[k.name]
		advanced := ok && v.Last >= k.period
		j, ok := byID.Get(f.job)
		job := f.job != 0 && ok && j.FirstDue == k.period && j.Payload == f.payload
		switch {
		case advanced && f.job != 0 && !job:
			c.check(InvPeriodOnce, false, "node %d: schedule %s recovered past period %s, but not its job %d: the period was skipped", node, k.name, Offset(k.period), f.job)
			return
		case advanced || job:
			f.durable = true
		default:
			delete(sn.periods, k)
		}
	}
	sn.expect = map[string]time.Duration{}
	clear(sn.ahead)
	for _, v := range views {
		sn.expect[v.Name] = v.Next
	}
	sn.live, sn.pending = views, nil
	c.check(InvPeriodOnce, true, "")
}

// JobAttemptsMax: the job id just appended on node has its own AttemptsMax n (0: the policy's),
// which its attempts must respect instead (attempts-max).
func (c *Checker) JobAttemptsMax(node int, id uint64, n int) {
	if j := c.jobs[jobKey{node, id}]; j != nil {
		j.attemptsMax = n
	}
}
