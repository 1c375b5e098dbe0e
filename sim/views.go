package sim

import (
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim/internal/runview"
)

// The checker compares a node's whole job state after every commit that wrote records. The
// views it compares are built straight from the engine's jobs (no snapshot copy), a job whose
// view did not change keeps its previous view (no string built again), and the slice is one of
// two buffers per node used in turn: the one the checker holds as the last committed state
// stays intact, the other (two commits old, held by nothing) is overwritten.

// viewBufs are a node's two view buffers.
type viewBufs [2][]JobView

// liveViews returns node's live state as job views after a commit, reusing prev (the views of
// its previous commit, ascending by id) for unchanged jobs. It equals runview.Jobs(nil, e.State()).
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
	if runview.Aliases(bufs[0], prev) {
		slot = 1
	}
	out := bufs[slot][:0]
	k := 0
	e.EachJob(func(j *runner.Job) {
		for k < len(prev) && prev[k].ID < j.ID {
			k++
		}
		if k < len(prev) && prev[k].ID == j.ID && runview.Same(&prev[k], j) {
			out = append(out, prev[k])
			return
		}
		payload := ""
		if k < len(prev) && prev[k].ID == j.ID && prev[k].Payload == string(j.Payload) {
			payload = prev[k].Payload
		} else {
			payload = string(j.Payload)
		}
		out = append(out, runview.OfJob(j, payload))
	})
	bufs[slot] = out
	return out
}

// JobView is a job as a runner reports it (live or recovered), reduced to what the
// invariants compare (sim/internal/runview).
type JobView = runview.Job

// ScheduleView is a schedule as a runner reports it, reduced to what period-once compares
// (sim/internal/runview).
type ScheduleView = runview.Schedule
