package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// On a queue runner, WithKeyConcurrency, WithKeyRate and WithRate hold in each process (a
// delivery over a limit waits in the queue, no attempt spent), and an attempt timeout ends the
// handler's context with cause ErrAttemptTimeout and retries the job.
func ExampleQueueRunner_flowControl() {
	q := newFleetQueue().queue() // in memory here; adapters/sqs in production
	r, err := sluice.NewQueueRunner(q, sluice.QueueConfig{Logger: quiet(),
		Policy: sluice.Policy{Attempts: 3, Base: 200 * time.Millisecond, Cap: time.Second}})
	if err != nil {
		fmt.Println(err)
		return
	}
	var mu sync.Mutex
	running, most := map[string]int{}, 0
	tenants, err := sluice.Register(r, "sync", sluice.JSON[string](), func(ctx context.Context, j sluice.Job[string]) error {
		mu.Lock()
		running[j.Payload]++
		most = max(most, running[j.Payload])
		mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		running[j.Payload]--
		mu.Unlock()
		return nil
	}, sluice.WithKeyConcurrency(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	slow, err := sluice.Register(r, "slow", sluice.JSON[string](), func(ctx context.Context, j sluice.Job[string]) error {
		if j.Attempt == 1 {
			<-ctx.Done()
			fmt.Println("attempt 1:", context.Cause(ctx), errors.Is(context.Cause(ctx), sluice.ErrAttemptTimeout))
			return ctx.Err()
		}
		fmt.Println("attempt 2: done")
		return nil
	}, sluice.WithAttemptTimeout(time.Minute))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, tenant := range []string{"a", "a", "b", "b"} {
		if _, err := tenants.Enqueue(ctx, time.Time{}, "api", tenant, sluice.WithKey(tenant)); err != nil {
			fmt.Println(err)
			return
		}
	}
	// The job's own timeout replaces the kind's minute.
	if _, err := slow.Enqueue(ctx, time.Time{}, "api", "x", sluice.WithJobAttemptTimeout(100*time.Millisecond)); err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	for r.Stats().Succeeded < 5 {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	st := r.Stats()
	fmt.Println("most attempts of one key at once:", most)
	fmt.Println("timed out:", st.TimedOut, "succeeded:", st.Succeeded)
	// Output:
	// attempt 1: sluice: attempt timed out true
	// attempt 2: done
	// most attempts of one key at once: 1
	// timed out: 1 succeeded: 5
}
