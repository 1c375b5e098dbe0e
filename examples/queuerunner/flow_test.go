package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adapters/sqs"
	"github.com/sluicehq/sluice/core/flow"
	"github.com/sluicehq/sluice/core/qjobs"
)

// TestFlowControlOnFauxqs runs one queue runner process on fauxqs (the SQS-compatible server,
// through aws-sdk-go-v2) with three kinds: a key limit of 1 over two keys, a kind rate, and an
// attempt timeout. In the process no key ever runs two attempts at once while the other key
// runs beside it; the rate's starts stay within Allowed over every window; the timed-out
// attempt sees ErrAttemptTimeout and the retry succeeds; nothing is dead-lettered.
func TestFlowControlOnFauxqs(t *testing.T) {
	e := newFleetEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := sqs.NewClient(ctx, sqs.ClientOptions{Endpoint: e.server.URL, Load: e.server.LoadOptions()})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := sqs.New(c, sqs.Config{QueueURL: e.queue})
	if err != nil {
		t.Fatal(err)
	}
	send, err := sqs.NewSender(c, sqs.Config{QueueURL: e.queue})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := sqs.NewSender(c, sqs.Config{QueueURL: e.dlq})
	if err != nil {
		t.Fatal(err)
	}
	r, err := sluice.NewQueueRunner(sluice.Queue{Transport: tr, Send: send, DeadLetter: dead}, sluice.QueueConfig{
		Policy: sluice.Policy{Attempts: 3, Base: 200 * time.Millisecond, Cap: time.Second},
		Worker: sluice.WorkerConfig{Window: 4 * time.Second, Concurrency: 6},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	running, most := map[string]int{}, map[string]int{}
	overlap := false
	tenants, err := sluice.Register(r, "tenant", sluice.JSON[string](), func(ctx context.Context, j sluice.Job[string]) error {
		mu.Lock()
		running[j.Payload]++
		most[j.Payload] = max(most[j.Payload], running[j.Payload])
		overlap = overlap || running["a"] > 0 && running["b"] > 0
		mu.Unlock()
		time.Sleep(400 * time.Millisecond)
		mu.Lock()
		running[j.Payload]--
		mu.Unlock()
		return nil
	}, sluice.WithKeyConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	rate := sluice.Rate{Count: 4, Per: time.Second, Burst: 2}
	var starts []time.Time
	calls, err := sluice.Register(r, "call", sluice.JSON[int](), func(ctx context.Context, j sluice.Job[int]) error {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		return nil
	}, sluice.WithRate(rate))
	if err != nil {
		t.Fatal(err)
	}
	var causes []error
	slow, err := sluice.Register(r, "slow", sluice.JSON[int](), func(ctx context.Context, j sluice.Job[int]) error {
		if j.Attempt > 1 {
			return nil
		}
		<-ctx.Done()
		mu.Lock()
		causes = append(causes, context.Cause(ctx))
		mu.Unlock()
		return ctx.Err()
	}, sluice.WithAttemptTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}

	for range 4 {
		for _, key := range []string{"a", "b"} {
			if _, err := tenants.Enqueue(ctx, time.Time{}, "api", key, sluice.WithKey(key)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var jobs []sluice.NewJob[int]
	for i := range 12 {
		jobs = append(jobs, sluice.NewJob[int]{Target: "api", Payload: i})
	}
	if _, err := calls.EnqueueMany(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	if _, err := slow.Enqueue(ctx, time.Time{}, "api", 0); err != nil {
		t.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.Run(runCtx) }()
	const total = 8 + 12 + 1
	for r.Stats().Succeeded < total && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	t.Logf("stats: %d runs, %d succeeded, %d flow waits, %d timed out, %d dead-lettered", st.Runs, st.Succeeded, st.FlowWaits, st.TimedOut, st.DeadLettered)
	if st.Succeeded != total || st.DeadLettered != 0 {
		t.Fatalf("%d succeeded, %d dead-lettered; want %d, none", st.Succeeded, st.DeadLettered, total)
	}
	if most["a"] != 1 || most["b"] != 1 || !overlap {
		t.Errorf("most attempts of one key at once %v (want 1 each), keys ran side by side: %v", most, overlap)
	}
	fr := flow.Rate{Count: rate.Count, Per: rate.Per, Burst: rate.Burst}
	// Handlers read the wall clock after the runner's decision, each late by its own
	// scheduling delay: a window may look shorter than the one the bucket saw.
	const slack = 100 * time.Millisecond
	for i := range starts {
		for j := i; j < len(starts); j++ {
			if w, n := starts[j].Sub(starts[i])+slack, int64(j-i+1); n > fr.Allowed(w) {
				t.Errorf("%d starts of the rated kind within %v, the rate allows %d", n, w, fr.Allowed(w))
			}
		}
	}
	if len(causes) != 1 || !errors.Is(causes[0], sluice.ErrAttemptTimeout) || st.TimedOut != 1 {
		t.Errorf("timed-out attempts' causes %v, TimedOut %d; want one ErrAttemptTimeout", causes, st.TimedOut)
	}
	into := map[string]qjobs.Attrs{}
	e.dead(ctx, into)
	if len(into) != 0 {
		t.Errorf("dead letters: %s", fmt.Sprint(into))
	}
}
