package sluice

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// Middleware wraps handlers, the runner's and the worker's alike (docs/observability.md).
// The runner's Handler[A] is generic and the worker's WorkerHandler takes a Message, so
// middleware sees neither: it wraps a CallHandler, a non-generic view of one call (an attempt
// of a job, or a delivery of a message) that returns a Verdict in the one vocabulary both
// share (docs/results.md). The driver maps the Verdict the chain returns back to an Outcome or
// a Result, so a middleware may change it (a timeout, a translation of errors) as well as
// observe it.
//
// Config.Middleware and WorkerConfig.Middleware list them outermost first. A panic in the
// handler reaches middleware as VerdictPanicked; a panic in a middleware is recovered the same
// way.
type Middleware func(next CallHandler) CallHandler

// CallHandler is a handler as middleware sees it.
type CallHandler func(ctx context.Context, call Call) Verdict

// Call describes one call of a handler.
type Call struct {
	Worker bool   // false: a runner attempt; true: a worker delivery
	ID     string // the job's id in decimal, or the message's id
	// Kind is the job's kind where the runner has one ("" otherwise, and for messages).
	Kind   string
	Target string // the job's target ("" for messages)
	// Attempt is the attempt's number (1 for the first), or the message's receive count.
	Attempt int

	inner func(context.Context) Verdict // the handler itself, typed by the driver
}

// innerCall is the end of every chain: the handler the driver put in the call.
func innerCall(ctx context.Context, c Call) Verdict { return c.inner(ctx) }

// VerdictKind names how a call ended, in the one vocabulary of runner and worker results.
type VerdictKind uint8

const (
	// VerdictSucceeded: runner Succeeded (the job is done); worker Ack (the message is deleted).
	VerdictSucceeded VerdictKind = iota + 1
	// VerdictRetry: runner Failed(err, true); worker Retry. Another try after the backoff
	// (or After).
	VerdictRetry
	// VerdictPermanent: runner Failed(err, false) (dead, ReasonPermanent); worker Reject.
	VerdictPermanent
	// VerdictPanicked: the handler panicked. Runner: dead, ReasonPanic; worker: as Reject.
	VerdictPanicked
	// VerdictDeadLetter: worker DeadLetter (hidden for the queue's redrive). The runner has
	// no dead-letter queue: a middleware that returns it makes the job dead as permanent.
	VerdictDeadLetter
)

func (k VerdictKind) String() string {
	switch k {
	case VerdictSucceeded:
		return "succeeded"
	case VerdictRetry:
		return "retry"
	case VerdictPermanent:
		return "permanent"
	case VerdictPanicked:
		return "panicked"
	case VerdictDeadLetter:
		return "deadletter"
	}
	return fmt.Sprintf("VerdictKind(%d)", uint8(k))
}

// Verdict is how a call ended.
type Verdict struct {
	Kind  VerdictKind
	Err   error          // the failure; nil for VerdictSucceeded
	After *time.Duration // VerdictRetry: the server-requested wait, if any
}

// chain composes mws around h, outermost first; nil when there are none (the driver then
// calls the handler directly and pays nothing).
func chain(mws []Middleware, h CallHandler) CallHandler {
	if len(mws) == 0 {
		return nil
	}
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// callChain runs a middleware chain, turning a panic in it into VerdictPanicked.
func callChain(ctx context.Context, h CallHandler, call Call) (v Verdict) {
	defer func() {
		if p := recover(); p != nil {
			v = Verdict{Kind: VerdictPanicked, Err: &PanicError{Value: p, Stack: debug.Stack()}}
		}
	}()
	return h(ctx, call)
}

// verdictOfOutcome and outcomeOfVerdict translate runner outcomes (docs/results.md).
func verdictOfOutcome(o Outcome) Verdict {
	switch o.Kind {
	case KindSucceeded:
		return Verdict{Kind: VerdictSucceeded}
	case KindPanicked:
		return Verdict{Kind: VerdictPanicked, Err: o.Err}
	}
	if o.Retryable {
		return Verdict{Kind: VerdictRetry, Err: o.Err, After: o.After}
	}
	return Verdict{Kind: VerdictPermanent, Err: o.Err}
}

func outcomeOfVerdict(v Verdict) Outcome {
	err := v.Err
	if err == nil && v.Kind != VerdictSucceeded {
		err = errNilFailure
	}
	switch v.Kind {
	case VerdictSucceeded:
		return Succeeded()
	case VerdictRetry:
		return Outcome{Kind: KindFailed, Err: err, Retryable: true, After: v.After}
	case VerdictPermanent, VerdictDeadLetter:
		return Failed(err, false)
	case VerdictPanicked:
		return Outcome{Kind: KindPanicked, Err: err}
	}
	return Failed(fmt.Errorf("sluice: middleware returned an invalid verdict (kind %d)", v.Kind), false)
}

// verdictOfResult and resultOfVerdict translate worker results.
func verdictOfResult(r Result) Verdict {
	switch r.Kind {
	case ResultAck:
		return Verdict{Kind: VerdictSucceeded}
	case ResultRetry:
		return Verdict{Kind: VerdictRetry, Err: r.Err, After: r.After}
	case ResultPermanent:
		var pe *PanicError
		if errors.As(r.Err, &pe) {
			return Verdict{Kind: VerdictPanicked, Err: r.Err}
		}
		return Verdict{Kind: VerdictPermanent, Err: r.Err}
	case ResultTerminal:
		return Verdict{Kind: VerdictDeadLetter, Err: r.Err}
	}
	return Verdict{Kind: VerdictPermanent, Err: errors.New("sluice: handler returned an invalid Result")}
}

func resultOfVerdict(v Verdict) Result {
	switch v.Kind {
	case VerdictSucceeded:
		return Ack()
	case VerdictRetry:
		return Result{Kind: ResultRetry, Err: v.Err, After: v.After}
	case VerdictPermanent, VerdictPanicked:
		return Reject(v.Err)
	case VerdictDeadLetter:
		return DeadLetter(v.Err)
	}
	return Reject(fmt.Errorf("sluice: middleware returned an invalid verdict (kind %d)", v.Kind))
}

// messageCall is the Call of a worker delivery.
func messageCall(msg Message) Call {
	return Call{Worker: true, ID: msg.ID, Attempt: msg.ReceiveCount}
}
