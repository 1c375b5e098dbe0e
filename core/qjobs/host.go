package qjobs

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/breaker"
)

// Event is the sealed set of inputs to Step.
type Event interface{ isEvent() }

// Register tells the machine this process has a handler for Kind, with its flow control in
// this process (Flow; the zero Flow limits nothing). A delivery of a kind never registered
// waits in the queue for a process that has it.
type Register struct {
	Kind string
	Flow Flow
}

// Enqueue asks to send new jobs (one Enqueue or EnqueueMany call). Every job is checked
// before any is sent: the effect is one Refuse, or one Send per job in order.
type Enqueue struct {
	Now  time.Time
	Jobs []NewJob
}

// NewJob is one job to enqueue.
type NewJob struct {
	Kind, Target string
	Due          time.Time // zero or past: now
	AttemptsMax  int       // > 0: replaces the policy's Attempts for this job
	Deadline     time.Duration
	Group        string // FIFO: the message group (jobs of one group run in order); "": its own
	Key          string // the flow key: its kind's Flow.KeyLimit and KeyRate count per key
	Timeout      time.Duration
	Payload      []byte // the body, as the codec made it
}

// Deliver hands over a message the worker received and started a handler for, at Now.
// Receipt names the delivery in every later event and effect.
type Deliver struct {
	Now     time.Time
	Receipt string
	Message core.Message
}

// AttemptDone reports that the handler of a Run returned. Cancelled: its context had ended
// (the lease was lost, or the process is stopping) by the time it returned. TimedOut: the
// Run's Timeout had ended the handler's context by then (counted in Stats.TimedOut).
type AttemptDone struct {
	Receipt   string
	Now       time.Time
	Outcome   Outcome
	Cancelled bool
	TimedOut  bool
}

// SendDone is the reply to a delivery's Send: nil, or the error of the call or of its entry.
type SendDone struct {
	Receipt string
	Now     time.Time
	Err     error
}

func (Register) isEvent()    {}
func (Enqueue) isEvent()     {}
func (Deliver) isEvent()     {}
func (AttemptDone) isEvent() {}
func (SendDone) isEvent()    {}

// Destination says which queue a Send goes to.
type Destination uint8

const (
	ToQueue      Destination = iota + 1 // the job queue
	ToDeadLetter                        // the dead-letter queue
)

// Why says what a Send is for.
type Why uint8

const (
	WhyEnqueue Why = iota + 1 // a new job
	WhyDefer                  // re-sent without an attempt: not before its time, breaker, kind
	WhyRetry                  // re-sent for a retry longer than a visibility change can hold
	WhyDead                   // the job is dead: to the dead-letter queue with its last error
	WhyNotJob                 // not a job: to the dead-letter queue as it came
	WhyWait                   // re-sent without an attempt: over a flow limit of this process
)

func (w Why) String() string {
	switch w {
	case WhyEnqueue:
		return "enqueue"
	case WhyDefer:
		return "defer"
	case WhyRetry:
		return "retry"
	case WhyDead:
		return "dead"
	case WhyNotJob:
		return "not-a-job"
	case WhyWait:
		return "wait"
	}
	return fmt.Sprintf("Why(%d)", uint8(w))
}

// Send asks the driver to send Message to To. Receipt is the delivery it is for ("" for an
// Enqueue, which gets no reply event: the driver reports its failure to its caller). Attrs
// are the job's attributes as encoded in Message (zero for WhyNotJob).
type Send struct {
	Receipt string
	To      Destination
	Why     Why
	Message core.Outgoing
	Attrs   Attrs
	// Deduplicated: the queue drops a copy of Message (FIFO, by its DedupID, for 5 min), so
	// a send whose answer was lost (core.ErrSendUnknown) may be sent again, at most
	// UnknownRetriesMax times. Otherwise it must not be: the caller learns it may be stored.
	Deduplicated bool
}

// UnknownRetriesMax bounds the repeats of a deduplicated send whose answer was lost.
const UnknownRetriesMax = 2

