package sluice

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/qjobs"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/core/runner"
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
	// FIFO says the queue and its dead-letter queue are SQS FIFO queues: each job's id is
	// its deduplication id, WithGroup names its message group (default: its own id, so jobs
	// run in parallel), and waits are hides, as FIFO queues take no delay per message.
	FIFO bool
	// LostMax is how many deliveries of a job may end without a handler outcome (a crash, a
	// lost lease, a lost receive answer, a graceful stop) before the job is dead-lettered
	// with reason deliveries-lost. These never spend the job's attempts. Default 0: 5 plus
	// 3 per attempt of the job's budget.
	LostMax int
	// WaitMax is how many times a job may wait in the queue for a flow limit of the process
	// that received it (WithRate, WithKeyRate, WithKeyConcurrency; each wait a re-send that
	// spends neither an attempt nor LostMax) before it is dead-lettered with reason
	// flow-waits. Default 0: 1,000.
	WaitMax int
	// Logger, Clock and Seed are as in Config (they replace Worker's). Seed does not rule
	// job ids: each process draws them from its own random source.
	Logger *slog.Logger
	Clock  clock.Clock
	Seed   int64
}

// ErrEnqueueUnknown is wrapped by the error of an Enqueue or EnqueueMany whose send may have
// been stored although it failed (the queue's answer was lost). The error names the job ids:
// enqueueing again may run the job twice, so check for the id (or make the handler
// idempotent on Job.ID) before retrying. On a FIFO queue the runner repeats such a send
// itself (the queue drops the copy) and returns this only if every repeat was lost too.
var ErrEnqueueUnknown = errors.New("sluice: enqueue may have been stored")

// WithGroup puts a job in the sequence key: jobs of one sequence run one at a time, in
// enqueue order, each starting once every earlier one has ended (succeeded, cancelled, or
// dead; see WithHoldOnDead). On the local runner sequences are per kind and journaled; on a
// queue runner they are a FIFO queue's message groups (QueueConfig.FIFO; a standard queue
// refuses WithGroup).
func WithGroup(key string) JobOption {
	return func(s *jobSettings) {
		if key == "" || len(key) > 128 {
			s.refuse(fmt.Errorf("WithGroup(%s): the key must be 1 to 128 bytes", runner.QuoteCut(key)))
		}
		s.group = key
		s.o.Group = key
	}
}

// ErrQueueUnsupported is wrapped by the error of every call a queue cannot honour: Get, List,
// Cancel, Retry, Drain, and the options WithPriority, WithUnique, WithUniqueWindow,
// WithFairShare and WithHoldOnDead (WithGroup on a standard queue).
var ErrQueueUnsupported = errors.New("sluice: not supported by the queue-backed runner")

// QueueMessageMax is the largest message SQS takes: a job's payload (the body) plus its
// message attributes (names, types and values).
const QueueMessageMax = qjobs.MessageMaxDefault

// QueueRunner runs registered kinds of job from a queue (Amazon SQS through adapters/sqs)
// instead of a local journal, so the same jobs run on a fleet of processes: Register and the
// typed handles' Enqueue and EnqueueMany work as on a Runner. Each process applies the retry
// policy, the deadline, its own per-target breaker and its own flow limits (WithRate,
// WithKeyRate, WithKeyConcurrency hold per process) to the jobs it receives; the worker's
// lease controller keeps each running job hidden. See docs/queue.md for what the queue cannot
// offer (Get, List, Cancel, unique keys, fair share, fleet-wide limits).
type QueueRunner struct {
	q   Queue
	cfg QueueConfig
	log *slog.Logger
	clk clock.Clock

	mu      sync.Mutex
	m       *qjobs.Machine // every Step is followed by its Ready under mu
	kinds   map[string]queueKind
	started bool
	w       *Worker
	next    uint64 // names the next delivery
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
	if cfg.LostMax < 0 {
		return nil, fieldErr("LostMax", cfg.LostMax, "must be ≥ 0 (0: 5 plus 3 per attempt)")
	}
	if cfg.WaitMax < 0 {
		return nil, fieldErr("WaitMax", cfg.WaitMax, "must be ≥ 0 (0: 1,000)")
	}
	m, err := qjobs.New(qjobs.Config{Policy: retry.Policy(p), Circuit: c, Margin: window,
		MessageMax: QueueMessageMax, Rand: rand.New(rand.NewSource(cfg.Seed)), IDs: idSource(),
		LostMax: cfg.LostMax, WaitMax: cfg.WaitMax, FIFO: cfg.FIFO})
	if err != nil {
		return nil, wrapf(nil, err, "NewQueueRunner")
	}
	return &QueueRunner{q: q, cfg: cfg, log: cfg.Logger, clk: cfg.Clock, m: m, kinds: map[string]queueKind{}}, nil
}

