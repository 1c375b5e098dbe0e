package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/core/flow"
)

// runQueueUntil runs r until every job left the queue (or 2,000 simulated seconds passed),
// then stops it.
func runQueueUntil(t *testing.T, f *fleetQueue, r *sluice.QueueRunner) {
	t.Helper()
	if dead := runQueue(t, f, r); dead != 0 {
		t.Fatalf("queue: %d dead; want every job done", dead)
	}
}

// runQueue runs r until the queue holds no live message and returns how many were
// dead-lettered.
func runQueue(t *testing.T, f *fleetQueue, r *sluice.QueueRunner) (dead int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	for range 2000 {
		if live, _, _ := f.counts(); live == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	live, _, dead := f.counts()
	if live != 0 {
		t.Fatalf("queue: %d live; want every job settled", live)
	}
	return dead
}

// TestQueueKeyConcurrencyHoldsPerProcess: with WithKeyConcurrency(1), two keys and four
// worker slots, one process never runs two attempts of a key at once, while the other key's
// attempts run beside it; every job runs once, and the waits are no attempts.
func TestQueueKeyConcurrencyHoldsPerProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleetQueue()
		r := f.runner(t, sluice.QueueConfig{Seed: 1,
			Worker: sluice.WorkerConfig{Concurrency: 4}})
		var mu sync.Mutex
		running := map[string]int{}
		most := map[string]int{}
		overlap := false // both keys ran at one instant
		attempts := map[string]int{}
		k, err := sluice.Register(r, "sync", sluice.JSON[mail](), func(ctx context.Context, j sluice.Job[mail]) error {
			key := j.Payload.To[:1]
			mu.Lock()
			running[key]++
			most[key] = max(most[key], running[key])
			overlap = overlap || running["a"] > 0 && running["b"] > 0
			attempts[j.Payload.To]++
			mu.Unlock()
			time.Sleep(3 * time.Second)
			mu.Lock()
			running[key]--
			mu.Unlock()
			return nil
		}, sluice.WithKeyConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 6 {
			for _, key := range []string{"a", "b"} {
				if _, err := k.Enqueue(context.Background(), time.Time{}, "t", mail{To: fmt.Sprint(key, i)}, sluice.WithKey(key)); err != nil {
					t.Fatal(err)
				}
			}
		}
		runQueueUntil(t, f, r)
		if most["a"] != 1 || most["b"] != 1 {
			t.Errorf("most attempts of one key at once: %v, want 1 each", most)
		}
		if !overlap {
			t.Error("key b never ran while key a did: one key's waits blocked the other")
		}
		for name, n := range attempts {
			if n != 1 {
				t.Errorf("job %s ran %d attempts, want 1", name, n)
			}
		}
		if st := r.Stats(); st.Succeeded != 12 || st.Runs != 12 || st.FlowWaits == 0 {
			t.Errorf("stats %+v: want 12 runs and successes, some flow waits", st)
		}
	})
}

// TestQueueRateHoldsPerProcess: with WithRate(3 per 2 s, burst 2), the starts stay within
// Allowed over every window, across a process stopped after 5 s and another started at
// once with jobs ready for it (its bucket starts empty: no second burst), and still every
// job runs.
func TestQueueRateHoldsPerProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleetQueue()
		rate := sluice.Rate{Count: 3, Per: 2 * time.Second, Burst: 2}
		var mu sync.Mutex
		var starts []time.Time
		process := func() (*sluice.QueueRunner, *sluice.Kind[mail]) {
			r := f.runner(t, sluice.QueueConfig{Seed: 1,
				Worker: sluice.WorkerConfig{Concurrency: 8}})
			k, err := sluice.Register(r, "call", sluice.JSON[mail](), func(ctx context.Context, j sluice.Job[mail]) error {
				mu.Lock()
				starts = append(starts, time.Now())
				mu.Unlock()
				return nil
			}, sluice.WithRate(rate))
			if err != nil {
				t.Fatal(err)
			}
			return r, k
		}
		r, k := process()
		var jobs []sluice.NewJob[mail]
		for i := range 30 {
			jobs = append(jobs, sluice.NewJob[mail]{Target: "t", Payload: mail{To: fmt.Sprint(i)}})
		}
		if _, err := k.EnqueueMany(context.Background(), jobs); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		time.Sleep(5 * time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		first := len(starts)
		r, k = process()
		// Jobs ready at the restart: a bucket that started full would start two at once.
		if _, err := k.EnqueueMany(context.Background(), jobs[:10]); err != nil {
			t.Fatal(err)
		}
		runQueueUntil(t, f, r)
		if len(starts) != 40 || first == 0 || first == 30 {
			t.Fatalf("%d starts, %d by the first process; want 40, split", len(starts), first)
		}
		fr := flow.Rate{Count: rate.Count, Per: rate.Per, Burst: rate.Burst}
		for i := range starts {
			for j := i; j < len(starts); j++ {
				if w, n := starts[j].Sub(starts[i]), int64(j-i+1); n > fr.Allowed(w) {
					t.Fatalf("%d starts within %v, the rate allows %d (the restart after start %d)", n, w, fr.Allowed(w), first)
				}
			}
		}
		if span := starts[len(starts)-1].Sub(starts[0]); span < 18*time.Second {
			t.Errorf("40 starts in %v: the rate did not bind", span)
		}
	})
}

