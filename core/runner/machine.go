package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"reflect"
	"slices"
	"time"

	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/flow"
	"github.com/sluicehq/sluice/core/pool"
	"github.com/sluicehq/sluice/core/retry"
)

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
	key        *flowKey // counted against its flow key (nil: its kind counts none)
	group      *group   // counted in its group's attempts in flight (nil: none)
	timeout    time.Duration
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
	// Defect plants one known flow-control bug, so that a test can show a check catching it
	// (the simulator's planted-defect tests); zero, always, outside them.
	Defect Defect
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

	// Flow control (flow.go): the flow keys of kinds that count them, the groups with a job
	// not ended, the keys parked by their rate by when to let them out, and when dispatching
	// first began (every bucket starts empty then).
	keys     map[string]*flowKey
	groups   map[string]*group
	rateWake []keyWake
	wakeSeq  uint64
	openAt   int64
	// keysSweepAt is the size of keys at which sweepKeys next runs.
	keysSweepAt int
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
		keys:     map[string]*flowKey{},
		groups:   map[string]*group{},
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
	case Pause:
		m.at(ev.Now)
		return m.pause(ev.Ticket, ev.Kind, true)
	case Resume:
		m.at(ev.Now)
		return m.pause(ev.Ticket, ev.Kind, false)
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
	for _, d := range [2]time.Time{m.earliest(), m.flowWake()} {
		if !d.IsZero() && (w.IsZero() || d.Before(w)) {
			w = d
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
		if !m.dispatched {
			m.openAt = m.now.UnixNano()
			for _, k := range m.kindList {
				if r := k.cfg.Rate; r.On() && m.cfg.Defect != DefectBurstAtOpen {
					k.bucket = flow.Fresh(r, m.openAt)
				}
			}
		}
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
	if err := checkNames(nj); err != nil {
		return Record{}, nil, fmt.Errorf("%w: %w", ErrJob, err)
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
	if j.State.Terminal() && !holds(j) {
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
			FirstDue: a.firstDue, Probe: a.probe != 0, Value: a.value, Kind: a.kind.name, Timeout: a.timeout})
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
	if ev.Outcome.Kind == OutcomeSnoozed {
		m.snooze(j, current, now, target, probe, ev.Outcome)
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

// snooze journals a snoozed attempt: given back like a release, the breaker not judging the
// target, and the job due again after o.After. A due past the journal's range is a
// permanent failure instead.
func (m *Machine) snooze(j *job, current bool, now time.Time, target string, probe breaker.Probe, o Outcome) {
	m.breakerFor(target).Step(breaker.Release{Probe: probe})
	if !current {
		return // a stale outcome: the job has moved on
	}
	var d time.Duration
	if o.After != nil {
		d = max(*o.After, 0)
	}
	due := now.Add(d)
	if !inRange(due) {
		m.finish(j, now, Failure(fmt.Sprintf("runner: snoozed %v, past the journal's time range", d), false))
		return
	}
	m.record(Record{Tag: TagSnoozed, ID: j.ID, Attempt: j.Attempts, At: now, Due: norm(due)})
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
	m.ended(a.key)
	if g := a.group; g != nil {
		g.inflight--
		m.maybeLetHead(g)
		m.maybeDropGroup(g)
	}
	a.key, a.group = nil, nil
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
	m.refilled(now)
	for _, k := range m.kindList {
		if m.runnable(k) {
			k.q.promote(now)
		}
	}
	// Each pass parks, starts, defers or ends a job, or ends a fair round (which lets out at
	// least one parked job): the bound is the jobs, twice, and the kinds.
	for range 2*len(m.order) + len(m.kindList) + 1 {
		j := m.pick(now)
		if j == nil {
			n := 0
			for _, k := range m.kindList {
				if len(k.fairKeys) > 0 && k.q.prio.len() == 0 && m.runnable(k) {
					m.maybeEndRound(k, now)
					n++
				}
			}
			if n == 0 {
				return
			}
			continue
		}
		if b, g, ks := m.gate(j, now); b.Reason != NotBlocked {
			m.park(j, g, ks)
			continue
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
			m.nudgeKey(j) // its key's turn is unused: the next parked job is considered too
		case retry.Start:
			m.maybeForgetBreaker(j.Target, now)
			tok := Token{j.ID, j.Attempts + 1}
			m.record(Record{Tag: TagStarted, ID: j.ID, Attempt: tok.Attempt, At: now})
			v, err := m.decode(j.kind, j.Payload)
			ks := m.started(j, now, err == nil)
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
			*a = attempt{token: tok, target: j.Target, kind: j.kind, payload: j.Payload, firstDue: j.firstDue(), probe: d.Probe, seq: m.seq, value: v, key: ks,
				timeout: m.timeout(j)}
			if j.Opts.Group != "" {
				if a.group = m.groups[groupKey(j.Opts)]; a.group != nil {
					a.group.inflight++
				}
			}
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

// timeout is the bound of j's attempts: its own, else its kind's (0: none).
func (m *Machine) timeout(j *job) time.Duration {
	d := j.kind.cfg.Timeout
	if j.Opts.Timeout > 0 {
		d = j.Opts.Timeout
	}
	if m.cfg.Defect == DefectTimeoutTriple {
		d *= 3
	}
	return d
}
