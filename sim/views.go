package sim

import "github.com/sluicehq/sluice/core/runner"

// liveViews returns node's live state as job views after a commit, reusing the payload
// strings of prev (the views of its previous commit) for unchanged jobs.
func (w *World) liveViews(_ int, prev []JobView, e *runner.Engine) []JobView {
	return jobViewsAfter(prev, e.State())
}
