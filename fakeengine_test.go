package sluice

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// fakeEngine is a plain in-memory engine for testing the driver's goroutine and timer logic
// apart from the real engine: capacity, attempts, a fixed backoff, no breaker, no disk.
type fakeEngine struct {
	capacity int
	attempts int
	backoff  time.Duration

	nextTicket ticket
	lastID     uint64
	jobs       map[uint64]*jobView
	buffered   []fakeOp
	commits    int
	records    int64
	failNext   error
	poison     string // an enqueue with this payload makes its commit fail with errPoison
	lose       string // an enqueue with this payload commits, then the engine is poisoned (a lost compaction)
	lost       error
	onCommit   func() // called at the start of every Commit, on the owner goroutine
}

var (
	errPoison = errors.New("fake: fsync: input/output error")
	errLost   = errors.New("fake: compaction lost: directory fsync failed after the rename")
)

type fakeOp struct {
	t   ticket
	fn  func() (uint64, error)
	set []Settled
}

func newFakeEngine(capacity, attempts int, backoff time.Duration) *fakeEngine {
	return &fakeEngine{capacity: capacity, attempts: attempts, backoff: backoff, jobs: map[uint64]*jobView{}}
}

func (e *fakeEngine) buffer(fn func() (uint64, error)) ticket {
	e.nextTicket++
	e.buffered = append(e.buffered, fakeOp{t: e.nextTicket, fn: fn})
	return e.nextTicket
}

func (e *fakeEngine) Enqueue(now, due time.Time, target string, payload []byte) (ticket, error) {
	if e.poison != "" && string(payload) == e.poison {
		e.failNext = errPoison
	}
	if e.lost != nil {
		return 0, e.lost
	}
	lose := e.lose != "" && string(payload) == e.lose
	return e.buffer(func() (uint64, error) {
		e.lastID++
		e.jobs[e.lastID] = &jobView{ID: e.lastID, Target: target, State: StatePending, FirstDue: due, Due: due, Payload: payload}
		if lose {
			e.lost = errLost
		}
		return e.lastID, nil
	}), nil
}

func (e *fakeEngine) Cancel(now time.Time, id uint64) (ticket, error) {
	j, ok := e.jobs[id]
	if !ok {
		return 0, ErrNotFound
	}
	return e.buffer(func() (uint64, error) {
		if j.State.Terminal() {
			return id, errors.New("fake: terminal")
		}
		j.State = StateCancelled
		return id, nil
	}), nil
}

func (e *fakeEngine) Retry(now time.Time, id uint64) (ticket, error) {
	j, ok := e.jobs[id]
	if !ok {
		return 0, ErrNotFound
	}
	return e.buffer(func() (uint64, error) {
		if j.State != StateDead {
			return id, errors.New("fake: not dead")
		}
		j.State, j.Due, j.Attempts = StatePending, now, 0
		return id, nil
	}), nil
}

func (e *fakeEngine) Done(now time.Time, tok token, out Outcome) {
	e.buffered = append(e.buffered, fakeOp{fn: func() (uint64, error) {
		j := e.jobs[tok.ID]
		if j == nil || j.Attempts != tok.Attempt {
			return 0, nil
		}
		if j.State == StateCancelled {
			j.Reason = "ran while cancelled"
			return 0, nil
		}
		switch {
		case out.Kind == KindSucceeded:
			j.State = StateSucceeded
		case out.Kind == KindFailed && out.Retryable && j.Attempts < e.attempts:
			j.State, j.Due = StateWaiting, now.Add(e.backoff)
			j.LastErr = out.Err.Error()
		default:
			j.State = StateDead
			j.LastErr = fmt.Sprint(out.Err)
		}
		return 0, nil
	}})
}

func (e *fakeEngine) running() int {
	n := 0
	for _, j := range e.jobs {
		if j.State == StateRunning {
			n++
		}
	}
	return n
}

func (e *fakeEngine) Commit(now time.Time, dispatch bool) (ready, error) {
	if e.onCommit != nil {
		e.onCommit()
	}
	if e.lost != nil {
		e.buffered = nil
		return ready{}, e.lost
	}
	if err := e.failNext; err != nil {
		e.failNext = nil
		e.buffered = nil
		return ready{}, err
	}
	var rd ready
	before := map[uint64]State{}
	for id, j := range e.jobs {
		before[id] = j.State
	}
	if len(e.buffered) > 0 {
		e.commits++
		e.records += int64(len(e.buffered))
	}
	for _, op := range e.buffered {
		id, err := op.fn()
		if op.t != 0 {
			rd.Acks = append(rd.Acks, ack{Ticket: op.t, ID: id, Err: err})
		}
	}
	e.buffered = nil
	ids := e.sortedIDs()
	if dispatch {
		free := e.capacity - e.running()
		for _, id := range ids {
			j := e.jobs[id]
			if free == 0 {
				break
			}
			if (j.State == StatePending || j.State == StateWaiting) && !j.Due.After(now) {
				j.State = StateRunning
				j.Attempts++
				free--
				rd.Starts = append(rd.Starts, start{Token: token{id, j.Attempts}, Target: j.Target, FirstDue: j.FirstDue, Payload: j.Payload})
			}
		}
		if len(rd.Starts) > 0 {
			e.commits++
			e.records += int64(len(rd.Starts))
		}
	}
	for _, id := range ids {
		j := e.jobs[id]
		if j.State.Terminal() && before[id] != j.State {
			rd.Settled = append(rd.Settled, Settled{ID: id, State: j.State, Attempts: j.Attempts})
		}
		if (j.State == StatePending || j.State == StateWaiting) && j.Due.After(now) &&
			(rd.Wake.IsZero() || j.Due.Before(rd.Wake)) {
			rd.Wake = j.Due
		}
	}
	return rd, nil
}

func (e *fakeEngine) sortedIDs() []uint64 {
	ids := make([]uint64, 0, len(e.jobs))
	for id := range e.jobs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool {
		ja, jb := e.jobs[ids[a]], e.jobs[ids[b]]
		if !ja.Due.Equal(jb.Due) {
			return ja.Due.Before(jb.Due)
		}
		return ids[a] < ids[b]
	})
	return ids
}

func (e *fakeEngine) Get(id uint64) (jobView, bool) {
	j, ok := e.jobs[id]
	if !ok {
		return jobView{}, false
	}
	return *j, true
}

func (e *fakeEngine) Stats() Stats {
	st := Stats{LastID: e.lastID, Commits: int64(e.commits), Records: e.records}
	for _, j := range e.jobs {
		switch j.State {
		case StatePending, StateWaiting:
			st.Waiting++
		case StateRunning:
			st.Running++
		case StateSucceeded:
			st.Succeeded++
		case StateDead:
			st.Dead++
		case StateCancelled:
			st.Cancelled++
		}
	}
	return st
}

func (e *fakeEngine) Idle() bool {
	for _, j := range e.jobs {
		if !j.State.Terminal() {
			return false
		}
	}
	return true
}

func (e *fakeEngine) Compact() error { return e.lost }

func (e *fakeEngine) Poisoned() error { return e.lost }

func (e *fakeEngine) Close() error { return nil }
