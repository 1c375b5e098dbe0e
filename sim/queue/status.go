package queue

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core"
)

// State is where a message stands at a given time.
type State uint8

const (
	Visible      State = iota + 1 // receivable now (never received, lapsed or released)
	InFlight                      // hidden until VisibleAt
	Deleted                       // deleted through its current receipt
	DeadLettered                  // moved to the dead-letter queue
)

func (s State) String() string {
	switch s {
	case Visible:
		return "visible"
	case InFlight:
		return "in-flight"
	case Deleted:
		return "deleted"
	case DeadLettered:
		return "dead-lettered"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// MessageStatus is a read-only copy of one message's state.
type MessageStatus struct {
	ID           string
	Body         string
	State        State
	ReceiveCount int
	Receipt      string    // the current receipt; "" before the first delivery
	ReceivedAt   time.Time // first receipt of the current delivery; zero before it
	VisibleAt    time.Time // when it is (or became) visible; meaningless once deleted or dead
}

// Status is a read-only copy of the queue at now, messages in send order.
type Status struct {
	Name                                     string
	Now                                      time.Time
	Messages                                 []MessageStatus
	Visible, InFlight, Deleted, DeadLettered int
}

// Status returns the queue's state at now. It costs O(messages ever sent).
func (q *Queue) Status(now time.Time) Status {
	s := Status{Name: q.cfg.Name, Now: now, Messages: make([]MessageStatus, 0, len(q.msgs))}
	for _, m := range q.msgs {
		ms := MessageStatus{
			ID: m.id, Body: string(m.body), State: q.stateOf(m, now), ReceiveCount: m.count,
			Receipt: m.receipt, ReceivedAt: m.receivedAt, VisibleAt: m.visibleAt,
		}
		switch ms.State {
		case Visible:
			s.Visible++
		case InFlight:
			s.InFlight++
		case Deleted:
			s.Deleted++
		case DeadLettered:
			s.DeadLettered++
		}
		s.Messages = append(s.Messages, ms)
	}
	return s
}

// Counts returns, in O(1), how many messages are live (visible or in flight), deleted and
// dead-lettered.
func (q *Queue) Counts() (live, deleted, dead int) {
	return q.live.Len(), q.deleted, q.dead
}

// Message returns the status of the message with the given id at now.
func (q *Queue) Message(now time.Time, id string) (MessageStatus, bool) {
	for _, m := range q.msgs {
		if m.id == id {
			return MessageStatus{
				ID: m.id, Body: string(m.body), State: q.stateOf(m, now), ReceiveCount: m.count,
				Receipt: m.receipt, ReceivedAt: m.receivedAt, VisibleAt: m.visibleAt,
			}, true
		}
	}
	return MessageStatus{}, false
}

// HiddenAt reports whether the message the receipt names is hidden at now under that very
// receipt: it is current and the message is in flight. Checkers use it for the
// hidden-while-working promise.
func (q *Queue) HiddenAt(now time.Time, receipt string) bool {
	m, current, ok := q.lookup(receipt)
	return ok && current && q.stateOf(m, now) == InFlight
}

// Ref is a receipt resolved once to the message it names, for a checker that asks HiddenAt
// about the same receipt after every step: HiddenAtRef(now, ref) is HiddenAt(now, receipt).
// It stays valid for the queue's life (messages are never forgotten; a receipt names one
// message and one receive count).
type Ref struct {
	m     *message
	count int
}

// Resolve returns receipt's Ref, or false when it names no message issued yet (ask HiddenAt
// then: one may be sent or received under it later).
func (q *Queue) Resolve(receipt string) (Ref, bool) {
	m, count, ok := q.resolve(receipt)
	return Ref{m: m, count: count}, ok
}

// HiddenAtRef is HiddenAt for the receipt ref was resolved from.
func (q *Queue) HiddenAtRef(now time.Time, ref Ref) bool {
	return ref.count == ref.m.count && q.stateOf(ref.m, now) == InFlight
}

func (q *Queue) stateOf(m *message, now time.Time) State {
	switch {
	case m.deleted:
		return Deleted
	case m.dead:
		return DeadLettered
	case m.visibleAt.After(now):
		return InFlight
	}
	return Visible
}

// Describe renders the status deterministically, one message a line, times as offsets from
// the queue's epoch.
func (q *Queue) Describe(now time.Time) string {
	s := q.Status(now)
	var b strings.Builder
	fmt.Fprintf(&b, "queue %s at %s: visible=%d in-flight=%d deleted=%d dead-lettered=%d\n",
		s.Name, q.offset(now), s.Visible, s.InFlight, s.Deleted, s.DeadLettered)
	for _, m := range s.Messages {
		fmt.Fprintf(&b, "  %s %s count=%d", m.ID, m.State, m.ReceiveCount)
		switch m.State {
		case Visible, InFlight:
			fmt.Fprintf(&b, " visible-at=%s", q.offset(m.VisibleAt))
		}
		if m.Receipt != "" && (m.State == InFlight || m.State == Visible) {
			fmt.Fprintf(&b, " receipt=%s received=%s", m.Receipt, q.offset(m.ReceivedAt))
		}
		fmt.Fprintf(&b, " body=%q\n", m.Body)
	}
	return b.String()
}

func (q *Queue) offset(t time.Time) string {
	d := t.Sub(q.cfg.Epoch)
	if d < 0 {
		return d.String()
	}
	return "+" + d.String()
}

// CheckInvariants states the package doc's invariants in code.
func (q *Queue) CheckInvariants() error { return q.checkInvariants() }

// timesChecked says whether m's times are the ones checkInvariants last found within their
// bounds, for the same branch (received or not): the check is a function of them alone.
func (m *message) timesChecked() bool {
	t := &m.checked.times
	return t.ok && t.unreceived == (m.receipt == "") && t.sent == m.sentAt && t.received == m.receivedAt && t.visible == m.visibleAt
}

// rememberTimes remembers m's times when ok (they were just found within their bounds) and
// returns ok.
func (m *message) rememberTimes(ok bool) bool {
	t := &m.checked.times
	t.ok, t.unreceived, t.sent, t.received, t.visible = ok, m.receipt == "", m.sentAt, m.receivedAt, m.visibleAt
	return ok
}

func (q *Queue) checkInvariants() error {
	var errs []error
	live := 0
	for i, m := range q.msgs {
		if m.seq != i+1 {
			errs = append(errs, fmt.Errorf("queue %s: message at %d has seq %d", q.cfg.Name, i, m.seq))
		}
		isLive := !m.deleted && !m.dead
		if isLive {
			live++
			if m.index < 0 || m.index >= q.live.Len() || q.live[m.index] != m {
				errs = append(errs, fmt.Errorf("queue %s: live message %s not at its heap index %d", q.cfg.Name, m.id, m.index))
			}
		} else if m.index != -1 {
			errs = append(errs, fmt.Errorf("queue %s: message %s is not live but has heap index %d", q.cfg.Name, m.id, m.index))
		}
		if m.deleted && m.dead {
			errs = append(errs, fmt.Errorf("queue %s: message %s both deleted and dead-lettered", q.cfg.Name, m.id))
		}
		if m.dead && (q.cfg.MaxReceiveCount == 0 || m.count < q.cfg.MaxReceiveCount) {
			errs = append(errs, fmt.Errorf("queue %s: message %s dead-lettered at count %d (max %d)", q.cfg.Name, m.id, m.count, q.cfg.MaxReceiveCount))
		}
		if m.receipt == "" {
			// A redriven message may carry a count > 0 without having been received here; a
			// delayed send (SendDelayed) is hidden for at most DelayMax after it.
			if !m.timesChecked() && !m.rememberTimes(m.receivedAt.IsZero() && !m.visibleAt.Before(m.sentAt) && !m.visibleAt.After(m.sentAt.Add(DelayMax))) {
				errs = append(errs, fmt.Errorf("queue %s: message %s never received but hidden or stamped", q.cfg.Name, m.id))
			}
			continue
		}
		if c := &m.checked; c.receipt != m.receipt || c.seq != m.seq || c.count != m.count {
			if !q.isReceiptOf(m, m.receipt) {
				errs = append(errs, fmt.Errorf("queue %s: message %s receipt %q, want %q", q.cfg.Name, m.id, m.receipt, q.receiptOf(m)))
			} else {
				c.receipt, c.seq, c.count = m.receipt, m.seq, m.count
			}
		}
		if !m.timesChecked() && !m.rememberTimes(!m.visibleAt.Before(m.receivedAt) && !m.visibleAt.After(m.receivedAt.Add(VisibilityCeiling))) {
			errs = append(errs, fmt.Errorf("queue %s: message %s visible at %s outside [received %s, +12h]", q.cfg.Name, m.id, q.offset(m.visibleAt), q.offset(m.receivedAt)))
		}
	}
	if live != q.live.Len() {
		errs = append(errs, fmt.Errorf("queue %s: %d live messages but heap holds %d", q.cfg.Name, live, q.live.Len()))
	}
	for i := 1; i < q.live.Len(); i++ {
		if q.live.Less(i, (i-1)/2) {
			errs = append(errs, fmt.Errorf("queue %s: heap out of order at %d", q.cfg.Name, i))
			break
		}
	}
	deleted, dead := 0, 0
	for _, m := range q.msgs {
		if m.deleted {
			deleted++
		}
		if m.dead {
			dead++
		}
	}
	if deleted != q.deleted || dead != q.dead {
		errs = append(errs, fmt.Errorf("queue %s: counters deleted=%d dead=%d, messages say %d and %d", q.cfg.Name, q.deleted, q.dead, deleted, dead))
	}
	return errors.Join(errs...)
}

var _ heap.Interface = (*msgHeap)(nil)

// Transport returns a synchronous core.Transport over the queue that reads the time from now.
// Receive ignores wait: it answers at once with what is visible (long polls belong to the
// world, which has NextVisibleAt); with its context already ended it receives nothing and
// fails Retryable. Misuse that the queue would panic on comes back as a
// Fatal error, as SQS would answer it.
func (q *Queue) Transport(now func() time.Time) core.Transport {
	return &transport{q: q, now: now}
}

type transport struct {
	q   *Queue
	now func() time.Time
}

func (t *transport) Receive(ctx context.Context, max int, wait, visibility time.Duration) ([]core.Message, error) {
	if max < 1 || max > core.BatchMax || visibility < 0 || visibility > VisibilityCeiling || wait < 0 {
		return nil, transportErr("receive", core.Fatal, CodeInvalidParameterValue,
			"queue %s: receive max %d, wait %v, visibility %v out of range", t.q.cfg.Name, max, wait, visibility)
	}
	if err := ctx.Err(); err != nil {
		// As a real client answers a call whose context ended: retryable, nothing received.
		return nil, &core.TransportError{Class: core.Retryable, Op: "receive", Code: "RequestCanceled", Err: err}
	}
	return t.q.Receive(t.now(), max, visibility), nil
}

func (t *transport) ChangeVisibility(_ context.Context, receipt string, timeout time.Duration) error {
	return t.q.ChangeVisibility(t.now(), receipt, timeout)
}

func (t *transport) ChangeVisibilityBatch(_ context.Context, entries []core.VisibilityChange) ([]error, error) {
	if err := batchErr("change-visibility", len(entries)); err != nil {
		return nil, err
	}
	return t.q.ChangeVisibilityBatch(t.now(), entries), nil
}

func (t *transport) Delete(_ context.Context, receipt string) error {
	return t.q.Delete(t.now(), receipt)
}

func (t *transport) DeleteBatch(_ context.Context, receipts []string) ([]error, error) {
	if err := batchErr("delete", len(receipts)); err != nil {
		return nil, err
	}
	return t.q.DeleteBatch(t.now(), receipts), nil
}

func batchErr(op string, n int) error {
	switch {
	case n == 0:
		return transportErr(op, core.Fatal, "EmptyBatchRequest", "queue: empty batch")
	case n > core.BatchMax:
		return transportErr(op, core.Fatal, "TooManyEntriesInBatchRequest", "queue: batch of %d entries, at most %d", n, core.BatchMax)
	}
	return nil
}
