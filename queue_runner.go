package sluice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"sort"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/qjobs"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/internal/outcome"
)

// The send port of the queue-backed runner (adapters/sqs implements it on SQS).
type (
	Sender          = core.Sender
	OutgoingMessage = core.Outgoing
)

// Queue names the queue a QueueRunner works on: its Transport (receive, visibility, delete),
// a Sender for the same queue (enqueues, retries re-sent past the 12 h visibility limit,
// defers), and a Sender for the dead-letter queue, where dead jobs go with their last error.
type Queue struct {
	Transport  Transport
	Send       Sender
	DeadLetter Sender
}

// QueueConfig configures a QueueRunner. The zero QueueConfig is valid.
type QueueConfig struct {
	// Policy and Circuit are the local runner's: the retry policy of every job (WithAttempts
	// and WithDeadline replace it per job) and the breaker every target gets in each process.
	Policy  Policy
	Circuit Circuit
	// Worker configures the lease controller: Window, Ceiling, Wait, Concurrency, Prefetch,
	// Grace, StopMargin. Its Budget, RedriveMax, Policy and Decode are the runner's own.
	Worker WorkerConfig
	// Logger, Clock and Seed are as in Config (they replace Worker's).
	Logger *slog.Logger
	Clock  clock.Clock
	Seed   int64
}

// ErrQueueUnsupported is wrapped by the error of every call a queue cannot honour: Get, List,
// Cancel, Retry, Drain, and the options WithPriority, WithUnique and WithUniqueWindow.
var ErrQueueUnsupported = errors.New("sluice: not supported by the queue-backed runner")

// QueueMessageMax is the largest message SQS takes: a job's payload (the body) plus its
// message attributes (names, types and values).
const QueueMessageMax = 256 << 10

// QueueRunner runs registered kinds of job from a queue (Amazon SQS through adapters/sqs)
// instead of a local journal, so the same jobs run on a fleet of processes: Register and the
// typed handles' Enqueue and EnqueueMany work as on a Runner. Each process applies the retry
// policy, the deadline and its own per-target breaker to the jobs it receives; the worker's
// lease controller keeps each running job hidden. See docs/queue.md for what the queue cannot
// offer (Get, List, Cancel, unique keys).
type QueueRunner struct {
	q   Queue
	cfg QueueConfig
	log *slog.Logger
	clk clock.Clock

	mu      sync.Mutex
	m       *qjobs.Machine
	kinds   map[string]queueKind
	warned  map[string]bool // kinds not registered, warned about once
	started bool
	w       *Worker
}

// queueKind is a registered kind with its type erased.
type queueKind struct {
	name string
	run  func(ctx context.Context, a qjobs.Attrs, attempt int, payload []byte) error
}

// Registrar is what Register takes: a *Runner (local, journaled) or a *QueueRunner.
type Registrar interface{ registrar() }

func (*Runner) registrar()      {}
func (*QueueRunner) registrar() {}

// NewQueueRunner returns a runner over q. It does nothing until Run; Enqueue works from here.
func NewQueueRunner(q Queue, cfg QueueConfig) (*QueueRunner, error) {
	if q.Transport == nil || q.Send == nil || q.DeadLetter == nil {
		return nil, fmt.Errorf("sluice: NewQueueRunner: Queue.Transport, Queue.Send and Queue.DeadLetter are all required (dead jobs go to the dead-letter queue)")
	}
	envDefaults(&cfg.Logger, &cfg.Clock, &cfg.Seed)
	p, err := cfg.Policy.withDefaults()
	if err != nil {
		return nil, err
	}
	c := breaker.Circuit(cfg.Circuit).WithDefaults()
	var fe *breaker.FieldError
	if err := c.Validate(); errors.As(err, &fe) {
		return nil, fieldErr("Circuit."+fe.Field, fe.Value, fe.Rule)
	}
	cfg.Policy, cfg.Circuit = p, Circuit(c)
	window := cfg.Worker.Window
	if window == 0 {
		window = DefaultWindow
	}
	m, err := qjobs.New(qjobs.Config{Policy: retry.Policy(p), Circuit: c, Margin: window,
		Rand: rand.New(rand.NewSource(cfg.Seed))})
	if err != nil {
		return nil, fmt.Errorf("sluice: NewQueueRunner: %w", err)
	}
	return &QueueRunner{q: q, cfg: cfg, log: cfg.Logger, clk: cfg.Clock, m: m, kinds: map[string]queueKind{}, warned: map[string]bool{}}, nil
}

