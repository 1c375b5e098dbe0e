package main

import (
	"context"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adapters/sqs"
)

// TestBuildsTheWorker builds the client, transport and worker of README's SQS snippet with an
// endpoint and static credentials, without calling the queue.
func TestBuildsTheWorker(t *testing.T) {
	t.Setenv("SQS_ACCESS_KEY_ID", "test")
	t.Setenv("SQS_SECRET_ACCESS_KEY", "test")
	if err := run(context.Background(), "http://127.0.0.1:4566/000000000000/jobs", "http://127.0.0.1:4566", "us-east-1", false); err != nil {
		t.Fatal(err)
	}
}

// work is README's worker section: a worker with a 30 s window that works the queue until ctx
// ends. It is built by go test, not run (that needs a queue; examples/sqsworker runs one).
var _ = work

func work(ctx context.Context, client *awssqs.Client, url string) error {
	// worker:begin
	t, err := sqs.New(client, sqs.Config{QueueURL: url}) // github.com/sluicehq/sluice/adapters/sqs
	if err != nil {
		return err
	}
	w, err := sluice.NewWorker(t, sluice.WorkerConfig{Window: 30 * time.Second},
		func(ctx context.Context, m sluice.Message) error {
			return handle(ctx, m.Body) // nil → delete, Permanent(err) → reject, else release with backoff
		})
	if err != nil {
		return err
	}
	return w.Run(ctx)
	// worker:end
}
