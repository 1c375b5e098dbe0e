package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/core/pool"
	"github.com/sluicehq/sluice/core/retry"
)

// Errors returned for commands that cannot apply.
var (
	ErrNotFound = errors.New("runner: no such job")
	ErrTerminal = errors.New("runner: job already terminal")
	ErrNotDead  = errors.New("runner: only a dead job can be retried")
	ErrTooLarge = errors.New("runner: record too large")
	ErrTime     = errors.New("runner: time out of range")
	ErrJob      = errors.New("runner: invalid job")
	// ErrDuplicate: a Retry would give a unique key a second non-terminal job.
	ErrDuplicate = errors.New("runner: unique key held by another job")
)

// TimeRange states the times a record can hold (UnixNano's range), for error messages.
const TimeRange = "[1677-09-21T00:12:43Z, 2262-04-11T23:47:16Z]"

// Ticket names one submitted command (Enqueue, Cancel, Retry) in the Ack that answers it.
type Ticket uint64

// Event is the sealed set of inputs to Machine.Step.
type Event interface{ isEvent() }

// Enqueue adds a job due at Due; a zero Due means Now (the machine decides, so the driver and
// the simulator need not). A past due stays as given: the queue starts anything due at or
// before the tick's now.
type Enqueue struct {
	Ticket  Ticket
	Now     time.Time
	Due     time.Time
	Target  string
	Payload []byte
	Opts    Opts
}

// NewJob is one job of an EnqueueMany: Enqueue's fields without the ticket and now.
type NewJob struct {
	Due     time.Time
	Target  string
	Payload []byte
	Opts    Opts
}

// EnqueueMany adds Jobs at Now in one batch: every record or none (the first refused job
// refuses them all, naming its index), one Ack listing the ids in order.
type EnqueueMany struct {
	Ticket Ticket
	Now    time.Time
	Jobs   []NewJob
}

// Cancel cancels a non-terminal job.
type Cancel struct {
	Ticket Ticket
	ID     uint64
}

// Retry re-enqueues a dead job at Now with a fresh attempt budget.
type Retry struct {
	Ticket Ticket
	ID     uint64
	Now    time.Time
}

// Synced says every record with Seq ≤ Through is durable.
type Synced struct{ Through uint64 }

// AttemptDone reports an attempt's outcome at Now.
type AttemptDone struct {
	Now     time.Time
	Token   Token
	Outcome Outcome
}

// Tick runs scheduling at Now: due jobs start while pool units are free (only with Admit and
// while dispatching), and a graceful stop moves on when its grace has passed.
type Tick struct {
	Now   time.Time
	Admit bool
}

// Dispatch turns admission on or off at Now. Off begins a graceful stop: nothing more is
// admitted; attempts still running when Grace has passed are cancelled (Ready.Cancels, why
// Stop), and each of those that then ends other than in success is released, not counted.
// Status().Stopped says when the driver may flush and close.
type Dispatch struct {
	Now time.Time
	On  bool
}

func (Dispatch) isEvent()    {}
func (Enqueue) isEvent()     {}
func (EnqueueMany) isEvent() {}
func (Cancel) isEvent()      {}
func (Retry) isEvent()       {}
func (Synced) isEvent()      {}
func (AttemptDone) isEvent() {}
func (Tick) isEvent()        {}

// Append is a record to write to the journal, numbered by the machine (Seq +1 per record).
type Append struct {
	Seq  uint64
	Tag  uint8
	Data []byte
}

// Ack answers a command whose record is durable.
type Ack struct {
	Ticket Ticket
	ID     uint64
	IDs    []uint64 // EnqueueMany: every id, in the order of its Jobs (ID is the first)
	// Duplicate: the enqueue named a unique key a non-terminal job holds; ID is that job and
	// nothing was journaled. Duplicates is the same per job of an EnqueueMany.
	Duplicate  bool
	Duplicates []bool
}

// Attempt is an attempt to dispatch.
type Attempt struct {
	Token    Token
	Target   string
	Payload  []byte
	FirstDue time.Time // the job's first due (start of its retry deadline)
	Probe    bool      // admitted as a half-open probe
	Value    any       // what the kind's decode-check port made of Payload (nil without one)
	Kind     string    // the job's kind (Opts.Kind): whose handler runs it
}

// Settled reports a job whose terminal state (succeeded, dead, cancelled) is durable.
type Settled struct {
	ID       uint64
	State    JobState
	Reason   Reason
	Attempts int
	LastErr  string
}

// Why says why the machine cancels a running attempt's handler.
type Why uint8

const (
	// ByUser: the job was cancelled (its Cancelled record is durable); the outcome is ignored.
	ByUser Why = iota + 1
	// ByStop: a graceful stop's grace has passed; the attempt is released unless it succeeds.
	ByStop
)

func (w Why) String() string {
	switch w {
	case ByUser:
		return "cancelled"
	case ByStop:
		return "stop"
	}
	return fmt.Sprintf("why(%d)", uint8(w))
}

// CancelAttempt tells the driver to cancel a running handler's context.
type CancelAttempt struct {
	Token Token
	Why   Why
}

// Ready is the effects to perform, drained by Machine.Ready.
//
// Ordering contract: Appends must be written and made durable, in order, before Synced{Through:
// the last Seq} is stepped. Acks, Starts, Settled and Cancels only ever name records already
// covered by a Synced event (or, for a stop's cancels, no record): perform them as soon as they
// appear. An effect counts as done once the driver has performed it; the machine does not wait
// for a confirmation, except that an attempt it started stays in flight until AttemptDone.
type Ready struct {
	Appends []Append
	Acks    []Ack
	Starts  []Attempt
	Settled []Settled
	Cancels []CancelAttempt
	// Transitions are the attempt ends and breaker deferrals whose records are durable, for
	// the driver's hooks.
	Transitions []Transition
}

// Transition reports a durable record about an attempt's end or a breaker's deferral, as the
// machine decided it: the driver hands it to its hooks and decides nothing.
type Transition struct {
	Tag     uint8 // TagFinished, TagReleased or TagDeferred
	ID      uint64
	Target  string
	Attempt int // TagFinished, TagReleased
	// Kind, Retryable, Err, Next and Reason are TagFinished's (Next Waiting: retried at Due).
	Kind      OutcomeKind
	Retryable bool
	Err       string
	Next      JobState
	Reason    Reason
	Due       time.Time // TagDeferred: until when; TagFinished with Next Waiting: the retry's due
	// Start and End bound the attempt (TagFinished, TagReleased); Start is zero when the
	// history no longer holds it.
	Start, End time.Time
}

// job is the machine's job: Job's fields, smaller. The dues are UnixNano (every due lies in
// TimeRange and records carry them normalized to UTC, so the public view rebuilds them
// exactly), and the options are shared and never written: jobs enqueued with equal options
// point to one copy. What replay builds is mostly jobs, and what the GC marks in them is their
// pointers: 160 bytes and six pointers, against 264 and nine embedding Job.
type job struct {
	ID      uint64
	Target  string
	Payload []byte
	Opts    *Opts
	// History is the last HistoryMax attempts, oldest first; a manual Retry keeps it.
	History []AttemptRecord
	LastErr string
	TermSeq uint64
	// dueKey is Due.UnixNano(): the heaps compare it, and due() is the time.
	dueKey      int64
	firstDueKey int64 // FirstDue.UnixNano(), firstDue() the time
	Attempts    int
	kind        *kind // Opts.Kind's state
	// idx is the position in each of its kind's queue heaps; -1 when not in it. int32 (a
	// heap of 2^31 jobs would not fit in memory) with the bytes after it.
	idx      [slots]int32
	State    JobState
	Reason   Reason
	Deferred bool
	// shared: History's array may have been handed out (Get, List, Snapshot, a loaded
	// snapshot), so endAttempt copies it before writing; a fresh array is written in place.
	shared bool
	pruned bool // Prune is taking it out of order
}

func (j *job) broken(termSeq uint64) string {
	return brokenJob(j.ID, j.State, j.Reason, j.TermSeq, termSeq, j.Deferred, j.Attempts, j.Opts, j.History)
}

func (j *job) due() time.Time      { return time.Unix(0, j.dueKey).UTC() }
func (j *job) firstDue() time.Time { return time.Unix(0, j.firstDueKey).UTC() }

