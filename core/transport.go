package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Class says what a transport failure means for the receipt it named (docs/worker.md).
type Class int

const (
	// Retryable: the call may not have taken effect (timeout, connection refused or reset,
	// throttling, a 5xx). Try again while the lease margin allows.
	Retryable Class = iota + 1
	// Gone: the receipt is invalid or its message is not in flight; it was redelivered or deleted.
	Gone
	// Fatal: authorisation or a malformed request; retrying will not help.
	Fatal
)

func (c Class) String() string {
	switch c {
	case Retryable:
		return "retryable"
	case Gone:
		return "gone"
	case Fatal:
		return "fatal"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// TransportError is the typed error every Transport returns for a failed call or batch entry.
type TransportError struct {
	Class Class
	Op    string // the call: "receive", "change-visibility", "delete"
	Code  string // the queue's error code when it gave one, e.g. "MessageNotInflight"
	Err   error
}

func (e *TransportError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("transport: %s: %s (%s): %v", e.Op, e.Class, e.Code, e.Err)
	}
	return fmt.Sprintf("transport: %s: %s: %v", e.Op, e.Class, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// ClassOf returns the class of err: the class of the first *TransportError in its chain, and
// Retryable for any other non-nil error (an unclassified failure may not have taken effect).
// It returns 0 for nil.
func ClassOf(err error) Class {
	if err == nil {
		return 0
	}
	var te *TransportError
	if errors.As(err, &te) {
		return te.Class
	}
	return Retryable
}

// Message is one delivery of a queue message. Receipt names this delivery only: a redelivery
// of the same message carries a new receipt and a higher ReceiveCount.
type Message struct {
	ID           string
	Receipt      string
	Body         []byte
	ReceiveCount int // ApproximateReceiveCount, 1 on the first delivery
	// Attributes are the message's String and Number attributes as sent (SQS
	// MessageAttributes), values as text; nil when it has none. Read only: a delivery must
	// not change them.
	Attributes map[string]string
	// Typed holds every attribute, Binary included, with its data type, as the queue
	// delivered it; nil from a transport that reports only Attributes.
	Typed map[string]Attribute
}

// VisibilityChange asks for a receipt's message to stay hidden for Timeout (whole seconds)
// from when the queue handles the call; 0 releases it at once.
type VisibilityChange struct {
	Receipt string
	Timeout time.Duration
}

// Transport is the queue port. Batch calls take at most 10 entries and return one
// error per entry (nil for success, a *TransportError otherwise), in entry order; their second
// result is for a failure of the whole call, in which case the per-entry slice is nil.
//
// Every method takes a context first: the driver ends a long poll it no longer wants (at
// shutdown) by cancelling it, so no call outlives the worker's Run. A call whose context
// ended returns promptly; a Receive cut short may lose messages the queue already handed
// out (they reappear when their window lapses). Machines never see the context: this file is
// a port definition, the one place under core/ allowed to import package context.
type Transport interface {
	Receive(ctx context.Context, max int, wait, visibility time.Duration) ([]Message, error)
	ChangeVisibility(ctx context.Context, receipt string, timeout time.Duration) error
	ChangeVisibilityBatch(ctx context.Context, entries []VisibilityChange) ([]error, error)
	Delete(ctx context.Context, receipt string) error
	DeleteBatch(ctx context.Context, receipts []string) ([]error, error)
}

// BatchMax is the most entries one batch call (and one receive) may carry.
const BatchMax = 10
