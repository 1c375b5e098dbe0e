package queue

import (
	"container/heap"
	"context"
	"fmt"
	"strings"
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
	if len(out.Typed) > 0 {
		m.typed = make(map[string]core.Attribute, len(out.Typed))
		for k, v := range out.Typed { // a copy: order does not matter
			v.Binary = append([]byte(nil), v.Binary...)
			m.typed[k] = v
			if v.Binary == nil && !strings.HasPrefix(v.Type, "Binary") {
				// String and Number attributes are delivered in Attributes too, as text.
				if m.attrs == nil {
					m.attrs = map[string]string{}
				}
				m.attrs[k] = v.String
			}
		}
	}
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
		if errs[i] = s.q.Refusal(m); errs[i] != nil {
			continue
		}
		s.q.SendOutgoing(s.now(), m)
	}
	return errs, nil
}

// AttrsMax is the most message attributes SQS takes on one message.
const AttrsMax = 10

// Refusal is the error SQS answers a send of out with (Fatal InvalidParameterValue): a delay
// outside 0..15m, more than MessageMax bytes, more than AttrsMax attributes, or a name in
// both Attributes and Typed; nil when the queue takes it.
func (q *Queue) Refusal(out core.Outgoing) error {
	bad := func(format string, args ...any) error {
		return transportErr("send", core.Fatal, CodeInvalidParameterValue, "queue %s: "+format, append([]any{q.cfg.Name}, args...)...)
	}
	switch n := len(out.Attributes) + len(out.Typed); {
	case out.Delay < 0 || out.Delay > DelayMax:
		return bad("delay %v", out.Delay)
	case Size(out) > MessageMax:
		return bad("%d bytes, at most %d", Size(out), MessageMax)
	case n > AttrsMax:
		return bad("%d attributes, at most %d", n, AttrsMax)
	}
	for k := range out.Typed { // any shared name refuses, unnamed: order does not matter
		if _, ok := out.Attributes[k]; ok {
			return bad("an attribute given both as String and typed")
		}
	}
	return nil
}

// typedOf is every attribute of m with its type (String ones as sent in Attributes): nil
// when m was sent without typed attributes, as a transport that reports only strings.
func typedOf(m *message) map[string]core.Attribute {
	if m.typed == nil {
		return nil
	}
	out := make(map[string]core.Attribute, len(m.attrs)+len(m.typed))
	for k, v := range m.attrs { // copies into a map: order does not matter
		out[k] = core.Attribute{Type: "String", String: v}
	}
	for k, v := range m.typed {
		v.Binary = append([]byte(nil), v.Binary...)
		out[k] = v
	}
	return out
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
	for k, v := range out.Typed {
		n += len(k) + len(v.Type) + len(v.String) + len(v.Binary)
	}
	return n
}