// view writes j's public Job into v (the payload and history not copied).
func (j *job) view(v *Job) {
	*v = Job{ID: j.ID, Target: j.Target, Payload: j.Payload, State: j.State, Reason: j.Reason,
		Attempts: j.Attempts, FirstDue: j.firstDue(), Due: j.due(), Deferred: j.Deferred,
		LastErr: j.LastErr, TermSeq: j.TermSeq, Opts: *j.Opts, History: j.History}
}

// fromView sets j's fields from v, with opts the shared copy of v.Opts.
func (j *job) fromView(v *Job, opts *Opts) {
	j.ID, j.Target, j.Payload, j.State, j.Reason = v.ID, v.Target, v.Payload, v.State, v.Reason
	j.Attempts, j.firstDueKey, j.dueKey, j.Deferred = v.Attempts, v.FirstDue.UnixNano(), v.Due.UnixNano(), v.Deferred
	j.LastErr, j.TermSeq, j.Opts, j.History = v.LastErr, v.TermSeq, opts, v.History
}

// job returns job id, or nil. Ids in order ascend and are unique, so job id is at an index
// no lower than counted back from nextID and no higher than counted up from the first id: a
// range as wide as the ids pruned between them (none: the first probe finds it).
func (m *Machine) job(id uint64) *job {
	n := len(m.order)
	if n == 0 || id < m.order[0].ID || id >= m.nextID {
		return nil
	}
	lo := n - int(min(m.nextID-id, uint64(n)))
	hi := min(n-1, int(min(id-m.order[0].ID, uint64(n))))
	if lo > hi {
		return nil
	}
	// The newest place first: where the job is when none after it was pruned.
	if j := m.order[lo]; j.ID >= id {
		if j.ID == id {
			return j
		}
		return nil
	}
	rest := m.order[lo+1 : hi+1]
	if i, ok := slices.BinarySearchFunc(rest, id, func(j *job, id uint64) int { return cmpU64(j.ID, id) }); ok {
		return rest[i]
	}
	return nil
}

// attempt is an attempt holding a pool unit.
type attempt struct {
	token      Token
	target     string
	kind       *kind
	payload    []byte
	firstDue   time.Time
	probe      breaker.Probe
	seq        uint64 // its Started record
	dispatched bool
	dropped    bool // cancelled before dispatch; skipped at Synced
	stopped    bool // cancelled by a graceful stop: released unless it succeeds
	value      any  // the decoded payload (MachineConfig.Decode)
}

// pending is an Ack waiting for its record to be durable.
type pending struct {
	seq uint64
	ack Ack
}

// pendingSettled is a terminal transition waiting for its record to be durable.
type pendingSettled struct {
	seq uint64
	s   Settled
}

// pendingTransition is a Transition waiting for its record to be durable.
type pendingTransition struct {
	seq uint64
	t   Transition
}

// pendingCancel is a user cancel of a dispatched attempt waiting for its record to be durable.
type pendingCancel struct {
	seq uint64
	c   CancelAttempt
}

// MachineConfig configures a Machine. Every field is required except Decode (Engine's Config
// fills defaults).
type MachineConfig struct {
	Policy    retry.Policy
	Circuit   breaker.Circuit
	Capacity  int
	RecordMax int // an Enqueue whose record is larger is refused with ErrTooLarge
	// Grace is how long a graceful stop waits for running attempts before cancelling them, and
	// again for the cancelled ones to return before they are abandoned.
	Grace  time.Duration
	Logger *slog.Logger
	Rand   *rand.Rand // jitter draws
	// Decode is the decode-check port: it turns a payload into the handler's value. A payload
	// it refuses is never dispatched: that attempt is a permanent failure. nil: no check, and
	// Attempt.Value stays nil.
	Decode func(payload []byte) (any, error)
	// AgeMax is the starvation rule: a due job that has waited AgeMax past its due starts
	// before any job of higher priority (the longest waiting first). 0: priority is strict.
	AgeMax time.Duration
	// Kinds are the kinds registered from the start (Register adds more before the first
	// dispatch): their limits and decode ports.
	Kinds []KindConfig
	// KindsOnly: only jobs of registered kinds start; the others wait, never started nor
	// dropped (the production driver). Without it every kind starts, limited if registered.
	KindsOnly bool
}

// validate refuses the first bad field with a *ConfigError: the one check of the fields a
// machine needs, which Config.WithDefaults runs too (after its defaults).
func (cfg MachineConfig) validate() error {
	var rf *retry.FieldError
	if err := cfg.Policy.Validate(); errors.As(err, &rf) {
		return configErr("Policy."+rf.Field, rf.Value, rf.Rule)
	}
	var bf *breaker.FieldError
	if err := cfg.Circuit.Validate(); errors.As(err, &bf) {
		return configErr("Circuit."+bf.Field, bf.Value, bf.Rule)
	}
	switch {
	case cfg.Grace < 0:
		return configErr("Grace", cfg.Grace, "must be ≥ 0 (0 means 10s)")
	case cfg.AgeMax < 0:
		return configErr("AgeMax", cfg.AgeMax, "must be ≥ 0 (0 means 1m)")
	case cfg.Capacity < 1:
		return configErr("Capacity", cfg.Capacity, "must be ≥ 1")
	case cfg.RecordMax < 1:
		return configErr("RecordMax", cfg.RecordMax, "must be ≥ 1")
	case cfg.Logger == nil:
		return configErr("Logger", nil, "must not be nil")
	case cfg.Rand == nil:
		return configErr("Rand", nil, "must not be nil")
	}
	return nil
}

// Machine is the runner's pure state machine (docs/runner.md).
type Machine struct {
	cfg MachineConfig

	// Invariant: every job id < nextID; nextID ≥ 1.
	nextID  uint64
	termSeq uint64
	// kinds holds every kind registered or named by a job; kindList the same, by name.
	// Invariant: every Waiting job is in its kind's queue, no other job is in any.
	kinds    map[string]*kind
	kindList []*kind
	lastKind *kind // the kind kindOf found last
	// dispatched: admission was turned on once; Register is closed from then on.
	dispatched bool
	// unique maps the key (uniqueKey) of every non-terminal job that has one to its id.
	// Invariant: at most one non-terminal job per key, and it is this one.
	unique map[string]uint64
	// windows maps the key of a job that succeeded with Opts.UniqueFor to the end of the
	// window in which the key stays reserved. Invariant: no key is in both unique and windows.
	// Expired entries stay until the next compaction leaves them out (Engine.compact), so
	// replay rebuilds exactly this map.
	windows map[string]window
	// scheds are the periodic jobs' schedules by name (schedule.go).
	scheds map[string]*sched
	// schedWake caches the earliest next period of any schedule (zero: none), so an idle Tick
	// costs O(1) whatever the number of schedules. Invariant: equals scheduleWakeScan().
	schedWake time.Time
	// answer is the last enqueue's ids and duplicate flags, for the Engine to return.
	answer Ack
	pool   *pool.Pool
	// breakers holds only targets whose breaker is not idle (breaker.Idle): memory is bounded
	// by the targets that failed within the Window or are open or half-open.
	breakers map[string]*breaker.Breaker
	// phaseFloor is the highest half-open phase of any forgotten breaker; new ones number after it.
	phaseFloor uint64
	// Invariant: len(inflight) == pool.Used(); a Running job's current token is in it.
	inflight map[Token]*attempt
	// spare are ended attempts kept for reuse (reuse), at most Capacity.
	spare []*attempt

	seq    uint64 // last record Seq handed out
	synced uint64 // Invariant: synced ≤ seq
	// Effects waiting for Synced, in Seq order.
	starting   []*attempt
	acking     []pending
	settling   []pendingSettled
	cancelling []pendingCancel
	noting     []pendingTransition
	// Effects ready to drain.
	appends []Append
	acks    []Ack
	starts  []Attempt
	settled []Settled
	cancels []CancelAttempt
	notes   []Transition

	arena []byte // the chunk records are encoded into (encode)
	// names interns the targets and kinds replay decodes (reader.name).
	names *interner
	// jobSlab, payloadSlab and histSlab are what replay cuts jobs, payloads and histories
	// from (newJob).
	jobSlab     []job
	payloadSlab []byte
	histSlab    []AttemptRecord
	opts        *Opts // the options shareOpts made last
	// order is every job ascending by id (ids are issued in order: enqueue appends), so
	// Snapshot neither sorts nor looks each job up, and a job is found by its id (job) with no
	// map: ids are dense but for pruned jobs.
	order []*job
	// appendsLast is the length of the last non-empty batch of appends (its successor's size).
	appendsLast int

	now time.Time // the latest time an event carried
	// dispatching: admission is on. Off, a graceful stop runs: graceAt is when the running
	// attempts get cancelled (zero once done), abandonAt when those ignoring it are abandoned.
	dispatching bool
	graceAt     time.Time
	abandonAt   time.Time

	// counts[s] is the number of jobs in state s; deferred the waiting ones deferred.
	// Invariant: they match the jobs (checkInvariants recounts).
	counts   [Cancelled + 1]int
	deferred int

	replaying bool // records come from the journal: nothing is appended
	snapshots int  // records applied so far (a snapshot must come first)
}

