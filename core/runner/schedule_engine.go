package runner

import "time"

// SetSchedule submits a schedule (added, or changed when one has its name) at now; it is
// durable, and its Ack is in a Result, after the next Commit. Checked before anything is
// written: the name, the spec (ErrSchedule), the job each period would enqueue (as EnqueueJob
// checks it: ErrJob, ErrTime, ErrTooLarge), at most SchedulesMax schedules. Also ErrPoisoned.
// Periods fire while dispatching, at Commits (Result.Wake names the next one).
func (e *Engine) SetSchedule(now time.Time, ns NewSchedule) (Ticket, error) {
	return e.step(SetSchedule{Now: now, Schedule: ns})
}

// RemoveSchedule submits the removal of the schedule name (ErrNoSchedule if there is none);
// jobs it enqueued already are not touched.
func (e *Engine) RemoveSchedule(name string) (Ticket, error) {
	return e.step(RemoveSchedule{Name: name})
}

// Schedules returns copies of the schedules, by name (the state after the last Commit, plus
// commands submitted since).
func (e *Engine) Schedules() []Schedule { return e.m.Schedules() }
