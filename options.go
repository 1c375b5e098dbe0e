package sluice

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/core/runner"
)

// Priority bounds: WithPriority takes a value in [PriorityMin, PriorityMax]; 0 is the default.
const (
	PriorityMin = runner.PriorityMin
	PriorityMax = runner.PriorityMax
)

// TimeRange is the range a due time must lie in (the range a journal record holds).
const TimeRange = runner.TimeRange

// ErrInvalidJob is returned by Enqueue and EnqueueMany for a job that cannot be journaled: an
// empty target, a due outside TimeRange, or an option out of range. The message says which.
var ErrInvalidJob = errors.New("sluice: invalid job")

// JobOption sets one of a job's own options; Enqueue and EnqueueMany (NewJob.Options) take
// them. Options are journaled with the job and kept for its life (a manual Retry included).
type JobOption func(*jobSettings)

// jobSettings is what the options set; err is the first option refused.
type jobSettings struct {
	o   runner.Opts
	err error
}

// WithPriority orders the job among due jobs: higher priorities start first, then earlier
// due times, then lower ids. The starvation rule (Config.AgeMax): a job due for AgeMax or
// longer starts before any higher priority, the longest waiting first.
func WithPriority(p int) JobOption {
	return func(s *jobSettings) {
		if p < PriorityMin || p > PriorityMax {
			s.refuse(fmt.Errorf("WithPriority(%d): must be in [%d, %d]", p, PriorityMin, PriorityMax))
		}
		s.o.Priority = p
	}
}

// WithAttempts replaces Config.Policy.Attempts for this job (n ≥ 1; the first attempt counts).
func WithAttempts(n int) JobOption {
	return func(s *jobSettings) {
		if n < 1 {
			s.refuse(fmt.Errorf("WithAttempts(%d): must be ≥ 1", n))
		}
		s.o.AttemptsMax = n
	}
}

// WithDeadline replaces Config.Policy.Deadline for this job: no attempt starts at or after
// its first due time plus d (d > 0).
func WithDeadline(d time.Duration) JobOption {
	return func(s *jobSettings) {
		if d <= 0 {
			s.refuse(fmt.Errorf("WithDeadline(%v): must be > 0", d))
		}
		s.o.Deadline = d
	}
}

// NewJob is one job of EnqueueMany: Enqueue's arguments.
type NewJob[A any] struct {
	Due     time.Time // zero: now
	Target  string
	Payload A
	Options []JobOption
}

func (s *jobSettings) refuse(err error) {
	if s.err == nil {
		s.err = fmt.Errorf("%w: %w", ErrInvalidJob, err)
	}
}

// jobOpts applies opts, or returns the first refusal.
func jobOpts(opts []JobOption) (runner.Opts, error) {
	var s jobSettings
	for _, f := range opts {
		f(&s)
	}
	return s.o, s.err
}
