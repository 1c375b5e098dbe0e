package sluice

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/internal/outcome"
)

// Flow control in the driver (docs/runner.md, "Flow control"): the machine decides what
// starts; the driver ends an attempt's context at its timeout, names the timeout in the
// attempt's error, and reads the machine's account of what waits and why.

// timeoutError is a failure of an attempt whose timeout ended its context: retryable, unless
// the handler's own error said otherwise (timedOut keeps those).
type timeoutError struct {
	after time.Duration
	err   error // the handler's; nil when it only echoed the context's end
}

func (e *timeoutError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("sluice: attempt timed out after %v", e.after)
	}
	return fmt.Sprintf("sluice: attempt timed out after %v: %v", e.after, e.err)
}

func (e *timeoutError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrAttemptTimeout}
	}
	return []error{ErrAttemptTimeout, e.err}
}

// timedOut is a handler's err for an attempt bounded by d, once it returned: when its
// context ended by the timeout and the handler failed retryably (any plain error, or
// RetryAfter), the failure names the timeout; a success, a Permanent or DeadLetter failure, a
// Snooze and a panic stay what they are. Through outcome.Runner, as every handler's error.
func timedOut(ctx context.Context, d time.Duration, err error) error {
	if err == nil || !errors.Is(context.Cause(ctx), ErrAttemptTimeout) {
		return err
	}
	if k, _ := outcome.Of(err); k != outcome.KindRetry {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrAttemptTimeout) {
		var ra *outcome.RetryAfterError
		if !errors.As(err, &ra) {
			err = nil // the context's end, echoed: the timeout says it all
		}
	}
	return &timeoutError{after: d, err: err}
}

// attemptContext is the context an attempt's handler runs under, for every executor (the
// owner, the queue runner, and sluicetest through runnerkit.Kit.Context): parent, ended by
// the returned cancel, and, with a timeout, with cause ErrAttemptTimeout once after (the
// executor's timer on its clock) fires. The returned cancel also stops the timer, so an
// ended attempt leaves none.
func attemptContext(parent context.Context, timeout time.Duration, after func(time.Duration, func()) func()) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	if timeout <= 0 {
		return ctx, cancel
	}
	stop := after(timeout, func() { cancel(ErrAttemptTimeout) })
	return ctx, func(cause error) {
		stop()
		cancel(cause)
	}
}

// afterFunc is attemptContext's timer on clk.
func afterFunc(clk clock.Clock) func(time.Duration, func()) func() {
	return func(d time.Duration, fire func()) func() {
		t := clk.AfterFunc(d, fire)
		return func() { t.Stop() }
	}
}

// blocked is why the waiting job j is not starting, in an operator's words ("" when it is not
// waiting).
func (o *owner) blocked(j *runner.Job) string {
	if j.State != runner.Waiting {
		return ""
	}
	return o.eng.Blocked(j.ID).String()
}

// journalBlocks sets Blocked on in's waiting jobs (s's, in order) that the journal alone
// holds back: a paused kind, an earlier job of the sequence. It asks m, the machine s was
// replayed by and never started, the rule the runner applies (Machine.Blocked); m has no
// kind's options and no clock, so its limits, rates, due times and pool say nothing.
func journalBlocks(in *Inspection, s runner.Snapshot, m *runner.Machine) {
	if len(s.Paused) == 0 && !slices.ContainsFunc(s.Jobs, func(j runner.Job) bool { return j.Opts.Group != "" }) {
		return // nothing the journal decides holds a job back
	}
	for i, j := range s.Jobs {
		if j.State != runner.Waiting {
			continue
		}
		switch b := m.Blocked(j.ID); b.Reason {
		case runner.BlockPaused, runner.BlockGroup, runner.BlockGroupDead:
			in.Jobs[i].Blocked = b.String()
		}
	}
}

// paused lists the paused kinds by name.
func (o *owner) paused() []string { return o.eng.Paused() }

// Paused lists the kinds paused (Pause) by name, as of the last commit. It waits for the
// runner's owner, so ctx bounds it.
func (r *Runner) Paused(ctx context.Context) ([]string, error) {
	rep, err := r.call(ctx, command{kind: cmdPaused})
	if err != nil {
		return nil, err
	}
	return rep.paused, rep.err
}

// Pause is Runner.Pause of this kind: it starts no attempt until Resume, durably (also
// across restarts). Running attempts go on, and Enqueue goes on. It hides the Runner's
// Pause(ctx, kind), which k.Runner.Pause still reaches for another kind. A queue-backed kind
// cannot be paused from a handle (ErrQueueUnsupported).
func (k *Kind[A]) Pause(ctx context.Context) error {
	if err := k.check(); err != nil {
		return err
	}
	if k.q != nil {
		return fmt.Errorf("%w: Pause %s: a queue-backed kind runs on every process of the fleet; stop its QueueRunners instead", ErrQueueUnsupported, runner.QuoteCut(k.name))
	}
	return k.Runner.Pause(ctx, k.name)
}

// Resume is Runner.Resume of this kind: it starts attempts again, durably. A queue-backed
// kind refuses (ErrQueueUnsupported).
func (k *Kind[A]) Resume(ctx context.Context) error {
	if err := k.check(); err != nil {
		return err
	}
	if k.q != nil {
		return fmt.Errorf("%w: Resume %s: a queue-backed kind cannot be paused", ErrQueueUnsupported, runner.QuoteCut(k.name))
	}
	return k.Runner.Resume(ctx, k.name)
}

// Paused is Runner.Paused; a queue-backed kind has no paused kinds to list
// (ErrQueueUnsupported).
func (k *Kind[A]) Paused(ctx context.Context) ([]string, error) {
	if k.queue() != nil {
		return nil, fmt.Errorf("%w: Paused: a queue-backed kind cannot be paused", ErrQueueUnsupported)
	}
	return k.runner().Paused(ctx)
}
