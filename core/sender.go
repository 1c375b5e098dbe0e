package core

import (
	"context"
	"time"
)

// Outgoing is one message to send: its body, its String attributes (SQS MessageAttributes,
// at most 10; nil for none), and how long the queue keeps it invisible after the send (whole
// seconds; SQS allows at most 15 min).
type Outgoing struct {
	Body       []byte
	Attributes map[string]string
	Delay      time.Duration
}

// Sender is the send port of one queue (the queue-backed runner sends jobs to its queue and
// dead jobs to its dead-letter queue). SendBatch takes at most BatchMax entries and returns
// one error per entry (nil for success, a *TransportError otherwise) in entry order; its
// second result is for a failure of the whole call, with a nil per-entry slice. A failed send
// may still have taken effect: the queue delivers at least once.
type Sender interface {
	SendBatch(ctx context.Context, msgs []Outgoing) ([]error, error)
}