// EnqueueFate is what becomes of one enqueue's send once the queue answered.
type EnqueueFate int

const (
	// EnqueueStored: the queue took it.
	EnqueueStored EnqueueFate = iota
	// EnqueueAgain: its answer was lost but the queue drops a copy: send it again.
	EnqueueAgain
	// EnqueueUnknown: its answer was lost and a copy would be a second job: the caller is
	// told it may be stored, with the job's id, and nothing is sent again.
	EnqueueUnknown
	// EnqueueFailed: the queue refused it; the caller gets the error.
	EnqueueFailed
)

// Fate says what becomes of s, an Enqueue's send, whose try-th send (0 the first) answered err.
func (s Send) Fate(err error, try int) EnqueueFate {
	switch {
	case err == nil:
		return EnqueueStored
	case errors.Is(err, core.ErrSendUnknown) && s.Deduplicated && try < UnknownRetriesMax:
		return EnqueueAgain
	case errors.Is(err, core.ErrSendUnknown):
		return EnqueueUnknown
	}
	return EnqueueFailed
}

// Run asks the driver to run the handler of Attrs.Kind on Payload as attempt Attempt. When
// Delay > 0 the driver starts the handler that long after (at most HoldMax: the delivery waits
// in the process for a rate's next token); a stop or a lost lease before then is answered by
// an AttemptDone with Cancelled. When Timeout > 0 the driver ends the handler's context
// Timeout after it starts, and reports AttemptDone.TimedOut.
type Run struct {
	Receipt string
	Attempt int
	Attrs   Attrs
	Payload []byte
	Delay   time.Duration
	Timeout time.Duration
}

// Disposition is how a delivery leaves the job layer: what the worker does with its message.
type Disposition uint8

const (
	// Delete the message (the job succeeded, or its successor was sent).
	Delete Disposition = iota + 1
	// Hide the message for Done.Visibility: a retry's backoff, or a failed send tried again.
	Hide
	// Release: the attempt was abandoned. After a graceful stop (the worker holds the lease,
	// worker.Config.StopHeld) the message is released at once; after a lost lease the worker
	// ignores it and the queue redelivers the message once its window lapses.
	Release
)

func (d Disposition) String() string {
	switch d {
	case Delete:
		return "delete"
	case Hide:
		return "hide"
	case Release:
		return "release"
	}
	return fmt.Sprintf("Disposition(%d)", uint8(d))
}

// Done ends a delivery: the driver reports Disposition to the worker as the handler's result,
// and the machine has forgotten Receipt.
type Done struct {
	Receipt     string
	Disposition Disposition
	Visibility  time.Duration // Hide: whole seconds
	Err         string        // Hide, Release: why the message comes back
}

// Refusal is an Enqueue refused as bad input: nothing of it is sent.
//
// (An Enqueue's Sends carry the job id in Attrs.ID: a driver names it in the error of a send
// that may have been stored.)
type Refusal struct {
	Index int   // the job's index in Enqueue.Jobs
	Err   error // wraps ErrTooLarge or ErrInvalidJob
	Size  int   // ErrTooLarge: the message's size as the queue counts it
}

// SuccessorRoom is the room an enqueued job's message keeps under MessageMax for the
// attributes its successors add (attempts, lost deliveries, not-before, the last error cut
// to errCutShort, the reason): a retry or dead letter of a job sent by Enqueue always fits.
const SuccessorRoom = 512

// The errors of Refusal: a job whose message exceeds MessageMax, and a job whose attributes
// are invalid (an empty kind or target, a negative attempts max or deadline).
var (
	ErrTooLarge   = errors.New("qjobs: message too large for the queue")
	ErrInvalidJob = errors.New("qjobs: invalid job")
)

// NoteLevel is a Note's severity.
type NoteLevel uint8

const (
	NoteWarn NoteLevel = iota + 1
	NoteError
)

// Note is a line for the driver's log: Text and key-value Args, in order.
type Note struct {
	Level NoteLevel
	Text  string
	Args  []string // key, value, key, value...
}

