package sqs

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// ClientOptions tune NewClient. The zero value is the SDK's defaults.
type ClientOptions struct {
	// Endpoint overrides the SQS endpoint (BaseEndpoint), e.g. "http://127.0.0.1:4566" for a
	// local server; "" resolves it the SDK's normal way.
	Endpoint string
	// MaxAttempts caps the SDK's own retries per call (1: none); 0 keeps the SDK default.
	// It applies to receives only: the Transport makes one attempt at every call naming a
	// receipt, whose retries the lease controller paces itself, and a Sender at every send.
	MaxAttempts int
	// Load is passed to config.LoadDefaultConfig (region, credentials, profile, ...).
	Load []func(*config.LoadOptions) error
}

// NewClient loads the SDK configuration the normal way (environment, shared files, IMDS) and
// returns an SQS client, pointed at opts.Endpoint when set.
func NewClient(ctx context.Context, opts ClientOptions) (*awssqs.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx, opts.Load...)
	if err != nil {
		return nil, fmt.Errorf("sqs: load AWS config: %w", err)
	}
	return awssqs.NewFromConfig(cfg, func(o *awssqs.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		if opts.MaxAttempts > 0 {
			o.RetryMaxAttempts = opts.MaxAttempts
		}
	}), nil
}

// AdminClient is the part of *awssqs.Client the helpers below use.
type AdminClient interface {
	CreateQueue(ctx context.Context, in *awssqs.CreateQueueInput, optFns ...func(*awssqs.Options)) (*awssqs.CreateQueueOutput, error)
	GetQueueAttributes(ctx context.Context, in *awssqs.GetQueueAttributesInput, optFns ...func(*awssqs.Options)) (*awssqs.GetQueueAttributesOutput, error)
	SendMessage(ctx context.Context, in *awssqs.SendMessageInput, optFns ...func(*awssqs.Options)) (*awssqs.SendMessageOutput, error)
}

var _ AdminClient = (*awssqs.Client)(nil)

// CreateQueue creates (or finds, if it exists with the same attributes) a standard queue and
// returns its URL.
func CreateQueue(ctx context.Context, c AdminClient, name string, attrs map[string]string) (string, error) {
	out, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", fmt.Errorf("sqs: create queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// CreateQueueWithDeadLetter creates the dead-letter queue name+"-dlq", then the queue name with
// a redrive policy moving a message there once it has been received maxReceiveCount times.
func CreateQueueWithDeadLetter(ctx context.Context, c AdminClient, name string, maxReceiveCount int, attrs map[string]string) (url, dlqURL string, err error) {
	if maxReceiveCount < 1 {
		return "", "", fmt.Errorf("sqs: create queue %s: maxReceiveCount %d < 1", name, maxReceiveCount)
	}
	dlqURL, err = CreateQueue(ctx, c, name+"-dlq", nil)
	if err != nil {
		return "", "", err
	}
	got, err := c.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{
		QueueUrl: aws.String(dlqURL), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", "", fmt.Errorf("sqs: read the ARN of %s: %w", dlqURL, err)
	}
	arn := got.Attributes[string(types.QueueAttributeNameQueueArn)]
	if arn == "" {
		return "", "", fmt.Errorf("sqs: queue %s has no ARN", dlqURL)
	}
	policy, err := json.Marshal(map[string]string{"deadLetterTargetArn": arn, "maxReceiveCount": strconv.Itoa(maxReceiveCount)})
	if err != nil {
		return "", "", fmt.Errorf("sqs: encode redrive policy: %w", err)
	}
	all := maps.Clone(attrs)
	if all == nil {
		all = map[string]string{}
	}
	all[string(types.QueueAttributeNameRedrivePolicy)] = string(policy)
	url, err = CreateQueue(ctx, c, name, all)
	return url, dlqURL, err
}

// Send sends one message and returns its id.
func Send(ctx context.Context, c AdminClient, queueURL, body string) (string, error) {
	out, err := c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)})
	if err != nil {
		return "", fmt.Errorf("sqs: send to %s: %w", queueURL, err)
	}
	return aws.ToString(out.MessageId), nil
}
