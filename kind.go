package sluice

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/internal/outcome"
)

// DefaultKind is the kind Open registers for its one type of job.
const DefaultKind = "default"

// Kind is the typed handle of one registered kind of job: its Enqueue, EnqueueMany, Get and
// List take and return payloads of type A. It embeds the Runner it was registered on, so the
// runner's methods (Run, Drain, Cancel, Retry, Stats, Close) are reachable through it.
type Kind[A any] struct {
	*Runner // nil for a kind registered on a QueueRunner
	name    string
	codec   Codec[A]
	q       *QueueRunner   // set for a kind registered on a QueueRunner
	hold    bool           // WithHoldOnDead: its jobs in a sequence hold it when dead
	keyOf   func(A) string // WithKeyFunc
}

// KindOption sets one of a kind's options at Register.
type KindOption func(*kindSettings)

type kindSettings struct {
	limit int
	flow  kindFlow
	err   error
}

// kindFlow is a kind's flow control (docs/runner.md, flow control).
type kindFlow struct {
	rate, keyRate Rate
	keyLimit      int
	fair, hold    bool
	timeout       time.Duration
	keyFn         any // WithKeyFunc's func(A) string, checked against the kind's A at Register
}

// Rate is at most Count starts per Per, Burst of them back to back (0: Count). Starts are
// attempts starting; a retry is a start.
type Rate struct {
	Count int
	Per   time.Duration
	Burst int
}

func (r Rate) core() runner.Rate { return runner.Rate{Count: r.Count, Per: r.Per, Burst: r.Burst} }

func (s *kindSettings) refuse(err error) {
	if s.err == nil {
		s.err = err
	}
}

// WithRate bounds the kind's starts to r: a token bucket that starts empty when the runner
// opens, so a restart never grants a burst the runner may have spent before it.
func WithRate(r Rate) KindOption {
	return func(s *kindSettings) {
		if err := r.core().Validate(); err != nil || r.Count == 0 {
			s.refuse(fmt.Errorf("WithRate(%+v): %v", r, orText(err, "Count must be ≥ 1")))
		}
		s.flow.rate = r
	}
}

// WithKeyRate bounds the starts of each flow key (WithKey) of the kind to r.
func WithKeyRate(r Rate) KindOption {
	return func(s *kindSettings) {
		if err := r.core().Validate(); err != nil || r.Count == 0 {
			s.refuse(fmt.Errorf("WithKeyRate(%+v): %v", r, orText(err, "Count must be ≥ 1")))
		}
		s.flow.keyRate = r
	}
}

// WithKeyFunc gives each job of the kind the flow key f returns for its payload, as if it
// were enqueued WithKey(f(payload)): the tenant of a sync, the account of an API call. A
// job's own WithKey replaces it; "" leaves the job the shared key "". f runs at Enqueue,
// EnqueueMany and Schedule, on the caller's goroutine. Register refuses an f whose payload
// type is not the kind's.
func WithKeyFunc[A any](f func(payload A) string) KindOption {
	return func(s *kindSettings) {
		if f == nil {
			s.refuse(errors.New("WithKeyFunc(nil): give the function that names a payload's key"))
		}
		s.flow.keyFn = f
	}
}

// keyFuncOf is WithKeyFunc's function for a kind of payload A (nil without one).
func keyFuncOf[A any](fl kindFlow) (func(A) string, error) {
	if fl.keyFn == nil {
		return nil, nil
	}
	f, ok := fl.keyFn.(func(A) string)
	if !ok {
		return nil, fmt.Errorf("WithKeyFunc: the function is a %T; the kind's payloads need a func(%v) string", fl.keyFn, reflect.TypeFor[A]())
	}
	return f, nil
}

// keyed is opts with WithKeyFunc's key for payload first, so that a WithKey of opts replaces it.
func (k *Kind[A]) keyed(payload A, opts []JobOption) []JobOption {
	return keyedBy(k.keyOf, payload, opts)
}

// keyedBy is opts with keyOf's key for payload first (opts when keyOf is nil).
func keyedBy[A any](keyOf func(A) string, payload A, opts []JobOption) []JobOption {
	if keyOf == nil {
		return opts
	}
	key := keyOf(payload)
	if key == "" {
		return opts
	}
	return append([]JobOption{func(s *jobSettings) {
		if err := runner.CheckName("the key", key, true); err != nil {
			s.refuse(fmt.Errorf("WithKeyFunc returned %s for this payload: %v; return 1 to %d bytes without NUL, or \"\" for the shared key", runner.QuoteCut(key), err, NameMax))
		}
		s.o.Key = key
	}}, opts...)
}