// Ready holds the effects produced since the last call to Ready, and forgets them as it hands
// them out. The ordering contract:
//   - Refused and an Enqueue's Sends: all of one Enqueue's jobs are refused (one Refusal) or
//     all are sent, in order; nothing waits for their reply.
//   - A delivery has at most one effect outstanding: a Run (answered by exactly one
//     AttemptDone), a Send (answered by exactly one SendDone), or its Done, which ends it.
//   - A delivery's Done with Delete after a Send follows a SendDone without error: the
//     original message is deleted only once its successor is sent. A failed send ends in Hide
//     for SendRetryDelay, so the original comes back and is decided again.
//   - Notes may be logged in any order with the rest.
//
// The driver calls Ready after each Step (under the same lock, in production) and performs
// the effects it got; effects name their delivery, so one Ready may serve several.
type Ready struct {
	Refused []Refusal
	Sends   []Send
	Runs    []Run
	Done    []Done
	Notes   []Note
}

// IsEmpty reports whether r holds no effect.
func (r Ready) IsEmpty() bool {
	return len(r.Refused)+len(r.Sends)+len(r.Runs)+len(r.Done)+len(r.Notes) == 0
}

// Status is a read-only copy of the machine's state.
type Status struct {
	Stats
	Deliveries int // deliveries handed over and not yet Done
	Kinds      int // kinds registered
}

// ErrMisuse is wrapped by Step's errors: an event the protocol does not allow.
var ErrMisuse = errors.New("qjobs: misuse")

// The limits of the host's own state.
const (
	deliveriesMax = 1 << 16 // deliveries in flight (the worker's concurrency bounds them far lower)
	warnedMax     = 1 << 10 // unregistered kinds warned about; later ones are not warned
)

// SendRetryDelay is how long the original message of a failed send stays hidden before it
// comes back to be decided again, doubled for each earlier receive of it up to
// SendRetryMax: a send that keeps failing (a dead-letter queue refusing it, a message that
// cannot fit) is retried ever more rarely, never every second forever.
const (
	SendRetryDelay = time.Second
	SendRetryMax   = 15 * time.Minute
)

// sendBackoff is the hide after the receiveCount-th delivery's send failed.
func sendBackoff(receiveCount int) time.Duration {
	return min(SendRetryDelay<<min(max(0, receiveCount-1), 10), SendRetryMax)
}

// stage is what a delivery waits for.
type stage uint8

const (
	stageRun  stage = iota + 1 // its attempt's AttemptDone
	stageSend                  // its send's SendDone
)

// pending is a delivery between Deliver and Done.
type pending struct {
	d       delivery
	stage   stage
	attempt int
	probe   breaker.Probe
	payload []byte
	msg     core.Message // as delivered: a successor keeps its other attributes
	why     Why          // stageSend: what the send is for
}

// Step applies one event. It returns an error wrapping ErrMisuse for an event the protocol
// does not allow (an unknown or repeated receipt, a reply nothing waits for).
func (m *Machine) Step(ev Event) error {
	switch ev := ev.(type) {
	case Enqueue:
		m.now = later(m.now, ev.Now)
	case Deliver:
		m.now = later(m.now, ev.Now)
	case AttemptDone:
		m.now = later(m.now, ev.Now)
	case SendDone:
		m.now = later(m.now, ev.Now)
	}
	switch ev := ev.(type) {
	case Register:
		if ev.Kind == "" {
			return fmt.Errorf("%w: Register with an empty kind", ErrMisuse)
		}
		if err := ev.Flow.Validate(); err != nil {
			return fmt.Errorf("%w: Register %q: Flow.%w", ErrMisuse, ev.Kind, err)
		}
		m.kinds[ev.Kind] = true
		delete(m.flows, ev.Kind)
		if ev.Flow != (Flow{}) {
			m.flows[ev.Kind] = &kindFlow{cfg: ev.Flow}
		}
	case Enqueue:
		m.onEnqueue(ev)
	case Deliver:
		return m.onDeliver(ev)
	case AttemptDone:
		return m.onAttemptDone(ev)
	case SendDone:
		return m.onSendDone(ev)
	default:
		panic(fmt.Sprintf("qjobs: Step with unknown event %T", ev))
	}
	return nil
}

