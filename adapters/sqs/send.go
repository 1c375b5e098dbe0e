package sqs

import (
	"context"
	"fmt"

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
// SendMessageBatch. Sends keep the client's retryer: they name no receipt, and a duplicate
// send is what at-least-once delivery allows.
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

// SendBatch sends msgs (1..10); one error per entry.
func (s *Sender) SendBatch(ctx context.Context, msgs []core.Outgoing) ([]error, error) {
	const op = "send"
	if err := batchErr(op, len(msgs)); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	if len(msgs) == 1 {
		_, err := s.c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: s.url,
			MessageBody: aws.String(string(msgs[0].Body)), DelaySeconds: seconds(msgs[0].Delay),
			MessageAttributes: attrsOut(msgs[0].Attributes)})
		if err != nil {
			return []error{classify(op, fmt.Errorf("sqs: send to %s: %w", s.cfg.QueueURL, err))}, nil
		}
		return []error{nil}, nil
	}
	in := &awssqs.SendMessageBatchInput{QueueUrl: s.url, Entries: make([]types.SendMessageBatchRequestEntry, len(msgs))}
	for i, m := range msgs {
		in.Entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(entryIDs[i]),
			MessageBody: aws.String(string(m.Body)), DelaySeconds: seconds(m.Delay),
			MessageAttributes: attrsOut(m.Attributes)}
	}
	out, err := s.c.SendMessageBatch(ctx, in)
	if err != nil {
		return nil, classify(op, fmt.Errorf("sqs: send batch of %d to %s: %w", len(msgs), s.cfg.QueueURL, err))
	}
	ok := make([]string, len(out.Successful))
	for i, e := range out.Successful {
		ok[i] = aws.ToString(e.Id)
	}
	return entryResults(op, len(msgs), ok, out.Failed), nil
}

// nopClient lets NewSender reuse New's config checks; it is never called.
type nopClient struct{ Client }

// attrsOut maps String attributes to SQS message attributes; nil for none.
func attrsOut(a map[string]string) map[string]types.MessageAttributeValue {
	if len(a) == 0 {
		return nil
	}
	out := make(map[string]types.MessageAttributeValue, len(a))
	for k, v := range a {
		out[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	return out
}

// attrsIn maps received message attributes back: String and Number ones by their text value
// (Number is text on the wire); Binary ones are left out, the port carries strings only.
func attrsIn(a map[string]types.MessageAttributeValue) map[string]string {
	var out map[string]string
	for k, v := range a {
		if v.StringValue == nil {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(a))
		}
		out[k] = *v.StringValue
	}
	return out
}