// timeoutQueue is a queue and a queue runner of three attempts, 1 s then 2 s apart.
func timeoutQueue(t *testing.T) (*fleetQueue, *sluice.QueueRunner) {
	t.Helper()
	f := newFleetQueue()
	r := f.runner(t, sluice.QueueConfig{Seed: 1,
		Policy: sluice.Policy{Attempts: 3, Base: time.Second, Cap: 2 * time.Second}})
	return f, r
}

// TestQueueAttemptTimeout: the kind's WithAttemptTimeout ends the handler's context with
// cause ErrAttemptTimeout, the attempt fails retryably and the retry runs; a job's
// WithJobAttemptTimeout replaces the kind's.
func TestQueueAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r := timeoutQueue(t)
		type run struct {
			attempt int
			took    time.Duration
			cause   error
		}
		var mu sync.Mutex
		runs := map[string][]run{}
		k, err := sluice.Register(r, "slow", sluice.JSON[mail](), func(ctx context.Context, j sluice.Job[mail]) error {
			start := time.Now()
			if j.Attempt == 1 {
				<-ctx.Done() // hangs until the timeout ends it, then fails with the context's error
				mu.Lock()
				runs[j.Payload.To] = append(runs[j.Payload.To], run{j.Attempt, time.Since(start), context.Cause(ctx)})
				mu.Unlock()
				return ctx.Err()
			}
			mu.Lock()
			runs[j.Payload.To] = append(runs[j.Payload.To], run{j.Attempt, time.Since(start), context.Cause(ctx)})
			mu.Unlock()
			return ctx.Err()
		}, sluice.WithAttemptTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := k.Enqueue(ctx, time.Time{}, "t", mail{To: "kind"}); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Enqueue(ctx, time.Time{}, "t", mail{To: "job"}, sluice.WithJobAttemptTimeout(2*time.Second)); err != nil {
			t.Fatal(err)
		}
		runQueueUntil(t, f, r)
		for name, took := range map[string]time.Duration{"kind": 5 * time.Second, "job": 2 * time.Second} {
			got := runs[name]
			if len(got) != 2 || got[0].attempt != 1 || got[1].attempt != 2 {
				t.Errorf("%s: runs %+v, want attempt 1 timed out, attempt 2 done", name, got)
				continue
			}
			if !errors.Is(got[0].cause, sluice.ErrAttemptTimeout) || got[0].took != took {
				t.Errorf("%s: attempt 1 ended after %v with cause %v; want %v, ErrAttemptTimeout", name, got[0].took, got[0].cause, took)
			}
			if got[1].cause != nil {
				t.Errorf("%s: attempt 2's context ended: %v", name, got[1].cause)
			}
		}
		if st := r.Stats(); st.TimedOut != 2 || st.Succeeded != 2 {
			t.Errorf("stats %+v, want 2 timed out, 2 succeeded", st)
		}
	})
}

