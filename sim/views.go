package sim

import (
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim/internal/runview"
)

// liveViews returns node's live state as job views after a commit, reusing prev (the views of
// its previous commit) for unchanged jobs, in one of the node's two buffers (runview.Bufs).
func (w *World) liveViews(node int, prev []JobView, e *runner.Engine) []JobView {
	if w.views == nil {
		w.views = make(map[int]*runview.Bufs)
	}
	if w.views[node] == nil {
		w.views[node] = &runview.Bufs{}
	}
	return w.views[node].Live(prev, e)
}

// JobView is a job as a runner reports it (live or recovered), reduced to what the
// invariants compare (sim/internal/runview).
type JobView = runview.Job

// ScheduleView is a schedule as a runner reports it, reduced to what period-once compares
// (sim/internal/runview).
type ScheduleView = runview.Schedule
