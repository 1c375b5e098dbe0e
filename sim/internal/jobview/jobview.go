// Package jobview is the simulator's view of a runner job, reduced to what its invariants
// compare, and the comparison of two job lists (live against recovered or replayed).
package jobview

import (
	"fmt"
	"sort"
	"time"

	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim/internal/trace"
)

// View is a job as a runner reports it (live or recovered), reduced to what the invariants
// compare. Times are offsets from trace.Epoch.
type View struct {
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
	// WindowUntil: a succeeded job's unique window end (its success time plus the window);
	// 0 without one.
	WindowUntil time.Duration
}

func (j View) String() string {
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

// Of is j's view, with payload its payload as a string.
func Of(j *runner.Job, payload string) View {
	v := View{ID: j.ID, State: j.State.String(), Deferred: j.Deferred, Attempts: j.Attempts,
		FirstDue: trace.Since(j.FirstDue), Due: trace.Since(j.Due), Target: j.Target, Payload: payload}
	if j.Opts.Unique != "" {
		v.Unique = j.Opts.Kind + "/" + j.Opts.Unique
	}
	v.WindowUntil = windowUntil(j)
	if j.State == runner.Dead {
		v.Reason = j.Reason.String()
	}
	return v
}

// OfSnapshot is the views of s's jobs, reusing the payload strings of prev (views of an
// earlier state of the same node, ascending by id) for jobs whose payload is unchanged: the
// views are rebuilt after every commit, and converting every payload again was most of their
// cost.
func OfSnapshot(prev []View, s runner.Snapshot) []View {
	out := make([]View, len(s.Jobs))
	k := 0
	for i := range s.Jobs {
		j := &s.Jobs[i]
		for k < len(prev) && prev[k].ID < j.ID {
			k++
		}
		out[i] = Of(j, payloadOf(prev, k, j))
	}
	return out
}

// payloadOf is j's payload as a string: prev[k]'s when it is j's and unchanged.
func payloadOf(prev []View, k int, j *runner.Job) string {
	if k < len(prev) && prev[k].ID == j.ID && prev[k].Payload == string(j.Payload) {
		return prev[k].Payload
	}
	return string(j.Payload)
}

// Aliases reports whether a and b share their first element (the same backing array).
func Aliases(a, b []View) bool {
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
func Same(v *View, j *runner.Job) bool {
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
func Diff(want, got []View, interrupted bool) string {
	if !ascendingByID(want) || !ascendingByID(got) {
		return DiffByMap(want, got, interrupted)
	}
	i, k := 0, 0
	for i < len(want) || k < len(got) {
		var a, b View
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
	v    []View
	m    map[uint64]View
	next int // v's index after the last one found: callers mostly ask in ascending order
}

// IndexOf indexes v.
func IndexOf(v []View) Index {
	if ascendingByID(v) {
		return Index{v: v}
	}
	m := make(map[uint64]View, len(v))
	for _, j := range v {
		m[j.ID] = j
	}
	return Index{m: m}
}

// Get finds id's view.
func (x *Index) Get(id uint64) (View, bool) {
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
		return View{}, false
	}
	x.next = lo + 1
	return v[lo], true
}

// ascendingByID says whether v's ids strictly ascend.
func ascendingByID(v []View) bool {
	for i := 1; i < len(v); i++ {
		if v[i-1].ID >= v[i].ID {
			return false
		}
	}
	return true
}

// DiffByMap is Diff for lists in any order (a later duplicate id wins).
func DiffByMap(want, got []View, interrupted bool) string {
	w := make(map[uint64]View, len(want))
	for _, v := range want {
		w[v.ID] = v
	}
	g := make(map[uint64]View, len(got))
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
func diffJob(a View, okA bool, b View, okB bool, interrupted bool) string {
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
