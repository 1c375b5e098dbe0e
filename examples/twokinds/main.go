// Command twokinds is a service with two kinds of job, welcome emails and thumbnails, that
// runs on the local runner or, with -queue, on SQS. Its handlers and its Register and Enqueue
// calls are the same code either way: only newRunner, which builds the runner, differs.
//
//	go run ./examples/twokinds -dir /tmp/jobs ada@example.com grace@example.com
//	go run ./examples/twokinds -queue URL -dlq URL [-endpoint http://127.0.0.1:4566] ada@example.com
//
// For each address given it enqueues a welcome email and a thumbnail of the user's picture,
// then works until SIGTERM or SIGINT. README and docs/concepts.md show the construction's
// diff; main_test.go runs both modes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adapters/sqs"
)

// Welcome is the email kind's payload.
type Welcome struct {
	To string `json:"to"`
}

// Thumbnail is the thumbnail kind's payload.
type Thumbnail struct {
	Image string `json:"image"`
	Width int    `json:"width"`
}

// options are the command line's settings.
type options struct {
	dir                          string // the local runner's directory
	queue, dlq, endpoint, region string // SQS: the jobs queue, its dead-letter queue, a local server
	log                          *slog.Logger
	down                         downstream // the services the handlers call
}

func main() {
	o := options{log: slog.Default(), down: printer{}}
	flag.StringVar(&o.dir, "dir", "", "the local runner's directory (without -queue)")
	flag.StringVar(&o.queue, "queue", "", "the SQS jobs queue's URL: run on SQS instead of a directory")
	flag.StringVar(&o.dlq, "dlq", "", "the SQS dead-letter queue's URL (with -queue)")
	flag.StringVar(&o.endpoint, "endpoint", "", "an SQS endpoint such as a local server; empty: AWS")
	flag.StringVar(&o.region, "region", "us-east-1", "the SQS region")
	flag.Parse()
	if (o.dir == "") == (o.queue == "") || (o.queue != "") != (o.dlq != "") {
		fmt.Fprintln(os.Stderr, "twokinds: give -dir, or -queue and -dlq")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, o, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "twokinds:", err)
		os.Exit(1)
	}
}

// runner is what the service needs of either runner: kinds are registered on it, and it runs
// them until its context ends.
type runner interface {
	sluice.Registrar
	Run(ctx context.Context) error
}

// newRunner builds the runner: the local one in o.dir, or the queue-backed one on o.queue. It
// is the only code that knows which.
func newRunner(ctx context.Context, o options) (runner, error) {
	if o.queue == "" {
		return sluice.New(o.dir, sluice.Config{Logger: o.log})
	}
	q, err := sqsQueue(ctx, o) // adapters/sqs: the jobs queue, its sender and the dead-letter sender
	if err != nil {
		return nil, err
	}
	return sluice.NewQueueRunner(q, sluice.QueueConfig{Logger: o.log})
}

// run registers both kinds, enqueues one job of each per address in signups, and works until
// ctx ends. Nothing here depends on the runner's kind.
func run(ctx context.Context, o options, signups []string) error {
	r, err := newRunner(ctx, o)
	if err != nil {
		return err
	}
	// service:begin
	emails, err := sluice.Register(r, "email", sluice.JSON[Welcome](), sendWelcome(o.down))
	if err != nil {
		return err
	}
	thumbs, err := sluice.Register(r, "thumbnail", sluice.JSON[Thumbnail](), resize(o.down))
	if err != nil {
		return err
	}
	for _, to := range signups {
		if _, err := emails.Enqueue(ctx, time.Time{}, "smtp", Welcome{To: to}); err != nil {
			return err
		}
		if _, err := thumbs.Enqueue(ctx, time.Time{}, "images", Thumbnail{Image: to + ".png", Width: 64}); err != nil {
			return err
		}
	}
	return r.Run(ctx)
	// service:end
}

// sqsQueue is the queue-backed runner's Queue: a transport and a sender on o.queue, and a
// sender to o.dlq for dead jobs.
func sqsQueue(ctx context.Context, o options) (sluice.Queue, error) {
	load := []func(*config.LoadOptions) error{config.WithRegion(o.region)}
	if o.endpoint != "" { // a local server takes any static credentials
		load = append(load, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	client, err := sqs.NewClient(ctx, sqs.ClientOptions{Endpoint: o.endpoint, Load: load})
	if err != nil {
		return sluice.Queue{}, err
	}
	t, err := sqs.New(client, sqs.Config{QueueURL: o.queue})
	if err != nil {
		return sluice.Queue{}, err
	}
	send, err := sqs.NewSender(client, sqs.Config{QueueURL: o.queue})
	if err != nil {
		return sluice.Queue{}, err
	}
	dead, err := sqs.NewSender(client, sqs.Config{QueueURL: o.dlq})
	if err != nil {
		return sluice.Queue{}, err
	}
	return sluice.Queue{Transport: t, Send: send, DeadLetter: dead}, nil
}

// downstream stands for the services the handlers call (a mail API, an image service). Each
// call carries an idempotency key, with which such a service does a repeated request once.
type downstream interface {
	Do(ctx context.Context, key, what string) error
}

// idempotencyKey names a job, not an attempt: Job.ID is the same on every attempt and delivery
// of a job, on both runners, so a second run after a crash or a lost lease repeats the key.
// The prefix keeps the keys of this service apart from other users of the same services.
func idempotencyKey(kind string, id uint64) string {
	return fmt.Sprintf("twokinds-%s-%d", kind, id)
}

// sendWelcome is the email kind's handler.
func sendWelcome(d downstream) sluice.Handler[Welcome] {
	return func(ctx context.Context, j sluice.Job[Welcome]) error {
		if j.Payload.To == "" {
			return sluice.Permanent(errors.New("welcome: no address"))
		}
		return d.Do(ctx, idempotencyKey(j.Kind, j.ID), "welcome "+j.Payload.To)
	}
}

// resize is the thumbnail kind's handler.
func resize(d downstream) sluice.Handler[Thumbnail] {
	return func(ctx context.Context, j sluice.Job[Thumbnail]) error {
		if j.Payload.Width <= 0 {
			return sluice.Permanent(fmt.Errorf("thumbnail %s: width %d", j.Payload.Image, j.Payload.Width))
		}
		return d.Do(ctx, idempotencyKey(j.Kind, j.ID), fmt.Sprintf("thumbnail %s at %d px", j.Payload.Image, j.Payload.Width))
	}
}

// printer is the command's downstream: it prints each request.
type printer struct{}

func (printer) Do(_ context.Context, key, what string) error {
	fmt.Printf("%s (idempotency key %s)\n", what, key)
	return nil
}
