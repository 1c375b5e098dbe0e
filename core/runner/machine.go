package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand"
	"slices"
	"time"

	"github.com/sluicehq/sluice/core/breaker"
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
)

// Ticket names one submitted command (Enqueue, Cancel, Retry) in the Ack that answers it.
type Ticket uint64

// Event is the sealed set of inputs to Machine.Step.
type Event interface{ isEvent() }

// Enqueue adds a job; Due is normalised (a zero or past due stays as given; the queue starts
// anything due at or before the tick's now).
type Enqueue struct {
	Ticket  Ticket
	Due     time.Time
	Target  string
	Payload []byte
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

// Tick runs scheduling at Now: due jobs start while pool units are free.
type Tick struct{ Now time.Time }

func (Enqueue) isEvent()     {}
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
}

// Attempt is an attempt to dispatch.
type Attempt struct {
	Token    Token
	Target   string
	Payload  []byte
	FirstDue time.Time // the job's first due (start of its retry deadline)
	Probe    bool      // admitted as a half-open probe
}

// Settled reports a job whose terminal state (succeeded, dead, cancelled) is durable.
type Settled struct {
	ID       uint64
	State    JobState
	Reason   Reason
	Attempts int
	LastErr  string
}

// Ready is the effects to perform, drained by Machine.Ready.
//
// Ordering contract: Appends must be written and made durable, in order, before Synced{Through:
// the last Seq} is stepped. Acks and Starts only ever name records already covered by a Synced
// event: perform them as soon as they appear.
type Ready struct {
	Appends []Append
	Acks    []Ack
	Starts  []Attempt
	Settled []Settled
}

// job is the machine's job; fields mirror Job.
type job struct {
	Job
	idx int // position in the queue; -1 unless Waiting
}

