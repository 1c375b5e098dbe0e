package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sim/queue"
)

// openExample opens a string runner in a new temporary directory; done closes it and
// removes the directory.
func openExample(cfg sluice.Config, h sluice.Handler[string]) (r *sluice.Kind[string], done func()) {
	dir, err := os.MkdirTemp("", "sluice-example")
	if err != nil {
		log.Fatal(err)
	}
	r, err = sluice.Open(dir, cfg, sluice.JSON[string](), h)
	if err != nil {
		log.Fatal(err)
	}
	return r, func() { r.Close(); os.RemoveAll(dir) }
}

// Cancel ends a job that has not finished, durably: it will not start (or, if it runs, its
// context is cancelled with ErrJobCancelled and its outcome ignored).
func ExampleRunner_Cancel() {
	r, done := openExample(sluice.Config{}, func(context.Context, sluice.Job[string]) error { return nil })
	defer done()
	ctx := context.Background()
	id, err := r.Enqueue(ctx, time.Now().Add(time.Hour), "reports", "monthly")
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Cancel(ctx, id); err != nil {
		log.Fatal(err)
	}
	j, _ := r.Get(ctx, id)
	fmt.Println("job", j.ID, j.State)
	fmt.Println("cancel again:", errors.Is(r.Cancel(ctx, id), sluice.ErrTerminal))
	// Output:
	// job 1 cancelled
	// cancel again: true
}

// Retry gives a dead job another round of attempts, due now; its history is kept.
func ExampleRunner_Retry() {
	fixed := false
	r, done := openExample(sluice.Config{Capacity: 1}, func(ctx context.Context, j sluice.Job[string]) error {
		if !fixed {
			return sluice.Permanent(errors.New("template missing")) // permanent: dead at once
		}
		return nil
	})
	defer done()
	ctx := context.Background()
	id, _ := r.Enqueue(ctx, time.Time{}, "mail", "welcome")
	_ = r.Drain(ctx)
	j, _ := r.Get(ctx, id)
	fmt.Println(j.State, j.Reason, j.LastErr)

	fixed = true // (the handler runs only while Drain does: no race)
	if err := r.Retry(ctx, id); err != nil {
		log.Fatal(err)
	}
	_ = r.Drain(ctx)
	j, _ = r.Get(ctx, id)
	fmt.Println(j.State, "after", len(j.History), "attempts in its history")
	// Output:
	// dead permanent template missing
	// succeeded after 2 attempts in its history
}

// Hooks report what the runner did once it is durable: here each attempt's end and each
// job's settlement. They run on the runner's goroutine: quick, and never calling the Runner.
func ExampleConfig_hooks() {
	cfg := sluice.Config{
		Capacity: 1,
		Policy:   sluice.Policy{Attempts: 2, Base: time.Millisecond},
		OnAttemptEnded: func(e sluice.AttemptEnded) {
			fmt.Printf("job %d attempt %d: %s, next %s\n", e.ID, e.Attempt, e.Outcome(), e.Next)
		},
		OnSettled: func(s sluice.Settled) {
			fmt.Printf("job %d settled %s after %d attempts (%s)\n", s.ID, s.State, s.Attempts, s.Reason)
		},
	}
	r, done := openExample(cfg, func(context.Context, sluice.Job[string]) error {
		return errors.New("503")
	})
	defer done()
	ctx := context.Background()
	_, _ = r.Enqueue(ctx, time.Time{}, "api.example.com", "ping")
	_ = r.Drain(ctx)
	// Output:
	// job 1 attempt 1: retry, next waiting
	// job 1 attempt 2: retry, next dead
	// job 1 settled dead after 2 attempts (spent)
}

// Middleware wraps the runner's and the worker's handlers alike: it sees a Call (an attempt
// or a delivery) and the handler's error, in the vocabulary both share (docs/results.md).
func ExampleMiddleware() {
	logCalls := func(next sluice.CallHandler) sluice.CallHandler {
		return func(ctx context.Context, c sluice.Call) error {
			err := next(ctx, c)
			fmt.Printf("%s #%s attempt %d: %s\n", c.Target, c.ID, c.Attempt, sluice.OutcomeName(err))
			return err
		}
	}
	r, done := openExample(sluice.Config{Middleware: []sluice.Middleware{logCalls}},
		func(context.Context, sluice.Job[string]) error { return nil })
	defer done()
	ctx := context.Background()
	_, _ = r.Enqueue(ctx, time.Time{}, "thumbnails", "cat.jpg")
	_ = r.Drain(ctx)
	// Output:
	// thumbnails #1 attempt 1: succeeded
}

// A Worker on a queue. Here the queue is the simulator's in-memory SQS (sim/queue); in
// production it is adapters/sqs (README's quick start builds one).
func ExampleWorker() {
	q := queue.New(queue.Config{}, nil)
	var mu sync.Mutex
	transport := lockedTransport{mu: &mu, t: q.Transport(time.Now)}
	mu.Lock()
	id := q.Send(time.Now(), []byte("resize cat.jpg"))
	mu.Unlock()

	ctx, stop := context.WithCancel(context.Background())
	w, err := sluice.NewWorker(transport, sluice.WorkerConfig{Window: 30 * time.Second},
		func(ctx context.Context, m sluice.Message) error {
			fmt.Printf("%s (delivery %d)\n", m.Body, m.ReceiveCount)
			stop() // one message is enough for the example
			return nil
		})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Run(ctx); err != nil { // until ctx ends; then a graceful stop
		log.Fatal(err)
	}
	mu.Lock()
	st, _ := q.Message(time.Now(), id)
	mu.Unlock()
	fmt.Println("message", st.State, "- handled:", w.Stats().Succeeded)
	// Output:
	// resize cat.jpg (delivery 1)
	// message deleted - handled: 1
}

// lockedTransport serialises calls to the simulator's queue, which is single-threaded.
type lockedTransport struct {
	mu *sync.Mutex
	t  sluice.Transport
}

func (l lockedTransport) Receive(ctx context.Context, max int, wait, vis time.Duration) ([]sluice.QueueMessage, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.Receive(ctx, max, wait, vis)
}

func (l lockedTransport) ChangeVisibility(ctx context.Context, receipt string, d time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.ChangeVisibility(ctx, receipt, d)
}

func (l lockedTransport) ChangeVisibilityBatch(ctx context.Context, es []sluice.VisibilityChange) ([]error, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.ChangeVisibilityBatch(ctx, es)
}

func (l lockedTransport) Delete(ctx context.Context, receipt string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.Delete(ctx, receipt)
}

func (l lockedTransport) DeleteBatch(ctx context.Context, rs []string) ([]error, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.DeleteBatch(ctx, rs)
}