// zero reports a nil or zero QueueRunner (not made by NewQueueRunner).
func (q *QueueRunner) zero() bool { return q == nil || q.m == nil }

var errZeroQueueRunner = notMade("QueueRunner", "NewQueueRunner")

func registerQueue[A any](q *QueueRunner, name string, codec Codec[A], handler Handler[A], fl kindFlow) (*Kind[A], error) {
	// Rates and key limits hold per process (docs/queue.md); what needs state shared by the
	// fleet is refused.
	switch {
	case fl.fair:
		return nil, fmt.Errorf("%w: Register %q: WithFairShare: a queue delivers in its own order, and the processes of a fleet share no rounds; use WithKeyConcurrency or WithKeyRate", ErrQueueUnsupported, name)
	case fl.hold:
		return nil, fmt.Errorf("%w: Register %q: WithHoldOnDead: a FIFO queue moves on past a dead letter; redrive the dead-letter queue to run it again", ErrQueueUnsupported, name)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.started {
		return nil, fmt.Errorf("sluice: Register %q: the queue runner has started (Run); register every kind before", name)
	}
	if _, ok := q.kinds[name]; ok {
		return nil, fmt.Errorf("sluice: Register %q: the kind is registered already", name)
	}
	f := qjobs.Flow{Rate: fl.rate.core(), KeyRate: fl.keyRate.core(), KeyLimit: fl.keyLimit, Timeout: fl.timeout}
	if err := q.m.Step(qjobs.Register{Kind: name, Flow: f}); err != nil {
		return nil, wrapf(nil, err, "Register %q", name)
	}
	q.kinds[name] = queueKind{name: name, run: func(ctx context.Context, a qjobs.Attrs, attempt int, payload []byte) error {
		v, err := codec.Decode(payload)
		if err != nil {
			return Permanent(fmt.Errorf("decode payload: %w", err))
		}
		return outcome.Call(ctx, func(ctx context.Context) error {
			return handler(ctx, Job[A]{ID: a.ID, Kind: name, Target: a.Target, Attempt: attempt, Due: a.FirstDue, Payload: v})
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

// idSource is a job-id source of this process's own: seeded from crypto/rand, so processes
// started with one Seed (or at one instant) still draw independent ids.
func idSource() *rand.Rand {
	var b [8]byte
	if _, err := crand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("sluice: crypto/rand: %v", err)) // documented never to fail
	}
	return rand.New(rand.NewSource(int64(binary.LittleEndian.Uint64(b[:]))))
}

// newJob checks a job's options; the job layer decides its due, delay and size.
func (q *QueueRunner) newJob(kind string, j queueJob) (qjobs.NewJob, error) {
	s, err := jobOpts(j.opts)
	if err != nil {
		return qjobs.NewJob{}, err
	}
	switch {
	case s.o.Priority != 0:
		return qjobs.NewJob{}, fmt.Errorf("%w: WithPriority: a queue delivers in its own order", ErrQueueUnsupported)
	case s.o.Unique != "" || s.window:
		return qjobs.NewJob{}, fmt.Errorf("%w: WithUnique: a standard queue cannot hold a key (SQS FIFO deduplication lasts 5 minutes); deduplicate in the handler on Job.ID", ErrQueueUnsupported)
	case s.group != "" && !q.cfg.FIFO:
		return qjobs.NewJob{}, fmt.Errorf("%w: WithGroup: a standard queue has no message groups; set QueueConfig.FIFO on a FIFO queue", ErrQueueUnsupported)
	}
	return qjobs.NewJob{Kind: kind, Target: j.target, Due: j.due, AttemptsMax: s.o.AttemptsMax, Deadline: s.o.Deadline,
		Group: s.group, Key: s.o.Key, Timeout: s.o.Timeout, Payload: j.payload}, nil
}

// refusal is the error of a job the job layer refused.
func refusal(r qjobs.Refusal) error {
	if errors.Is(r.Err, qjobs.ErrTooLarge) {
		return fmt.Errorf("%w: %d bytes with its attributes, the queue takes %d less %d kept for its retry and dead-letter attributes; make the payload smaller",
			ErrTooLarge, r.Size, QueueMessageMax, qjobs.SuccessorRoom)
	}
	// The job layer's text names the field (an empty target, a negative option), after its prefix.
	return fmt.Errorf("%w: %s", ErrInvalidJob, strings.TrimPrefix(r.Err.Error(), qjobs.ErrInvalidJob.Error()+": "))
}

// enqueue sends jobs in batches of at most 10 (SendMessageBatch) and returns their ids.
// Every job is checked before anything is sent; a failed batch entry fails the call naming
// the job's index and id (the jobs before it, and others of its batch, may have been sent).
// A send that may have been stored is repeated only when the queue deduplicates it (FIFO);
// otherwise the error wraps ErrEnqueueUnknown with the ids, never a silent second copy.
func (q *QueueRunner) enqueue(ctx context.Context, kind string, jobs []queueJob) ([]uint64, error) {
	named := func(err error, i int) error {
		if len(jobs) > 1 {
			return fmt.Errorf("%w (job %d)", err, i)
		}
		return err
	}
	nj := make([]qjobs.NewJob, len(jobs))
	for i, j := range jobs {
		var err error
		if nj[i], err = q.newJob(kind, j); err != nil {
			return nil, named(err, i)
		}
	}
	rd, err := q.step(qjobs.Enqueue{Now: q.clk.Now(), Jobs: nj})
	if err != nil {
		return nil, wrapf(nil, err, "enqueue")
	}
	if len(rd.Refused) > 0 {
		return nil, named(refusal(rd.Refused[0]), rd.Refused[0].Index)
	}
	ids := make([]uint64, len(rd.Sends))
	for i, s := range rd.Sends {
		ids[i] = s.Attrs.ID
	}
	for lo := 0; lo < len(rd.Sends); lo += core.BatchMax {
		hi := min(lo+core.BatchMax, len(rd.Sends))
		if err := q.sendJobs(ctx, rd.Sends[lo:hi], lo); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// sendJobs sends one batch of an enqueue (first is the index of its first job), repeating the
// entries whose answer was lost while the job layer says the queue deduplicates them.
func (q *QueueRunner) sendJobs(ctx context.Context, sends []qjobs.Send, first int) error {
	idx := make([]int, len(sends)) // the batch entries still to send
	for i := range idx {
		idx[i] = i
	}
	for try := 0; ; try++ {
		msgs := make([]OutgoingMessage, len(idx))
		for k, i := range idx {
			msgs[k] = sends[i].Message
		}
		errs, err := q.q.Send.SendBatch(ctx, msgs)
		if err == nil && len(errs) != len(msgs) {
			err = fmt.Errorf("a send of %d messages answered %d entries", len(msgs), len(errs))
		}
		var again []int
		for k, i := range idx {
			e := err
			if e == nil {
				e = errs[k]
			}
			switch sends[i].Fate(e, try) {
			case qjobs.EnqueueStored:
			case qjobs.EnqueueAgain:
				again = append(again, i)
			case qjobs.EnqueueUnknown:
				return wrapf(ErrEnqueueUnknown, e, "enqueue: job %d (id %d) may have been stored; check for id %d before enqueueing it again",
					first+i, sends[i].Attrs.ID, sends[i].Attrs.ID)
			default:
				return wrapf(nil, e, "enqueue: send job %d (id %d)", first+i, sends[i].Attrs.ID)
			}
		}
		if len(again) == 0 {
			return nil
		}
		idx = again
	}
}

// step steps the job layer and returns the effects of that event alone (Ready under the same
// lock).
func (q *QueueRunner) step(ev qjobs.Event) (qjobs.Ready, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.m.Step(ev); err != nil {
		return qjobs.Ready{}, err
	}
	return q.m.Ready(), nil
}

// QueueStats counts what a queue runner's job layer decided in this process.
// Retried counts retryable failures sent on for another attempt (every retry is a re-send:
// Resent counts the same).
type QueueStats struct {
	Runs, Deferred, Succeeded, Retried, Resent, DeadLettered, Abandoned int
	// Unsendable counts re-sends and dead letters that could not fit the queue even cut
	// (their original comes back later, with backoff; each is logged at Error).
	Unsendable int
	// FlowWaits counts deliveries over a flow limit of this process (WithRate, WithKeyRate,
	// WithKeyConcurrency), sent back to the queue to wait without an attempt; FlowHeld those
	// held in the process (at most a second) for a rate's next token; TimedOut the attempts
	// that ran past their timeout and failed.
	FlowWaits, FlowHeld, TimedOut int
	Worker                        WorkerStats
}

// Stats returns the job layer's counts and the worker's.
func (q *QueueRunner) Stats() QueueStats {
	if q.zero() {
		return QueueStats{}
	}
	q.mu.Lock()
	st := q.m.Status()
	w := q.w
	q.mu.Unlock()
	out := QueueStats{Runs: st.Runs, Deferred: st.Deferred, Succeeded: st.Acked, Retried: st.Hidden + st.Resent,
		Resent: st.Resent, DeadLettered: st.DeadLettered, Abandoned: st.Abandoned, Unsendable: st.Unsendable,
		FlowWaits: st.FlowWaits, FlowHeld: st.FlowHeld, TimedOut: st.TimedOut}
	if w != nil {
		out.Worker = w.Stats()
	}
	return out
}

// Run receives and runs jobs until ctx ends, then stops as Worker.Run does (grace, cancel),
// except that a handler cancelled by the stop keeps its lease until it returns (a second
// Grace at most): its message is then released at once, and the attempt is not counted (the
// delivery counts against QueueConfig.LostMax). An attempt cancelled by a lost lease, or a
// process killed, is redelivered when the message's window lapses and counts against
// LostMax too. Run may be called once.
func (q *QueueRunner) Run(ctx context.Context) error {
	if q.zero() {
		return errZeroQueueRunner
	}
	q.mu.Lock()
	if q.started {
		q.mu.Unlock()
		return ErrStopped
	}
	q.started = true
	wc := q.cfg.Worker
	wc.Logger, wc.Clock, wc.Seed = q.log, q.clk, q.cfg.Seed
	wc.Budget, wc.RedriveMax = qjobs.WorkerBudget, 0
	wc.Policy = Policy{Attempts: qjobs.WorkerAttemptMax, Base: qjobs.WorkerRetryBase, Cap: qjobs.WorkerHideMax}
	w, err := newWorker(q.q.Transport, wc, q.handle, true)
	if err != nil {
		q.mu.Unlock()
		return wrapf(nil, err, "queue runner")
	}
	q.w = w
	q.mu.Unlock()
	return w.Run(ctx)
}

// handle is the worker's handler: it performs the job layer's effects for one delivery, in
// turn, until its Done. A delivery takes at most three steps (Deliver, AttemptDone, SendDone).
func (q *QueueRunner) handle(ctx context.Context, msg Message) error {
	q.mu.Lock()
	q.next++
	receipt := "d" + strconv.FormatUint(q.next, 10)
	q.mu.Unlock()
	rd, err := q.step(qjobs.Deliver{Now: q.clk.Now(), Receipt: receipt,
		Message: core.Message{ID: msg.ID, Body: msg.Body, ReceiveCount: msg.ReceiveCount, Attributes: msg.Attributes, Typed: msg.Typed}})
	for range 3 {
		if err != nil {
			panic(fmt.Sprintf("sluice: queue runner: %v", err)) // the driver broke the protocol
		}
		q.logNotes(ctx, rd.Notes)
		switch {
		case len(rd.Done) > 0:
			return doneResult(rd.Done[0])
		case len(rd.Runs) > 0:
			r := rd.Runs[0]
			q.mu.Lock()
			k := q.kinds[r.Attrs.Kind]
			q.mu.Unlock()
			out, timedOut := q.attempt(ctx, k, r)
			rd, err = q.step(qjobs.AttemptDone{Receipt: receipt, Now: q.clk.Now(), Outcome: jobOutcome(out),
				Cancelled: ctx.Err() != nil, TimedOut: timedOut})
		case len(rd.Sends) > 0:
			s := rd.Sends[0]
			to := q.q.Send
			if s.To == qjobs.ToDeadLetter {
				to = q.q.DeadLetter
			}
			// The send carries an outcome on: a stop cancelling the handler must not lose it.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
			errs, err2 := to.SendBatch(sctx, []OutgoingMessage{s.Message})
			cancel()
			switch {
			case err2 != nil:
			case len(errs) != 1: // a broken reply: the original stays, a duplicate at worst
				err2 = fmt.Errorf("sluice: queue runner: a send of one message answered %d entries", len(errs))
			default:
				err2 = errs[0]
			}
			rd, err = q.step(qjobs.SendDone{Receipt: receipt, Now: q.clk.Now(), Err: err2})
		default:
			panic("sluice: queue runner: the job layer left a delivery without an effect")
		}
	}
	panic("sluice: queue runner: a delivery took more than three steps")
}

// attempt runs r's handler, r.Delay from now (a stop before then returns its cause: the job
// layer abandons the delivery); with r.Timeout, its context ends that long after the start
// with cause ErrAttemptTimeout (on the runner's clock), and timedOut reports that it had.
func (q *QueueRunner) attempt(ctx context.Context, k queueKind, r qjobs.Run) (out error, expired bool) {
	if r.Delay > 0 { // held for a rate's next token
		t := q.clk.Timer(r.Delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("stopped before its start: %w", context.Cause(ctx)), false
		case <-t.C:
		}
	}
	actx, cancel := attemptContext(ctx, r.Timeout, afterFunc(q.clk))
	defer cancel(nil)
	out = k.run(actx, r.Attrs, r.Attempt, r.Payload)
	if r.Timeout > 0 {
		out = timedOut(actx, r.Timeout, out) // the local runner's rule: Permanent stays
	}
	return out, errors.Is(context.Cause(actx), ErrAttemptTimeout)
}

// sendTimeout bounds a delivery's send (a re-send or a dead letter), which runs on after the
// handler's context ended: the worker holds the lease meanwhile.
const sendTimeout = 10 * time.Second

// jobOutcome is a handler's outcome in the job layer's terms.
func jobOutcome(out error) qjobs.Outcome {
	kind, after := outcome.Of(out)
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
	return o
}

// doneResult is a delivery's Done as the worker's handler result.
func doneResult(d qjobs.Done) error {
	switch d.Disposition {
	case qjobs.Delete:
		return nil
	case qjobs.Hide:
		return RetryAfter(errors.New(d.Err), d.Visibility)
	}
	return RetryAfter(errors.New(d.Err), 0) // Release: the worker cancelled it and ignores this
}

// logNotes logs the job layer's notes.
func (q *QueueRunner) logNotes(ctx context.Context, notes []qjobs.Note) {
	for _, n := range notes {
		level := slog.LevelWarn
		if n.Level == qjobs.NoteError {
			level = slog.LevelError
		}
		args := make([]any, len(n.Args))
		for i, a := range n.Args {
			args[i] = a
		}
		q.log.Log(ctx, level, "sluice: queue runner: "+n.Text, args...)
	}
}

// Kinds returns the registered kinds' names, sorted.
func (q *QueueRunner) Kinds() []string {
	if q.zero() {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, len(q.kinds))
	for n := range q.kinds {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
