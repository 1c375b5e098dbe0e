package qjobs

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Attrs are a job's attributes, carried with every message of the job.
type Attrs struct {
	Kind     string    `json:"k"`
	Target   string    `json:"t"`
	FirstDue time.Time `json:"f"`
	// NotBefore: a delivery before it runs nothing; zero means none.
	NotBefore time.Time `json:"n,omitzero"`
	// Attempts is the number of attempts made before this message was sent.
	Attempts int `json:"a,omitempty"`
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
)

// ErrEnvelope is wrapped by every Decode error.
var ErrEnvelope = errors.New("qjobs: not a job message")

// magic opens every job message's body; the version lets a later format be told apart.
const magic = "sj1"

// Validate reports the first attribute a job message cannot carry.
func (a Attrs) Validate() error {
	switch {
	case a.Kind == "" || strings.ContainsRune(a.Kind, 0):
		return fmt.Errorf("%w: kind %q must be non-empty, without NUL", ErrEnvelope, a.Kind)
	case a.Target == "":
		return fmt.Errorf("%w: empty target", ErrEnvelope)
	case a.Attempts < 0 || a.AttemptsMax < 0 || a.Deadline < 0:
		return fmt.Errorf("%w: negative attempts (%d), attempts max (%d) or deadline (%v)", ErrEnvelope, a.Attempts, a.AttemptsMax, a.Deadline)
	}
	return nil
}

// Encode returns the body of a job message: magic, the attributes' length and JSON, payload.
func Encode(a Attrs, payload []byte) []byte {
	h, err := json.Marshal(a)
	if err != nil {
		panic(fmt.Sprintf("qjobs: encode attrs: %v", err)) // plain fields: cannot fail
	}
	out := make([]byte, 0, len(magic)+binary.MaxVarintLen64+len(h)+len(payload))
	out = append(out, magic...)
	out = binary.AppendUvarint(out, uint64(len(h)))
	out = append(out, h...)
	return append(out, payload...)
}

// Decode splits a job message's body into its attributes and payload.
func Decode(body []byte) (Attrs, []byte, error) {
	var a Attrs
	if len(body) < len(magic) || string(body[:len(magic)]) != magic {
		return a, nil, fmt.Errorf("%w: the body does not open with %q", ErrEnvelope, magic)
	}
	rest := body[len(magic):]
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > uint64(len(rest)-k) {
		return a, nil, fmt.Errorf("%w: bad attributes length", ErrEnvelope)
	}
	rest = rest[k:]
	if err := json.Unmarshal(rest[:n], &a); err != nil {
		return a, nil, fmt.Errorf("%w: attributes: %w", ErrEnvelope, err)
	}
	if err := a.Validate(); err != nil {
		return a, nil, err
	}
	return a, rest[n:], nil
}
