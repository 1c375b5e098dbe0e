package core

import (
	"context"
	"errors"
	"time"
)

// Outgoing is one message to send: its body, its String attributes (SQS MessageAttributes,
// at most 10 in all with Typed; nil for none), and how long the queue keeps it invisible after
// the send (whole seconds; SQS allows at most 15 min).
type Outgoing struct {
	Body       []byte
	Attributes map[string]string
	// Typed are attributes sent with their own data type (Number, Binary, custom suffixes),
	// as a dead letter forwards what came in; a name in both maps is an error of the caller.
	Typed map[string]Attribute
	Delay time.Duration
	// DedupID and GroupID are a FIFO queue's MessageDeduplicationId and MessageGroupId;
	// empty on a standard queue.
	DedupID string
	GroupID string
}

// Attribute is one message attribute with its data type as the queue holds it: "String",
// "Number" or "Binary", optionally with a custom suffix ("Number.int"). Binary types carry
// Binary; the others carry String.
type Attribute struct {
	Type   string
	String string
	Binary []byte
}

// ErrSendUnknown is wrapped by a send error when the queue may have stored the message
// (the call timed out or the connection broke after the request was written). A sender
// never retries such a send itself: the caller decides, knowing a retry may store it twice.
var ErrSendUnknown = errors.New("transport: the send may have been stored")

// Sender is the send port of one queue (the queue-backed runner sends jobs to its queue and
// dead jobs to its dead-letter queue). SendBatch takes at most BatchMax entries and returns
// one error per entry (nil for success, a *TransportError otherwise) in entry order; its
// second result is for a failure of the whole call, with a nil per-entry slice. A failed send
// may still have taken effect: the queue delivers at least once.
type Sender interface {
	SendBatch(ctx context.Context, msgs []Outgoing) ([]error, error)
}