// attempt is an attempt holding a pool unit.
type attempt struct {
	token      Token
	target     string
	payload    []byte
	firstDue   time.Time
	probe      breaker.Probe
	seq        uint64 // its Started record
	dispatched bool
	dropped    bool // cancelled before dispatch; skipped at Synced
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

// MachineConfig configures a Machine. Every field is required (Engine's Config fills defaults).
type MachineConfig struct {
	Policy    retry.Policy
	Circuit   breaker.Circuit
	Capacity  int
	RecordMax int // an Enqueue whose record is larger is refused with ErrTooLarge
	Logger    *slog.Logger
	Rand      *rand.Rand // jitter draws
}

// Machine is the runner's pure state machine (SPEC 2.1-2.4).
type Machine struct {
	cfg MachineConfig

	jobs map[uint64]*job
	// Invariant: every job id < nextID; nextID ≥ 1.
	nextID  uint64
	termSeq uint64
	// Invariant: holds exactly the Waiting jobs, as a heap on (due, id).
	queue queue
	pool  *pool.Pool
	// breakers holds only targets whose breaker is not idle (breaker.Idle): memory is bounded
	// by the targets that failed within the Window or are open or half-open.
	breakers map[string]*breaker.Breaker
	// phaseFloor is the highest half-open phase of any forgotten breaker; new ones number after it.
	phaseFloor uint64
	// Invariant: len(inflight) == pool.Used(); a Running job's current token is in it.
	inflight map[Token]*attempt

	seq    uint64 // last record Seq handed out
	synced uint64 // Invariant: synced ≤ seq
	// Effects waiting for Synced, in Seq order.
	starting []*attempt
	acking   []pending
	settling []pendingSettled
	// Effects ready to drain.
	appends []Append
	acks    []Ack
	starts  []Attempt
	settled []Settled

	// counts[s] is the number of jobs in state s; deferred the waiting ones deferred.
	// Invariant: they match the jobs (checkInvariants recounts).
	counts   [Cancelled + 1]int
	deferred int

	replaying bool // records come from the journal: nothing is appended
	snapshots int  // records applied so far (a snapshot must come first)
}

// NewMachine returns an empty machine. cfg must be valid (misuse panics).
func NewMachine(cfg MachineConfig) *Machine {
	if err := cfg.Policy.Validate(); err != nil {
		panic(err)
	}
	if cfg.Logger == nil || cfg.Rand == nil || cfg.RecordMax < 1 {
		panic("runner: MachineConfig needs Logger, Rand and RecordMax")
	}
	return &Machine{
		cfg:      cfg,
		jobs:     map[uint64]*job{},
		nextID:   1,
		pool:     pool.New(cfg.Capacity),
		breakers: map[string]*breaker.Breaker{},
		inflight: map[Token]*attempt{},
	}
}

// Step applies one event. It returns an error only for a command that cannot apply (ErrNotFound,
// ErrTerminal, ErrNotDead, ErrTooLarge, ErrTime); nothing changes then.
func (m *Machine) Step(ev Event) error {
	switch ev := ev.(type) {
	case Enqueue:
		return m.enqueue(ev)
	case Cancel:
		return m.cancel(ev)
	case Retry:
		return m.retry(ev)
	case Synced:
		m.becomeSynced(ev.Through)
	case AttemptDone:
		m.attemptDone(ev)
	case Tick:
		m.schedule(norm(ev.Now))
	default:
		panic(fmt.Sprintf("runner: unknown event %T", ev))
	}
	return nil
}

// Ready drains the effects produced so far.
func (m *Machine) Ready() Ready {
	rd := Ready{Appends: m.appends, Acks: m.acks, Starts: m.starts, Settled: m.settled}
	m.appends, m.acks, m.starts, m.settled = nil, nil, nil, nil
	return rd
}

// WakeAt is when the next waiting job falls due, if a unit is free to start it; false means
// nothing is to do until a command or an outcome arrives.
func (m *Machine) WakeAt() (time.Time, bool) {
	if len(m.queue) == 0 || m.pool.Free() == 0 {
		return time.Time{}, false
	}
	return m.queue[0].Due, true
}

func (m *Machine) enqueue(ev Enqueue) error {
	if !inRange(ev.Due) {
		return fmt.Errorf("%w: enqueue due %v", ErrTime, ev.Due)
	}
	r := Record{Tag: TagEnqueued, ID: m.nextID, Due: norm(ev.Due), Target: ev.Target, Payload: ev.Payload}
	data := EncodeRecord(r)
	if len(data) > m.cfg.RecordMax {
		return fmt.Errorf("%w: enqueue record of %d bytes exceeds RecordMax %d", ErrTooLarge, len(data), m.cfg.RecordMax)
	}
	m.commit(r, data)
	m.acking = append(m.acking, pending{m.seq, Ack{ev.Ticket, r.ID}})
	return nil
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
	m.acking = append(m.acking, pending{m.seq, Ack{ev.Ticket, j.ID}})
	// An attempt not yet dispatched never starts; a dispatched one finishes, ignored.
	if a := m.inflight[tok]; wasRunning && a != nil && !a.dispatched {
		a.dropped = true
		m.releaseAttempt(a)
		m.breakerFor(a.target).Release(a.probe) // a released probe leaves it half-open, not idle
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
	m.record(Record{Tag: TagRetried, ID: j.ID, Due: norm(ev.Now)})
	m.acking = append(m.acking, pending{m.seq, Ack{ev.Ticket, j.ID}})
	return nil
}

func (m *Machine) lookup(id uint64) (*job, error) {
	j, ok := m.jobs[id]
	if !ok {
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
	i := 0
	for ; i < len(m.acking) && m.acking[i].seq <= through; i++ {
		m.acks = append(m.acks, m.acking[i].ack)
	}
	m.acking = m.acking[i:]
	i = 0
	for ; i < len(m.starting) && m.starting[i].seq <= through; i++ {
		a := m.starting[i]
		if a.dropped {
			continue
		}
		a.dispatched = true
		m.starts = append(m.starts, Attempt{Token: a.token, Target: a.target, Payload: a.payload,
			FirstDue: a.firstDue, Probe: a.probe != 0})
	}
	m.starting = m.starting[i:]
	i = 0
	for ; i < len(m.settling) && m.settling[i].seq <= through; i++ {
		m.settled = append(m.settled, m.settling[i].s)
	}
	m.settling = m.settling[i:]
}

func (m *Machine) attemptDone(ev AttemptDone) {
	now := norm(ev.Now)
	a, ok := m.inflight[ev.Token]
	if !ok {
		m.cfg.Logger.Info("runner: outcome of an unknown attempt ignored", "token", ev.Token.String(), "outcome", ev.Outcome.Kind.String())
		return
	}
	if !a.dispatched {
		panic(fmt.Sprintf("runner: AttemptDone for %v before it was dispatched", ev.Token))
	}
	m.releaseAttempt(a)
	m.breakerFor(a.target).Record(now, breakerResult(ev.Outcome), a.probe)
	m.maybeForgetBreaker(a.target, now)
	j := m.jobs[ev.Token.ID]
	if j == nil || j.State != Running || j.Attempts != ev.Token.Attempt {
		m.cfg.Logger.Info("runner: stale outcome ignored", "token", ev.Token.String(), "outcome", ev.Outcome.Kind.String())
		return
	}
	m.finish(j, now, ev.Outcome)
}

// finish journals the end of j's current attempt at now.
func (m *Machine) finish(j *job, now time.Time, o Outcome) {
	r := Record{Tag: TagFinished, ID: j.ID, Attempt: j.Attempts, Kind: o.Kind, Err: o.Err}
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
		due, v := m.cfg.Policy.Next(j.FirstDue, now, j.Attempts, m.cfg.Rand.Uint32(), o.After)
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

func (m *Machine) releaseAttempt(a *attempt) {
	delete(m.inflight, a.token)
	m.pool.Release()
}

func (m *Machine) breakerFor(target string) *breaker.Breaker {
	b := m.breakers[target]
	if b == nil {
		b = breaker.NewAfter(m.cfg.Circuit, m.phaseFloor)
		m.breakers[target] = b
	}
	return b
}

// maybeForgetBreaker drops target's breaker when it would decide as a new one, so breakers
// are kept only for targets that failed recently (not for every target ever seen). The phase
// floor keeps probes of a forgotten breaker from ever being current in its successor.
func (m *Machine) maybeForgetBreaker(target string, now time.Time) {
	if b := m.breakers[target]; b != nil && b.Idle(now) {
		m.phaseFloor = max(m.phaseFloor, b.Phase())
		delete(m.breakers, target)
	}
}

// schedule starts due jobs in (due, id) order while a unit is free (SPEC 2.2 admission).
func (m *Machine) schedule(now time.Time) {
	for len(m.queue) > 0 && !m.queue[0].Due.After(now) {
		j := m.queue[0]
		var d breaker.Decision
		v := retry.Admit(retry.Candidate{
			UnitFree: m.pool.Free() > 0,
			Late:     m.cfg.Policy.Late(j.FirstDue, now),
			Spent:    m.cfg.Policy.Spent(j.Attempts),
		}, func() bool {
			d = m.breakerFor(j.Target).Admit(now)
			return d.Verdict != breaker.Refused
		})
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
			m.pool.Acquire()
			tok := Token{j.ID, j.Attempts + 1}
			m.record(Record{Tag: TagStarted, ID: j.ID, Attempt: tok.Attempt})
			a := &attempt{token: tok, target: j.Target, payload: j.Payload, firstDue: j.FirstDue, probe: d.Probe, seq: m.seq}
			m.inflight[tok] = a
			m.starting = append(m.starting, a)
		}
	}
}

// requeueOrphans records every Running job as a failed, retryable `interrupted` attempt at now
// (SPEC 2.6). Called once after replay, before anything else.
func (m *Machine) requeueOrphans(now time.Time) int {
	var ids []uint64
	for id, j := range m.jobs {
		if j.State == Running {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		m.finish(m.jobs[id], norm(now), Failure(Interrupted, true))
	}
	return len(ids)
}

// record applies r and appends it.
func (m *Machine) record(r Record) { m.commit(r, EncodeRecord(r)) }

func (m *Machine) commit(r Record, data []byte) {
	var was JobState
	if j := m.jobs[r.ID]; j != nil {
		was = j.State
	}
	if err := m.apply(r); err != nil {
		panic(fmt.Sprintf("runner: live transition refused: %v", err))
	}
	m.seq++
	m.appends = append(m.appends, Append{Seq: m.seq, Tag: r.Tag, Data: data})
	if j := m.jobs[r.ID]; j.State.Terminal() && !was.Terminal() {
		m.settling = append(m.settling, pendingSettled{m.seq, Settled{ID: j.ID, State: j.State,
			Reason: j.Reason, Attempts: j.Attempts, LastErr: j.LastErr}})
	}
}

// apply is the one place durable state changes, live and in replay; it keeps the counts.
func (m *Machine) apply(r Record) error {
	j0 := m.jobs[r.ID]
	var s0 JobState
	var d0 bool
	if j0 != nil {
		s0, d0 = j0.State, j0.Deferred
	}
	if err := m.applyRecord(r); err != nil {
		return err
	}
	if j0 != nil {
		m.count(s0, d0, -1)
	}
	j := m.jobs[r.ID]
	m.count(j.State, j.Deferred, +1)
	return nil
}

// count adds n (±1) for a job in state s, deferred or not, to the counts.
func (m *Machine) count(s JobState, deferred bool, n int) {
	m.counts[s] += n
	if deferred {
		m.deferred += n
	}
}

// applyRecord validates r against the state, then applies it; it changes nothing on error.
func (m *Machine) applyRecord(r Record) error {
	if r.Tag == TagEnqueued {
		if r.ID != m.nextID {
			return fmt.Errorf("enqueue of id %d, next id is %d", r.ID, m.nextID)
		}
		j := &job{Job: Job{ID: r.ID, Target: r.Target, Payload: append([]byte(nil), r.Payload...),
			State: Waiting, FirstDue: r.Due, Due: r.Due}}
		m.jobs[r.ID] = j
		m.nextID++
		m.queue.push(j)
		return nil
	}
	j, ok := m.jobs[r.ID]
	if !ok {
		return fmt.Errorf("tag %d for unknown job %d", r.Tag, r.ID)
	}
	want := Waiting
	switch r.Tag {
	case TagFinished:
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
	switch r.Tag {
	case TagStarted:
		if r.Attempt != j.Attempts+1 {
			return fmt.Errorf("job %d: started attempt %d after %d", r.ID, r.Attempt, j.Attempts)
		}
		m.queue.remove(j)
		j.State, j.Attempts, j.Deferred = Running, r.Attempt, false
	case TagFinished:
		if r.Attempt != j.Attempts {
			return fmt.Errorf("job %d: finished attempt %d while attempt %d runs", r.ID, r.Attempt, j.Attempts)
		}
		if r.Kind != OutcomeSucceeded {
			j.LastErr = r.Err
		}
		switch r.Next {
		case Waiting:
			j.State, j.Due = Waiting, r.Due
			m.queue.push(j)
		default:
			m.becomeTerminal(j, r.Next, r.Reason)
		}
	case TagExpired:
		m.queue.remove(j)
		j.Deferred = false
		m.becomeTerminal(j, Dead, r.Reason)
	case TagDeferred:
		j.Due, j.Deferred = r.Due, true
		m.queue.fix(j)
	case TagCancelled:
		if j.State == Waiting {
			m.queue.remove(j)
		}
		j.Deferred = false
		m.becomeTerminal(j, Cancelled, NoReason)
	case TagRetried:
		j.State, j.Reason, j.TermSeq = Waiting, NoReason, 0
		j.Attempts, j.FirstDue, j.Due = 0, r.Due, r.Due
		m.queue.push(j)
	default:
		return fmt.Errorf("unknown tag %d", r.Tag)
	}
	return nil
}

func (m *Machine) becomeTerminal(j *job, s JobState, why Reason) {
	m.termSeq++
	j.State, j.Reason, j.TermSeq = s, why, m.termSeq
}

// Replay applies one journal record (tag, data) during open.
func (m *Machine) Replay(tag uint8, snapshot bool, data []byte) error {
	first := m.snapshots == 0
	m.snapshots++
	if snapshot || tag == TagSnapshot {
		if !snapshot || tag != TagSnapshot || !first {
			return fmt.Errorf("runner: replay: snapshot tag %d (snapshot flag %v) at record %d", tag, snapshot, m.snapshots)
		}
		s, err := DecodeSnapshot(data)
		if err != nil {
			return fmt.Errorf("runner: replay snapshot: %w", err)
		}
		m.load(s)
		return nil
	}
	r, err := DecodeRecord(tag, data)
	if err != nil {
		return fmt.Errorf("runner: replay record %d: %w", m.snapshots, err)
	}
	if err := m.apply(r); err != nil {
		return fmt.Errorf("runner: replay record %d: %w: %w", m.snapshots, ErrDecode, err)
	}
	return nil
}

func (m *Machine) load(s Snapshot) {
	m.nextID, m.termSeq = s.NextID, s.TermSeq
	for i := range s.Jobs {
		j := &job{Job: s.Jobs[i], idx: -1}
		m.jobs[j.ID] = j
		m.count(j.State, j.Deferred, +1)
		if j.State == Waiting {
			m.queue.push(j)
		}
	}
}

// Snapshot returns the durable state with all but the last retain terminal jobs left out, and
// the ids left out (for Prune once the snapshot is durable). It sorts ids, not Job values:
// the simulator calls it on every commit.
func (m *Machine) Snapshot(retain int) (Snapshot, []uint64) {
	s := Snapshot{NextID: m.nextID, TermSeq: m.termSeq}
	ids := make([]uint64, 0, len(m.jobs))
	terminal := 0
	for id, j := range m.jobs {
		ids = append(ids, id)
		if j.State.Terminal() {
			terminal++
		}
	}
	slices.Sort(ids)
	var dropped []uint64
	if terminal > retain {
		// Drop the terminal jobs with the lowest terminal sequence: those before cut.
		seqs := make([]uint64, 0, terminal)
		for _, id := range ids {
			if j := m.jobs[id]; j.State.Terminal() {
				seqs = append(seqs, j.TermSeq)
			}
		}
		slices.Sort(seqs)
		cut := uint64(math.MaxUint64) // retain ≤ 0: drop them all
		if retain > 0 {
			cut = seqs[terminal-retain] // TermSeqs are unique: keep exactly retain of them
		}
		for _, id := range ids {
			if j := m.jobs[id]; j.State.Terminal() && j.TermSeq < cut {
				dropped = append(dropped, id)
			}
		}
	}
	s.Jobs = make([]Job, 0, len(ids)-len(dropped))
	d := 0
	for _, id := range ids {
		if d < len(dropped) && dropped[d] == id {
			d++
			continue
		}
		s.Jobs = append(s.Jobs, m.jobs[id].Job)
	}
	return s, dropped
}

// Prune forgets terminal jobs (after a snapshot without them is durable).
func (m *Machine) Prune(ids []uint64) {
	for _, id := range ids {
		if j := m.jobs[id]; j != nil && j.State.Terminal() {
			m.count(j.State, j.Deferred, -1)
			delete(m.jobs, id)
		}
	}
}

// Idle reports that nothing is waiting (due or not, deferred included) or holding a unit.
func (m *Machine) Idle() bool { return len(m.queue) == 0 && m.pool.Used() == 0 }

// Counts returns the number of jobs in state s (O(1)).
func (m *Machine) Counts(s JobState) int { return m.counts[s] }

// Seq is the last record number handed out; Synced is the last one known durable.
func (m *Machine) Seq() uint64    { return m.seq }
func (m *Machine) Synced() uint64 { return m.synced }

// Get returns a copy of job id.
func (m *Machine) Get(id uint64) (Job, bool) {
	j, ok := m.jobs[id]
	if !ok {
		return Job{}, false
	}
	c := j.Job
	c.Payload = append([]byte(nil), j.Payload...)
	return c, true
}

// Breaker returns the state of target's breaker (Closed when it has none).
func (m *Machine) Breaker(target string) breaker.State {
	if b := m.breakers[target]; b != nil {
		return b.State()
	}
	return breaker.Closed
}