func registerQueue[A any](q *QueueRunner, name string, codec Codec[A], handler Handler[A]) (*Kind[A], error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.started {
		return nil, fmt.Errorf("sluice: Register %q: the queue runner has started (Run); register every kind before", name)
	}
	if _, ok := q.kinds[name]; ok {
		return nil, fmt.Errorf("sluice: Register %q: the kind is registered already", name)
	}
	q.kinds[name] = queueKind{name: name, run: func(ctx context.Context, a qjobs.Attrs, attempt int, payload []byte) error {
		v, err := codec.Decode(payload)
		if err != nil {
			return Permanent(fmt.Errorf("decode payload: %w", err))
		}
		return outcome.Call(ctx, func(ctx context.Context) error {
			return handler(ctx, Job[A]{Kind: name, Target: a.Target, Attempt: attempt, Due: a.FirstDue, Payload: v})
		})
	}}
	return &Kind[A]{name: name, codec: codec, q: q}, nil
}

// queueJob is one job to send.
type queueJob struct {
	due     time.Time
	target  string
	payload []byte
	opts    []JobOption
}

// message builds the body and delay of a job's first message.
func (q *QueueRunner) message(kind string, j queueJob) (OutgoingMessage, error) {
	s, err := jobOpts(j.opts)
	if err != nil {
		return OutgoingMessage{}, err
	}
	switch {
	case s.o.Priority != 0:
		return OutgoingMessage{}, fmt.Errorf("%w: WithPriority: a queue delivers in its own order", ErrQueueUnsupported)
	case s.o.Unique != "" || s.window:
		return OutgoingMessage{}, fmt.Errorf("%w: WithUnique: a standard queue cannot hold a key (SQS FIFO deduplication lasts 5 minutes); deduplicate in the handler", ErrQueueUnsupported)
	case j.target == "":
		return OutgoingMessage{}, fmt.Errorf("%w: empty target", ErrInvalidJob)
	}
	now := q.clk.Now()
	due := j.due
	if due.IsZero() || due.Before(now) {
		due = now
	}
	a := qjobs.Attrs{Kind: kind, Target: j.target, FirstDue: due, AttemptsMax: s.o.AttemptsMax, Deadline: s.o.Deadline}
	if due.After(now) {
		a.NotBefore = due
	}
	out := qjobs.Encode(a, j.payload)
	if n := qjobs.Size(out); n > QueueMessageMax {
		return OutgoingMessage{}, fmt.Errorf("%w: %d bytes with its attributes, the queue takes %d", ErrTooLarge, n, QueueMessageMax)
	}
	delay := min(max(0, due.Sub(now)), qjobs.DelayMaxDefault)
	out.Delay = (delay + time.Second - 1) / time.Second * time.Second
	return out, nil
}

// enqueue sends jobs in batches of at most 10 (SendMessageBatch). Every job is checked
// before anything is sent; a failed batch entry fails the call naming the job's index (the
// jobs before it, and others of its batch, may have been sent).
func (q *QueueRunner) enqueue(ctx context.Context, kind string, jobs []queueJob) error {
	msgs := make([]OutgoingMessage, len(jobs))
	for i, j := range jobs {
		m, err := q.message(kind, j)
		if err != nil {
			if len(jobs) > 1 {
				return fmt.Errorf("%w (job %d)", err, i)
			}
			return err
		}
		msgs[i] = m
	}
	for lo := 0; lo < len(msgs); lo += core.BatchMax {
		hi := min(lo+core.BatchMax, len(msgs))
		errs, err := q.q.Send.SendBatch(ctx, msgs[lo:hi])
		if err != nil {
			return fmt.Errorf("sluice: enqueue: send jobs %d..%d: %w", lo, hi-1, err)
		}
		for i, e := range errs {
			if e != nil {
				return fmt.Errorf("sluice: enqueue: send job %d: %w", lo+i, e)
			}
		}
	}
	return nil
}

// QueueStats counts what a queue runner's job layer decided in this process.
type QueueStats struct {
	Runs, Deferred, Succeeded, Retried, Resent, DeadLettered, Abandoned int
	Worker                                                              WorkerStats
}

// Stats returns the job layer's counts and the worker's.
func (q *QueueRunner) Stats() QueueStats {
	q.mu.Lock()
	st := q.m.Stats()
	w := q.w
	q.mu.Unlock()
	out := QueueStats{Runs: st.Runs, Deferred: st.Deferred, Succeeded: st.Acked, Retried: st.Hidden,
		Resent: st.Resent, DeadLettered: st.DeadLettered, Abandoned: st.Abandoned}
	if w != nil {
		out.Worker = w.Stats()
	}
	return out
}

// Run receives and runs jobs until ctx ends, then stops as Worker.Run does (grace, cancel).
// A job whose attempt was cancelled by the stop or by a lost lease is redelivered by the queue,
// and that attempt counts. Run may be called once.
func (q *QueueRunner) Run(ctx context.Context) error {
	q.mu.Lock()
	if q.started {
		q.mu.Unlock()
		return ErrStopped
	}
	q.started = true
	wc := q.cfg.Worker
	wc.Logger, wc.Clock, wc.Seed = q.log, q.clk, q.cfg.Seed
	// The job layer counts attempts and dead-letters (non-job messages too); the worker only
	// keeps leases. Its backoff carries the job layer's visibility (After) uncapped up to the
	// 12 h limit.
	wc.Budget, wc.RedriveMax = 1<<30, 0
	wc.Policy = Policy{Attempts: 1, Base: time.Second, Cap: qjobs.VisibilityMaxDefault}
	w, err := NewWorker(q.q.Transport, wc, q.handle)
	if err != nil {
		q.mu.Unlock()
		return fmt.Errorf("sluice: queue runner: %w", err)
	}
	q.w = w
	q.mu.Unlock()
	return w.Run(ctx)
}

