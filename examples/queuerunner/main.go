// Command queuerunner runs email jobs from an SQS queue with sluice's queue-backed runner:
// start as many processes as you like on one queue. It is the local runner's example moved to
// SQS by changing the runner's construction only (see README and docs/queue.md).
//
//	queuerunner -queue URL -dlq URL [-endpoint http://127.0.0.1:4566] [-done FILE] [-trace FILE]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adapters/sqs"
)

// Email is the job's payload.
type Email struct {
	To string
}

type options struct {
	endpoint, region, queue, dlq, done, trace string
	window, work, grace                       time.Duration
	concurrency                               int
	fifo                                      bool
}

func main() {
	var o options
	flag.StringVar(&o.endpoint, "endpoint", "", "SQS endpoint (a local server); empty: AWS")
	flag.StringVar(&o.region, "region", "us-east-1", "region")
	flag.StringVar(&o.queue, "queue", "", "the jobs queue's URL")
	flag.StringVar(&o.dlq, "dlq", "", "the dead-letter queue's URL")
	flag.StringVar(&o.done, "done", "", "append each delivered email's address to this file")
	flag.StringVar(&o.trace, "trace", "", "append a line to this file when each attempt starts and ends")
	flag.DurationVar(&o.window, "window", 30*time.Second, "visibility window")
	flag.IntVar(&o.concurrency, "concurrency", 10, "handlers at once")
	flag.BoolVar(&o.fifo, "fifo", false, "the queues are FIFO queues (names ending .fifo)")
	flag.DurationVar(&o.work, "work", 20*time.Millisecond, "how long delivering one email takes")
	flag.DurationVar(&o.grace, "grace", 0, "how long running handlers may finish after a stop (0: the default)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// newRunner builds the queue-backed runner and registers the email kind on it. With the
// local runner, the first statement would be sluice.New(dir, cfg); nothing else changes.
func newRunner(ctx context.Context, o options, log *slog.Logger) (*sluice.QueueRunner, *sluice.Kind[Email], error) {
	load := []func(*config.LoadOptions) error{config.WithRegion(o.region)}
	if o.endpoint != "" {
		load = append(load, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	client, err := sqs.NewClient(ctx, sqs.ClientOptions{Endpoint: o.endpoint, Load: load})
	if err != nil {
		return nil, nil, err
	}
	t, err := sqs.New(client, sqs.Config{QueueURL: o.queue})
	if err != nil {
		return nil, nil, err
	}
	send, err := sqs.NewSender(client, sqs.Config{QueueURL: o.queue})
	if err != nil {
		return nil, nil, err
	}
	dead, err := sqs.NewSender(client, sqs.Config{QueueURL: o.dlq})
	if err != nil {
		return nil, nil, err
	}
	// README:begin
	// With the local runner this is r, err := sluice.New(dir, cfg); the rest is unchanged.
	r, err := sluice.NewQueueRunner(sluice.Queue{Transport: t, Send: send, DeadLetter: dead}, sluice.QueueConfig{
		Policy:  sluice.Policy{Attempts: 3, Base: time.Second, Cap: 4 * time.Second},
		Circuit: sluice.Circuit{Threshold: 50, Window: 10 * time.Second, Cooldown: 5 * time.Second},
		Worker:  sluice.WorkerConfig{Window: o.window, Concurrency: o.concurrency, Grace: o.grace},
		FIFO:    o.fifo,
		Logger:  log,
	})
	if err != nil {
		return nil, nil, err
	}
	emails, err := sluice.Register(r, "email", sluice.JSON[Email](), traced(o.trace, deliver(o.done, o.work)))
	// README:end
	return r, emails, err
}

// deliver is the handler: "flaky" targets fail their first attempt, "busy" ones every
// attempt (retryably), "bad" ones always fail permanently, "slow" ones take 10 times as long;
// the rest succeed after a short while.
func deliver(doneFile string, work time.Duration) sluice.Handler[Email] {
	return func(ctx context.Context, j sluice.Job[Email]) error {
		d := work
		if j.Target == "slow" {
			d *= 10
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
		switch {
		case j.Target == "bad":
			return sluice.Permanent(errors.New("mailbox does not exist"))
		case j.Target == "busy":
			return fmt.Errorf("smtp: 451 mailbox busy (attempt %d)", j.Attempt)
		case j.Target == "flaky" && j.Attempt == 1:
			return errors.New("smtp: 421 try again later")
		}
		if doneFile != "" {
			if err := appendLine(doneFile, j.Payload.To); err != nil {
				return err
			}
		}
		return nil
	}
}

// traced appends a line to file when an attempt starts and when it ends, for a test to
// check the fleet from outside: tab-separated "start" or "end", the address, the job's id,
// its attempt, this process's id, the run's number in this process, the time (Unix ns), and
// at the end "ok" or the error.
func traced(file string, h sluice.Handler[Email]) sluice.Handler[Email] {
	if file == "" {
		return h
	}
	var runs atomic.Int64
	return func(ctx context.Context, j sluice.Job[Email]) error {
		run := runs.Add(1)
		line := func(what string) string {
			return fmt.Sprintf("%s\t%s\t%v\t%d\t%d\t%d\t%d", what, j.Payload.To, j.ID, j.Attempt, os.Getpid(), run, time.Now().UnixNano())
		}
		if err := appendLine(file, line("start")); err != nil {
			return err
		}
		err := h(ctx, j)
		res := "ok"
		if err != nil {
			res = strings.ReplaceAll(err.Error(), "\n", " ")
		}
		if werr := appendLine(file, line("end")+"\t"+res); werr != nil && err == nil {
			return werr
		}
		return err
	}
}

// appendLine appends one line with a single O_APPEND write: lines from several processes
// never interleave.
func appendLine(file, line string) error {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func run(ctx context.Context, o options) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r, _, err := newRunner(ctx, o, log)
	if err != nil {
		return err
	}
	return r.Run(ctx)
}
