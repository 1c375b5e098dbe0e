package sluice

import (
	"log/slog"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core/lease"
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/core/worker"
	"github.com/sluicehq/sluice/internal/outcome"
)

// Hooks report what a runner or a worker did, as it did it (docs/observability.md). Each is a
// field of Config or WorkerConfig, nil by default. The driver calls them when it performs an
// effect its machine reported (a durable record, a call it sends), on its one goroutine: a
// hook must be quick and must not call the Runner or the Worker. Hooks observe; they decide
// nothing, and what they return changes nothing.

// AttemptStarted reports an attempt whose Started record is durable, as its handler starts
// (Config.OnAttemptStarted).
type AttemptStarted struct {
	ID      uint64
	Target  string
	Attempt int
	Probe   bool // the attempt is its target's half-open breaker's probe
	At      time.Time
}

// AttemptEnded reports an attempt whose end is durable (Config.OnAttemptEnded): a handler's
// outcome, an attempt a stop gave back (Released), or one a crash interrupted (found at Open:
// Outcome "retry", Err "interrupted"). The outcome of an attempt whose job was cancelled
// is ignored, so none is reported; OnSettled reports the cancellation.
type AttemptEnded struct {
	ID      uint64
	Target  string
	Attempt int
	// Next is what the runner made of the attempt: StateWaiting (retried at Due),
	// StateSucceeded or StateDead (Reason says why).
	Released bool // a stop cut it: not counted, the job waits again at its due time
	Snoozed  bool // the handler returned Snooze: not counted, the job waits until Due
	Err      string
	Next     State
	Due      time.Time
	Reason   Reason
	Duration time.Duration // from the Started record to the end (0 when unknown)

	outcome outcome.Kind
}

// Outcome is how the attempt ended as one word: "released", or OutcomeName of the handler's
// error ("succeeded", "retry", "permanent", "panicked", "snoozed").
func (e AttemptEnded) Outcome() string {
	switch {
	case e.Released:
		return "released"
	case e.Snoozed:
		return "snoozed"
	}
	return e.outcome.String()
}

// Deferred reports a job its target's breaker held back (Config.OnDeferred): no attempt was
// counted, and the job waits until Until.
type Deferred struct {
	ID     uint64
	Target string
	Until  time.Time
}

// Committed reports one journal batch made durable (Config.OnCommitted): Records records
// behind one fsync, which took Duration by Config.Clock.
type Committed struct {
	Records  int
	Duration time.Duration
}

// MessageReceived reports a delivery a receive returned (WorkerConfig.OnReceived).
type MessageReceived struct {
	ID           string
	Receipt      string
	ReceiveCount int
}

// LeaseRenewed reports a renewal sent for a message's lease (WorkerConfig.OnRenewed): its
// visibility is extended to Visibility from now.
type LeaseRenewed struct {
	Receipt    string
	Visibility time.Duration
}

// LeaseDropped reports a running handler whose lease was lost or ended and which is being
// cancelled (WorkerConfig.OnDropped); Reason says why ("margin", "gone", "fatal", "ceiling",
// "late", "expired", "shutdown").
type LeaseDropped struct {
	Receipt string
	Reason  string
}

// MessageDisposed reports a disposition sent for a message (WorkerConfig.OnDisposed): Deleted
// (an ack, a permanent failure without a redrive policy, a retired delivery), or made visible
// again after Visibility (a retry, a dead-letter hide, a release at shutdown).
type MessageDisposed struct {
	Receipt    string
	Deleted    bool
	Visibility time.Duration
}

// hookDefaults fills Config's nil hooks with no-ops: the one place hooks get defaults, so the
// driver calls them unconditionally.
func (c *Config) hookDefaults() {
	noop(&c.OnAttemptStarted)
	noop(&c.OnAttemptEnded)
	noop(&c.OnDeferred)
	noop(&c.OnSettled)
	noop(&c.OnCommitted)
	c.OnSettled = logDead(c.Logger, c.OnSettled)
}

// deadErrMax bounds the error text a dead job's log line carries.
const deadErrMax = 1024

