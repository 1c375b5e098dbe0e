// Command sqsworker is README's SQS quick start: it builds an SQS client (region,
// credentials, endpoint), the transport of adapters/sqs over it, and a worker, and works the
// queue given by -queue until interrupted. Without -queue it only builds them and exits.
//
// README shows the region between the "README:begin" and "README:end" lines of run;
// readme_test.go in the parent directory fails if the two differ.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adapters/sqs"
)

func main() {
	queueURL := flag.String("queue", "", "the queue's URL, as GetQueueUrl returns it")
	endpoint := flag.String("endpoint", "", "an SQS endpoint other than AWS's (a local server)")
	region := flag.String("region", "eu-west-1", "the AWS region")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *queueURL, *endpoint, *region, *queueURL != ""); err != nil {
		log.Fatal(err)
	}
}

// handle stands for the real work.
func handle(ctx context.Context, body []byte) error {
	fmt.Printf("handling %s\n", body)
	return nil
}

// run builds the client, the transport and the worker, and works the queue if work is set.
func run(ctx context.Context, queueURL, endpoint, region string, work bool) error {
	if queueURL == "" {
		queueURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs" // built, never called
	}
	// README:begin
	load := []func(*config.LoadOptions) error{config.WithRegion(region)}
	if key := os.Getenv("SQS_ACCESS_KEY_ID"); key != "" {
		// Static credentials; without them the SDK's default chain is used (environment,
		// shared files, the instance's or task's role).
		load = append(load, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(key, os.Getenv("SQS_SECRET_ACCESS_KEY"), "")))
	}
	client, err := sqs.NewClient(ctx, sqs.ClientOptions{
		Endpoint:    endpoint, // "" for AWS; e.g. "http://127.0.0.1:4566" for a local server
		MaxAttempts: 1,        // the worker paces retries itself
		Load:        load,
	})
	if err != nil {
		return err
	}
	transport, err := sqs.New(client, sqs.Config{QueueURL: queueURL})
	if err != nil {
		return err
	}
	w, err := sluice.NewWorker(transport, sluice.WorkerConfig{},
		func(ctx context.Context, m sluice.Message) error {
			return handle(ctx, m.Body) // nil: delete; Permanent(err): reject; else retry
		})
	if err != nil {
		return err
	}
	// README:end
	if !work {
		return nil
	}
	return w.Run(ctx) // until interrupted; then it releases what it holds and returns
}