// WithKeyConcurrency bounds the attempts of one flow key (WithKey) running at once to n.
func WithKeyConcurrency(n int) KindOption {
	return func(s *kindSettings) {
		if n < 1 {
			s.refuse(fmt.Errorf("WithKeyConcurrency(%d): must be ≥ 1", n))
		}
		s.flow.keyLimit = n
	}
}

// WithFairShare serves the kind's flow keys round-robin: a key that started a job waits
// until every other key with a due job has started one. While a key has a due job, at most
// 2(N−1) starts of other keys come before its next start (N the keys with a due job at
// some time during the wait; docs/runner.md states the rule).
func WithFairShare() KindOption { return func(s *kindSettings) { s.flow.fair = true } }

// WithHoldOnDead makes a dead job hold its sequence (WithGroup): the later jobs of the
// sequence wait until it is retried or cancelled. Without it a dead job releases them.
func WithHoldOnDead() KindOption { return func(s *kindSettings) { s.flow.hold = true } }

// WithAttemptTimeout bounds each attempt of the kind to d (d > 0) unless the job sets its own
// (WithJobAttemptTimeout): the handler's context ends with cause ErrAttemptTimeout, and an
// error it then returns that would be retried names the timeout; Permanent stays permanent
// (docs/results.md). The same on a queue runner.
func WithAttemptTimeout(d time.Duration) KindOption {
	return func(s *kindSettings) {
		if d <= 0 {
			s.refuse(fmt.Errorf("WithAttemptTimeout(%v): must be > 0", d))
		}
		s.flow.timeout = d
	}
}

func orText(err error, text string) string {
	if err != nil {
		return err.Error()
	}
	return text
}

// WithConcurrency bounds the attempts of the kind that run at once to n (n ≥ 1), within the
// runner's Capacity: a kind calling a slow service cannot take every unit. Jobs of a kind at
// its limit wait; jobs of other kinds start meanwhile.
func WithConcurrency(n int) KindOption {
	return func(s *kindSettings) {
		if n < 1 && s.err == nil {
			s.err = fmt.Errorf("WithConcurrency(%d): must be ≥ 1", n)
		}
		s.limit = n
	}
}

// kindEntry is a registered kind with its type erased, for the owner.
type kindEntry struct {
	name   string
	limit  int
	flow   kindFlow
	decode func([]byte) (any, error)
	// start runs the handler for one attempt whose payload decode made value; a panic is a
	// *PanicError.
	start func(ctx context.Context, a runner.Attempt) error
}

// Register adds a kind of job named name to r, with its codec and handler, and returns its
// typed handle. Register every kind before the first Run or Drain; registering after is an
// error, as are an empty name and a name registered already. A journal may hold jobs of a
// kind not registered (a kind a program stopped using, or not yet deployed): they wait, never
// started nor dropped, Stats.Unregistered counts them, and Run logs a warning once per kind.
//
// r may be a *QueueRunner instead: the same kinds then run from a queue (docs/queue.md);
// WithConcurrency is refused there (Worker.Concurrency bounds a process).
func Register[A any](reg Registrar, name string, codec Codec[A], handler Handler[A], opts ...KindOption) (*Kind[A], error) {
	if codec == nil || handler == nil {
		return nil, fmt.Errorf("sluice: Register %s: the codec and the handler must not be nil", runner.QuoteCut(name))
	}
	var s kindSettings
	for _, o := range opts {
		o(&s)
	}
	if s.err != nil {
		return nil, fmt.Errorf("sluice: Register %s: %w", runner.QuoteCut(name), s.err)
	}
	keyOf, err := keyFuncOf[A](s.flow)
	if err != nil {
		return nil, fmt.Errorf("sluice: Register %s: %w", runner.QuoteCut(name), err)
	}
	if err := runner.CheckName("kind name", name, true); err != nil {
		return nil, fmt.Errorf("sluice: Register: %w: a kind's name is journaled with each of its jobs (NameMax)", err)
	}
	if q, ok := reg.(*QueueRunner); ok {
		if q.zero() {
			return nil, errZeroQueueRunner
		}
		if s.limit != 0 {
			return nil, fmt.Errorf("%w: Register %q: WithConcurrency: bound a process with QueueConfig.Worker.Concurrency", ErrQueueUnsupported, name)
		}
		k, err := registerQueue(q, name, codec, handler, s.flow)
		if k != nil {
			k.keyOf = keyOf
		}
		return k, err
	}
	r, _ := reg.(*Runner)
	if r.zero() {
		return nil, errZeroRunner
	}
	r.mu.Lock()
	started := r.started
	r.mu.Unlock()
	if started {
		return nil, fmt.Errorf("sluice: Register %q: the runner has started (Run or Drain); register every kind before", name)
	}
	e := kindEntry{name: name, limit: s.limit, flow: s.flow,
		decode: func(b []byte) (any, error) { return codec.Decode(b) },
		start:  startOf(name, handler)}
	rep, err := r.call(context.Background(), command{kind: cmdRegister, reg: e})
	if err == nil {
		err = rep.err
	}
	if err != nil {
		return nil, err
	}
	return &Kind[A]{Runner: r, name: name, codec: codec, hold: s.flow.hold, keyOf: keyOf}, nil
}

