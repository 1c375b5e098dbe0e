package sqs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicehq/sluice/core"
)

// SendClient is the part of *awssqs.Client a Sender uses.
type SendClient interface {
	SendMessage(ctx context.Context, in *awssqs.SendMessageInput, optFns ...func(*awssqs.Options)) (*awssqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *awssqs.SendMessageBatchInput, optFns ...func(*awssqs.Options)) (*awssqs.SendMessageBatchOutput, error)
}

var _ SendClient = (*awssqs.Client)(nil)

// Sender is core.Sender on one SQS queue: one message is a SendMessage, more a
// SendMessageBatch. Each send is one attempt (the SDK's retryer is off for it): a blind
// resend of a message the queue may already hold stores it twice. A send whose outcome is
// unknown fails with an error wrapping core.ErrSendUnknown, and the caller decides.
type Sender struct {
	c   SendClient
	cfg Config
	url *string
}

var _ core.Sender = (*Sender)(nil)

// NewSender returns a sender for cfg.QueueURL over c (Config as for New).
func NewSender(c SendClient, cfg Config) (*Sender, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil client", ErrConfig)
	}
	probe, err := New(nopClient{}, cfg) // the same checks and defaults as a Transport's
	if err != nil {
		return nil, err
	}
	return &Sender{c: c, cfg: probe.cfg, url: aws.String(probe.cfg.QueueURL)}, nil
}

// DelayMax is the longest delay SQS takes on a message.
const DelayMax = 15 * time.Minute

// SendBatch sends msgs (1..10); one error per entry. A delay outside 0..DelayMax, or
// attributes attrsOut refuses, fail the call Fatal without sending anything.
func (s *Sender) SendBatch(ctx context.Context, msgs []core.Outgoing) ([]error, error) {
	const op = "send"
	if err := batchErr(op, len(msgs)); err != nil {
		return nil, err
	}
	attrs := make([]map[string]types.MessageAttributeValue, len(msgs))
	for i, m := range msgs {
		var err error
		if m.Delay < 0 || m.Delay > DelayMax {
			err = fmt.Errorf("delay %v outside 0..%v", m.Delay, DelayMax)
		} else {
			attrs[i], err = attrsOut(m)
		}
		if err != nil {
			return nil, &core.TransportError{Class: core.Fatal, Op: op, Code: "InvalidParameterValue",
				Err: fmt.Errorf("sqs: send entry %d to %s: %w", i, s.cfg.QueueURL, err)}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	if len(msgs) == 1 {
		m := msgs[0]
		_, err := s.c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: s.url,
			MessageBody: aws.String(string(m.Body)), DelaySeconds: seconds(m.Delay), MessageAttributes: attrs[0],
			MessageDeduplicationId: optional(m.DedupID), MessageGroupId: optional(m.GroupID)}, oneAttempt)
		if err != nil {
			return []error{classifySend(op, fmt.Errorf("sqs: send to %s: %w", s.cfg.QueueURL, err))}, nil
		}
		return []error{nil}, nil
	}
	in := &awssqs.SendMessageBatchInput{QueueUrl: s.url, Entries: make([]types.SendMessageBatchRequestEntry, len(msgs))}
	for i, m := range msgs {
		in.Entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(entryIDs[i]),
			MessageBody: aws.String(string(m.Body)), DelaySeconds: seconds(m.Delay), MessageAttributes: attrs[i],
			MessageDeduplicationId: optional(m.DedupID), MessageGroupId: optional(m.GroupID)}
	}
	out, err := s.c.SendMessageBatch(ctx, in, oneAttempt)
	if err != nil {
		return nil, classifySend(op, fmt.Errorf("sqs: send batch of %d to %s: %w", len(msgs), s.cfg.QueueURL, err))
	}
	ok := make([]string, len(out.Successful))
	for i, e := range out.Successful {
		ok[i] = aws.ToString(e.Id)
	}
	errs := entryResults(op, len(msgs), ok, out.Failed)
	for i, e := range errs {
		// SQS named neither success nor failure for the entry: it may hold it.
		if te, isTE := e.(*core.TransportError); isTE && te.Code == codeNoEntryResult {
			te.Err = unknown(te.Err)
			errs[i] = te
		}
	}
	return errs, nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return aws.String(s)
}

// nopClient lets NewSender reuse New's config checks; it is never called.
type nopClient struct{ Client }

// attrsOut maps a message's attributes (String ones and typed ones) to SQS message
// attributes; nil for none. A name in both maps, or a Binary type without bytes or a
// String or Number type with bytes, is the caller's error.
func attrsOut(m core.Outgoing) (map[string]types.MessageAttributeValue, error) {
	if len(m.Attributes)+len(m.Typed) == 0 {
		return nil, nil
	}
	out := make(map[string]types.MessageAttributeValue, len(m.Attributes)+len(m.Typed))
	for k, v := range m.Attributes {
		out[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	for k, v := range m.Typed {
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("attribute %q is both in Attributes and Typed", k)
		}
		binary := isBinary(v.Type)
		switch {
		case binary && v.String != "", !binary && v.Binary != nil:
			return nil, fmt.Errorf("attribute %q of type %q carries the wrong kind of value (Binary types carry bytes, the others text)", k, v.Type)
		case binary:
			out[k] = types.MessageAttributeValue{DataType: aws.String(v.Type), BinaryValue: v.Binary}
		default:
			out[k] = types.MessageAttributeValue{DataType: aws.String(v.Type), StringValue: aws.String(v.String)}
		}
	}
	return out, nil
}

// isBinary reports a Binary data type, with or without a custom suffix ("Binary.gz").
func isBinary(dataType string) bool {
	base, _, _ := strings.Cut(dataType, ".")
	return base == "Binary"
}

// attrsIn maps received message attributes back: every one with its data type (typed),
// and the String and Number ones by their text value (Number is text on the wire).
func attrsIn(a map[string]types.MessageAttributeValue) (text map[string]string, typed map[string]core.Attribute) {
	if len(a) == 0 {
		return nil, nil
	}
	typed = make(map[string]core.Attribute, len(a))
	for k, v := range a {
		t := core.Attribute{Type: aws.ToString(v.DataType)}
		if isBinary(t.Type) {
			t.Binary = append([]byte{}, v.BinaryValue...)
			typed[k] = t
			continue
		}
		t.String = aws.ToString(v.StringValue)
		typed[k] = t
		if v.StringValue != nil {
			if text == nil {
				text = make(map[string]string, len(a))
			}
			text[k] = *v.StringValue
		}
	}
	return text, typed
}
