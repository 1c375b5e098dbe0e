package runner

import "github.com/sluicehq/sluice/internal/runnermut"

// The simulator's planted defect for periodic jobs (internal/runnermut): never set in production.
func init() {
	runnermut.SplitFiring = func(cfg any, between func()) { cfg.(*Config).splitFiring = between }
}

// writeSplit is writeBatch's journaling under the planted defect: every record but the
// ScheduleFired ones, a commit, between(), then those. It reports whether it wrote anything.
func (e *Engine) writeSplit(as []Append) (bool, error) {
	if e.cfg.splitFiring == nil {
		return false, nil
	}
	var fired []Append
	for _, a := range as {
		if a.Tag == TagScheduleFired {
			fired = append(fired, a)
			continue
		}
		if _, err := e.j.Append(a.Tag, a.Data); err != nil {
			return true, err
		}
	}
	if len(fired) == 0 {
		return true, nil
	}
	if _, err := e.j.Commit(); err != nil {
		return true, err
	}
	e.cfg.splitFiring()
	for _, a := range fired {
		if _, err := e.j.Append(a.Tag, a.Data); err != nil {
			return true, err
		}
	}
	return true, nil
}