// onEnqueue checks every job, then sends them all or refuses the first bad one.
func (m *Machine) onEnqueue(ev Enqueue) {
	sends := make([]Send, 0, len(ev.Jobs))
	for i, j := range ev.Jobs {
		due := j.Due
		if due.Before(ev.Now) { // a zero due is before any now
			due = ev.Now
		}
		a := Attrs{ID: m.newID(), Kind: j.Kind, Target: j.Target, FirstDue: due, AttemptsMax: j.AttemptsMax, Deadline: j.Deadline, Group: j.Group,
			Key: j.Key, Timeout: j.Timeout}
		if due.After(ev.Now) {
			a.NotBefore = due
			if m.cfg.FIFO {
				a.SentAt = ev.Now
			}
		}
		if err := a.check(); err != nil {
			m.ready.Refused = append(m.ready.Refused, Refusal{Index: i, Err: fmt.Errorf("%w: %w", ErrInvalidJob, err)})
			return
		}
		out := Encode(a, j.Payload)
		if n := Size(out); n > m.cfg.MessageMax-SuccessorRoom {
			m.ready.Refused = append(m.ready.Refused, Refusal{Index: i, Size: n,
				Err: fmt.Errorf("%w: %d bytes with its attributes, the queue takes %d less %d kept for its retry and dead-letter attributes",
					ErrTooLarge, n, m.cfg.MessageMax, SuccessorRoom)})
			return
		}
		out.Delay = m.delay(due.Sub(ev.Now))
		s := Send{To: ToQueue, Why: WhyEnqueue, Message: out, Attrs: a}
		if m.cfg.FIFO {
			fifoIDs(&s.Message, a, "")
			s.Deduplicated = true
		}
		sends = append(sends, s)
	}
	m.stats.Enqueued += len(sends)
	m.ready.Sends = append(m.ready.Sends, sends...)
}

// onDeliver decodes the message and admits it; a message that is not a job goes to the
// dead-letter queue as it came.
func (m *Machine) onDeliver(ev Deliver) error {
	if ev.Receipt == "" {
		return fmt.Errorf("%w: Deliver without a receipt", ErrMisuse)
	}
	if _, ok := m.pending[ev.Receipt]; ok {
		return fmt.Errorf("%w: Deliver of receipt %s, already delivered", ErrMisuse, cut(ev.Receipt))
	}
	if len(m.pending) >= deliveriesMax {
		return fmt.Errorf("%w: Deliver: %d deliveries in flight already", ErrMisuse, len(m.pending))
	}
	m.flowBegin(ev.Now)
	msg := ev.Message
	a, payload, err := Decode(msg)
	if err != nil {
		m.stats.NotJobs++
		m.note(NoteError, "a message that is not a job; moving it to the dead-letter queue", "message", msg.ID, "err", err.Error())
		m.pending[ev.Receipt] = &pending{stage: stageSend, msg: msg, why: WhyNotJob}
		s := Send{Receipt: ev.Receipt, To: ToDeadLetter, Why: WhyNotJob, Message: asIs(msg)}
		if m.cfg.FIFO {
			s.Message.DedupID, s.Message.GroupID = cut128("not-a-job-"+msg.ID), cut128(msg.ID)
		}
		m.ready.Sends = append(m.ready.Sends, s)
		return nil
	}
	d := delivery{Attrs: a, ReceiveCount: msg.ReceiveCount, ReceivedAt: ev.Now, Unregistered: !m.kinds[a.Kind]}
	if m.cfg.FIFO {
		d.Early = earlyHops(a, m.cfg.VisibilityMax-m.cfg.Margin)
	}
	if d.Unregistered && !m.warned[a.Kind] && len(m.warned) < warnedMax {
		m.warned[a.Kind] = true
		m.note(NoteWarn, "jobs of a kind not registered in this process wait in the queue (warned once per kind)", "kind", a.Kind, "message", msg.ID)
	}
	p := &pending{d: d, payload: payload, msg: msg}
	m.pending[ev.Receipt] = p
	pl := m.admit(ev.Now, d)
	if pl.Action == actRun {
		p.stage, p.attempt, p.probe = stageRun, pl.Attempt, pl.Probe
		m.ready.Runs = append(m.ready.Runs, Run{Receipt: ev.Receipt, Attempt: pl.Attempt, Attrs: a, Payload: payload, Delay: pl.Delay, Timeout: pl.Timeout})
		return nil
	}
	m.perform(ev.Receipt, p, pl, "")
	return nil
}

