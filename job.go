package sluice

import (
	"fmt"
	"time"
)

// State is where a job stands (docs/runner.md).
type State uint8

const (
	// StatePending: waiting for its due time (first attempt or manual retry).
	StatePending State = iota + 1
	// StateWaiting: a failed attempt's backoff is running.
	StateWaiting
	// StateDeferred: its target's breaker held it back; no attempt was counted.
	StateDeferred
	// StateRunning: an attempt is in progress.
	StateRunning
	// StateSucceeded, StateDead and StateCancelled are terminal.
	StateSucceeded
	StateDead
	StateCancelled
)

// Terminal reports whether no attempt will start again (unless Retry revives a dead job).
func (s State) Terminal() bool {
	return s == StateSucceeded || s == StateDead || s == StateCancelled
}

func (s State) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StateWaiting:
		return "waiting"
	case StateDeferred:
		return "deferred"
	case StateRunning:
		return "running"
	case StateSucceeded:
		return "succeeded"
	case StateDead:
		return "dead"
	case StateCancelled:
		return "cancelled"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Reason says why a job is dead.
type Reason string

// The reasons a job is dead.
const (
	ReasonSpent     Reason = "spent"     // every attempt was used
	ReasonLate      Reason = "late"      // the deadline passed
	ReasonPermanent Reason = "permanent" // a non-retryable failure (or an undecodable payload)
	ReasonPanic     Reason = "panic"     // the handler panicked
)

// Attempt is one attempt in a job's history.
type Attempt struct {
	Number     int       // 1-based; a manual Retry starts again at 1
	Start, End time.Time // End is zero while it runs
	Outcome    string    // "running", "succeeded", "failed", "panicked", "released" (given back by a stop), "snoozed"
	Err        string
}

// JobInfo is a read-only copy of a job, returned by Get.
type JobInfo[A any] struct {
	ID       uint64
	Kind     string // the kind's name (Register)
	Target   string
	State    State
	Attempts int       // attempts started so far
	FirstDue time.Time // the start of the retry deadline
	Due      time.Time // when it may start next (non-terminal states)
	Reason   Reason    // why a dead job died (ReasonSpent, ...); "" otherwise
	LastErr  string    // the last failure's message
	Priority int       // WithPriority's value (0 by default)
	Unique   string    // WithUnique's key ("" without one)
	// UniqueWindow is how long the key stays reserved after success (WithUniqueWindow).
	UniqueWindow time.Duration
	// History is the job's last attempts (at most 10), oldest first; Retry keeps it.
	History []Attempt
	// Key is the job's flow key (WithKey) and Group its sequence (WithGroup), "" without;
	// HoldOnDead says that, dead, it holds its sequence (its kind's WithHoldOnDead).
	Key, Group string
	HoldOnDead bool
	// Blocked says why a job that waits (pending, waiting or deferred) is not starting, in
	// an operator's words: "its kind is paused", "key \"a\" is at its limit (2 running)",
	// "sequence \"s\" is held by job 4", "due at ...", "ready to start" (nothing but its turn).
	// "" for a job that does not wait. Inspect says only what the journal decides (a paused
	// kind, a sequence held), "" otherwise: limits and rates are a running program's options.
	Blocked string
	Payload A
}

// Stats counts jobs by state and the runner's disk work since Open.
type Stats struct {
	Waiting   int // waiting for their due time or a backoff (never-run jobs included)
	Deferred  int // held back by an open breaker
	Running   int
	Succeeded int // terminal jobs still retained
	Dead      int
	Cancelled int
	LastID    uint64 // the highest id issued so far (0: none)
	// Unregistered counts the waiting jobs (within Waiting) whose kind is not registered:
	// they wait, never started nor dropped, until a runner registers their kind.
	Unregistered int
	// Paused counts the waiting jobs (within Waiting) of paused kinds (Pause); Held those
	// behind a dead job that holds its sequence (WithHoldOnDead). Both wait for an operator:
	// Drain does not wait for them.
	Paused, Held int

	Commits     int64 // journal batches made durable since Open
	Records     int64 // journal records made durable since Open
	Syncs       int64 // File.Sync and SyncDir calls since Open (the journal's fsyncs)
	Compactions int64
}
