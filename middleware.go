package sluice

import (
	"context"

	"github.com/sluicehq/sluice/internal/outcome"
)

// Middleware wraps handlers, the runner's and the worker's alike (docs/observability.md).
// The runner's Handler[A] is generic and the worker's WorkerHandler takes a Message, so
// middleware sees neither: it wraps a CallHandler, a non-generic view of one call (an attempt
// of a job, or a delivery of a message) that returns the handler's error, in the one
// vocabulary of handlers (docs/results.md). What the chain returns is what the runner or the
// worker acts on, so a middleware may change it (a timeout, a translation of errors) as well
// as observe it.
//
// Config.Middleware and WorkerConfig.Middleware list them outermost first. A panic in the
// handler reaches middleware as a *PanicError; a panic in a middleware is recovered the same
// way.
type Middleware func(next CallHandler) CallHandler

// CallHandler is a handler as middleware sees it.
type CallHandler func(ctx context.Context, call Call) error

// Call describes one call of a handler.
type Call struct {
	Worker bool   // false: a runner attempt; true: a worker delivery
	ID     string // the job's id in decimal, or the message's id
	// Kind is the job's kind where the runner has one ("" otherwise, and for messages).
	Kind   string
	Target string // the job's target ("" for messages)
	// Attempt is the attempt's number (1 for the first), or the message's receive count.
	Attempt int

	inner func(context.Context) error // the handler itself, typed by the driver
}

// innerCall is the end of every chain: the handler the driver put in the call.
func innerCall(ctx context.Context, c Call) error { return c.inner(ctx) }

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

// callThrough runs the handler inner through the chain h (nil: directly), a panic in either
// recovered as a *PanicError.
func callThrough(ctx context.Context, h CallHandler, call Call, inner func(context.Context) error) error {
	if h == nil {
		return outcome.Call(ctx, inner)
	}
	call.inner = func(ctx context.Context) error { return outcome.Call(ctx, inner) }
	return outcome.Call(ctx, func(ctx context.Context) error { return h(ctx, call) })
}

// messageCall is the Call of a worker delivery.
func messageCall(msg Message) Call {
	return Call{Worker: true, ID: msg.ID, Attempt: msg.ReceiveCount}
}
