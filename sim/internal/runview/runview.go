// Package runview is the simulator's view of a runner's jobs and schedules, reduced to what its
// invariants compare, the comparison of two job lists (live against recovered or replayed),
// and the checker's own oracle of a schedule spec's periods.
package runview

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim/internal/trace"
)

// Job is a job as a runner reports it (live or recovered), reduced to what the invariants
// compare. Times are offsets from trace.Epoch.
type Job struct {
	ID       uint64
	State    string // "waiting", "running", "succeeded", "dead", "cancelled"
	Reason   string // dead only
	Deferred bool
	Attempts int
	FirstDue time.Duration // the start of the retry deadline
	Due      time.Duration
	Target   string
	Payload  string
	Unique   string // the job's kind and unique key ("" without one)
	Kind     string // the job's kind and flow key (a schedule's firing, which the world did
	Key      string // not enqueue, is known to the checkers by these)
	// WindowUntil: a succeeded job's unique window end (its success time plus the window);
	// 0 without one.
	WindowUntil time.Duration
}

func (j Job) String() string {
	s := fmt.Sprintf("{id=%d %s", j.ID, j.State)
	if j.Reason != "" {
		s += "(" + j.Reason + ")"
	}
	if j.Deferred {
		s += " deferred"
	}
	return s + fmt.Sprintf(" attempts=%d first-due=%s due=%s target=%s payload=%q}", j.Attempts, trace.Offset(j.FirstDue), trace.Offset(j.Due), j.Target, j.Payload)
}

// Terminal reports whether state is final.
func Terminal(state string) bool {
	return state == "succeeded" || state == "dead" || state == "cancelled"
}

// OfJob is j's view, with payload its payload as a string.
func OfJob(j *runner.Job, payload string) Job {
	v := Job{ID: j.ID, State: j.State.String(), Deferred: j.Deferred, Attempts: j.Attempts,
		FirstDue: trace.Since(j.FirstDue), Due: trace.Since(j.Due), Target: j.Target, Payload: payload,
		Kind: j.Opts.Kind, Key: j.Opts.Key}
	if j.Opts.Unique != "" {
		v.Unique = j.Opts.Kind + "/" + j.Opts.Unique
	}
	v.WindowUntil = windowUntil(j)
	if j.State == runner.Dead {
		v.Reason = j.Reason.String()
	}
	return v
}

// Jobs is the views of s's jobs, reusing the payload strings of prev (views of an
// earlier state of the same node, ascending by id) for jobs whose payload is unchanged: the
// views are rebuilt after every commit, and converting every payload again was most of their
// cost.
func Jobs(prev []Job, s runner.Snapshot) []Job {
	out := make([]Job, len(s.Jobs))
	k := 0
	for i := range s.Jobs {
		j := &s.Jobs[i]
		for k < len(prev) && prev[k].ID < j.ID {
			k++
		}
		out[i] = OfJob(j, payloadOf(prev, k, j))
	}
	return out
}

// payloadOf is j's payload as a string: prev[k]'s when it is j's and unchanged.
func payloadOf(prev []Job, k int, j *runner.Job) string {
	if k < len(prev) && prev[k].ID == j.ID && prev[k].Payload == string(j.Payload) {
		return prev[k].Payload
	}
	return string(j.Payload)
}

// Aliases reports whether a and b share their first element (the same backing array).
func Aliases(a, b []Job) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:1][0] == &b[:1][0]
}

// windowUntil is a succeeded job's unique window end: the success's own time, as its Finished
// record carries it, plus the window (0 without one).
func windowUntil(j *runner.Job) time.Duration {
	if h := j.History; j.State == runner.Succeeded && j.Opts.UniqueFor > 0 && len(h) > 0 {
		return trace.Since(h[len(h)-1].End) + j.Opts.UniqueFor
	}
	return 0
}

// Same reports whether v is j's view, field by field, without building one.
func Same(v *Job, j *runner.Job) bool {
	if v.State != j.State.String() || v.Deferred != j.Deferred || v.Attempts != j.Attempts ||
		v.FirstDue != trace.Since(j.FirstDue) || v.Due != trace.Since(j.Due) || v.Target != j.Target ||
		v.Payload != string(j.Payload) || v.WindowUntil != windowUntil(j) {
		return false
	}
	if j.State == runner.Dead {
		if v.Reason != j.Reason.String() {
			return false
		}
	} else if v.Reason != "" {
		return false
	}
	if j.Opts.Unique == "" {
		return v.Unique == ""
	}
	kind, key := j.Opts.Kind, j.Opts.Unique
	return len(v.Unique) == len(kind)+1+len(key) && v.Unique[:len(kind)] == kind &&
		v.Unique[len(kind)] == '/' && v.Unique[len(kind)+1:] == key
}