// startOf is a kind's start: handler called with the attempt's job; a panic is a *PanicError.
func startOf[A any](name string, handler Handler[A]) func(ctx context.Context, a runner.Attempt) error {
	return func(ctx context.Context, a runner.Attempt) (err error) {
		defer outcome.Recover(&err)
		err = handler(ctx, Job[A]{ID: a.Token.ID, Kind: name, Target: a.Target, Attempt: a.Token.Attempt,
			Due: a.FirstDue, Payload: a.Value.(A)})
		if a.Timeout > 0 {
			err = timedOut(ctx, a.Timeout, err)
		}
		return err
	}
}

// jobOpts applies a job's options for this kind (kindJobOpts).
func (k *Kind[A]) jobOpts(opts []JobOption) (jobSettings, error) {
	return kindJobOpts(k.name, k.hold, opts)
}

// kindJobOpts applies a job's options for kind name: its name, and Hold for a job in a
// sequence of a kind registered WithHoldOnDead (hold).
func kindJobOpts(name string, hold bool, opts []JobOption) (jobSettings, error) {
	s, err := jobOpts(opts)
	if err != nil {
		return s, err
	}
	s.o.Kind = name
	s.o.Hold = hold && s.o.Group != ""
	return s, nil
}

// Name is the kind's name, as journaled with each of its jobs.
func (k *Kind[A]) Name() string {
	if k == nil {
		return ""
	}
	return k.name
}

// check refuses a nil or zero Kind (not made by Register or Open), whose methods would
// otherwise dereference a missing codec or runner.
func (k *Kind[A]) check() error {
	if k == nil || k.codec == nil {
		return errZeroKind
	}
	return nil
}

var errZeroKind = notMade("Kind", "Register or Open")

// Enqueue adds a job of this kind due at due (the zero time means now) for target, with
// per-job options (WithPriority, WithAttempts, WithDeadline, WithUnique...), and returns its
// id once the record is durable. Refused before anything is written: a payload whose record
// would exceed Config.RecordMax (ErrTooLarge); an empty target, a due outside the range a
// record holds (TimeRange) or an option out of range (ErrInvalidJob). If ctx ends first,
// Enqueue returns ctx.Err() and the job may or may not exist.
func (k *Kind[A]) Enqueue(ctx context.Context, due time.Time, target string, payload A, opts ...JobOption) (uint64, error) {
	if err := k.check(); err != nil {
		return 0, err
	}
	b, err := k.codec.Encode(payload)
	if err != nil {
		return 0, wrapf(nil, err, "enqueue")
	}
	opts = k.keyed(payload, opts)
	if k.q != nil {
		ids, err := k.q.enqueue(ctx, k.name, []queueJob{{due: due, target: target, payload: b, opts: opts}})
		if err != nil {
			return 0, err
		}
		return ids[0], nil
	}
	s, err := k.jobOpts(opts)
	if err != nil {
		return 0, err
	}
	return k.Runner.enqueue(ctx, s, due, target, b)
}

