package sluiceui

import (
	"context"

	"github.com/sluicehq/sluice"
)

// FromRunner returns a Source over a live runner (a *sluice.Runner, or the Runner a Kind
// handle embeds) of any number of kinds; payloads are shown as their journaled bytes. Retry
// and Cancel act on the runner, durably.
func FromRunner(r *sluice.Runner) Source {
	return runnerSource{r: r}
}

// runnerSource only translates: every decision is the runner's.
type runnerSource struct {
	r *sluice.Runner
}

func (s runnerSource) Stats(ctx context.Context) (sluice.Stats, error) { return s.r.Stats(ctx) }

func (s runnerSource) List(ctx context.Context, f Filter) (Page, error) {
	p, err := s.r.List(ctx, sluice.ListFilter{States: f.States, Kind: f.Kind, Target: f.Target, After: f.After, Limit: f.limit(),
		OmitPayload: f.NoPayload})
	if err != nil {
		return Page{}, err
	}
	out := Page{Next: p.Next, More: p.More}
	for _, j := range p.Jobs {
		out.Jobs = append(out.Jobs, jobOf(j))
	}
	return out, nil
}

func (s runnerSource) Get(ctx context.Context, id uint64) (Job, error) {
	j, err := s.r.Get(ctx, id)
	if err != nil {
		return Job{}, err
	}
	return jobOf(j), nil
}

func jobOf(j sluice.JobInfo[[]byte]) Job {
	return Job{ID: j.ID, Kind: j.Kind, Target: j.Target, State: j.State, Attempts: j.Attempts, FirstDue: j.FirstDue, Due: j.Due,
		Reason: j.Reason, LastErr: j.LastErr, Priority: j.Priority, Unique: j.Unique, History: j.History, Payload: j.Payload,
		Blocked: j.Blocked, Key: j.Key, Group: j.Group, Hold: j.HoldOnDead}
}

func (s runnerSource) Breakers(ctx context.Context) ([]Breaker, error) {
	bs, err := s.r.Breakers(ctx)
	if err != nil {
		return nil, err
	}
	var out []Breaker
	for _, b := range bs {
		out = append(out, Breaker{Target: b.Target, State: b.State, Until: b.Until, Failures: b.Failures, InFlight: b.InFlight})
	}
	return out, nil
}

func (s runnerSource) Schedules(ctx context.Context) ([]sluice.ScheduleInfo, error) {
	return s.r.Schedules(ctx)
}

func (s runnerSource) Paused(ctx context.Context) ([]string, error) { return s.r.Paused(ctx) }

func (s runnerSource) Retry(ctx context.Context, id uint64) error    { return s.r.Retry(ctx, id) }
func (s runnerSource) Cancel(ctx context.Context, id uint64) error   { return s.r.Cancel(ctx, id) }
func (s runnerSource) Pause(ctx context.Context, kind string) error  { return s.r.Pause(ctx, kind) }
func (s runnerSource) Resume(ctx context.Context, kind string) error { return s.r.Resume(ctx, kind) }
func (s runnerSource) ReadOnly() bool                                { return false }
