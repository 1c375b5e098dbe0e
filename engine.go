package sluice

import "time"

// engine is the narrow view of the runner engine (core/runner) that the driver drives. It is
// synchronous and single-owner: only the owner goroutine calls it. Commands are buffered by
// Enqueue, Cancel, Retry and Done and take effect, durably, in the next Commit.
type engine interface {
	Enqueue(now, due time.Time, target string, payload []byte) (ticket, error)
	Cancel(now time.Time, id uint64) (ticket, error)
	Retry(now time.Time, id uint64) (ticket, error)
	// Done reports an attempt's outcome; a stale token is ignored by the engine.
	Done(now time.Time, tok token, out Outcome)
	// Commit makes everything buffered durable with one journal commit, then (when dispatch
	// is true) admits due jobs up to the free capacity, making their Started records durable
	// before returning them.
	Commit(now time.Time, dispatch bool) (ready, error)
	Get(id uint64) (jobView, bool)
	Stats() Stats
	// Idle reports that nothing is due, waiting, deferred or running.
	Idle() bool
	// Compact writes a snapshot now; everything buffered must have been committed.
	Compact() error
	// Poisoned is non-nil once the engine refuses all work until reopened, also after a
	// Commit that returned nil (a compaction lost after its batch was durable).
	Poisoned() error
	Close() error
}

// ticket names a buffered command until its commit acknowledges it.
type ticket uint64

// token names one attempt: an outcome is applied only to the job's current attempt.
type token struct {
	ID      uint64
	Attempt int
}

type ack struct {
	Ticket ticket
	ID     uint64
	Err    error
}

type start struct {
	Token    token
	Target   string
	FirstDue time.Time
	Payload  []byte
}

type ready struct {
	Acks    []ack
	Starts  []start
	Settled []Settled
	Wake    time.Time // zero: nothing scheduled
}

type jobView struct {
	ID       uint64
	Target   string
	State    State
	Attempts int
	FirstDue time.Time
	Due      time.Time
	Reason   string
	LastErr  string
	Payload  []byte
}