// handle is the worker's handler: it executes the job layer's plans for one delivery.
func (q *QueueRunner) handle(ctx context.Context, msg Message) error {
	received := q.clk.Now()
	a, payload, err := qjobs.Decode(core.Message{ID: msg.ID, Body: msg.Body, ReceiveCount: msg.ReceiveCount, Attributes: msg.Attributes})
	if err != nil {
		// Not a job (sent by something else): moved to the dead-letter queue as it is.
		q.log.Error("sluice: queue runner: a message that is not a job; moving it to the dead-letter queue", "message", msg.ID, "err", err)
		errs, serr := q.q.DeadLetter.SendBatch(ctx, []OutgoingMessage{{Body: msg.Body, Attributes: msg.Attributes}})
		if serr == nil && errs[0] != nil {
			serr = errs[0]
		}
		if serr != nil {
			return RetryAfter(serr, time.Second)
		}
		return nil
	}
	q.mu.Lock()
	k, ok := q.kinds[a.Kind]
	warn := !ok && !q.warned[a.Kind]
	if warn {
		q.warned[a.Kind] = true
	}
	d := qjobs.Delivery{Attrs: a, ReceiveCount: msg.ReceiveCount, ReceivedAt: received, Unregistered: !ok}
	p := q.m.Admit(received, d)
	q.mu.Unlock()
	if p.Action != qjobs.Run {
		if warn {
			q.log.Warn("sluice: queue runner: jobs of a kind not registered in this process wait in the queue (warned once per kind)", "kind", a.Kind, "message", msg.ID)
		}
		return q.execute(ctx, msg, p, payload)
	}
	out := k.run(ctx, a, p.Attempt, payload)
	kind, after := outcome.Of(out)
	if ctx.Err() != nil && kind != outcome.KindSucceeded {
		// Lease lost or stopping: the queue redelivers; the attempt counts.
		q.mu.Lock()
		q.m.Abandon(a.Target, p.Probe)
		q.mu.Unlock()
		return RetryAfter(context.Cause(ctx), 0)
	}
	o := qjobs.Outcome{Result: qjobs.Success, After: after}
	switch kind {
	case outcome.KindSucceeded:
	case outcome.KindRetry, outcome.KindSnooze:
		o.Result, o.Err = qjobs.Retryable, outcome.Text(out)
	case outcome.KindPanicked:
		o.Result, o.Err = qjobs.Panicked, outcome.Text(out)
	default:
		o.Result, o.Err = qjobs.Permanent, outcome.Text(out)
	}
	q.mu.Lock()
	f := q.m.Finish(q.clk.Now(), d, p.Attempt, p.Probe, o)
	q.mu.Unlock()
	return q.execute(ctx, msg, f, payload)
}

// execute performs a plan that ends a delivery.
func (q *QueueRunner) execute(ctx context.Context, msg Message, p qjobs.Plan, payload []byte) error {
	switch p.Action {
	case qjobs.Ack:
		return nil
	case qjobs.Hide:
		return RetryAfter(errors.New("retry"), p.Visibility)
	case qjobs.Resend, qjobs.DeadLetter:
		to := q.q.Send
		if p.Action == qjobs.DeadLetter {
			to = q.q.DeadLetter
			q.log.Warn("sluice: queue runner: job dead", "message", msg.ID, "kind", p.Send.Attrs.Kind,
				"target", p.Send.Attrs.Target, "reason", string(p.Send.Attrs.Reason), "attempts", p.Send.Attrs.Attempts, "err", p.Send.Attrs.LastErr)
		}
		out := qjobs.Encode(p.Send.Attrs, payload)
		out.Delay = p.Send.Delay
		errs, err := to.SendBatch(ctx, []OutgoingMessage{out})
		if err == nil && errs[0] != nil {
			err = errs[0]
		}
		if err != nil {
			// The original stays: it comes back after a second and is decided again.
			q.log.Warn("sluice: queue runner: send failed; the message comes back", "message", msg.ID, "action", p.Action.String(), "err", err)
			return RetryAfter(err, time.Second)
		}
		return nil // the original is deleted once its successor is sent
	}
	panic(fmt.Sprintf("sluice: queue runner: plan %v ends no delivery", p.Action))
}

// Kinds returns the registered kinds' names, sorted.
func (q *QueueRunner) Kinds() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, len(q.kinds))
	for n := range q.kinds {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