// onAttemptDone applies the abandon rule, then finishes the attempt.
func (m *Machine) onAttemptDone(ev AttemptDone) error {
	p, ok := m.pending[ev.Receipt]
	if !ok || p.stage != stageRun {
		return fmt.Errorf("%w: AttemptDone for receipt %s, which runs no attempt", ErrMisuse, cut(ev.Receipt))
	}
	if r := ev.Outcome.Result; r < Success || r > Panicked {
		return fmt.Errorf("%w: AttemptDone for receipt %s with result %d", ErrMisuse, cut(ev.Receipt), r)
	}
	m.flowEnd(p.d.Attrs, ev.Now.Sub(p.d.ReceivedAt))
	if ev.Cancelled && ev.Outcome.Result != Success {
		// The lease was lost or the process is stopping: no outcome, the queue redelivers and
		// the attempt counts. A success is kept: its job is done even if the delete is lost.
		m.abandon(p.d.Attrs.Target, p.probe)
		m.end(ev.Receipt, Done{Receipt: ev.Receipt, Disposition: Release, Err: "abandoned: " + ev.Outcome.Err})
		return nil
	}
	o := ev.Outcome
	if ev.TimedOut && o.Result != Success {
		// The outcome is the handler's as the driver's timeout rule made it: a retryable
		// failure naming the timeout; a Permanent, DeadLetter or panic stays what it is.
		m.stats.TimedOut++
	}
	m.perform(ev.Receipt, p, m.finish(ev.Now, p.d, p.attempt, p.probe, o), o.Err)
	return nil
}

// onSendDone deletes the original once its successor is sent, or hides it to try again.
func (m *Machine) onSendDone(ev SendDone) error {
	p, ok := m.pending[ev.Receipt]
	if !ok || p.stage != stageSend {
		return fmt.Errorf("%w: SendDone for receipt %s, which sends nothing", ErrMisuse, cut(ev.Receipt))
	}
	if ev.Err != nil {
		m.stats.SendsFailed++
		v := sendBackoff(p.msg.ReceiveCount)
		m.note(NoteWarn, "send failed; the message comes back", "message", p.msg.ID, "send", p.why.String(), "after", v.String(), "err", ev.Err.Error())
		m.end(ev.Receipt, Done{Receipt: ev.Receipt, Disposition: Hide, Visibility: v, Err: "send failed: " + ev.Err.Error()})
		return nil
	}
	m.end(ev.Receipt, Done{Receipt: ev.Receipt, Disposition: Delete})
	return nil
}

// perform turns a decision that ends a delivery into its effect; why is the failure a hide
// retries.
func (m *Machine) perform(receipt string, p *pending, pl plan, why string) {
	switch pl.Action {
	case actAck:
		m.end(receipt, Done{Receipt: receipt, Disposition: Delete})
	case actHide:
		switch {
		case pl.Deferred:
			why = "waiting for its not-before time (FIFO: no delay per message)"
		case pl.Wait != "":
			why = "flow wait: " + pl.Wait
		}
		m.end(receipt, Done{Receipt: receipt, Disposition: Hide, Visibility: pl.Visibility, Err: why})
	case actResend, actDeadLetter:
		m.sendOn(receipt, p, pl)
	default:
		panic(fmt.Sprintf("qjobs: plan %v does not end a delivery", pl.Action))
	}
}

