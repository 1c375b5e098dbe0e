package runner

import (
	"fmt"
	"math"
	"time"
)

// JobState is a job's state (docs/runner.md). Waiting covers enqueued, due, requeued and deferred
// jobs: a job in the queue ordered by (due, id).
type JobState uint8

const (
	Waiting JobState = iota + 1
	Running
	Succeeded
	Dead
	Cancelled
)

func (s JobState) String() string {
	switch s {
	case Waiting:
		return "waiting"
	case Running:
		return "running"
	case Succeeded:
		return "succeeded"
	case Dead:
		return "dead"
	case Cancelled:
		return "cancelled"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// broken says what is impossible about the job on its own ("" when nothing is), termSeq being
// the last terminal sequence number handed out: a known state; a reason exactly when dead; a
// terminal sequence exactly when terminal; deferred only while waiting; an attempt count in
// range, at least one while running; valid options; a bounded history of valid entries. A
// snapshot's decoder and the machine's invariants share it.
func (j *Job) broken(termSeq uint64) string {
	return brokenJob(j.ID, j.State, j.Reason, j.TermSeq, termSeq, j.Deferred, j.Attempts, &j.Opts, j.History)
}

// brokenJob is broken over a job's fields, for Job and the machine's job alike.
func brokenJob(id uint64, state JobState, why Reason, seq, termSeq uint64, deferred bool, attempts int, o *Opts, hist []AttemptRecord) string {
	history := len(hist) <= HistoryMax
	for _, h := range hist {
		history = history && h.Attempt >= 1 && h.Attempt <= math.MaxUint32 && h.Outcome <= AttemptSnoozed
	}
	opts := o.validate()
	if state < Waiting || state > Cancelled || (state == Dead) != (why != NoReason) || why > Panic ||
		state.Terminal() != (seq != 0) || seq > termSeq || deferred && state != Waiting ||
		attempts < 0 || attempts > math.MaxUint32 || (state == Running && attempts == 0) || !history || opts != nil {
		return fmt.Sprintf("job %d: %v (reason %v) with terminal sequence %d (last %d), deferred %v, %d attempts, history %v (valid %v), options: %v",
			id, state, why, seq, termSeq, deferred, attempts, hist, history, opts)
	}
	return ""
}

// Terminal reports whether s is succeeded, dead or cancelled.
func (s JobState) Terminal() bool { return s >= Succeeded && s <= Cancelled }

// Reason says why a job is dead.
type Reason uint8

const (
	NoReason  Reason = iota
	Late             // the deadline passed
	Spent            // every attempt was used
	Permanent        // a non-retryable failure
	Panic            // the handler panicked
)

func (r Reason) String() string {
	switch r {
	case NoReason:
		return "-"
	case Late:
		return "late"
	case Spent:
		return "spent"
	case Permanent:
		return "permanent"
	case Panic:
		return "panic"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Token names one attempt: a job id and its attempt number (1-based).
type Token struct {
	ID      uint64
	Attempt int
}

func (t Token) String() string { return fmt.Sprintf("%d#%d", t.ID, t.Attempt) }

// OutcomeKind says how an attempt ended.
type OutcomeKind uint8

const (
	OutcomeSucceeded OutcomeKind = iota + 1
	OutcomeFailed
	OutcomePanicked
	// OutcomeSnoozed: the handler asked to run again after Outcome.After; the attempt is
	// not counted and the breaker does not judge it.
	OutcomeSnoozed
)

func (k OutcomeKind) String() string {
	switch k {
	case OutcomeSucceeded:
		return "succeeded"
	case OutcomeFailed:
		return "failed"
	case OutcomePanicked:
		return "panicked"
	case OutcomeSnoozed:
		return "snoozed"
	}
	return fmt.Sprintf("outcome(%d)", uint8(k))
}

// Outcome is how one attempt ended (docs/runner.md).
type Outcome struct {
	Kind OutcomeKind
	// Err is the failure or the panic value as text (journaled; empty on success).
	Err string
	// Retryable applies to OutcomeFailed only.
	Retryable bool
	// After is a server-requested wait (Retry-After); it replaces the jittered backoff.
	// OutcomeSnoozed: the wait before the job is due again (required).
	After *time.Duration
}

// Success, Failure and Panicked build outcomes.
func Success() Outcome { return Outcome{Kind: OutcomeSucceeded} }

// Failure is a failed attempt.
func Failure(err string, retryable bool) Outcome {
	return Outcome{Kind: OutcomeFailed, Err: err, Retryable: retryable}
}

// Panicked is an attempt whose handler panicked with value v (as text).
func Panicked(v string) Outcome { return Outcome{Kind: OutcomePanicked, Err: v} }

// Snoozed is an attempt that asks to run again after d (< 0: 0), not counted.
func Snoozed(d time.Duration) Outcome {
	d = max(d, 0)
	return Outcome{Kind: OutcomeSnoozed, After: &d}
}

// Interrupted is the error text of an attempt found running at open (docs/journal.md).
const Interrupted = "interrupted"

// Priority bounds: a job's priority is in [PriorityMin, PriorityMax]; 0 is the default.
const (
	PriorityMin = -1000
	PriorityMax = 1000
)

// Opts are a job's own options, journaled in its Enqueued record and kept for its life.
// Zero values mean the runner's defaults.
type Opts struct {
	// Priority orders due jobs: higher starts first, then (due, id). See MachineConfig.AgeMax
	// for the rule that keeps low priorities from starving.
	Priority int
	// AttemptsMax, when > 0, replaces Policy.Attempts for this job.
	AttemptsMax int
	// Deadline, when > 0, replaces Policy.Deadline for this job.
	Deadline time.Duration
	// Kind names the job's kind (its codec and handler); "" is the default kind.
	Kind string
	// Unique is the job's unique key within its kind; "" means none.
	Unique string
	// UniqueFor, when > 0, keeps Unique reserved for this long after the job succeeds (from
	// the time its Finished record carries); a dead or cancelled job frees it at once.
	UniqueFor time.Duration
	// Key is the job's flow key within its kind: KindConfig.KeyLimit, KeyRate and Fair count
	// per key. "" is a key like any other.
	Key string
	// Group is the job's sequence within its kind: jobs of one group start one at a time, in
	// id (enqueue) order; a later job waits until every earlier one has ended. "": none.
	Group string
	// Hold: when this job dies, its group's later jobs wait until it is retried or cancelled
	// (without it, a dead job releases its group). Requires Group.
	Hold bool
	// Timeout, when > 0, bounds each attempt's run (Attempt.Timeout); 0: the kind's.
	Timeout time.Duration
}

// ext reports whether o has a field of the options' extension (codec: w.opts).
func (o *Opts) ext() bool { return o.Key != "" || o.Group != "" || o.Hold || o.Timeout != 0 }

// validate takes a pointer: every record and job checks its options, and Opts is 64 bytes.
func (o *Opts) validate() error {
	switch {
	case o.Priority < PriorityMin || o.Priority > PriorityMax:
		return fmt.Errorf("priority %d outside [%d, %d]", o.Priority, PriorityMin, PriorityMax)
	case o.AttemptsMax < 0 || o.AttemptsMax > math.MaxInt32:
		return fmt.Errorf("attempts %d outside [0, %d] (0: the policy's)", o.AttemptsMax, math.MaxInt32)
	case o.Deadline < 0:
		return fmt.Errorf("deadline %v is negative (0: the policy's)", o.Deadline)
	case o.UniqueFor < 0:
		return fmt.Errorf("unique window %v is negative", o.UniqueFor)
	case o.UniqueFor > 0 && o.Unique == "":
		return fmt.Errorf("unique window %v without a unique key", o.UniqueFor)
	case o.Timeout < 0:
		return fmt.Errorf("attempt timeout %v is negative (0: the kind's)", o.Timeout)
	case o.Hold && o.Group == "":
		return fmt.Errorf("hold on dead without a group")
	}
	return nil
}

// Job is a read-only copy of one job, for Get, State and checkers.
type Job struct {
	ID       uint64
	Target   string
	Payload  []byte
	State    JobState
	Reason   Reason    // Dead only
	Attempts int       // attempts started so far (reset by a manual Retry)
	FirstDue time.Time // start of the retry deadline
	Due      time.Time // Waiting: when it is due; otherwise the last due
	Deferred bool      // Waiting after a breaker refusal
	LastErr  string    // the last failure's text, kept across a manual Retry
	// TermSeq orders terminal transitions (retention keeps the highest); 0 unless terminal.
	TermSeq uint64
	Opts    Opts
	// History is the last HistoryMax attempts, oldest first; a manual Retry keeps it.
	History []AttemptRecord
}

// HistoryMax bounds a job's attempt history.
const HistoryMax = 10

// AttemptOutcome is how a recorded attempt ended; AttemptRunning while it runs.
type AttemptOutcome uint8

const (
	AttemptRunning AttemptOutcome = iota
	AttemptSucceeded
	AttemptFailed
	AttemptPanicked
	AttemptReleased // a graceful stop gave it back; not counted
	AttemptSnoozed  // the handler asked to run later; not counted
)

func (o AttemptOutcome) String() string {
	switch o {
	case AttemptRunning:
		return "running"
	case AttemptSucceeded:
		return "succeeded"
	case AttemptFailed:
		return "failed"
	case AttemptPanicked:
		return "panicked"
	case AttemptReleased:
		return "released"
	case AttemptSnoozed:
		return "snoozed"
	}
	return fmt.Sprintf("attempt-outcome(%d)", uint8(o))
}

// AttemptRecord is one attempt in a job's history (times as journaled).
type AttemptRecord struct {
	Attempt    int
	Start, End time.Time // End is zero while it runs (or if a crash cut it before it ended)
	Outcome    AttemptOutcome
	Err        string
}
