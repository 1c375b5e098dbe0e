package qjobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core"
)

// Attrs are a job's attributes, carried with every message of the job as message attributes
// (Encode); the body is the payload alone.
type Attrs struct {
	// ID names the job across every message of it (re-sends, dead letters); drawn at
	// enqueue, never 0 on a job enqueued by this version (0: a message of an older one).
	ID       uint64    `json:"-"`
	Kind     string    `json:"-"`
	Target   string    `json:"-"`
	FirstDue time.Time `json:"-"`
	// NotBefore: a delivery before it runs nothing; zero means none.
	NotBefore time.Time `json:"n,omitzero"`
	// Attempts is the number of handler outcomes (attempts that reported) before this
	// message was sent.
	Attempts int `json:"-"`
	// Lost is the number of deliveries of the job that ended without a handler outcome
	// (a crash, a lost lease, a lost receive answer, a stop) before this message was sent.
	Lost int `json:"l,omitempty"`
	// Group is the job's FIFO message group (WithGroup); empty: the job's own id.
	Group string `json:"g,omitempty"`
	// SentAt is when a FIFO message with a not-before time was sent: its waits are hides,
	// and this bounds how many of its receives were waits (not lost deliveries).
	SentAt time.Time `json:"s,omitzero"`
	// Key is the job's flow key (WithKey): its kind's KeyLimit and KeyRate count per key.
	Key string `json:"-"`
	// Timeout bounds each attempt of the job, replacing its kind's Flow.Timeout when > 0.
	Timeout time.Duration `json:"t,omitempty"`
	// Waits counts the flow waits of the job: deliveries over a flow limit of their process,
	// re-sent without an attempt (bounded by Config.WaitMax).
	Waits int `json:"w,omitempty"`
	// AttemptsMax and Deadline replace the policy's for this job when > 0.
	AttemptsMax int           `json:"m,omitempty"`
	Deadline    time.Duration `json:"d,omitempty"`
	// LastErr is the error of the last failed attempt; Reason why the job died (dead letters).
	LastErr string `json:"e,omitempty"`
	Reason  Reason `json:"r,omitempty"`
}

// Reason says why a job was dead-lettered.
type Reason string

const (
	ReasonSpent     Reason = "attempts-spent"
	ReasonLate      Reason = "deadline"
	ReasonPermanent Reason = "permanent"
	// ReasonLost: more deliveries ended without a handler outcome than the delivery budget.
	ReasonLost Reason = "deliveries-lost"
	// ReasonWaits: the job waited for its flow limits more than Config.WaitMax times.
	ReasonWaits Reason = "flow-waits"
)

// ErrEnvelope is wrapped by every Decode error.
var ErrEnvelope = errors.New("qjobs: not a job message")

// The message attributes of a job. Kind, target, first due time and attempt count have one
// each so other tools (consoles, filters) can read them; the rest (NotBefore, AttemptsMax,
// Deadline, LastErr, Reason) travel as one JSON object, keeping the total under SQS's 10.
const (
	AttrID       = "sluice-id" // the job id, decimal; absent on messages of older versions
	AttrKind     = "sluice-kind"
	AttrTarget   = "sluice-target"
	AttrFirstDue = "sluice-first-due" // RFC 3339, nanoseconds, UTC
	AttrAttempt  = "sluice-attempt"   // attempts made before this message was sent, decimal
	AttrOpts     = "sluice-opts"      // JSON; absent when every field is zero
	AttrKey      = "sluice-key"       // the flow key (WithKey); absent: the key ""
)

// Validate reports the first attribute a job message cannot carry.
func (a Attrs) Validate() error {
	if err := a.check(); err != nil {
		return fmt.Errorf("%w: %w", ErrEnvelope, err)
	}
	return nil
}

func (a Attrs) check() error {
	switch {
	case a.Kind == "" || strings.ContainsRune(a.Kind, 0):
		return fmt.Errorf("kind %q must be non-empty, without NUL", a.Kind)
	case a.Target == "":
		return errors.New("empty target")
	case a.Attempts < 0 || a.AttemptsMax < 0 || a.Deadline < 0 || a.Lost < 0:
		return fmt.Errorf("negative attempts (%d), attempts max (%d), deadline (%v) or lost deliveries (%d)", a.Attempts, a.AttemptsMax, a.Deadline, a.Lost)
	case a.Timeout < 0 || a.Waits < 0:
		return fmt.Errorf("negative attempt timeout (%v) or flow waits (%d)", a.Timeout, a.Waits)
	}
	return nil
}

// Encode returns a job message: the attributes as message attributes, payload as the body
// (not copied).
func Encode(a Attrs, payload []byte) core.Outgoing {
	m := map[string]string{
		AttrKind:     a.Kind,
		AttrTarget:   a.Target,
		AttrFirstDue: a.FirstDue.UTC().Format(time.RFC3339Nano),
		AttrAttempt:  strconv.Itoa(a.Attempts),
	}
	if a.ID != 0 {
		m[AttrID] = strconv.FormatUint(a.ID, 10)
	}
	if a.Key != "" {
		m[AttrKey] = a.Key
	}
	if opts, err := json.Marshal(a); err != nil {
		panic(fmt.Sprintf("qjobs: encode attrs: %v", err)) // plain fields: cannot fail
	} else if string(opts) != "{}" {
		m[AttrOpts] = string(opts)
	}
	return core.Outgoing{Body: payload, Attributes: m}
}

// Size is what SQS counts against its message size limit: the body, and each attribute's
// name, data type ("String" for Attributes) and value.
func Size(m core.Outgoing) int {
	n := len(m.Body)
	for k, v := range m.Attributes { // a sum: order does not matter
		n += len(k) + len("String") + len(v)
	}
	for k, v := range m.Typed {
		n += len(k) + len(v.Type) + len(v.String) + len(v.Binary)
	}
	return n
}

// AttrsMax is the most message attributes SQS takes on one message.
const AttrsMax = 10

// Decode reads a job message's attributes; its payload is the body. A message without the
// kind attribute is not a job (sent by something else, or an attribute was lost).
func Decode(m core.Message) (Attrs, []byte, error) {
	var a Attrs
	kind, ok := m.Attributes[AttrKind]
	if !ok {
		return a, nil, fmt.Errorf("%w: no %s attribute", ErrEnvelope, AttrKind)
	}
	if raw := m.Attributes[AttrOpts]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &a); err != nil {
			return Attrs{}, nil, fmt.Errorf("%w: %s: %w", ErrEnvelope, AttrOpts, err)
		}
	}
	a.Kind, a.Target, a.Key = kind, m.Attributes[AttrTarget], m.Attributes[AttrKey]
	due, err := time.Parse(time.RFC3339Nano, m.Attributes[AttrFirstDue])
	if err != nil {
		return Attrs{}, nil, fmt.Errorf("%w: %s: %w", ErrEnvelope, AttrFirstDue, err)
	}
	a.FirstDue = due
	if a.Attempts, err = strconv.Atoi(m.Attributes[AttrAttempt]); err != nil {
		return Attrs{}, nil, fmt.Errorf("%w: %s: %w", ErrEnvelope, AttrAttempt, err)
	}
	if raw, ok := m.Attributes[AttrID]; ok {
		if a.ID, err = strconv.ParseUint(raw, 10, 64); err != nil || a.ID == 0 {
			return Attrs{}, nil, fmt.Errorf("%w: %s %q: want a decimal id above 0", ErrEnvelope, AttrID, cut(raw))
		}
	}
	if err := a.Validate(); err != nil {
		return Attrs{}, nil, err
	}
	return a, m.Body, nil
}
