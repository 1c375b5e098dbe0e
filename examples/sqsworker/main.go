// Command sqsworker works an SQS queue with a sluice Worker: each received message stays
// hidden (its visibility renewed by the lease controller) while its handler runs, then is
// deleted, released for a retry, or left for the queue's redrive policy.
//
//	sqsworker -queue-url URL [-endpoint URL] [-window 30s] [-wait 0] [-concurrency 10]
//	          [-max-receive N] [-grace 10s] [-send "a,b,c"]
//	sqsworker -create NAME [-max-receive N] -endpoint URL ...   (create the queue, then work it)
//
// The queue URL and endpoint also come from SQS_QUEUE_URL and SQS_ENDPOINT (the SDK itself
// honours AWS_ENDPOINT_URL_SQS, AWS_REGION and the usual credential sources). -max-receive
// must match the queue's redrive maxReceiveCount, so that the worker lets the queue
// dead-letter messages before retiring them itself.
//
// The handler reads the body as a few words, so that every disposition can be tried:
// "sleep=2s" sleeps first (cut short if the lease is lost or shutdown's grace ends), "fail"
// fails retryably (released after a backoff), "reject" fails permanently, a body starting
// with "poison" cannot be decoded (never handled; the redrive policy takes it), and anything
// else succeeds. It prints "handled <id> count=<n> result=<outcome> body=<body>" per message.
// SIGINT or SIGTERM starts a graceful shutdown: unstarted messages are released at once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adapters/sqs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sqsworker:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	queueURL, endpoint, create, send string
	window, wait, grace              time.Duration
	concurrency, maxReceive          int
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("sqsworker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.queueURL, "queue-url", os.Getenv("SQS_QUEUE_URL"), "queue URL (env SQS_QUEUE_URL)")
	fs.StringVar(&o.endpoint, "endpoint", os.Getenv("SQS_ENDPOINT"), "SQS endpoint override, e.g. a local server (env SQS_ENDPOINT)")
	fs.StringVar(&o.create, "create", "", "create queue `NAME` (and NAME-dlq with -max-receive) and work it")
	fs.StringVar(&o.send, "send", "", "comma-separated bodies to send before working")
	fs.DurationVar(&o.window, "window", 30*time.Second, "visibility window (whole seconds)")
	fs.DurationVar(&o.wait, "wait", 0, "long-poll wait (0: min(20s, window/2))")
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "shutdown grace for running handlers")
	fs.IntVar(&o.concurrency, "concurrency", 10, "handlers at once")
	fs.IntVar(&o.maxReceive, "max-receive", 0, "the queue's redrive maxReceiveCount (0: no redrive policy)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if (o.queueURL == "") == (o.create == "") {
		return o, errors.New("give exactly one of -queue-url (or SQS_QUEUE_URL) and -create")
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	client, err := sqs.NewClient(ctx, sqs.ClientOptions{Endpoint: o.endpoint, MaxAttempts: 1})
	if err != nil {
		return err
	}
	if o.create != "" {
		if o.maxReceive > 0 {
			url, dlq, err := sqs.CreateQueueWithDeadLetter(ctx, client, o.create, o.maxReceive, nil)
			if err != nil {
				return err
			}
			o.queueURL = url
			fmt.Fprintf(stdout, "queue %s dead-letter %s\n", url, dlq)
		} else if o.queueURL, err = sqs.CreateQueue(ctx, client, o.create, nil); err != nil {
			return err
		} else {
			fmt.Fprintf(stdout, "queue %s\n", o.queueURL)
		}
	}
	if o.send != "" {
		for _, body := range strings.Split(o.send, ",") {
			id, err := sqs.Send(ctx, client, o.queueURL, body)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "sent %s body=%s\n", id, body)
		}
	}
	// Calls outlive ctx: shutdown still releases messages after the signal.
	tr, err := sqs.New(client, sqs.Config{QueueURL: o.queueURL, CallTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	w, err := sluice.NewWorker(tr, sluice.WorkerConfig{
		Window: o.window, Wait: o.wait, Concurrency: o.concurrency, RedriveMax: o.maxReceive,
		Grace: o.grace, Logger: logger, Decode: decode,
	}, handler(stdout))
	if err != nil {
		return err
	}
	logger.Info("sqsworker: working", "queue", o.queueURL, "window", o.window)
	err = w.Run(ctx)
	st := w.Stats()
	fmt.Fprintf(stdout, "stopped received=%d succeeded=%d released=%d permanent=%d poison=%d released-at-end=%d\n",
		st.Received, st.Succeeded, st.Released, st.Permanent, st.Poison, st.ReleasedAtEnd)
	return err
}

// decode refuses bodies starting with "poison".
func decode(m sluice.Message) error {
	if strings.HasPrefix(string(m.Body), "poison") {
		return fmt.Errorf("sqsworker: message %s: undecodable body", m.ID)
	}
	return nil
}

// handler interprets the body's words (see the command doc).
func handler(out io.Writer) sluice.WorkerHandler {
	var mu sync.Mutex
	return func(ctx context.Context, m sluice.Message) error {
		var res error
		for _, word := range strings.Fields(string(m.Body)) {
			switch {
			case strings.HasPrefix(word, "sleep="):
				d, err := time.ParseDuration(strings.TrimPrefix(word, "sleep="))
				if err != nil {
					res = sluice.Permanent(fmt.Errorf("bad %q: %w", word, err))
					break
				}
				select {
				case <-time.After(d):
				case <-ctx.Done():
					res = ctx.Err()
				}
			case word == "fail":
				res = errors.New("asked to fail")
			case word == "reject":
				res = sluice.Permanent(errors.New("asked to reject"))
			}
		}
		mu.Lock()
		fmt.Fprintf(out, "handled %s count=%d result=%s body=%s\n", m.ID, m.ReceiveCount, sluice.OutcomeName(res), m.Body)
		mu.Unlock()
		return res
	}
}
