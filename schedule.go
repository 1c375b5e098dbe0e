package sluice

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/core/runner"
)

// Periodic jobs (docs/runner.md, "Periodic jobs"): a schedule is journaled like a job, so it
// survives crashes and restarts; each period enqueues one job of its kind, and that job and
// the schedule's next period are made durable together, so a crash neither skips nor repeats
// a period.

// IntervalMin is the shortest interval a schedule takes.
const IntervalMin = runner.IntervalMin

// ErrInvalidSchedule is returned by Schedule for a name, spec or job it cannot journal; the
// message says which.
var ErrInvalidSchedule = errors.New("sluice: invalid schedule")

// ErrNoSchedule is returned by Unschedule for a name no schedule has.
var ErrNoSchedule = errors.New("sluice: no such schedule")

// Every is the spec of a schedule that fires every d (d ≥ IntervalMin), counted from when
// the schedule was set: "@every " and d.
func Every(d time.Duration) string { return "@every " + d.String() }

// ScheduleOption sets one of a schedule's options.
type ScheduleOption func(*scheduleSettings)

type scheduleSettings struct {
	job     []JobOption
	catchUp runner.CatchUp
}

// ScheduleJob gives every job the schedule enqueues these options (WithPriority,
// WithAttempts, WithDeadline, WithUnique: a unique key makes a period whose previous job has
// not ended enqueue nothing).
func ScheduleJob(opts ...JobOption) ScheduleOption {
	return func(s *scheduleSettings) { s.job = append(s.job, opts...) }
}

// SkipMissed makes the schedule skip periods missed while the runner was down or not running
// (or its timer fired more than a period late): no job for them, the next one at the first
// period after now. The default is one catch-up job for all the missed periods, due at the
// first of them.
func SkipMissed() ScheduleOption {
	return func(s *scheduleSettings) { s.catchUp = runner.CatchUpSkip }
}

// Schedule sets the schedule name, durably: from now on each period of spec enqueues one job
// of this kind for target with payload. spec is Every(d) ("@every 5m") or a cron expression
// (5 fields, or 6 with seconds first; "@hourly" and the other descriptors), evaluated in UTC.
// Setting a name that exists changes that schedule: a change that keeps the spec keeps the
// next period, a new spec starts a new grid now. Call it at every start of the program: a
// schedule that did not change is left as it is. Periods fire while Run or Drain is active;
// periods missed meanwhile follow the catch-up policy (SkipMissed). Refused before anything is
// written: a bad name or spec (ErrInvalidSchedule); a job Enqueue would refuse (ErrInvalidJob,
// ErrTooLarge); more than 1,000 schedules.
func (k *Kind[A]) Schedule(ctx context.Context, name, spec, target string, payload A, opts ...ScheduleOption) error {
	if err := k.check(); err != nil {
		return err
	}
	if k.q != nil {
		return fmt.Errorf("%w: schedule %s: periodic jobs live in the local runner's journal; enqueue from your own cron instead", ErrQueueUnsupported, runner.QuoteCut(name))
	}
	var s scheduleSettings
	for _, o := range opts {
		o(&s)
	}
	js, err := k.jobOpts(k.keyed(payload, s.job))
	if err != nil {
		return err
	}
	b, err := k.codec.Encode(payload)
	if err != nil {
		return wrapf(nil, err, "schedule %q", name)
	}
	ns := runner.NewSchedule{Name: name, Spec: spec, Target: target, Payload: b, Opts: js.o, CatchUp: s.catchUp}
	rep, err := k.Runner.call(ctx, command{kind: cmdSchedule, sched: ns})
	if err != nil {
		return err
	}
	return scheduleErr(rep.err)
}

// Unschedule removes the schedule name, durably (ErrNoSchedule if there is none). Jobs it
// enqueued already are not touched.
func (r *Runner) Unschedule(ctx context.Context, name string) error {
	rep, err := r.call(ctx, command{kind: cmdUnschedule, sched: runner.NewSchedule{Name: name}})
	if err != nil {
		return err
	}
	return scheduleErr(rep.err)
}

// ScheduleInfo is a schedule as Schedules lists it.
type ScheduleInfo struct {
	Name, Spec string
	Kind       string
	Target     string
	Key, Group string // the flow key and sequence its jobs carry (WithKey, WithKeyFunc, WithGroup)
	SkipMissed bool
	Next       time.Time // the next period; zero when the spec has no more
	Last       time.Time // the last period handled; zero before the first
	LastJob    uint64    // the job of the last period; 0 when it was skipped
	Fired      uint64    // jobs enqueued so far
}

// Schedules lists the schedules by name, as of the last commit.
func (r *Runner) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	rep, err := r.call(ctx, command{kind: cmdSchedules})
	if err != nil {
		return nil, err
	}
	if rep.err != nil {
		return nil, rep.err
	}
	return schedulesOf(rep.scheds), nil
}

// schedulesOf is the engine's schedules in public terms.
func schedulesOf(scheds []runner.Schedule) []ScheduleInfo {
	out := make([]ScheduleInfo, len(scheds))
	for i, s := range scheds {
		out[i] = ScheduleInfo{Name: s.Name, Spec: s.Spec, Kind: s.Opts.Kind, Target: s.Target, Key: s.Opts.Key, Group: s.Opts.Group,
			SkipMissed: s.CatchUp == runner.CatchUpSkip, Next: s.Next, Last: s.Last, LastJob: s.LastJob, Fired: s.Fired}
	}
	return out
}

// scheduleErr gives the engine's schedule refusals their sluice sentinels.
func scheduleErr(err error) error {
	switch {
	case errors.Is(err, runner.ErrSchedule):
		return reprefix(ErrInvalidSchedule, err)
	case errors.Is(err, runner.ErrNoSchedule):
		return reprefix(ErrNoSchedule, err)
	}
	return err
}

// scheduleCmd is a schedule command in the Node's terms (the owner's part).
func scheduleCmd(c command) runner.Event {
	if c.kind == cmdUnschedule {
		return runner.RemoveSchedule{Name: c.sched.Name}
	}
	return runner.SetSchedule{Schedule: c.sched}
}