// logDead wraps the OnSettled hook so that a job going dead is logged at Warn, whatever the
// hook does: a dead job waits for an operator, who should hear of it without a hook.
func logDead(log *slog.Logger, next func(Settled)) func(Settled) {
	return func(s Settled) {
		if s.State == StateDead && log != nil {
			msg := ""
			if s.Err != nil {
				msg = s.Err.Error()
				if len(msg) > deadErrMax {
					msg = strings.ToValidUTF8(msg[:deadErrMax], "") + "…"
				}
			}
			log.Warn("sluice: job dead; it waits for a Retry or a Cancel (sluice show, the UI)",
				"job", s.ID, "reason", string(s.Reason), "attempts", s.Attempts, "err", msg)
		}
		next(s)
	}
}

// hookDefaults fills WorkerConfig's nil hooks with no-ops.
func (c *WorkerConfig) hookDefaults() {
	noop(&c.OnReceived)
	noop(&c.OnRenewed)
	noop(&c.OnDropped)
	noop(&c.OnDisposed)
}

func noop[E any](f *func(E)) {
	if *f == nil {
		*f = func(E) {}
	}
}

// attemptStarted is the hook event of an engine's start.
func attemptStarted(s runner.Attempt, now time.Time) AttemptStarted {
	return AttemptStarted{ID: s.Token.ID, Target: s.Target, Attempt: s.Token.Attempt, Probe: s.Probe, At: now}
}

// reportTransitions hands a commit's durable transitions to the hooks.
// reportDurable reports what a Ready made durable to cfg's hooks: the landed batch, timed to
// now, the attempts' ends and deferrals, the settled jobs.
func reportDurable(cfg *Config, rd runner.Effects, now time.Time) {
	if l := rd.Landed; l != nil && l.Records > 0 {
		cfg.OnCommitted(Committed{Records: l.Records, Duration: now.Sub(l.Began)})
	}
	reportTransitions(cfg, rd.Transitions)
	for _, s := range rd.Settled {
		cfg.OnSettled(settledOf(s))
	}
}

func reportTransitions(cfg *Config, ts []runner.Transition) {
	for _, t := range ts {
		switch t.Tag {
		case runner.TagDeferred:
			cfg.OnDeferred(Deferred{ID: t.ID, Target: t.Target, Until: t.Due})
		case runner.TagFinished, runner.TagReleased, runner.TagSnoozed:
			cfg.OnAttemptEnded(attemptEnded(t))
		}
	}
}

func attemptEnded(t runner.Transition) AttemptEnded {
	e := AttemptEnded{ID: t.ID, Target: t.Target, Attempt: t.Attempt, Err: t.Err}
	if !t.Start.IsZero() && t.End.After(t.Start) {
		e.Duration = t.End.Sub(t.Start)
	}
	switch t.Tag {
	case runner.TagReleased:
		e.Released, e.Next = true, StateWaiting
		return e
	case runner.TagSnoozed:
		e.Snoozed, e.Next, e.Due = true, StateWaiting, t.Due
		return e
	}
	switch {
	case t.Kind == runner.OutcomeSucceeded:
		e.outcome = outcome.KindSucceeded
	case t.Kind == runner.OutcomePanicked:
		e.outcome = outcome.KindPanicked
	case t.Retryable:
		e.outcome = outcome.KindRetry
	default:
		e.outcome = outcome.KindPermanent
	}
	e.Next = stateOf(t.Next, false, t.Attempt)
	if t.Next == runner.Waiting {
		e.Due = t.Due
	}
	e.Reason = reasonOf(t.Reason)
	return e
}

// reportLeaseEffects hands the worker's lease effects to the hooks as the driver sends them.
func reportLeaseEffects(cfg *WorkerConfig, changes []lease.ChangeVisibility, deletes []lease.Delete, cancels []worker.CancelHandler) {
	for _, c := range cancels {
		cfg.OnDropped(LeaseDropped{Receipt: c.Receipt, Reason: c.Reason.String()})
	}
	for _, c := range changes {
		for _, e := range c.Entries {
			if c.Purpose == lease.Renewal {
				cfg.OnRenewed(LeaseRenewed{Receipt: e.Receipt, Visibility: e.Timeout})
				continue
			}
			cfg.OnDisposed(MessageDisposed{Receipt: e.Receipt, Visibility: e.Timeout})
		}
	}
	for _, d := range deletes {
		for _, r := range d.Receipts {
			cfg.OnDisposed(MessageDisposed{Receipt: r, Deleted: true})
		}
	}
}