// New returns an empty machine, not dispatching, or a *ConfigError naming the first bad field.
func New(cfg MachineConfig) (*Machine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p, err := pool.New(pool.Config{Capacity: cfg.Capacity})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	m := &Machine{
		cfg:      cfg,
		kinds:    map[string]*kind{},
		unique:   map[string]uint64{},
		windows:  map[string]window{},
		scheds:   map[string]*sched{},
		nextID:   1,
		pool:     p,
		breakers: map[string]*breaker.Breaker{},
		inflight: map[Token]*attempt{},
	}
	for _, k := range cfg.Kinds {
		if err := m.register(k); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Step applies one event. It returns an error only for a command that cannot apply (ErrNotFound,
// ErrTerminal, ErrNotDead, ErrTooLarge, ErrTime); nothing changes then.
func (m *Machine) Step(ev Event) error {
	switch ev := ev.(type) {
	case Enqueue:
		return m.enqueue(ev)
	case EnqueueMany:
		return m.enqueueMany(ev)
	case Cancel:
		return m.cancel(ev)
	case Retry:
		return m.retry(ev)
	case SetSchedule:
		return m.setSchedule(ev)
	case RemoveSchedule:
		return m.removeSchedule(ev)
	case Synced:
		m.becomeSynced(ev.Through)
	case AttemptDone:
		m.at(ev.Now)
		m.attemptDone(ev)
	case Tick:
		m.at(ev.Now)
		m.maybeStopMoves()
		if ev.Admit && m.dispatching {
			m.fireSchedules(m.now)
			m.schedule(m.now)
		}
	case Dispatch:
		m.at(ev.Now)
		m.becomeDispatching(ev.On)
	default:
		panic("runner: unknown event " + reflect.TypeOf(ev).String())
	}
	return nil
}

// Ready drains the effects produced so far.
func (m *Machine) Ready() Ready {
	rd := Ready{Appends: m.appends, Acks: m.acks, Starts: m.starts, Settled: m.settled, Cancels: m.cancels, Transitions: m.notes}
	if len(m.appends) > 0 {
		m.appendsLast = len(m.appends)
	}
	m.appends, m.acks, m.starts, m.settled, m.cancels, m.notes = nil, nil, nil, nil, nil, nil
	return rd
}

// WakeAt is when to Tick next if nothing else happens: while dispatching, the next due job
// (with a unit free) or the next period of a schedule, whichever is first; else the next step
// of a graceful stop. Zero: nothing until a command or an outcome arrives.
func (m *Machine) WakeAt() time.Time {
	if !m.dispatching {
		switch {
		case m.running() == 0:
			return time.Time{}
		case !m.graceAt.IsZero():
			return m.graceAt
		case !m.abandonAt.IsZero() && m.now.Before(m.abandonAt):
			return m.abandonAt
		}
		return time.Time{}
	}
	w := m.scheduleWake()
	if m.pool.Status().Free == 0 {
		return w
	}
	if e := m.earliest(); e != nil {
		if d := e.due(); w.IsZero() || d.Before(w) {
			return d
		}
	}
	return w
}

// at moves the machine's clock; time never goes back.
func (m *Machine) at(now time.Time) {
	if now = norm(now); now.After(m.now) {
		m.now = now
	}
}

// running counts dispatched attempts in flight.
func (m *Machine) running() int {
	n := 0
	for _, a := range m.inflight {
		if a.dispatched {
			n++
		}
	}
	return n
}

// becomeDispatching turns admission on, or off to begin a graceful stop.
func (m *Machine) becomeDispatching(on bool) {
	if on == m.dispatching {
		return
	}
	m.dispatching = on
	m.graceAt, m.abandonAt = time.Time{}, time.Time{}
	if on {
		m.dispatched = true
		m.warnUnregistered()
	}
	if !on {
		m.graceAt = m.now.Add(m.cfg.Grace)
		m.maybeStopMoves()
	}
}

// maybeStopMoves cancels, once the grace has passed, every attempt still running (why ByStop),
// and starts the second grace after which those ignoring it are abandoned.
func (m *Machine) maybeStopMoves() {
	if m.dispatching || m.graceAt.IsZero() || m.now.Before(m.graceAt) {
		return
	}
	m.graceAt = time.Time{}
	m.abandonAt = m.now.Add(m.cfg.Grace)
	toks := make([]Token, 0, len(m.inflight))
	for t, a := range m.inflight {
		if a.dispatched && !a.stopped {
			toks = append(toks, t)
		}
	}
	slices.SortFunc(toks, func(a, b Token) int {
		if a.ID != b.ID {
			return cmpU64(a.ID, b.ID)
		}
		return a.Attempt - b.Attempt
	})
	for _, t := range toks {
		m.inflight[t].stopped = true
		m.cancels = append(m.cancels, CancelAttempt{Token: t, Why: ByStop})
	}
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (m *Machine) enqueue(ev Enqueue) error {
	m.at(ev.Now)
	nj := NewJob{Due: ev.Due, Target: ev.Target, Payload: ev.Payload, Opts: ev.Opts}
	r, data, err := m.enqueueRecord(m.nextID, ev.Now, nj)
	if err != nil {
		return err
	}
	if id, dup := m.holder(uniqueKey(&nj.Opts)); dup {
		m.ack(Ack{Ticket: ev.Ticket, ID: id, Duplicate: true})
		return nil
	}
	m.applyAndAppend(r, data)
	m.ack(Ack{Ticket: ev.Ticket, ID: r.ID})
	return nil
}

// ack answers a command once everything appended so far is durable (at once if it is): a
// duplicate's holder may still be waiting for its sync.
func (m *Machine) ack(a Ack) {
	m.answer = a
	if m.seq <= m.synced {
		m.acks = append(m.acks, a)
		return
	}
	m.acking = append(m.acking, pending{m.seq, a})
}

// uniqueKey is the index key of a job's unique key within its kind; "" when it has none.
func uniqueKey(o *Opts) string {
	if o.Unique == "" {
		return ""
	}
	return o.Kind + "\x00" + o.Unique
}

// enqueueMany checks every job before recording any, so a refused batch changes nothing.
func (m *Machine) enqueueMany(ev EnqueueMany) error {
	m.at(ev.Now)
	if len(ev.Jobs) == 0 {
		return fmt.Errorf("%w: EnqueueMany with no jobs", ErrJob)
	}
	// Check every job first; a key held, or taken by an earlier job of the batch, makes a
	// duplicate that gets the holder's id and no record.
	// Only the encoded records are kept between the passes: a Record is ten times their size.
	ds := make([][]byte, len(ev.Jobs))
	ids := make([]uint64, len(ev.Jobs))
	dups := make([]bool, len(ev.Jobs))
	taken := map[string]uint64{}
	next := m.nextID
	for i, nj := range ev.Jobs {
		_, data, err := m.enqueueRecord(next, ev.Now, nj)
		if err != nil {
			return fmt.Errorf("%w (job %d of %d, counting from 0)", err, i, len(ev.Jobs))
		}
		k := uniqueKey(&nj.Opts)
		if id, ok := m.holder(k); ok {
			ids[i], dups[i] = id, true
			continue
		}
		if id, ok := taken[k]; ok && k != "" {
			ids[i], dups[i] = id, true
			continue
		}
		if k != "" {
			taken[k] = next
		}
		ds[i], ids[i] = data, next
		next++
	}
	for i, nj := range ev.Jobs {
		if !dups[i] {
			m.applyAndAppend(enqueued(ids[i], ev.Now, nj), ds[i])
		}
	}
	m.ack(Ack{Ticket: ev.Ticket, ID: ids[0], IDs: ids, Duplicates: dups})
	return nil
}

// enqueueRecord is the Enqueued record of nj as job id, or why it is refused.
func (m *Machine) enqueueRecord(id uint64, now time.Time, nj NewJob) (Record, []byte, error) {
	due := nj.Due
	if due.IsZero() {
		due = now
	}
	if !inRange(due) {
		return Record{}, nil, fmt.Errorf("%w: enqueue due %v: a due time must lie in %s", ErrTime, due, TimeRange)
	}
	if nj.Target == "" {
		return Record{}, nil, fmt.Errorf("%w: empty target: every job names the target its breaker guards", ErrJob)
	}
	if err := nj.Opts.validate(); err != nil {
		return Record{}, nil, fmt.Errorf("%w: %w", ErrJob, err)
	}
	if strings.Contains(nj.Opts.Kind, "\x00") || strings.Contains(nj.Opts.Unique, "\x00") {
		return Record{}, nil, fmt.Errorf("%w: kind %q or unique key %q holds a NUL byte", ErrJob, nj.Opts.Kind, nj.Opts.Unique)
	}
	r := enqueued(id, now, nj)
	// Measured before it is encoded: an oversize payload is refused without a copy of it.
	if n := r.enqueuedLen(); n > m.cfg.RecordMax {
		return Record{}, nil, fmt.Errorf("%w: enqueue record of %d bytes exceeds RecordMax %d", ErrTooLarge, n, m.cfg.RecordMax)
	}
	return r, m.encode(r), nil
}

// enqueued is the Enqueued record of nj as job id, enqueued at now (enqueueRecord checks it).
func enqueued(id uint64, now time.Time, nj NewJob) Record {
	if nj.Due.IsZero() {
		nj.Due = now
	}
	return Record{Tag: TagEnqueued, ID: id, Due: norm(nj.Due), Target: nj.Target, Payload: nj.Payload, Opts: nj.Opts}
}

// policy is the retry policy of j: the runner's, with the job's own attempts and deadline.
func (m *Machine) policy(j *job) retry.Policy {
	p := m.cfg.Policy
	if j.Opts.AttemptsMax > 0 {
		p.Attempts = j.Opts.AttemptsMax
	}
	if j.Opts.Deadline > 0 {
		p.Deadline = j.Opts.Deadline
	}
	return p
}

func (m *Machine) cancel(ev Cancel) error {
	j, err := m.lookup(ev.ID)
	if err != nil {
		return err
	}
	if j.State.Terminal() {
		return fmt.Errorf("%w: cancel job %d (%v)", ErrTerminal, ev.ID, j.State)
	}
	tok := Token{j.ID, j.Attempts}
	wasRunning := j.State == Running
	m.record(Record{Tag: TagCancelled, ID: j.ID})
	m.acking = append(m.acking, pending{m.seq, Ack{Ticket: ev.Ticket, ID: j.ID}})
	// An attempt not yet dispatched never starts; a dispatched one is cancelled once the
	// Cancelled record is durable, and finishes, ignored.
	a := m.inflight[tok]
	switch {
	case !wasRunning || a == nil:
	case !a.dispatched:
		a.dropped = true
		m.releaseAttempt(a)
		m.breakerFor(a.target).Step(breaker.Release{Probe: a.probe}) // a released probe leaves it half-open, not idle
	default:
		m.cancelling = append(m.cancelling, pendingCancel{m.seq, CancelAttempt{Token: tok, Why: ByUser}})
	}
	return nil
}

func (m *Machine) retry(ev Retry) error {
	j, err := m.lookup(ev.ID)
	if err != nil {
		return err
	}
	if j.State != Dead {
		return fmt.Errorf("%w: retry job %d (%v)", ErrNotDead, ev.ID, j.State)
	}
	if !inRange(ev.Now) {
		return fmt.Errorf("%w: retry at %v", ErrTime, ev.Now)
	}
	m.at(ev.Now)
	if id, held := m.holder(uniqueKey(j.Opts)); held {
		return fmt.Errorf("%w: retry job %d: its unique key %q is held by job %d (until it ends, or its window after success)", ErrDuplicate, j.ID, j.Opts.Unique, id)
	}
	m.record(Record{Tag: TagRetried, ID: j.ID, Due: norm(ev.Now)})
	m.acking = append(m.acking, pending{m.seq, Ack{Ticket: ev.Ticket, ID: j.ID}})
	return nil
}

func (m *Machine) lookup(id uint64) (*job, error) {
	j := m.job(id)
	if j == nil {
		return nil, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	return j, nil
}

func (m *Machine) becomeSynced(through uint64) {
	if through > m.seq {
		panic(fmt.Sprintf("runner: Synced through %d, but only %d records were appended", through, m.seq))
	}
	if through <= m.synced {
		return
	}
	m.synced = through
	// Each effect list is grown once to what this sync releases (a batch may release
	// hundreds), not doubled from empty.
	i := 0
	for i < len(m.acking) && m.acking[i].seq <= through {
		i++
	}
	m.acks = slices.Grow(m.acks, i)
	for _, p := range m.acking[:i] {
		m.acks = append(m.acks, p.ack)
	}
	m.acking = drained(m.acking, i)
	i = 0
	for i < len(m.starting) && m.starting[i].seq <= through {
		i++
	}
	m.starts = slices.Grow(m.starts, i)
	for _, a := range m.starting[:i] {
		if a.dropped {
			continue
		}
		a.dispatched = true
		m.starts = append(m.starts, Attempt{Token: a.token, Target: a.target, Payload: a.payload,
			FirstDue: a.firstDue, Probe: a.probe != 0, Value: a.value, Kind: a.kind.name})
	}
	m.starting = drained(m.starting, i)
	i = 0
	for ; i < len(m.cancelling) && m.cancelling[i].seq <= through; i++ {
		// Only a handler still running is cancelled: its outcome may have arrived meanwhile.
		if c := m.cancelling[i].c; m.inflight[c.Token] != nil {
			m.cancels = append(m.cancels, c)
		}
	}
	m.cancelling = drained(m.cancelling, i)
	i = 0
	for i < len(m.settling) && m.settling[i].seq <= through {
		i++
	}
	m.settled = slices.Grow(m.settled, i)
	for _, p := range m.settling[:i] {
		m.settled = append(m.settled, p.s)
	}
	m.settling = drained(m.settling, i)
	i = 0
	for ; i < len(m.noting) && m.noting[i].seq <= through; i++ {
		m.notes = append(m.notes, m.noting[i].t)
	}
	m.noting = drained(m.noting, i)
}

// drained is s without its first i entries; when none is left its array is kept, cleared, for
// the next batch instead of being cut away (a list sliced from the front reallocates as it goes).
func drained[T any](s []T, i int) []T {
	if i == len(s) {
		clear(s)
		return s[:0]
	}
	return s[i:]
}

func (m *Machine) attemptDone(ev AttemptDone) {
	now := norm(ev.Now)
	a, ok := m.inflight[ev.Token]
	if !ok {
		m.cfg.Logger.Info("runner: outcome of an unknown attempt ignored", "job", ev.Token.ID, "attempt", ev.Token.Attempt, "outcome", ev.Outcome.Kind.String())
		return
	}
	if !a.dispatched {
		panic(fmt.Sprintf("runner: AttemptDone for %v before it was dispatched", ev.Token))
	}
	m.releaseAttempt(a)
	target, probe, stopped := a.target, a.probe, a.stopped
	m.reuse(a)
	j := m.job(ev.Token.ID)
	current := j != nil && j.State == Running && j.Attempts == ev.Token.Attempt
	if stopped && ev.Outcome.Kind != OutcomeSucceeded {
		// The runner's own stop cut it: the attempt is given back, the target not judged.
		m.breakerFor(target).Step(breaker.Release{Probe: probe})
		if current {
			m.record(Record{Tag: TagReleased, ID: j.ID, Attempt: j.Attempts, At: now})
		}
		return
	}
	// A result that does not count leaves a new breaker idle: forgotten at once, so none is made.
	if res := breakerResult(ev.Outcome); res.Counts() || m.breakers[target] != nil {
		m.breakerFor(target).Step(breaker.Record{Now: now, Result: res, Probe: probe})
		m.maybeForgetBreaker(target, now)
	}
	if !current {
		m.cfg.Logger.Info("runner: stale outcome ignored", "job", ev.Token.ID, "attempt", ev.Token.Attempt, "outcome", ev.Outcome.Kind.String())
		return
	}
	m.finish(j, now, ev.Outcome)
}

// finish journals the end of j's current attempt at now.
func (m *Machine) finish(j *job, now time.Time, o Outcome) {
	r := Record{Tag: TagFinished, ID: j.ID, Attempt: j.Attempts, Kind: o.Kind, Err: o.Err, At: now}
	switch o.Kind {
	case OutcomeSucceeded:
		r.Next, r.Err = Succeeded, ""
	case OutcomePanicked:
		r.Next, r.Reason = Dead, Panic
	case OutcomeFailed:
		r.Retryable = o.Retryable
		if !o.Retryable {
			r.Next, r.Reason = Dead, Permanent
			break
		}
		due, v := m.policy(j).Next(j.firstDue(), now, j.Attempts, m.cfg.Rand.Uint32(), o.After)
		switch v {
		case retry.DeadSpent:
			r.Next, r.Reason = Dead, Spent
		case retry.DeadLate:
			r.Next, r.Reason = Dead, Late
		default:
			if !inRange(due) {
				r.Next, r.Reason = Dead, Late
				break
			}
			r.Next, r.Due = Waiting, norm(due)
		}
	default:
		panic(fmt.Sprintf("runner: outcome kind %d", o.Kind))
	}
	m.record(r)
}

func breakerResult(o Outcome) breaker.Result {
	switch {
	case o.Kind == OutcomeSucceeded:
		return breaker.Success
	case o.Kind == OutcomePanicked:
		return breaker.Panic
	case o.Retryable:
		return breaker.RetryableFailure
	}
	return breaker.PermanentFailure
}

// reuse keeps an ended attempt for the next start (at most Capacity of them): it must no longer
// be in inflight nor in starting, which holds only attempts not yet dispatched.
func (m *Machine) reuse(a *attempt) {
	*a = attempt{}
	if len(m.spare) < m.cfg.Capacity {
		m.spare = append(m.spare, a)
	}
}

func (m *Machine) releaseAttempt(a *attempt) {
	delete(m.inflight, a.token)
	a.kind.inflight--
	m.pool.Step(pool.Release{})
}

func (m *Machine) breakerFor(target string) *breaker.Breaker {
	b := m.breakers[target]
	if b == nil {
		var err error
		if b, err = breaker.New(breaker.Config{Circuit: m.cfg.Circuit, PhaseAfter: m.phaseFloor}); err != nil {
			panic(err) // New validated the circuit
		}
		m.breakers[target] = b
	}
	return b
}

// maybeForgetBreaker drops target's breaker when it would decide as a new one, so breakers
// are kept only for targets that failed recently (not for every target ever seen). The phase
// floor keeps probes of a forgotten breaker from ever being current in its successor.
func (m *Machine) maybeForgetBreaker(target string, now time.Time) {
	if b := m.breakers[target]; b != nil && b.Idle(now) {
		m.phaseFloor = max(m.phaseFloor, b.Status().Phase)
		delete(m.breakers, target)
	}
}

// schedule starts due jobs while a unit is free (docs/runner.md admission): the highest priority
// first, then (due, id), except that a job due for AgeMax or longer goes first (pick).
func (m *Machine) schedule(now time.Time) {
	for _, k := range m.kindList {
		if m.runnable(k) {
			k.q.promote(now)
		}
	}
	for {
		j := m.pick(now)
		if j == nil {
			return
		}
		var d breaker.Decision
		m.pool.Step(pool.Acquire{})
		unit := m.pool.Ready().Granted
		v := retry.Admit(retry.Candidate{
			UnitFree: unit,
			Late:     m.policy(j).Late(j.firstDue(), now),
			Spent:    m.policy(j).Spent(j.Attempts),
		}, func() bool {
			b := m.breakers[j.Target]
			if b == nil {
				// No breaker: a new one admits as normal and stays idle, so the start
				// would forget it at once. Nothing is made.
				d = breaker.Decision{Verdict: breaker.Normal}
				return true
			}
			b.Step(breaker.Admit{Now: now})
			d = *b.Ready().Decision
			return d.Verdict != breaker.Refused
		})
		if unit && v != retry.Start {
			m.pool.Step(pool.Release{})
		}
		switch v {
		case retry.NoUnit:
			return
		case retry.DeadLate:
			m.record(Record{Tag: TagExpired, ID: j.ID, Reason: Late})
		case retry.DeadSpent:
			m.record(Record{Tag: TagExpired, ID: j.ID, Reason: Spent})
		case retry.Defer:
			m.record(Record{Tag: TagDeferred, ID: j.ID, Due: norm(d.Until)})
		case retry.Start:
			m.maybeForgetBreaker(j.Target, now)
			tok := Token{j.ID, j.Attempts + 1}
			m.record(Record{Tag: TagStarted, ID: j.ID, Attempt: tok.Attempt, At: now})
			v, err := m.decode(j.kind, j.Payload)
			if err != nil {
				// Never dispatched: the attempt ends in the same batch as a permanent failure
				// of the job; the target was never called, so its breaker records nothing.
				m.pool.Step(pool.Release{})
				m.breakerFor(j.Target).Step(breaker.Release{Probe: d.Probe})
				m.cfg.Logger.Error("runner: cannot decode payload; the job fails permanently", "job", tok.ID, "attempt", tok.Attempt, "err", err)
				m.finish(j, now, Failure("decoding payload: "+err.Error(), false))
				continue
			}
			var a *attempt
			if n := len(m.spare); n > 0 {
				a, m.spare = m.spare[n-1], m.spare[:n-1]
			} else {
				a = new(attempt)
			}
			*a = attempt{token: tok, target: j.Target, kind: j.kind, payload: j.Payload, firstDue: j.firstDue(), probe: d.Probe, seq: m.seq, value: v}
			m.inflight[tok] = a
			j.kind.inflight++
			m.starting = append(m.starting, a)
		}
	}
}

// decode runs k's decode-check port (or MachineConfig.Decode) on payload (nil value, no
// error without one).
func (m *Machine) decode(k *kind, payload []byte) (any, error) {
	switch {
	case k.cfg.Decode != nil:
		return k.cfg.Decode(payload)
	case m.cfg.Decode != nil:
		return m.cfg.Decode(payload)
	}
	return nil, nil
}

// requeueOrphans records every Running job as a failed, retryable `interrupted` attempt at now
// (docs/journal.md). Called once after replay, before anything else.
func (m *Machine) requeueOrphans(now time.Time) int {
	if m.counts[Running] == 0 {
		return 0 // the common case after a graceful stop: no scan of every job
	}
	var orphans []*job
	for _, j := range m.order {
		if j.State == Running {
			orphans = append(orphans, j)
		}
	}
	for _, j := range orphans {
		m.finish(j, norm(now), Failure(Interrupted, true))
	}
	return len(orphans)
}

// record applies r and appends it.
func (m *Machine) record(r Record) { m.applyAndAppend(r, m.encode(r)) }

// arenaChunk is the size of the buffers records are encoded into.
const arenaChunk = 16 << 10

// encode is EncodeRecord into the machine's arena: records share chunks of arenaChunk bytes
// (one allocation for dozens of records), and a chunk is never written again once a record
// in it was handed out, so every Append's Data stays valid after Ready.
func (m *Machine) encode(r Record) []byte {
	need := r.sizeMax()
	if need > arenaChunk/4 {
		// A large record gets its own buffer: in a chunk, it would keep the chunk alive (or a
		// refused one would leave its bytes in the arena).
		return appendRecord(make([]byte, 0, need), r)
	}
	if cap(m.arena)-len(m.arena) < need {
		m.arena = make([]byte, 0, arenaChunk)
	}
	start := len(m.arena)
	m.arena = appendRecord(m.arena, r)
	return m.arena[start:len(m.arena):len(m.arena)]
}

func (m *Machine) applyAndAppend(r Record, data []byte) {
	j, was, err := m.apply(&r)
	if err != nil {
		panic(fmt.Sprintf("runner: live transition refused: %v", err))
	}
	m.seq++
	if m.appends == nil {
		// A batch tends to be as long as the last one: one allocation, not a doubling series.
		m.appends = make([]Append, 0, max(8, m.appendsLast))
	}
	m.appends = append(m.appends, Append{Seq: m.seq, Tag: r.Tag, Data: data})
	if j == nil { // a schedule's record
		return
	}
	if j.State.Terminal() && !was.Terminal() {
		m.settling = append(m.settling, pendingSettled{m.seq, Settled{ID: j.ID, State: j.State,
			Reason: j.Reason, Attempts: j.Attempts, LastErr: j.LastErr}})
	}
	switch r.Tag {
	case TagFinished, TagReleased, TagDeferred:
		m.noting = append(m.noting, pendingTransition{m.seq, transitionOf(&r, j)})
	}
}

// transitionOf is the Transition of r, applied to j.
func transitionOf(r *Record, j *job) Transition {
	t := Transition{Tag: r.Tag, ID: r.ID, Target: j.Target, Attempt: r.Attempt, Kind: r.Kind,
		Retryable: r.Retryable, Err: r.Err, Next: r.Next, Reason: r.Reason, Due: r.Due, End: r.At}
	for _, h := range j.History {
		if h.Attempt == r.Attempt && r.Tag != TagDeferred {
			t.Start = h.Start
		}
	}
	return t
}

// apply is the one place durable state changes, live and in replay; it keeps the counts. It
// returns the job and its state before (zero for a new job; no job for a schedule's record).
func (m *Machine) apply(r *Record) (*job, JobState, error) {
	if scheduleTag(r.Tag) {
		return nil, 0, m.applySchedule(*r)
	}
	// Only an Enqueued record adds a job; every other one changes its job in place.
	var j *job
	if r.Tag != TagEnqueued {
		j = m.job(r.ID)
	}
	var s0 JobState
	var d0 bool
	if j != nil {
		s0, d0 = j.State, j.Deferred
	}
	if err := m.applyRecord(r, j); err != nil {
		return nil, 0, err
	}
	if j != nil {
		m.count(j.kind, s0, d0, -1)
	} else {
		j = m.order[len(m.order)-1] // the job the Enqueued record added
	}
	m.count(j.kind, j.State, j.Deferred, +1)
	return j, s0, nil
}

// count adds n (±1) for a job of kind k in state s, deferred or not, to the counts; in replay
// also to its kind's waiting jobs, so that replay's end sizes each kind's queue without a pass
// over every job.
func (m *Machine) count(k *kind, s JobState, deferred bool, n int) {
	m.counts[s] += n
	if deferred {
		m.deferred += n
	}
	if s == Waiting && m.replaying {
		k.replayWaiting += n
	}
}

// applyRecord validates r against the state, then applies it; it changes nothing on error.
// j is job r.ID (nil: none), which the caller has looked up.
func (m *Machine) applyRecord(r *Record, j *job) error {
	if r.Tag == TagEnqueued {
		if r.ID != m.nextID {
			return fmt.Errorf("enqueue of id %d, next id is %d", r.ID, m.nextID)
		}
		if id, held := m.keyHolder(&r.Opts); held {
			return fmt.Errorf("enqueue of id %d with unique key %q held by job %d", r.ID, r.Opts.Unique, id)
		}
		// Filled field by field: a Job literal would be built then copied whole.
		j = m.newJob(r.Opts.Kind)
		j.ID, j.Target, j.Payload, j.State = r.ID, r.Target, m.keepPayload(r.Payload), Waiting
		j.firstDueKey, j.dueKey, j.Opts = r.Due.UnixNano(), r.Due.UnixNano(), m.shareOpts(&r.Opts)
		if m.replaying && len(m.order) == cap(m.order) {
			// Doubled: append grows a large slice by a quarter, so replay would copy the
			// table (with write barriers, as the GC marks) about five times over.
			m.order = slices.Grow(m.order, max(len(m.order), 1024))
		}
		m.order = append(m.order, j)
		m.nextID++
		m.qpush(j)
		m.holdKey(j)
		m.maybeWarn(j.kind)
		return nil
	}
	if j == nil {
		return fmt.Errorf("tag %d for unknown job %d", r.Tag, r.ID)
	}
	want := Waiting
	switch r.Tag {
	case TagFinished, TagReleased:
		want = Running
	case TagRetried:
		want = Dead
	case TagCancelled:
		if j.State == Running {
			want = Running
		}
	}
	if j.State != want {
		return fmt.Errorf("tag %d for job %d in state %v", r.Tag, r.ID, j.State)
	}
	if r.Tag == TagRetried {
		if id, held := m.keyHolder(j.Opts); held {
			return fmt.Errorf("retry of job %d with unique key %q held by job %d", r.ID, j.Opts.Unique, id)
		}
	}
	switch r.Tag {
	case TagStarted:
		if r.Attempt != j.Attempts+1 {
			return fmt.Errorf("job %d: started attempt %d after %d", r.ID, r.Attempt, j.Attempts)
		}
		m.qremove(j)
		j.State, j.Attempts, j.Deferred = Running, r.Attempt, false
		grown := len(j.History) == cap(j.History) // append makes a new array
		if j.History == nil && m.replaying {
			j.History = m.historySlab()
		}
		h := append(j.History, AttemptRecord{Attempt: r.Attempt, Start: r.At})
		j.History = h[max(0, len(h)-HistoryMax):]
		j.shared = j.shared && !grown
	case TagFinished:
		if r.Attempt != j.Attempts {
			return fmt.Errorf("job %d: finished attempt %d while attempt %d runs", r.ID, r.Attempt, j.Attempts)
		}
		if r.Kind != OutcomeSucceeded {
			j.LastErr = r.Err
		}
		j.endAttempt(r.Attempt, r.At, attemptOutcome(r.Kind), r.Err)
		switch r.Next {
		case Waiting:
			j.State, j.dueKey = Waiting, r.Due.UnixNano()
			m.qpush(j)
		default:
			m.becomeTerminal(j, r.Next, r.Reason, r.At)
		}
	case TagReleased:
		if r.Attempt != j.Attempts {
			return fmt.Errorf("job %d: released attempt %d while attempt %d runs", r.ID, r.Attempt, j.Attempts)
		}
		// The attempt is given back: not counted, the job waits again at the due it started at.
		j.endAttempt(r.Attempt, r.At, AttemptReleased, "")
		j.State, j.Attempts = Waiting, j.Attempts-1
		m.qpush(j)
	case TagExpired:
		m.qremove(j)
		j.Deferred = false
		m.becomeTerminal(j, Dead, r.Reason, time.Time{})
	case TagDeferred:
		j.dueKey, j.Deferred = r.Due.UnixNano(), true
		m.qfix(j)
	case TagCancelled:
		if j.State == Waiting {
			m.qremove(j)
		}
		j.Deferred = false
		m.becomeTerminal(j, Cancelled, NoReason, time.Time{})
	case TagRetried:
		j.State, j.Reason, j.TermSeq = Waiting, NoReason, 0
		j.Attempts, j.firstDueKey, j.dueKey = 0, r.Due.UnixNano(), r.Due.UnixNano()
		m.qpush(j)
		m.holdKey(j)
	default:
		return fmt.Errorf("unknown tag %d", r.Tag)
	}
	return nil
}

// qpush, qremove and qfix keep the queues; in replay they leave them to endReplay, which
// queues the jobs left waiting once: a queue's order is (due, id), a total order, so building
// it at the end gives the order one push per transition would, without growing the heaps by
// doubling or pushing and removing every job that replay also sees start.
func (m *Machine) qpush(j *job) {
	if !m.replaying {
		j.kind.q.push(j)
	}
}

func (m *Machine) qremove(j *job) {
	if !m.replaying {
		j.kind.q.remove(j)
	}
}

func (m *Machine) qfix(j *job) {
	if !m.replaying {
		j.kind.q.fix(j)
	}
}

// endReplay ends a replay: it queues the waiting jobs in id order (a backlog's ids ascend
// with its dues, so each push appends to its heap's run, sized once per kind), and drops what
// only replay needed.
func (m *Machine) endReplay() {
	m.replaying, m.names, m.jobSlab, m.payloadSlab, m.histSlab = false, nil, nil, nil, nil
	if cap(m.order) > len(m.order)+len(m.order)/4 {
		m.order = slices.Clone(m.order) // the slack of doubling: no more than append leaves
	}
	for _, k := range m.kindList {
		k.q.timers.reserve(k.replayWaiting)
		k.replayWaiting = 0
	}
	for _, j := range m.order {
		if j.State == Waiting {
			j.kind.q.push(j)
		}
	}
}

// keyHolder is the non-terminal job holding o's unique key. No key, no lookup (the index
// never holds ""): most jobs have none, and apply asks for every record.
func (m *Machine) keyHolder(o *Opts) (uint64, bool) {
	if o.Unique == "" {
		return 0, false
	}
	id, held := m.unique[uniqueKey(o)]
	return id, held
}

// endAttempt records the end of attempt n in the history (if it is still there).
func (j *job) endAttempt(n int, at time.Time, o AttemptOutcome, err string) {
	if k := len(j.History) - 1; k >= 0 && j.History[k].Attempt == n && j.History[k].Outcome == AttemptRunning {
		// Copy on write once Get, List or Snapshot handed the slice out.
		if j.shared {
			j.History, j.shared = slices.Clone(j.History), false
		}
		h := j.History
		h[k].End, h[k].Outcome, h[k].Err = at, o, err
	}
}

func attemptOutcome(k OutcomeKind) AttemptOutcome {
	switch k {
	case OutcomeSucceeded:
		return AttemptSucceeded
	case OutcomePanicked:
		return AttemptPanicked
	}
	return AttemptFailed
}

// newJob returns a zero job of kind k, in no heap; the caller fills its fields.
func (m *Machine) newJob(k string) *job {
	var nj *job
	if m.replaying {
		if len(m.jobSlab) == 0 {
			m.jobSlab = make([]job, jobSlabLen)
		}
		nj, m.jobSlab = &m.jobSlab[0], m.jobSlab[1:]
	} else {
		nj = new(job)
	}
	nj.kind = m.kindOf(k)
	for i := range nj.idx {
		nj.idx[i] = -1
	}
	return nj
}

// Open cuts the jobs it replays and their first histories from slabs (one allocation per
// jobSlabLen of them), and payloads of up to payloadSlabMax bytes share chunks of payloadSlabLen. A slab lives while any of its jobs
// does, so what replay allocates stays bounded by the state the journal held.
const (
	// 409 jobs of 160 bytes fill 64 KiB but 96 bytes: a slab is a large object, rounded up to
	// 8 KiB pages (TestJobSlabFillsItsPages holds the two together).
	jobSlabLen     = 409
	histSlabLen    = 256
	payloadSlabLen = 64 << 10
	payloadSlabMax = 1 << 10
)

// historySlab is an empty history of capacity 1 cut from the replay's slab: a job's first
// attempt fills it, a second one reallocates.
func (m *Machine) historySlab() []AttemptRecord {
	if len(m.histSlab) == 0 {
		m.histSlab = make([]AttemptRecord, histSlabLen)
	}
	h := m.histSlab[:0:1]
	m.histSlab = m.histSlab[1:]
	return h
}

// shareOpts returns a copy of o for jobs to share and never write: the last one made when it
// is equal (a journal's jobs mostly repeat their options), else a new one.
func (m *Machine) shareOpts(o *Opts) *Opts {
	if m.opts == nil || *m.opts != *o {
		c := *o
		m.opts = &c
	}
	return m.opts
}

// keepPayload copies an Enqueued record's payload for its job (nil stays nil).
func (m *Machine) keepPayload(p []byte) []byte {
	if !m.replaying || len(p) > payloadSlabMax {
		return append([]byte(nil), p...)
	}
	if len(p) == 0 {
		return nil
	}
	if cap(m.payloadSlab)-len(m.payloadSlab) < len(p) {
		m.payloadSlab = make([]byte, 0, payloadSlabLen)
	}
	n := len(m.payloadSlab)
	m.payloadSlab = append(m.payloadSlab, p...)
	return m.payloadSlab[n:len(m.payloadSlab):len(m.payloadSlab)] // an append reallocates
}

// holdKey indexes a job that became non-terminal under its unique key; it ends any window
// the key had (the live machine only gets here once the window is over).
func (m *Machine) holdKey(j *job) {
	if k := uniqueKey(j.Opts); k != "" {
		m.unique[k] = j.ID
		delete(m.windows, k)
	}
}

// becomeTerminal ends j; a success with Opts.UniqueFor keeps its key reserved for the window
// from at, the time its Finished record carries.
func (m *Machine) becomeTerminal(j *job, s JobState, why Reason, at time.Time) {
	if k := uniqueKey(j.Opts); k != "" && m.unique[k] == j.ID {
		delete(m.unique, k)
		if s == Succeeded && j.Opts.UniqueFor > 0 {
			m.windows[k] = window{id: j.ID, until: addClamped(at, j.Opts.UniqueFor)}
		}
	}
	m.termSeq++
	j.State, j.Reason, j.TermSeq = s, why, m.termSeq
}

// Replay applies one journal record (tag, data) during open.
func (m *Machine) Replay(tag uint8, snapshot bool, data []byte) error {
	first := m.snapshots == 0
	m.snapshots++
	if snapshot || tag == TagSnapshot {
		if !snapshot || tag != TagSnapshot || !first {
			return fmt.Errorf("runner: replay: %w: snapshot tag %d (snapshot flag %v) at record %d", ErrDecode, tag, snapshot, m.snapshots)
		}
		if err := m.loadSnapshot(data); err != nil {
			return fmt.Errorf("runner: replay snapshot: %w", err)
		}
		return nil
	}
	// The payload aliases data: applying an Enqueued record copies it, nothing else keeps it.
	if m.names == nil {
		m.names = &interner{m: map[string]string{}}
	}
	var r Record
	if err := decodeRecord(reader{b: data, alias: true, names: m.names}, tag, &r); err != nil {
		return fmt.Errorf("runner: replay record %d: %w", m.snapshots, err)
	}
	if _, _, err := m.apply(&r); err != nil {
		return fmt.Errorf("runner: replay record %d: %w: %w", m.snapshots, ErrDecode, err)
	}
	return nil
}

// loadSnapshot installs a snapshot's payload, decoding its jobs in place into one slab (not
// into a []Job copied after), interning their names and cutting their payloads from the
// replay's slabs. It validates as DecodeSnapshot does before it installs anything.
func (m *Machine) loadSnapshot(data []byte) error {
	if m.names == nil {
		m.names = &interner{m: map[string]string{}}
	}
	var s Snapshot
	var jobs []job
	err := decodeSnapshot(reader{b: data, alias: true, names: m.names}, &s,
		func(n int) { jobs = make([]job, n) },
		func(i int, v *Job) { jobs[i].fromView(v, m.shareOpts(&v.Opts)) })
	if err != nil {
		return err
	}
	if err := validateJobs(s.NextID, s.TermSeq, len(jobs), func(i int) (uint64, string) {
		return jobs[i].ID, jobs[i].broken(s.TermSeq)
	}); err != nil {
		return err
	}
	if err := s.validateRest(); err != nil {
		return err
	}
	if err := m.load(s, jobs); err != nil {
		return fmt.Errorf("%w: %w", ErrDecode, err)
	}
	return nil
}

// load installs a snapshot whose jobs are jobs (filled by fromView, s.Jobs unused); the
// unique index is rebuilt from the jobs' keys.
func (m *Machine) load(s Snapshot, jobs []job) error {
	m.nextID, m.termSeq = s.NextID, s.TermSeq
	m.order = slices.Grow(m.order, len(jobs)) // sized once, not grown by doubling
	for _, w := range s.Windows {
		m.windows[uniqueKey(&Opts{Kind: w.Kind, Unique: w.Unique})] = window{id: w.ID, until: w.Until}
	}
	for i := range jobs {
		j := &jobs[i]
		j.kind = m.kindOf(j.Opts.Kind)
		for k := range j.idx {
			j.idx[k] = -1
		}
		j.Payload = m.keepPayload(j.Payload) // it aliased the record's data
		if k := uniqueKey(j.Opts); k != "" && !j.State.Terminal() {
			if id, held := m.unique[k]; held {
				return fmt.Errorf("jobs %d and %d both hold unique key %q", id, j.ID, j.Opts.Unique)
			}
			if w, held := m.windows[k]; held {
				return fmt.Errorf("job %d holds unique key %q in job %d's window", j.ID, j.Opts.Unique, w.id)
			}
			m.unique[k] = j.ID
		}
		m.order = append(m.order, j)
		m.count(j.kind, j.State, j.Deferred, +1)
		if j.State == Waiting {
			m.qpush(j)
		}
	}
	return m.loadSchedules(s.Schedules)
}

// window is a succeeded job's hold on its unique key until a time.
type window struct {
	id    uint64
	until time.Time
}

// holder is the job holding key k at the machine's now: a non-terminal job, or a succeeded
// one whose window has not ended.
func (m *Machine) holder(k string) (uint64, bool) {
	if k == "" {
		return 0, false
	}
	if id, ok := m.unique[k]; ok {
		return id, true
	}
	if w, ok := m.windows[k]; ok && m.now.Before(w.until) {
		return w.id, true
	}
	return 0, false
}

// addClamped is t+d, at most timeMax.
func addClamped(t time.Time, d time.Duration) time.Time {
	if t.After(timeMax.Add(-d)) {
		return timeMax
	}
	return t.Add(d)
}

// Snapshot returns the durable state with all but the last retain terminal jobs left out, and
// the ids left out (for Prune once the snapshot is durable). It sorts ids, not Job values:
// the simulator calls it on every commit.
func (m *Machine) Snapshot(retain int) (Snapshot, []uint64) {
	return m.snapshot(retain, time.Time{})
}

// snapshot is Snapshot leaving out the unique windows ended at or before ended (compaction
// passes now; zero keeps them all).
func (m *Machine) snapshot(retain int, ended time.Time) (Snapshot, []uint64) {
	s := Snapshot{NextID: m.nextID, TermSeq: m.termSeq}
	keys := make([]string, 0, len(m.windows))
	for k, w := range m.windows {
		if w.until.After(ended) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys) // kind, NUL, key: the order of (kind, key)
	for _, k := range keys {
		kind, key, _ := strings.Cut(k, "\x00")
		w := m.windows[k]
		s.Windows = append(s.Windows, UniqueWindow{Kind: kind, Unique: key, ID: w.id, Until: w.until})
	}
	terminal := 0
	for _, j := range m.order {
		if j.State.Terminal() {
			terminal++
		}
	}
	var dropped []uint64
	if terminal > retain {
		// Drop the terminal jobs with the lowest terminal sequence: those before cut.
		seqs := make([]uint64, 0, terminal)
		for _, j := range m.order {
			if j.State.Terminal() {
				seqs = append(seqs, j.TermSeq)
			}
		}
		slices.Sort(seqs)
		cut := uint64(math.MaxUint64) // retain ≤ 0: drop them all
		if retain > 0 {
			cut = seqs[terminal-retain] // TermSeqs are unique: keep exactly retain of them
		}
		for _, j := range m.order {
			if j.State.Terminal() && j.TermSeq < cut {
				dropped = append(dropped, j.ID)
			}
		}
	}
	s.Jobs = make([]Job, 0, len(m.order)-len(dropped))
	d := 0
	for _, j := range m.order {
		if d < len(dropped) && dropped[d] == j.ID {
			d++
			continue
		}
		s.Jobs = s.Jobs[:len(s.Jobs)+1]
		j.view(&s.Jobs[len(s.Jobs)-1])
		j.shared = true
	}
	if len(m.scheds) > 0 {
		s.Schedules = m.Schedules()
	}
	return s, dropped
}

// pruneWindows forgets the unique windows ended at or before ended (after a snapshot without
// them is durable).
func (m *Machine) pruneWindows(ended time.Time) {
	for k, w := range m.windows {
		if !w.until.After(ended) {
			delete(m.windows, k)
		}
	}
}

// Prune forgets terminal jobs (after a snapshot without them is durable).
func (m *Machine) Prune(ids []uint64) {
	pruned := 0
	for _, id := range ids {
		if j := m.job(id); j != nil && j.State.Terminal() && !j.pruned {
			m.count(j.kind, j.State, j.Deferred, -1)
			j.pruned = true
			pruned++
		}
	}
	if pruned > 0 {
		m.order = slices.DeleteFunc(m.order, func(j *job) bool { return j.pruned })
	}
}

// IdleThrough reports that no waiting job and no schedule's period is due at or before t and
// nothing holds a unit.
func (m *Machine) IdleThrough(t time.Time) bool {
	e := m.earliest()
	return (e == nil || e.due().After(t)) && m.pool.Status().Used == 0 && len(m.dueSchedules(t)) == 0
}

// Idle reports that nothing is waiting (due or not, deferred included) or holding a unit.
func (m *Machine) Idle() bool { return m.waiting() == 0 && m.pool.Status().Used == 0 }

// Get returns a copy of job id.
func (m *Machine) Get(id uint64) (Job, bool) {
	j := m.job(id)
	if j == nil {
		return Job{}, false
	}
	var c Job
	j.view(&c)
	c.Payload = append([]byte(nil), j.Payload...)
	j.shared = true
	return c, true
}

// List returns copies of the jobs with ids in [from, to] that match, ascending by id: at most
// limit of them, looking at no more than scanMax ids. next is the last id looked at (the
// cursor to resume from next+1); more reports ids left in the range. Ids are dense (1 to
// NextID-1, minus pruned jobs), so a page costs O(ids scanned), not O(jobs).
func (m *Machine) List(from, to uint64, match func(*Job) bool, limit, scanMax int) (jobs []Job, next uint64, more bool) {
	from, to = max(from, 1), min(to, m.nextID-1)
	next = from - 1
	var v Job
	for id := from; id <= to && len(jobs) < limit && scanMax > 0; id++ {
		scanMax--
		next = id
		j := m.job(id)
		if j == nil {
			continue
		}
		if j.view(&v); !match(&v) {
			continue
		}
		v.Payload = append([]byte(nil), j.Payload...)
		j.shared = true
		jobs = append(jobs, v)
	}
	return jobs, next, next < to
}

// Status is a summary for Stats and checkers. The journal fields (Durable to Compactions) are
// the Engine's; a bare Machine leaves them zero.
type Status struct {
	Waiting   int // in the queue, including deferred ones
	Deferred  int // waiting after a breaker refusal
	Running   int // jobs whose current attempt is running
	Succeeded int
	Dead      int
	Cancelled int
	InFlight  int // attempts holding a pool unit (dispatched, or awaiting their sync)
	Capacity  int
	NextID    uint64
	WakeAt    time.Time // zero when only a command or an outcome can make progress
	// Dispatching: admission is on. Stopped: admission is off and no attempt is running, or
	// the stop's second grace has passed (those still running are abandoned): the driver may
	// flush, compact and close.
	Dispatching bool
	Stopped     bool
	// Unregistered counts the waiting jobs of kinds not registered (KindsOnly): they wait.
	Unregistered int

	Durable     journal.LSN
	Grown       int64 // journal bytes since open or the last compaction
	Bytes       int64 // the journal's length: header and synced batches (not its spare)
	Poisoned    error
	Orphans     int   // running jobs requeued as interrupted at open
	Commits     int64 // journal batches synced since open
	Records     int64 // records in them
	Compactions int64 // snapshots written since open
}

// Status summarises the machine in O(inflight).
func (m *Machine) Status() Status {
	ps := m.pool.Status()
	s := Status{InFlight: ps.Used, Capacity: ps.Capacity, NextID: m.nextID,
		Waiting: m.counts[Waiting], Deferred: m.deferred, Running: m.counts[Running],
		Succeeded: m.counts[Succeeded], Dead: m.counts[Dead], Cancelled: m.counts[Cancelled],
		WakeAt: m.WakeAt(), Dispatching: m.dispatching, Unregistered: m.unregistered()}
	s.Stopped = !m.dispatching && (m.running() == 0 ||
		(m.graceAt.IsZero() && !m.abandonAt.IsZero() && !m.now.Before(m.abandonAt)))
	return s
}