// Diff compares two job lists by id; "" when equal. Terminal jobs that one side dropped
// (compaction retention) are not a difference. With interrupted, a job running in want may
// come back requeued (a recovery after a crash); without, it must be identical (a plain
// replay). Lists ascending by id (as views are built) are merged; others go through maps.
func Diff(want, got []Job, interrupted bool) string {
	if !ascendingByID(want) || !ascendingByID(got) {
		return DiffByMap(want, got, interrupted)
	}
	i, k := 0, 0
	for i < len(want) || k < len(got) {
		var a, b Job
		var okA, okB bool
		switch {
		case k == len(got) || i < len(want) && want[i].ID < got[k].ID:
			a, okA = want[i], true
			i++
		case i == len(want) || got[k].ID < want[i].ID:
			b, okB = got[k], true
			k++
		default:
			a, okA, b, okB = want[i], true, got[k], true
			i, k = i+1, k+1
		}
		if d := diffJob(a, okA, b, okB, interrupted); d != "" {
			return d
		}
	}
	return ""
}

// Index finds a list's views by id: by binary search when the ids ascend (as views are
// built), else through a map (a later duplicate id wins, as a map's assignment would).
type Index struct {
	v    []Job
	m    map[uint64]Job
	next int // v's index after the last one found: callers mostly ask in ascending order
}

// IndexOf indexes v.
func IndexOf(v []Job) Index {
	if ascendingByID(v) {
		return Index{v: v}
	}
	m := make(map[uint64]Job, len(v))
	for _, j := range v {
		m[j.ID] = j
	}
	return Index{m: m}
}

// Get finds id's view.
func (x *Index) Get(id uint64) (Job, bool) {
	if x.m != nil {
		j, ok := x.m[id]
		return j, ok
	}
	v := x.v
	if i := x.next; i < len(v) && v[i].ID == id {
		x.next = i + 1
		return v[i], true
	}
	lo, hi := 0, len(v) // the first index whose id is not below id
	for lo < hi {
		if m := int(uint(lo+hi) >> 1); v[m].ID < id {
			lo = m + 1
		} else {
			hi = m
		}
	}
	x.next = lo
	if lo == len(v) || v[lo].ID != id {
		return Job{}, false
	}
	x.next = lo + 1
	return v[lo], true
}

// ascendingByID says whether v's ids strictly ascend.
func ascendingByID(v []Job) bool {
	for i := 1; i < len(v); i++ {
		if v[i-1].ID >= v[i].ID {
			return false
		}
	}
	return true
}

