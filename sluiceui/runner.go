package sluiceui

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

// FromRunner returns a Source over a live runner; codec encodes payloads back to the bytes
// the UI shows (pass the codec the runner was opened with). Retry and Cancel act on the
// runner, durably.
func FromRunner[A any](r *sluice.Runner[A], codec sluice.Codec[A]) Source {
	return runnerSource[A]{r: r, codec: codec}
}

// runnerSource only translates: every decision is the runner's.
type runnerSource[A any] struct {
	r     *sluice.Runner[A]
	codec sluice.Codec[A]
}

func (s runnerSource[A]) Stats(context.Context) (sluice.Stats, error) { return s.r.Stats(), nil }

func (s runnerSource[A]) List(ctx context.Context, f Filter) (Page, error) {
	p, err := s.r.List(ctx, sluice.ListFilter{States: f.States, Target: f.Target, After: f.After, Limit: f.limit()})
	if err != nil {
		return Page{}, err
	}
	out := Page{Next: p.Next, More: p.More}
	for _, j := range p.Jobs {
		v, err := s.job(j)
		if err != nil {
			return Page{}, err
		}
		if f.match(v) { // the runner's List has no kinds yet
			out.Jobs = append(out.Jobs, v)
		}
	}
	return out, nil
}

func (s runnerSource[A]) Get(_ context.Context, id uint64) (Job, error) {
	j, err := s.r.Get(id)
	if err != nil {
		return Job{}, err
	}
	return s.job(j)
}

func (s runnerSource[A]) job(j sluice.JobInfo[A]) (Job, error) {
	b, err := s.codec.Encode(j.Payload)
	if err != nil {
		return Job{}, fmt.Errorf("sluice: job %d: %w", j.ID, err)
	}
	return Job{ID: j.ID, Target: j.Target, State: j.State, Attempts: j.Attempts, FirstDue: j.FirstDue, Due: j.Due,
		Reason: j.Reason, LastErr: j.LastErr, Priority: j.Priority, Unique: j.Unique, History: j.History, Payload: b}, nil
}

func (s runnerSource[A]) Breakers(context.Context) ([]Breaker, error) {
	var out []Breaker
	for _, b := range s.r.Breakers() {
		out = append(out, Breaker{Target: b.Target, State: b.State, Until: b.Until, Failures: b.Failures, InFlight: b.InFlight})
	}
	return out, nil
}

func (s runnerSource[A]) Retry(ctx context.Context, id uint64) error  { return s.r.Retry(ctx, id) }
func (s runnerSource[A]) Cancel(ctx context.Context, id uint64) error { return s.r.Cancel(ctx, id) }
func (s runnerSource[A]) ReadOnly() bool                              { return false }
