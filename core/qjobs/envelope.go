package qjobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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

// Encode returns the body of a job message: magic, the attributes' JSON length in decimal,
// ':', the JSON, the payload. It is text when the payload is (SQS takes text bodies only).
func Encode(a Attrs, payload []byte) []byte {
	h, err := json.Marshal(a)
	if err != nil {
		panic(fmt.Sprintf("qjobs: encode attrs: %v", err)) // plain fields: cannot fail
	}
	out := make([]byte, 0, len(magic)+8+len(h)+len(payload))
	out = append(out, magic...)
	out = strconv.AppendInt(out, int64(len(h)), 10)
	out = append(out, ':')
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
	k := bytes.IndexByte(rest, ':')
	n, err := strconv.Atoi(string(rest[:max(k, 0)]))
	if k < 1 || k > 7 || err != nil || n < 0 || n > len(rest)-k-1 {
		return a, nil, fmt.Errorf("%w: bad attributes length", ErrEnvelope)
	}
	rest = rest[k+1:]
	if err := json.Unmarshal(rest[:n], &a); err != nil {
		return a, nil, fmt.Errorf("%w: attributes: %w", ErrEnvelope, err)
	}
	if err := a.Validate(); err != nil {
		return a, nil, err
	}
	return a, rest[n:], nil
}