// TestQueueAttemptTimeoutKeepsPermanent: as on the local runner, a handler that answers its
// timed-out context with Permanent dead-letters the job (reason permanent); the attempt still
// counts as timed out.
func TestQueueAttemptTimeoutKeepsPermanent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, r := timeoutQueue(t)
		runs := 0
		k, err := sluice.Register(r, "slow", sluice.JSON[mail](), func(ctx context.Context, j sluice.Job[mail]) error {
			runs++
			<-ctx.Done()
			return sluice.Permanent(errors.New("upstream gone"))
		}, sluice.WithAttemptTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Enqueue(context.Background(), time.Time{}, "t", mail{To: "x"}); err != nil {
			t.Fatal(err)
		}
		if dead := runQueue(t, f, r); dead != 1 || runs != 1 {
			t.Fatalf("%d dead after %d runs; want the job dead-lettered after one", dead, runs)
		}
		if st := r.Stats(); st.TimedOut != 1 || st.DeadLettered != 1 {
			t.Errorf("stats %+v, want 1 timed out, 1 dead-lettered", st)
		}
	})
}

// TestQueueFlowRefusals: what needs state shared by a fleet is refused naming the option;
// WithKey on a kind without key limits is carried and harmless.
func TestQueueFlowRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleetQueue()
		r := f.runner(t, sluice.QueueConfig{Seed: 1})
		h := func(context.Context, sluice.Job[mail]) error { return nil }
		for name, opt := range map[string]sluice.KindOption{"WithFairShare": sluice.WithFairShare(), "WithHoldOnDead": sluice.WithHoldOnDead()} {
			_, err := sluice.Register(r, "k", sluice.JSON[mail](), h, opt)
			if !errors.Is(err, sluice.ErrQueueUnsupported) || !strings.Contains(err.Error(), name) || strings.Count(err.Error(), "sluice:") != 1 {
				t.Errorf("%s: %v; want ErrQueueUnsupported naming it, one sluice: prefix", name, err)
			}
		}
		var ran int
		k, err := sluice.Register(r, "plain", sluice.JSON[mail](), func(context.Context, sluice.Job[mail]) error { ran++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Enqueue(context.Background(), time.Time{}, "t", mail{}, sluice.WithKey("tenant-1"), sluice.WithGroup("g")); !errors.Is(err, sluice.ErrQueueUnsupported) || !strings.Contains(err.Error(), "WithGroup") {
			t.Errorf("WithGroup on a standard queue: %v", err)
		}
		if _, err := k.Enqueue(context.Background(), time.Time{}, "t", mail{}, sluice.WithKey("tenant-1")); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		msgs := f.q.Receive(time.Now(), 10, time.Second) // back in a second
		f.mu.Unlock()
		if len(msgs) != 1 || msgs[0].Attributes["sluice-key"] != "tenant-1" {
			t.Fatalf("messages %+v: want one carrying sluice-key", msgs)
		}
		time.Sleep(time.Second)
		runQueueUntil(t, f, r)
		if ran != 1 {
			t.Errorf("the keyed job ran %d times, want 1", ran)
		}
	})
}

// BenchmarkQueueFlowNotBinding is a queue runner with 64 workers on the in-memory queue, one
// op a job from enqueue to its delete, over 1,000 flow keys: without flow limits, and with a
// kind rate, a key rate and a key limit all far above the load (configured, not binding).
func BenchmarkQueueFlowNotBinding(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []sluice.KindOption
	}{
		{"none", nil},
		{"not-binding", []sluice.KindOption{sluice.WithRate(sluice.Rate{Count: 1_000_000, Per: time.Second}),
			sluice.WithKeyRate(sluice.Rate{Count: 100_000, Per: time.Second}), sluice.WithKeyConcurrency(64)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFleetQueue()
			r := f.runner(b, sluice.QueueConfig{Seed: 1, Worker: sluice.WorkerConfig{Concurrency: 64}})
			k, err := sluice.Register(r, "k", sluice.JSON[int](), func(context.Context, sluice.Job[int]) error { return nil }, bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for lo := 0; lo < b.N; lo += 1000 {
				var jobs []sluice.NewJob[int]
				for i := lo; i < min(lo+1000, b.N); i++ {
					jobs = append(jobs, sluice.NewJob[int]{Target: "t", Payload: i, Options: []sluice.JobOption{sluice.WithKey(fmt.Sprint("tenant-", i%1000))}})
				}
				if _, err := k.EnqueueMany(ctx, jobs); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			done := make(chan error)
			go func() { done <- r.Run(ctx) }()
			for r.Stats().Succeeded < b.N {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			cancel()
			<-done
			st := r.Stats()
			b.ReportMetric(float64(st.FlowWaits), "waits")
		})
	}
}
