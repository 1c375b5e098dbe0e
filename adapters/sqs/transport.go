package sqs

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicehq/sluice/core"
)

// Client is the part of *awssqs.Client the transport uses.
type Client interface {
	ReceiveMessage(ctx context.Context, in *awssqs.ReceiveMessageInput, optFns ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *awssqs.ChangeMessageVisibilityInput, optFns ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *awssqs.ChangeMessageVisibilityBatchInput, optFns ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityBatchOutput, error)
	DeleteMessage(ctx context.Context, in *awssqs.DeleteMessageInput, optFns ...func(*awssqs.Options)) (*awssqs.DeleteMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *awssqs.DeleteMessageBatchInput, optFns ...func(*awssqs.Options)) (*awssqs.DeleteMessageBatchOutput, error)
}

var _ Client = (*awssqs.Client)(nil)

// WaitMax is SQS's longest long poll.
const WaitMax = 20 * time.Second

// CallTimeoutDefault bounds each call when Config.CallTimeout is 0.
const CallTimeoutDefault = 10 * time.Second

// Config configures a Transport.
type Config struct {
	QueueURL string // an absolute http(s) URL, as GetQueueUrl returns it
	// CallTimeout bounds each call (a long poll gets its wait on top); default 10 s.
	CallTimeout time.Duration
}

// ErrConfig reports an invalid Config.
var ErrConfig = errors.New("sqs: invalid config")

// Transport is core.Transport on one SQS queue.
type Transport struct {
	c   Client
	cfg Config
	url *string
}

var _ core.Transport = (*Transport)(nil)

// New returns a transport for cfg.QueueURL over c.
func New(c Client, cfg Config) (*Transport, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil client", ErrConfig)
	}
	if cfg.QueueURL == "" {
		return nil, fmt.Errorf("%w: empty QueueURL", ErrConfig)
	}
	if u, err := url.Parse(cfg.QueueURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: QueueURL %q is not an http(s) URL (pass the queue's URL, not its name or ARN)", ErrConfig, cfg.QueueURL)
	}
	if cfg.CallTimeout < 0 {
		return nil, fmt.Errorf("%w: negative call timeout %v", ErrConfig, cfg.CallTimeout)
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = CallTimeoutDefault
	}
	return &Transport{c: c, cfg: cfg, url: aws.String(cfg.QueueURL)}, nil
}

// oneAttempt turns the SDK's own retries off for one call about a receipt or one send: the
// lease machine paces renewal and disposition retries itself, within the receipt's lease
// (an SDK retry could reach the queue after the machine dropped the receipt), and a resent
// message the queue already stored would be stored twice. Receives keep the client's
// retryer: they name no receipt and store nothing.
func oneAttempt(o *awssqs.Options) { o.Retryer = aws.NopRetryer{} }

// QueueURL is the queue the transport talks to.
func (t *Transport) QueueURL() string { return t.cfg.QueueURL }

func (t *Transport) callContext(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, t.cfg.CallTimeout+extra)
}

func seconds(d time.Duration) int32 { return int32(d / time.Second) }

// Receive long-polls for up to max messages, hiding them for visibility.
func (t *Transport) Receive(ctx context.Context, max int, wait, visibility time.Duration) ([]core.Message, error) {
	const op = "receive"
	if max < 1 || max > core.BatchMax || wait < 0 || visibility < 0 {
		return nil, &core.TransportError{Class: core.Fatal, Op: op, Code: "InvalidParameterValue",
			Err: fmt.Errorf("sqs: receive max %d, wait %v, visibility %v out of range", max, wait, visibility)}
	}
	wait = min(wait, WaitMax).Truncate(time.Second)
	in := &awssqs.ReceiveMessageInput{
		QueueUrl:                    t.url,
		MaxNumberOfMessages:         int32(max),
		WaitTimeSeconds:             seconds(wait),
		VisibilityTimeout:           seconds(visibility),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
		MessageAttributeNames:       []string{"All"},
	}
	ctx, cancel := t.callContext(ctx, wait)
	defer cancel()
	out, err := t.c.ReceiveMessage(ctx, in)
	if err != nil {
		return nil, classify(op, fmt.Errorf("sqs: receive from %s: %w", t.cfg.QueueURL, err))
	}
	msgs := make([]core.Message, 0, len(out.Messages))
	for _, m := range out.Messages {
		raw, ok := m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]
		count, err := strconv.Atoi(raw)
		if !ok || err != nil || count < 1 {
			return nil, &core.TransportError{Class: core.Fatal, Op: op, Code: "MissingReceiveCount",
				Err: fmt.Errorf("sqs: receive from %s: message %s has ApproximateReceiveCount %q", t.cfg.QueueURL, aws.ToString(m.MessageId), raw)}
		}
		msgs = append(msgs, core.Message{
			ID:           aws.ToString(m.MessageId),
			Receipt:      aws.ToString(m.ReceiptHandle),
			Body:         []byte(aws.ToString(m.Body)),
			ReceiveCount: count,
		})
		msgs[len(msgs)-1].Attributes, msgs[len(msgs)-1].Typed = attrsIn(m.MessageAttributes)
	}
	return msgs, nil
}

