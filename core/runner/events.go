package runner

import (
	"errors"
	"fmt"
	"time"
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

// Pause stops a kind's jobs from starting, durably, until a Resume (a running attempt goes
// on). Kind must be registered or named by a job (ErrUnknownKind).
type Pause struct {
	Ticket Ticket
	Kind   string
	Now    time.Time
}

// Resume lets a paused kind's jobs start again.
type Resume struct {
	Ticket Ticket
	Kind   string
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
func (Pause) isEvent()       {}
func (Resume) isEvent()      {}
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
	// Timeout bounds the attempt's run (the job's Opts.Timeout, else its kind's); 0: none. The
	// driver ends the handler's context then, and the attempt fails (retryably).
	Timeout time.Duration
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
