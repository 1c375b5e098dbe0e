package queue

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/core"
)

// DelayMax is the longest delay a send may ask for (SQS DelaySeconds).
const DelayMax = 15 * time.Minute

// SendDelayed stores body (copied), invisible until now+delay, and returns the message's id.
func (q *Queue) SendDelayed(now time.Time, body []byte, delay time.Duration) string {
	return q.SendOutgoing(now, core.Outgoing{Body: body, Delay: delay})
}

// SendOutgoing stores out's body and attributes (both copied), invisible until
// now+out.Delay, and returns the message's id.
func (q *Queue) SendOutgoing(now time.Time, out core.Outgoing) string {
	delay := out.Delay
	if delay < 0 || delay > DelayMax {
		panic(fmt.Sprintf("queue: send delay %v outside 0..15m", delay))
	}
	m := q.store(now, "", out.Body, 0)
	m.attrs = copyAttrs(out.Attributes)
	m.visibleAt = now.Add(delay)
	heap.Fix(&q.live, m.index)
	return m.id
}

// Sender returns a synchronous core.Sender over the queue that reads the time from now.
func (q *Queue) Sender(now func() time.Time) core.Sender { return &sender{q: q, now: now} }

type sender struct {
	q   *Queue
	now func() time.Time
}

func (s *sender) SendBatch(ctx context.Context, msgs []core.Outgoing) ([]error, error) {
	if len(msgs) < 1 || len(msgs) > core.BatchMax {
		return nil, transportErr("send", core.Fatal, CodeInvalidParameterValue, "queue %s: batch of %d", s.q.cfg.Name, len(msgs))
	}
	if err := ctx.Err(); err != nil {
		return nil, &core.TransportError{Class: core.Retryable, Op: "send", Code: "RequestCanceled", Err: err}
	}
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if m.Delay < 0 || m.Delay > DelayMax {
			errs[i] = transportErr("send", core.Fatal, CodeInvalidParameterValue, "queue %s: delay %v", s.q.cfg.Name, m.Delay)
			continue
		}
		s.q.SendOutgoing(s.now(), m)
	}
	return errs, nil
}

// copyAttrs copies a (nil when empty), so a sender's later writes cannot reach the queue.
func copyAttrs(a map[string]string) map[string]string {
	if len(a) == 0 {
		return nil
	}
	c := make(map[string]string, len(a))
	for k, v := range a {
		c[k] = v
	}
	return c
}

// MessageMax is the largest message SQS takes, in bytes as Size counts them.
const MessageMax = 256 << 10

// Size is a message's size as SQS counts it against MessageMax: the body, and each
// attribute's name, data type ("String") and value.
func Size(out core.Outgoing) int {
	n := len(out.Body)
	for k, v := range out.Attributes { // a sum: the order does not matter
		n += len(k) + len("String") + len(v)
	}
	return n
}