// ChangeVisibility hides the receipt's message for timeout (whole seconds) from now.
func (t *Transport) ChangeVisibility(ctx context.Context, receipt string, timeout time.Duration) error {
	const op = "change-visibility"
	ctx, cancel := t.callContext(ctx, 0)
	defer cancel()
	_, err := t.c.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{
		QueueUrl: t.url, ReceiptHandle: aws.String(receipt), VisibilityTimeout: seconds(timeout),
	}, oneAttempt)
	if err != nil {
		return classify(op, fmt.Errorf("sqs: change visibility to %v: %w", timeout, err))
	}
	return nil
}

// Delete deletes the receipt's message.
func (t *Transport) Delete(ctx context.Context, receipt string) error {
	const op = "delete"
	ctx, cancel := t.callContext(ctx, 0)
	defer cancel()
	_, err := t.c.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: t.url, ReceiptHandle: aws.String(receipt)}, oneAttempt)
	if err != nil {
		return classify(op, fmt.Errorf("sqs: delete: %w", err))
	}
	return nil
}

var entryIDs = [core.BatchMax]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}

// batchErr refuses, without a call, what SQS would refuse: an empty or oversized batch.
func batchErr(op string, n int) error {
	switch {
	case n == 0:
		return &core.TransportError{Class: core.Fatal, Op: op, Code: "EmptyBatchRequest", Err: errors.New("sqs: empty batch")}
	case n > core.BatchMax:
		return &core.TransportError{Class: core.Fatal, Op: op, Code: "TooManyEntriesInBatchRequest",
			Err: fmt.Errorf("sqs: batch of %d entries, at most %d", n, core.BatchMax)}
	}
	return nil
}

// ChangeVisibilityBatch sends one ChangeMessageVisibilityBatch; one error per entry.
func (t *Transport) ChangeVisibilityBatch(ctx context.Context, entries []core.VisibilityChange) ([]error, error) {
	const op = "change-visibility"
	if err := batchErr(op, len(entries)); err != nil {
		return nil, err
	}
	in := &awssqs.ChangeMessageVisibilityBatchInput{QueueUrl: t.url,
		Entries: make([]types.ChangeMessageVisibilityBatchRequestEntry, len(entries))}
	for i, e := range entries {
		in.Entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
			Id: aws.String(entryIDs[i]), ReceiptHandle: aws.String(e.Receipt), VisibilityTimeout: seconds(e.Timeout),
		}
	}
	ctx, cancel := t.callContext(ctx, 0)
	defer cancel()
	out, err := t.c.ChangeMessageVisibilityBatch(ctx, in, oneAttempt)
	if err != nil {
		return nil, classify(op, fmt.Errorf("sqs: change visibility batch of %d: %w", len(entries), err))
	}
	ok := make([]string, len(out.Successful))
	for i, s := range out.Successful {
		ok[i] = aws.ToString(s.Id)
	}
	return entryResults(op, len(entries), ok, out.Failed), nil
}

// DeleteBatch sends one DeleteMessageBatch; one error per entry.
func (t *Transport) DeleteBatch(ctx context.Context, receipts []string) ([]error, error) {
	const op = "delete"
	if err := batchErr(op, len(receipts)); err != nil {
		return nil, err
	}
	in := &awssqs.DeleteMessageBatchInput{QueueUrl: t.url,
		Entries: make([]types.DeleteMessageBatchRequestEntry, len(receipts))}
	for i, r := range receipts {
		in.Entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(entryIDs[i]), ReceiptHandle: aws.String(r)}
	}
	ctx, cancel := t.callContext(ctx, 0)
	defer cancel()
	out, err := t.c.DeleteMessageBatch(ctx, in, oneAttempt)
	if err != nil {
		return nil, classify(op, fmt.Errorf("sqs: delete batch of %d: %w", len(receipts), err))
	}
	ok := make([]string, len(out.Successful))
	for i, s := range out.Successful {
		ok[i] = aws.ToString(s.Id)
	}
	return entryResults(op, len(receipts), ok, out.Failed), nil
}

// codeNoEntryResult is the code of a batch entry SQS answered neither way.
const codeNoEntryResult = "NoEntryResult"

// EntryError is a failed batch entry as SQS reported it.
type EntryError struct {
	Code        string
	Message     string
	SenderFault bool
}

func (e *EntryError) Error() string {
	fault := "server"
	if e.SenderFault {
		fault = "sender"
	}
	return fmt.Sprintf("sqs: batch entry failed (%s fault): %s: %s", fault, e.Code, e.Message)
}

// entryResults maps per-entry results (by id "0".."n-1") back to entry order.
func entryResults(op string, n int, successful []string, failed []types.BatchResultErrorEntry) []error {
	errs := make([]error, n)
	seen := make([]bool, n)
	index := func(id string) int {
		i, err := strconv.Atoi(id)
		if err != nil || i < 0 || i >= n || entryIDs[i] != id {
			return -1
		}
		return i
	}
	for _, id := range successful {
		if i := index(id); i >= 0 {
			seen[i] = true
		}
	}
	for _, f := range failed {
		i := index(aws.ToString(f.Id))
		if i < 0 {
			continue
		}
		seen[i] = true
		errs[i] = classifyEntry(op, &EntryError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault})
	}
	for i := range errs {
		if !seen[i] {
			errs[i] = &core.TransportError{Class: core.Retryable, Op: op, Code: codeNoEntryResult,
				Err: fmt.Errorf("sqs: batch answered neither success nor failure for entry %d", i)}
		}
	}
	return errs
}
