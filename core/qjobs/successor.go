package qjobs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/core"
)

// The fit ladder of a successor (a re-send or a dead letter) that would not fit the queue:
// its last error is cut to errCutLong, then errCutShort bytes; a re-send then drops the
// attributes of other producers, while a dead letter moves everything (every attribute, its
// own included, and the payload) into an attribute-free body (Envelope). What still does not
// fit is not sent (Machine.successor reports it).
const (
	errCutLong  = 1 << 10
	errCutShort = 64
)

// own reports whether name is one of the job's attributes, which a successor writes anew.
func own(name string) bool {
	switch name {
	case AttrID, AttrKind, AttrTarget, AttrFirstDue, AttrAttempt, AttrOpts, AttrKey:
		return true
	}
	return false
}

// foreign returns the attributes of m that are not the job's own, each with its type as it
// came (Typed when the transport reports it, else String); nil when there are none.
func foreign(m core.Message) map[string]core.Attribute {
	var out map[string]core.Attribute
	add := func(k string, v core.Attribute) {
		if own(k) {
			return
		}
		if out == nil {
			out = map[string]core.Attribute{}
		}
		out[k] = v
	}
	if m.Typed != nil {
		for k, v := range m.Typed { // a copy into a map: order does not matter
			add(k, v)
		}
		return out
	}
	for k, v := range m.Attributes {
		add(k, core.Attribute{Type: "String", String: v})
	}
	return out
}

// asIs is a message sent on unchanged (a message that is not a job, to the dead-letter
// queue): its body and every attribute with its type.
func asIs(m core.Message) core.Outgoing {
	if m.Typed != nil {
		return core.Outgoing{Body: m.Body, Typed: m.Typed}
	}
	return core.Outgoing{Body: m.Body, Attributes: m.Attributes}
}

// fits reports whether out is within the queue's limits: size and attribute count.
func (m *Machine) fits(out core.Outgoing) bool {
	return Size(out) <= m.cfg.MessageMax && len(out.Attributes)+len(out.Typed) <= AttrsMax
}

// successor builds the message that carries the job on from delivery msg: the job's
// attributes a, the payload, and the other producers' attributes as they came. It walks
// the fit ladder; ok is false when even the last rung does not fit.
func (m *Machine) successor(msg core.Message, a Attrs, payload []byte, dead bool) (out core.Outgoing, sent Attrs, ok bool) {
	other := foreign(msg)
	try := func(a Attrs, other map[string]core.Attribute) (core.Outgoing, Attrs, bool) {
		out := Encode(a, payload)
		out.Typed = other
		return out, a, m.fits(out)
	}
	if out, a2, ok := try(a, other); ok {
		return out, a2, true
	}
	for _, n := range []int{errCutLong, errCutShort} {
		if len(a.LastErr) > n {
			a.LastErr = cutText(a.LastErr, n)
			if out, a2, ok := try(a, other); ok {
				return out, a2, true
			}
		}
	}
	if !dead && other != nil {
		return try(a, nil)
	}
	if out, a2, ok := try(a, other); ok || !dead {
		return out, a2, ok
	}
	out = envelope(Encode(a, payload), other)
	return out, a, m.fits(out)
}

// Envelope is the body of a dead letter whose attributes could not travel as attributes
// (more than SQS's 10): every attribute, the job's own included, with its type, and the
// payload as Body (a JSON string: SQS bodies are text already). It is marked by its first
// field; a redrive must unpack it, as sluice reads it as a message that is not a job.
type Envelope struct {
	DeadLetter int                  `json:"sluice-dead-letter"` // 1
	Attributes map[string]Attribute `json:"attributes"`
	Body       string               `json:"body"`
}

// Attribute is one attribute in an Envelope: Binary values are base64 (encoding/json).
type Attribute struct {
	Type   string `json:"type"`
	String string `json:"string,omitempty"`
	Binary []byte `json:"binary,omitempty"`
}

// envelope packs a job message and other producers' attributes into an attribute-free body.
func envelope(job core.Outgoing, other map[string]core.Attribute) core.Outgoing {
	e := Envelope{DeadLetter: 1, Attributes: make(map[string]Attribute, len(job.Attributes)+len(other)), Body: string(job.Body)}
	for k, v := range other { // into a map: encoding/json sorts the keys
		e.Attributes[k] = Attribute{Type: v.Type, String: v.String, Binary: v.Binary}
	}
	for k, v := range job.Attributes {
		e.Attributes[k] = Attribute{Type: "String", String: v}
	}
	b, err := json.Marshal(e)
	if err != nil {
		panic(fmt.Sprintf("qjobs: encode envelope: %v", err)) // strings and bytes: cannot fail
	}
	return core.Outgoing{Body: b}
}

// cutText shortens s to at most n bytes, marking the cut.
func cutText(s string, n int) string {
	const mark = "…(cut)"
	if len(s) <= n {
		return s
	}
	if n <= len(mark) {
		return s[:n]
	}
	i := n - len(mark)
	for i > 0 && s[i]&0xC0 == 0x80 { // do not split a UTF-8 sequence
		i--
	}
	return s[:i] + mark
}

// fifoIDs sets a FIFO send's deduplication and group ids. An enqueue deduplicates on the job
// id; a successor on the job id and the message it replaces, so a send retried for the same
// delivered message is dropped by the queue, while each hop of the job is a new message.
func fifoIDs(out *core.Outgoing, a Attrs, replaces string) {
	id := strconv.FormatUint(a.ID, 10)
	out.DedupID = id
	if replaces != "" {
		out.DedupID = cut128(id + "-" + replaces)
	}
	out.GroupID = a.Group
	if out.GroupID == "" {
		out.GroupID = id
	}
}

// cut128 keeps the last 128 bytes of s (SQS's limit on a deduplication id): a message id
// differs in its tail more than in its head.
func cut128(s string) string {
	if len(s) > 128 {
		return s[len(s)-128:]
	}
	return s
}

// earlyHops is how many receives of a FIFO message may have been waits for its not-before
// time: hides of at most hop each, plus one for a delivery on the boundary.
func earlyHops(a Attrs, hop time.Duration) int {
	if a.NotBefore.IsZero() || a.SentAt.IsZero() || !a.NotBefore.After(a.SentAt) || hop <= 0 {
		return 0
	}
	w := a.NotBefore.Sub(a.SentAt)
	return int(w/hop) + 2
}