// DiffByMap is Diff for lists in any order (a later duplicate id wins).
func DiffByMap(want, got []Job, interrupted bool) string {
	w := make(map[uint64]Job, len(want))
	for _, v := range want {
		w[v.ID] = v
	}
	g := make(map[uint64]Job, len(got))
	for _, v := range got {
		g[v.ID] = v
	}
	ids := make([]uint64, 0, len(w)+len(g))
	for id := range w {
		ids = append(ids, id)
	}
	for id := range g {
		if _, ok := w[id]; !ok {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	for _, id := range ids {
		a, okA := w[id]
		b, okB := g[id]
		if d := diffJob(a, okA, b, okB, interrupted); d != "" {
			return d
		}
	}
	return ""
}

// diffJob compares one id's job on each side (ok: present there); "" when they agree.
func diffJob(a Job, okA bool, b Job, okB bool, interrupted bool) string {
	id := a.ID
	if !okA {
		id = b.ID
	}
	switch {
	case okA && okB && a.State == "running" && interrupted:
		// Open requeues an interrupted attempt through the policy: waiting or dead, same count.
		if b.Attempts != a.Attempts || (b.State != "waiting" && b.State != "dead") || b.Target != a.Target || b.Payload != a.Payload {
			return fmt.Sprintf("job %d live %v, recovered %v (want it requeued or dead after the interrupted attempt)", id, a, b)
		}
	case okA && okB:
		if a != b {
			return fmt.Sprintf("job %d live %v, recovered %v", id, a, b)
		}
	case okA && !Terminal(a.State):
		return fmt.Sprintf("job %d live %v, missing after recovery", id, a)
	case okB && !Terminal(b.State):
		return fmt.Sprintf("job %d recovered %v, not in the live state", id, b)
	}
	return ""
}

// Schedule is a schedule as a runner reports it (live or recovered), reduced to what the
// period-once invariant compares. Times are offsets from trace.Epoch; -1 when zero (none).
type Schedule struct {
	Name    string
	Spec    string
	Payload string
	CatchUp string // "one" or "skip"
	Anchor  time.Duration
	Next    time.Duration
	Last    time.Duration // the last period handled
	LastAt  time.Duration // when it was handled
	LastJob uint64        // its job; 0: skipped
	Unique  string        // the key its jobs hold (kind/key), "" without one
	// Held (PeriodFired only): before the commit that handled the period, a job of the node
	// not yet terminal held the schedule's unique key.
	Held bool
}

func (v Schedule) String() string {
	return fmt.Sprintf("{%s spec=%q catch-up=%s next=%s last=%s at=%s job=%d}", v.Name, v.Spec, v.CatchUp,
		trace.Offset(v.Next), trace.Offset(v.Last), trace.Offset(v.LastAt), v.LastJob)
}

// Schedules is the views of ss.
func Schedules(ss []runner.Schedule) []Schedule {
	out := make([]Schedule, len(ss))
	for i, s := range ss {
		out[i] = OfSchedule(s)
	}
	return out
}

// OfSchedule is s's view.
func OfSchedule(s runner.Schedule) Schedule {
	off := func(t time.Time) time.Duration {
		if t.IsZero() {
			return -1
		}
		return trace.Since(t)
	}
	v := Schedule{Name: s.Name, Spec: s.Spec, Payload: string(s.Payload), CatchUp: s.CatchUp.String(),
		Anchor: off(s.Anchor), Next: off(s.Next), Last: off(s.Last), LastAt: off(s.LastAt), LastJob: s.LastJob}
	if s.Opts.Unique != "" {
		v.Unique = s.Opts.Kind + "/" + s.Opts.Unique
	}
	return v
}

// SameSchedules reports whether a and b are equal, schedule by schedule.
func SameSchedules(a, b []Schedule) bool { return slices.Equal(a, b) }

// SpecNext is the independent oracle of a spec's periods: the first period strictly after
// after (-1: none). Intervals count from the anchor; cron specs are robfig/cron's own
// definition (5 fields, 6 with seconds, descriptors), in UTC.
func SpecNext(spec string, anchor, after time.Duration) time.Duration {
	return SpecCache(nil).Next(spec, anchor, after)
}

// SpecCache holds each cron spec parsed once (nil: it does not parse): a run's schedules use a
// few specs, and the checker asks at every period handled. A nil cache parses every time.
type SpecCache map[string]cron.Schedule

// Next is SpecNext, parsing through the cache.
func (sc SpecCache) Next(spec string, anchor, after time.Duration) time.Duration {
	if rest, ok := strings.CutPrefix(spec, "@every "); ok {
		d, err := time.ParseDuration(rest)
		if err != nil || d <= 0 {
			return -1
		}
		k := max(1, (after-anchor)/d)
		for anchor+k*d <= after {
			k++
		}
		for k > 1 && anchor+(k-1)*d > after {
			k--
		}
		return anchor + k*d
	}
	s, ok := sc[spec]
	if !ok {
		s = parseCron(spec)
		if sc != nil {
			sc[spec] = s
		}
	}
	if s == nil {
		return -1
	}
	t := s.Next(trace.Epoch.Add(after))
	if t.IsZero() {
		return -1
	}
	return t.Sub(trace.Epoch)
}

// parseCron parses a cron spec as the runner's parser does; nil when it does not parse.
func parseCron(spec string) cron.Schedule {
	p := cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	s, err := p.Parse(spec)
	if err != nil {
		return nil
	}
	return s
}

// Bufs are a node's two view buffers (Live): the one a checker holds as the last committed
// state stays intact, the other (two commits old, held by nothing) is overwritten.
type Bufs [2][]Job

// Live returns e's live state as job views after a commit, reusing prev (the views of its
// previous commit, ascending by id) for unchanged jobs: a job whose view did not change keeps
// its previous view (no string built again). It equals Jobs(nil, e.State()).
func (b *Bufs) Live(prev []Job, e *runner.Engine) []Job {
	slot := 0
	if Aliases(b[0], prev) {
		slot = 1
	}
	out := b[slot][:0]
	k := 0
	e.EachJob(func(j *runner.Job) {
		for k < len(prev) && prev[k].ID < j.ID {
			k++
		}
		if k < len(prev) && prev[k].ID == j.ID && Same(&prev[k], j) {
			out = append(out, prev[k])
			return
		}
		payload := ""
		if k < len(prev) && prev[k].ID == j.ID && prev[k].Payload == string(j.Payload) {
			payload = prev[k].Payload
		} else {
			payload = string(j.Payload)
		}
		out = append(out, OfJob(j, payload))
	})
	b[slot] = out
	return out
}
