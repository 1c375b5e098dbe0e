package sim

import (
	"time"

	"github.com/sluicehq/sluice/core/runner"
)

// The checker compares a node's whole job state after every commit that wrote records. The
// views it compares are built straight from the engine's jobs (no snapshot copy), a job whose
// view did not change keeps its previous view (no string built again), and the slice is one of
// two buffers per node used in turn: the one the checker holds as the last committed state
// stays intact, the other (two commits old, held by nothing) is overwritten.

// viewBufs are a node's two view buffers.
type viewBufs [2][]JobView

// liveViews returns node's live state as job views after a commit, reusing prev (the views of
// its previous commit, ascending by id) for unchanged jobs. It equals jobViews(e.State()).
func (w *World) liveViews(node int, prev []JobView, e *runner.Engine) []JobView {
	if w.views == nil {
		w.views = make(map[int]*viewBufs)
	}
	bufs := w.views[node]
	if bufs == nil {
		bufs = &viewBufs{}
		w.views[node] = bufs
	}
	slot := 0
	if aliases(bufs[0], prev) {
		slot = 1
	}
	out := bufs[slot][:0]
	k := 0
	e.EachJob(func(j *runner.Job) {
		for k < len(prev) && prev[k].ID < j.ID {
			k++
		}
		if k < len(prev) && prev[k].ID == j.ID && sameView(&prev[k], j) {
			out = append(out, prev[k])
			return
		}
		payload := ""
		if k < len(prev) && prev[k].ID == j.ID && prev[k].Payload == string(j.Payload) {
			payload = prev[k].Payload
		} else {
			payload = string(j.Payload)
		}
		out = append(out, jobView(j, payload))
	})
	bufs[slot] = out
	return out
}

// aliases reports whether a and b share their first element (the same backing array).
func aliases(a, b []JobView) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:1][0] == &b[:1][0]
}

// jobView is j's view, with payload its payload as a string.
func jobView(j *runner.Job, payload string) JobView {
	v := JobView{ID: j.ID, State: j.State.String(), Deferred: j.Deferred, Attempts: j.Attempts,
		FirstDue: since(j.FirstDue), Due: since(j.Due), Target: j.Target, Payload: payload}
	if j.Opts.Unique != "" {
		v.Unique = j.Opts.Kind + "/" + j.Opts.Unique
	}
	v.WindowUntil = windowUntil(j)
	if j.State == runner.Dead {
		v.Reason = j.Reason.String()
	}
	return v
}

// windowUntil is a succeeded job's unique window end: the success's own time, as its Finished
// record carries it, plus the window (0 without one).
func windowUntil(j *runner.Job) time.Duration {
	if h := j.History; j.State == runner.Succeeded && j.Opts.UniqueFor > 0 && len(h) > 0 {
		return since(h[len(h)-1].End) + j.Opts.UniqueFor
	}
	return 0
}

// sameView reports whether v is j's view, field by field, without building one.
func sameView(v *JobView, j *runner.Job) bool {
	if v.State != j.State.String() || v.Deferred != j.Deferred || v.Attempts != j.Attempts ||
		v.FirstDue != since(j.FirstDue) || v.Due != since(j.Due) || v.Target != j.Target ||
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
