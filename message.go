package sluice

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/worker"
)

// The queue port a Worker runs on, and its typed errors (docs/worker.md). adapters/sqs implements
// Transport on Amazon SQS; a Transport of your own returns a *TransportError with a class for
// every failed call or batch entry (any other error counts as retryable).
type (
	Transport        = core.Transport
	TransportError   = core.TransportError
	TransportClass   = core.Class
	QueueMessage     = core.Message // a delivery as the transport returns it (with its receipt)
	VisibilityChange = core.VisibilityChange
)

// The classes of a transport failure: what it means for the receipt it named.
const (
	// TransportRetryable: timeout, connection refused or reset, throttling, a 5xx. A renewal
	// is retried while the lease's margin allows.
	TransportRetryable = core.Retryable
	// TransportGone: the receipt is invalid or its message not in flight; the lease is dropped.
	TransportGone = core.Gone
	// TransportFatal: authorisation or a malformed request; the lease is dropped, logged at Error.
	TransportFatal = core.Fatal
)

// TransportClassOf returns the class of err (0 for nil; Retryable for an error that is not a
// *TransportError).
func TransportClassOf(err error) TransportClass { return core.ClassOf(err) }

// Message is one delivery of a queue message, as a worker's handler sees it.
type Message struct {
	ID           string
	Body         []byte
	ReceiveCount int // 1 on the first delivery
	// Attributes are the message's String attributes (SQS MessageAttributes); nil for none.
	Attributes map[string]string
	// Typed holds every attribute with its data type (Binary included), as the transport
	// reported it; nil from a transport that reports only Attributes. Read only.
	Typed map[string]Attribute
}

// Attribute is one message attribute with its data type ("String", "Number", "Binary",
// optionally with a custom suffix).
type Attribute = core.Attribute

// WorkerHandler processes one message and returns what became of it, as an error (see
// docs/results.md): nil deletes the message; Permanent(err) deletes it and logs at Error (or,
// with a redrive policy, dead-letters it); DeadLetter(err) hides it for the queue's redrive
// policy; RetryAfter(err, d) makes it visible again after d; any other error after the
// policy's backoff. Its context is cancelled when the message's lease is lost (the message
// may then be redelivered to someone else) and when shutdown's grace period ends;
// context.Cause(ctx) says which: ErrShutdown, ErrMessageGone, or an error wrapping
// ErrLeaseLost. A panic is recovered and treated as Permanent.
type WorkerHandler func(ctx context.Context, msg Message) error

// WorkerConfig configures a Worker. The zero WorkerConfig is valid.
type WorkerConfig struct {
	// Window is the visibility timeout asked for on receive and on each renewal; default 30s.
	Window time.Duration
	// Ceiling is how long after receipt the queue lets a message stay hidden; default 12h (SQS).
	Ceiling time.Duration
	// Wait is the long-poll wait of a receive call; default min(20s, 2·Window/3 in whole
	// seconds). It may be at most 2·Window/3: a message's window counts from before the call.
	Wait time.Duration
	// Concurrency bounds the handlers running at once; default 10.
	Concurrency int
	// Prefetch is how many received messages may wait for a free handler; default 0.
	Prefetch int
	// Budget: a delivery whose receive count reaches max(2, Budget) is retired without running
	// (deleted, logged at Error); default 5. With a redrive policy (RedriveMax N) the budget is
	// raised to at least N+1, so the queue dead-letters first (logged once at Info).
	Budget int
	// RedriveMax is the queue's redrive maxReceiveCount, 0 when it has none.
	RedriveMax int
	// Policy gives the backoff after a retryable error: Base and Cap (and its jitter). Attempts and
	// Deadline are unused here: the receive Budget and the redrive policy bound redeliveries.
	Policy Policy
	// Grace is how long shutdown keeps renewing running handlers' leases before cancelling
	// them, and then how long it waits for cancelled handlers to return; default 30s.
	Grace time.Duration
	// StopMargin is how long before a message's local deadline a handler whose lease is
	// ending is cancelled (context.Cause: ErrLeaseLost), and after which no call about the
	// message is still running; default min(1s, Window/20), under Window/10. The queue's own
	// deadline is later than the local one by the receive's one-way latency, so a handler
	// that returns within StopMargin of its cancellation never overlaps the next consumer.
	StopMargin time.Duration
	// Logger receives the worker's logs; default slog.Default().
	Logger *slog.Logger
	// Clock supplies time and the timer; default clock.New().
	Clock clock.Clock
	// Seed seeds backoff jitter; 0 picks one from the clock.
	Seed int64
	// Decode, when set, says whether a message can be handled at all; an error makes it
	// poison: counted, logged with its id, never handled, deleted once its receive count reaches
	// the budget.
	Decode func(Message) error
	// OnReceived, OnRenewed, OnDropped and OnDisposed report deliveries received, renewals,
	// dropped leases and dispositions as the worker performs them, on Run's goroutine: they
	// must be quick and must not call the Worker (see Hooks in docs/observability.md).
	OnReceived func(MessageReceived)
	OnRenewed  func(LeaseRenewed)
	OnDropped  func(LeaseDropped)
	OnDisposed func(MessageDisposed)
	// Middleware wraps every message's handler, outermost first (see Middleware).
	Middleware []Middleware
}

// Worker defaults (docs/worker.md).
const (
	DefaultWindow      = worker.WindowDefault
	DefaultCeiling     = worker.CeilingDefault
	DefaultWait        = worker.WaitDefault
	DefaultConcurrency = worker.ConcurrencyDefault
	DefaultBudget      = worker.BudgetDefault
)

// withDefaults fills the logger, clock, seed and policy. The queue worker's own fields keep
// their zeros: core/worker defaults and validates them, in one place, and NewWorker names the
// WorkerConfig field it refused.
func (c WorkerConfig) withDefaults() (WorkerConfig, error) {
	var err error
	if c.Policy, err = c.Policy.withDefaults(); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			ce.Field = "WorkerConfig." + ce.Field
		}
		return c, err
	}
	envDefaults(&c.Logger, &c.Clock, &c.Seed)
	c.hookDefaults()
	return c, nil
}
