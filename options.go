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

// NameMax bounds, in bytes, each name a job carries: its kind, target and unique key, and a
// schedule's name. A name also holds no NUL byte. Enqueue, EnqueueMany, Schedule and Register
// refuse a name that breaks either rule, writing nothing.
const NameMax = runner.NameMax

// TimeRange is the range a due time must lie in (the range a journal record holds).
const TimeRange = runner.TimeRange

// ErrInvalidJob is returned by Enqueue and EnqueueMany for a job that cannot be journaled: an
// empty target, a name that breaks NameMax's rules, a due outside TimeRange, or an option out
// of range. The message says which.
var ErrInvalidJob = errors.New("sluice: invalid job")

// JobOption sets one of a job's own options; Enqueue and EnqueueMany (NewJob.Options) take
// them. Options are journaled with the job and kept for its life (a manual Retry included).
type JobOption func(*jobSettings)

// jobSettings is what the options set; err is the first option refused.
type jobSettings struct {
	o       runner.Opts
	err     error
	dupOut  *bool // WasDuplicate
	dupFail bool  // FailOnDuplicate
	window  bool  // WithUniqueWindow
	// WithGroup (queue_runner.go)
	group string
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

// ErrDuplicate is returned, with the holder's id, by an Enqueue given FailOnDuplicate when
// its unique key is held.
var ErrDuplicate = errors.New("sluice: duplicate of a job holding the unique key")

// WithUnique gives the job a unique key: while a job holding key has not ended (succeeded,
// dead or cancelled), an Enqueue with the same key journals nothing and returns the holder's
// id, with no error (WasDuplicate says so; FailOnDuplicate makes it ErrDuplicate). Keys are
// per kind. The key is free again once its job ends, or, after a success, once the window of
// WithUniqueWindow ends. A dead job cannot be retried while another job holds its key.
func WithUnique(key string) JobOption {
	return func(s *jobSettings) {
		if key == "" {
			s.refuse(fmt.Errorf("WithUnique(\"\"): the key must not be empty"))
		}
		s.o.Unique = key
	}
}

// WithUniqueWindow keeps the job's unique key (WithUnique, required) reserved for d after the
// job succeeds, so an Enqueue with the key within d of the success is a duplicate too (of
// the succeeded job): "at most one welcome email per day". A dead or cancelled job frees its
// key at once. The window is durable: it survives restarts and compaction.
func WithUniqueWindow(d time.Duration) JobOption {
	return func(s *jobSettings) {
		if d <= 0 {
			s.refuse(fmt.Errorf("WithUniqueWindow(%v): must be > 0", d))
		}
		s.o.UniqueFor = d
		s.window = true
	}
}

// WithKey gives the job a flow key within its kind: the kind's WithKeyConcurrency,
// WithKeyRate and WithFairShare count per key (a tenant, a customer, an upstream account).
// A key is 1 to NameMax bytes without a NUL. Jobs without one share the key "".
func WithKey(key string) JobOption {
	return func(s *jobSettings) {
		if err := runner.CheckName("the key", key, true); err != nil {
			s.refuse(fmt.Errorf("WithKey(%s): %v (1 to %d bytes, no NUL)", runner.QuoteCut(key), err, NameMax))
		}
		s.o.Key = key
	}
}

// WithJobAttemptTimeout bounds each attempt of this job to d (d > 0), replacing its kind's
// WithAttemptTimeout: the handler's context ends d after the attempt starts, with
// context.Cause ErrAttemptTimeout; an error the handler then returns that would be retried
// is a retryable failure naming the timeout, while nil, Permanent and the other outcomes stay
// what they are (docs/results.md). It is distinct from WithDeadline, which bounds when
// attempts may start.
func WithJobAttemptTimeout(d time.Duration) JobOption {
	return func(s *jobSettings) {
		if d <= 0 {
			s.refuse(fmt.Errorf("WithJobAttemptTimeout(%v): must be > 0", d))
		}
		s.o.Timeout = d
	}
}

// WasDuplicate sets *dup to whether the job was a duplicate (see WithUnique), through
// Enqueue or EnqueueMany.
func WasDuplicate(dup *bool) JobOption { return func(s *jobSettings) { s.dupOut = dup } }

// FailOnDuplicate makes a duplicate Enqueue return ErrDuplicate (with the holder's id), and
// an EnqueueMany with such a job return its ids with ErrDuplicate naming it.
func FailOnDuplicate() JobOption { return func(s *jobSettings) { s.dupFail = true } }

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
func jobOpts(opts []JobOption) (jobSettings, error) {
	var s jobSettings
	for _, f := range opts {
		f(&s)
	}
	if s.window && s.o.Unique == "" {
		s.refuse(fmt.Errorf("WithUniqueWindow without WithUnique: the window reserves the job's unique key"))
	}
	return s, s.err
}