// sendOn sends the job on (a re-send or a dead letter) for a delivery, or, when its message
// cannot fit the queue whatever the fit ladder cuts, hides the original with the send backoff.
func (m *Machine) sendOn(receipt string, p *pending, pl plan) {
	s := Send{Receipt: receipt, To: ToQueue, Why: WhyRetry}
	dead := pl.Action == actDeadLetter
	switch {
	case dead:
		s.To, s.Why = ToDeadLetter, WhyDead
	case pl.Deferred:
		s.Why = WhyDefer
	case pl.Wait != "":
		s.Why = WhyWait
	}
	a := pl.Send.Attrs
	if m.cfg.FIFO && !a.NotBefore.IsZero() {
		a.SentAt = m.now
	} else {
		a.SentAt = time.Time{}
	}
	out, a, ok := m.successor(p.msg, a, p.payload, dead)
	if !ok {
		m.stats.Unsendable++
		v := sendBackoff(p.msg.ReceiveCount)
		m.note(NoteError, "the job's next message does not fit the queue even cut; it comes back", "message", p.msg.ID,
			"id", strconv.FormatUint(a.ID, 10), "send", s.Why.String(), "bytes", strconv.Itoa(Size(out)),
			"attributes", strconv.Itoa(len(out.Attributes)+len(out.Typed)), "after", v.String())
		m.end(receipt, Done{Receipt: receipt, Disposition: Hide, Visibility: v, Err: "the job's next message does not fit the queue"})
		return
	}
	if dead {
		m.note(NoteWarn, "job dead", "message", p.msg.ID, "id", strconv.FormatUint(a.ID, 10), "kind", a.Kind, "target", a.Target,
			"reason", string(a.Reason), "attempts", strconv.Itoa(a.Attempts), "lost", strconv.Itoa(a.Lost), "err", a.LastErr)
	}
	out.Delay = pl.Send.Delay
	if m.cfg.FIFO {
		fifoIDs(&out, a, p.msg.ID)
		s.Deduplicated = true
	}
	s.Message, s.Attrs = out, a
	p.stage, p.why = stageSend, s.Why
	m.ready.Sends = append(m.ready.Sends, s)
}

func (m *Machine) end(receipt string, d Done) {
	delete(m.pending, receipt)
	m.ready.Done = append(m.ready.Done, d)
}

func (m *Machine) note(l NoteLevel, text string, args ...string) {
	m.ready.Notes = append(m.ready.Notes, Note{Level: l, Text: text, Args: args})
}

// Ready returns the effects produced since the last call, and forgets them.
func (m *Machine) Ready() Ready {
	r := m.ready
	m.ready = Ready{}
	return r
}

// WakeAt is always zero: the job layer keeps no timer. Every wait leaves as a send's delay or
// a message's visibility, which the queue keeps.
func (m *Machine) WakeAt() time.Time { return time.Time{} }

// Status returns a copy of the counters and the sizes of the machine's state.
func (m *Machine) Status() Status {
	return Status{Stats: m.stats, Deliveries: len(m.pending), Kinds: len(m.kinds)}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// cut shortens a receipt for an error message.
func cut(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// String renders a Send on one line for traces: what it is for, where it goes, the job's
// attempts, the delay, and a dead letter's reason.
func (s Send) String() string {
	to := "queue"
	if s.To == ToDeadLetter {
		to = "dead-letter"
	}
	out := "send " + s.Why.String() + " to " + to
	if s.Why == WhyNotJob {
		return out
	}
	out += " attempts=" + strconv.Itoa(s.Attrs.Attempts) + " delay=" + s.Message.Delay.String()
	if s.Attrs.Reason != "" {
		out += " reason=" + string(s.Attrs.Reason)
	}
	return out
}

// String renders a Done on one line for traces.
func (d Done) String() string {
	if d.Disposition == Hide {
		return "done hide " + d.Visibility.String()
	}
	return "done " + d.Disposition.String()
}