// EnqueueMany adds jobs of this kind in one journal batch (one fsync for all) and returns
// their ids, in order, once the batch is durable. Each job's options act as on Enqueue. A job
// whose unique key is held (or taken by an earlier job of the batch) is a duplicate: its id is
// the holder's, its WasDuplicate flag is set, and with FailOnDuplicate the call returns the
// ids with an error wrapping ErrDuplicate that names each such job (the others are enqueued
// all the same). Every job is checked
// first, as Enqueue checks one: the first refusal refuses the whole batch, names the job's
// index, and writes nothing. If ctx ends first, EnqueueMany returns ctx.Err() and the jobs
// may or may not exist.
func (k *Kind[A]) EnqueueMany(ctx context.Context, jobs []NewJob[A]) ([]uint64, error) {
	if err := k.check(); err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	if k.q != nil {
		return k.enqueueQueue(ctx, jobs)
	}
	njs := make([]runner.NewJob, len(jobs))
	sets := make([]jobSettings, len(jobs))
	for i, j := range jobs {
		b, err := k.codec.Encode(j.Payload)
		if err != nil {
			return nil, wrapf(nil, err, "enqueue many: job %d", i)
		}
		s, err := k.jobOpts(k.keyed(j.Payload, j.Options))
		if err != nil {
			return nil, fmt.Errorf("%w (job %d)", err, i)
		}
		njs[i] = runner.NewJob{Due: j.Due, Target: j.Target, Payload: b, Opts: s.o}
		sets[i] = s
	}
	return k.Runner.enqueueMany(ctx, njs, sets)
}

// Get returns a copy of the job with the given id, its payload decoded, or ErrNotFound (also
// for a job of another kind). ctx bounds the wait, as on Runner.Get.
func (k *Kind[A]) Get(ctx context.Context, id uint64) (JobInfo[A], error) {
	if err := k.check(); err != nil {
		return JobInfo[A]{}, err
	}
	if k.q != nil {
		return JobInfo[A]{}, fmt.Errorf("%w: get %d: a queue cannot look a message up", ErrQueueUnsupported, id)
	}
	v, err := k.Runner.Get(ctx, id)
	if err != nil {
		return JobInfo[A]{}, err
	}
	if v.Kind != k.name {
		return JobInfo[A]{}, errorf(ErrNotFound, "get %d: job not found among kind %q: it is of kind %q; use that kind's handle or Runner.Get", id, k.name, v.Kind)
	}
	return decodeInfo(k.codec, v)
}

// List is Runner.List of this kind's jobs, payloads decoded. f.Kind must be empty or the
// kind's name.
func (k *Kind[A]) List(ctx context.Context, f ListFilter) (Page[A], error) {
	if err := k.check(); err != nil {
		return Page[A]{}, err
	}
	if k.q != nil {
		return Page[A]{}, fmt.Errorf("%w: list: a queue cannot list its messages", ErrQueueUnsupported)
	}
	if f.Kind != "" && f.Kind != k.name {
		return Page[A]{}, fmt.Errorf("%w: ListFilter.Kind %q on the handle of kind %q", ErrInvalidJob, f.Kind, k.name)
	}
	f.Kind = k.name
	raw, err := k.Runner.List(ctx, f)
	if err != nil {
		return Page[A]{}, err
	}
	p := Page[A]{Next: raw.Next, More: raw.More, Jobs: make([]JobInfo[A], len(raw.Jobs))}
	for i, v := range raw.Jobs {
		if f.OmitPayload {
			p.Jobs[i], _ = decodeInfo[A](nil, v)
			continue
		}
		if p.Jobs[i], err = decodeInfo(k.codec, v); err != nil {
			return p, wrapf(nil, err, "list")
		}
	}
	return p, nil
}

// decodeInfo is v with its payload decoded by codec.
func decodeInfo[A any](codec Codec[A], v JobInfo[[]byte]) (JobInfo[A], error) {
	info := JobInfo[A]{ID: v.ID, Kind: v.Kind, Target: v.Target, State: v.State, Attempts: v.Attempts,
		FirstDue: v.FirstDue, Due: v.Due, Reason: v.Reason, LastErr: v.LastErr, Priority: v.Priority,
		Unique: v.Unique, UniqueWindow: v.UniqueWindow, History: v.History, Blocked: v.Blocked,
		Key: v.Key, Group: v.Group, HoldOnDead: v.HoldOnDead}
	if codec == nil { // ListFilter.OmitPayload: nothing to decode
		return info, nil
	}
	var err error
	if info.Payload, err = codec.Decode(v.Payload); err != nil {
		return info, fmt.Errorf("job %d: %w", v.ID, err)
	}
	return info, nil
}
