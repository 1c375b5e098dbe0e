package runner

import (
	"fmt"
	"slices"
	"time"
)

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
	if j.State.Terminal() && j.State != was { // a dead job holding its group may be cancelled
		m.settling = append(m.settling, pendingSettled{m.seq, Settled{ID: j.ID, State: j.State,
			Reason: j.Reason, Attempts: j.Attempts, LastErr: j.LastErr}})
	}
	switch r.Tag {
	case TagFinished, TagReleased, TagSnoozed, TagDeferred:
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
	if pauseTag(r.Tag) {
		return nil, 0, m.applyPause(r)
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
		return m.applyEnqueue(r)
	}
	if j == nil {
		return fmt.Errorf("tag %d for unknown job %d", r.Tag, r.ID)
	}
	want := Waiting
	switch r.Tag {
	case TagFinished, TagReleased, TagSnoozed:
		want = Running
	case TagRetried:
		want = Dead
	case TagCancelled:
		switch {
		case j.State == Running:
			want = Running
		case holds(j):
			want = Dead // a dead job holding its group may be cancelled, to release it
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
	return m.applyTransition(r, j)
}

// applyEnqueue files the job r enqueues; it changes nothing on error.
func (m *Machine) applyEnqueue(r *Record) error {
	if r.ID != m.nextID {
		return fmt.Errorf("enqueue of id %d, next id is %d", r.ID, m.nextID)
	}
	if id, held := m.keyHolder(&r.Opts); held {
		return fmt.Errorf("enqueue of id %d with unique key %q held by job %d", r.ID, r.Opts.Unique, id)
	}
	// Filled field by field: a Job literal would be built then copied whole.
	j := m.newJob(r.Opts.Kind)
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
	m.joinGroup(j)
	m.maybeWarn(j.kind)
	return nil
}

// applyTransition applies r to job j, whose state r's tag allows; it changes nothing on error.
func (m *Machine) applyTransition(r *Record, j *job) error {
	switch r.Tag {
	case TagStarted:
		if r.Attempt != j.Attempts+1 {
			return fmt.Errorf("job %d: started attempt %d after %d", r.ID, r.Attempt, j.Attempts)
		}
		m.qremove(j)
		j.State, j.Attempts, j.Deferred = Running, r.Attempt, false
		m.groupRunning(j, +1)
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
		m.groupRunning(j, -1)
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
		m.groupRunning(j, -1)
	case TagSnoozed:
		if r.Attempt != j.Attempts {
			return fmt.Errorf("job %d: snoozed attempt %d while attempt %d runs", r.ID, r.Attempt, j.Attempts)
		}
		// Not counted, as a release, but the job is due again at the due the handler asked.
		j.endAttempt(r.Attempt, r.At, AttemptSnoozed, "")
		j.State, j.Attempts, j.dueKey, j.Deferred = Waiting, j.Attempts-1, r.Due.UnixNano(), false
		m.qpush(j)
		m.groupRunning(j, -1)
	case TagExpired:
		m.qremove(j)
		j.Deferred = false
		m.becomeTerminal(j, Dead, r.Reason, time.Time{})
		m.nudgeKey(j)
	case TagDeferred:
		j.dueKey, j.Deferred = r.Due.UnixNano(), true
		m.qfix(j)
	case TagCancelled:
		if j.State == Waiting {
			m.qremove(j)
		}
		if j.State == Running {
			m.groupRunning(j, -1)
		}
		wasWaiting := j.State == Waiting
		j.Deferred = false
		m.becomeTerminal(j, Cancelled, NoReason, time.Time{})
		if wasWaiting {
			m.nudgeKey(j)
		}
	case TagRetried:
		j.State, j.Reason, j.TermSeq = Waiting, NoReason, 0
		j.Attempts, j.firstDueKey, j.dueKey = 0, r.Due.UnixNano(), r.Due.UnixNano()
		m.qpush(j)
		m.holdKey(j)
		m.joinGroup(j)
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
	switch {
	case m.replaying:
	case parked(j):
		m.unparkRemove(j)
	default:
		j.kind.q.remove(j)
	}
}

func (m *Machine) qfix(j *job) {
	switch {
	case m.replaying:
	case parked(j):
		m.unparkRemove(j)
		j.kind.q.push(j)
	default:
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
	m.leaveGroup(j)
	m.restuckOf(j)
}
