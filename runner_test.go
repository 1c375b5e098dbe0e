package sluice

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// The owner checks its O(running) invariants after every commit in tests.
func init() { invariantsFull = true }

// openFn opens a runner for a driver test; the same tests run over the fake engine and the
// real one.
type openFn func(t *testing.T, cfg Config, h Handler[string]) *Runner[string]

func openFake(t *testing.T, cfg Config, h Handler[string]) *Runner[string] {
	t.Helper()
	cfg.Logger = quiet
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	eng := newFakeEngine(cfg.Capacity, cfg.Policy.Attempts, cfg.Policy.Base)
	return newRunner[string](eng, cfg, JSON[string](), h, &counter{})
}

func openReal(t *testing.T, cfg Config, h Handler[string]) *Runner[string] {
	t.Helper()
	cfg.Logger = quiet
	r, err := Open(t.TempDir(), cfg, JSON[string](), h)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func driverOpeners() map[string]openFn {
	return map[string]openFn{"fake": openFake, "real": openReal}
}

func forEachOpener(t *testing.T, f func(t *testing.T, open openFn)) {
	for _, name := range []string{"fake", "real"} {
		open, ok := driverOpeners()[name]
		if !ok {
			continue
		}
		t.Run(name, func(t *testing.T) { f(t, open) })
	}
}

func TestDriverEnqueueDrainSucceedsAll(t *testing.T) {
	forEachOpener(t, func(t *testing.T, open openFn) {
		var runs atomic.Int64
		r := open(t, Config{Capacity: 4}, func(ctx context.Context, j Job[string]) Outcome {
			runs.Add(1)
			if j.Payload != fmt.Sprint("p", j.ID) {
				return Failed(fmt.Errorf("payload %q for job %d", j.Payload, j.ID), false)
			}
			return Succeeded()
		})
		defer r.Close()
		ctx := context.Background()
		const n = 200
		var wg sync.WaitGroup
		ids := make([]uint64, n)
		errs := make([]error, n)
		// Enqueue one at a time from many goroutines: the driver must group them.
		var mu sync.Mutex
		next := uint64(0)
		for i := range n {
			wg.Go(func() {
				mu.Lock() // payload must match the id the runner assigns: serialise id and payload
				next++
				want := next
				id, err := r.Enqueue(ctx, time.Time{}, "t", fmt.Sprint("p", want))
				mu.Unlock()
				ids[i], errs[i] = id, err
				if err == nil && id != want {
					errs[i] = fmt.Errorf("got id %d, want %d", id, want)
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		st := r.Stats()
		if st.Succeeded != n || runs.Load() != n || st.LastID != n {
			t.Fatalf("after drain: %+v, runs %d; want %d succeeded, %d runs", st, runs.Load(), n, n)
		}
		j, err := r.Get(7)
		if err != nil || j.State != StateSucceeded || j.Attempts != 1 || j.Payload != "p7" {
			t.Errorf("Get(7) = %+v, %v; want succeeded after 1 attempt with payload p7", j, err)
		}
		if _, err := r.Get(n + 1); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%d) err = %v, want ErrNotFound", n+1, err)
		}
	})
}

func TestDriverGroupCommitGathersConcurrentEnqueues(t *testing.T) {
	// The first commit is held until all 64 enqueues are either in it or waiting in the owner's
	// channel; those waiting must then share the next commit.
	cfg := Config{Logger: quiet}
	cfg, _ = cfg.withDefaults()
	eng := newFakeEngine(1, 1, time.Second)
	var r *Runner[string]
	first := true
	eng.onCommit = func() {
		if !first {
			return
		}
		first = false
		for len(r.cmds)+len(eng.buffered) < 64 {
			time.Sleep(time.Millisecond)
		}
	}
	r = newRunner[string](eng, cfg, JSON[string](), func(context.Context, Job[string]) Outcome { return Succeeded() }, &counter{})
	defer r.Close()
	enqueueConcurrently(t, r, 64)
	st := r.Stats()
	if st.LastID != 64 || st.Commits > 2 {
		t.Errorf("64 concurrent enqueues: LastID %d in %d commits, want 64 in at most 2 (group commit)", st.LastID, st.Commits)
	}
}

// enqueueConcurrently enqueues n jobs due now, each from its own goroutine, and returns when
// all are acknowledged (a failed Enqueue fails the test).
func enqueueConcurrently(t *testing.T, r *Runner[string], n int) {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := r.Enqueue(context.Background(), time.Time{}, "t", "x"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

func TestDriverSyncEveryRecordCommitsEachCommand(t *testing.T) {
	cfg := Config{Logger: quiet, SyncEveryRecord: true}
	cfg, _ = cfg.withDefaults()
	eng := newFakeEngine(1, 1, time.Second)
	r := newRunner[string](eng, cfg, JSON[string](), func(context.Context, Job[string]) Outcome { return Succeeded() }, &counter{})
	defer r.Close()
	enqueueConcurrently(t, r, 32)
	if st := r.Stats(); st.Commits != 32 {
		t.Errorf("commits = %d for 32 enqueues with SyncEveryRecord, want 32", st.Commits)
	}
}

// drainOne enqueues one job due now and runs Drain in a goroutine; wait waits for Drain and
// fails the test on its error.
func drainOne(t *testing.T, r *Runner[string]) (id uint64, wait func()) {
	t.Helper()
	ctx := context.Background()
	id, err := r.Enqueue(ctx, time.Time{}, "t", "x")
	if err != nil {
		t.Fatal(err)
	}
	drained := make(chan error, 1)
	go func() { drained <- r.Drain(ctx) }()
	return id, func() {
		t.Helper()
		if err := <-drained; err != nil {
			t.Fatal(err)
		}
	}
}

func TestDriverCancelCancelsRunningHandler(t *testing.T) {
	forEachOpener(t, func(t *testing.T, open openFn) {
		synctest.Test(t, func(t *testing.T) {
			running := make(chan struct{})
			var sawCancel atomic.Bool
			r := open(t, Config{Capacity: 1}, func(ctx context.Context, j Job[string]) Outcome {
				close(running)
				<-ctx.Done()
				sawCancel.Store(true)
				return Failed(ctx.Err(), true)
			})
			defer r.Close()
			ctx := context.Background()
			id, drained := drainOne(t, r)
			<-running
			if err := r.Cancel(ctx, id); err != nil {
				t.Fatal(err)
			}
			drained()
			if !sawCancel.Load() {
				t.Error("the handler's context was not cancelled by Cancel")
			}
			j, _ := r.Get(id)
			if j.State != StateCancelled {
				t.Errorf("state = %v, want cancelled (the running attempt's outcome is ignored)", j.State)
			}
		})
	})
}

func TestDriverRetryWaitsForBackoffOnTheClock(t *testing.T) {
	forEachOpener(t, func(t *testing.T, open openFn) {
		synctest.Test(t, func(t *testing.T) {
			var starts []time.Time
			var mu sync.Mutex
			r := open(t, Config{Capacity: 1, Policy: Policy{Attempts: 3, Base: time.Minute, Cap: time.Minute}}, func(ctx context.Context, j Job[string]) Outcome {
				mu.Lock()
				starts = append(starts, time.Now())
				mu.Unlock()
				if j.Attempt < 3 {
					return Failed(errors.New("flaky"), true)
				}
				return Succeeded()
			})
			defer r.Close()
			ctx := context.Background()
			t0 := time.Now()
			id, err := r.Enqueue(ctx, time.Time{}, "t", "x")
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			j, _ := r.Get(id)
			if j.State != StateSucceeded || j.Attempts != 3 || len(starts) != 3 {
				t.Fatalf("job %+v after %d starts, want succeeded on attempt 3", j, len(starts))
			}
			// Each retry waits between Base/2 and Base (equal jitter; the fake waits Base).
			for i := 1; i < 3; i++ {
				gap := starts[i].Sub(starts[i-1])
				if gap < 30*time.Second || gap > time.Minute+time.Second {
					t.Errorf("gap before attempt %d = %v, want within [30s, 1m]", i+1, gap)
				}
			}
			if total := time.Since(t0); total > 3*time.Minute {
				t.Errorf("drain took %v of fake time, want about two backoffs", total)
			}
		})
	})
}

func TestDriverPanicIsRecordedDead(t *testing.T) {
	forEachOpener(t, func(t *testing.T, open openFn) {
		var settled []Settled
		var mu sync.Mutex
		cfg := Config{Capacity: 2, OnSettled: func(s Settled) { mu.Lock(); settled = append(settled, s); mu.Unlock() }}
		r := open(t, cfg, func(ctx context.Context, j Job[string]) Outcome { panic("boom") })
		defer r.Close()
		ctx := context.Background()
		id, _ := r.Enqueue(ctx, time.Time{}, "t", "x")
		if err := r.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		j, _ := r.Get(id)
		if j.State != StateDead || j.Attempts != 1 {
			t.Errorf("job = %+v, want dead after 1 attempt", j)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(settled) != 1 || settled[0].ID != id || settled[0].State != StateDead {
			t.Errorf("OnSettled saw %+v, want one dead settlement of job %d", settled, id)
		}
	})
}

func TestDriverRunGraceThenCancel(t *testing.T) {
	forEachOpener(t, func(t *testing.T, open openFn) {
		synctest.Test(t, func(t *testing.T) {
			started := make(chan struct{}, 2)
			var cancelledAt atomic.Int64
			t0 := time.Now()
			r := open(t, Config{Capacity: 2, Grace: 5 * time.Second}, func(ctx context.Context, j Job[string]) Outcome {
				started <- struct{}{}
				if j.Payload == "quick" {
					// Finishes within the grace period: its success is recorded.
					time.Sleep(2 * time.Second)
					return Succeeded()
				}
				<-ctx.Done()
				cancelledAt.Store(int64(time.Since(t0)))
				return Failed(ctx.Err(), true)
			})
			ctx, cancel := context.WithCancel(context.Background())
			quick, _ := r.Enqueue(ctx, time.Time{}, "a", "quick")
			_, _ = r.Enqueue(ctx, time.Time{}, "b", "stuck")
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			<-started
			<-started
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run = %v, want nil after a graceful stop", err)
			}
			at := time.Duration(cancelledAt.Load())
			if at < 5*time.Second || at > 6*time.Second {
				t.Errorf("stuck handler cancelled at %v, want after the 5s grace", at)
			}
			if _, err := r.Enqueue(context.Background(), time.Time{}, "a", "late"); !errors.Is(err, ErrClosed) {
				t.Errorf("Enqueue after Run returned: %v, want ErrClosed", err)
			}
			_ = quick
		})
	})
}

func TestDriverCommitFailureFailsEverything(t *testing.T) {
	cfg := Config{Logger: quiet}
	cfg, _ = cfg.withDefaults()
	eng := newFakeEngine(1, 1, time.Second)
	eng.poison = `"lost"`
	r := newRunner[string](eng, cfg, JSON[string](), func(context.Context, Job[string]) Outcome { return Succeeded() }, &counter{})
	defer r.Close()
	ctx := context.Background()
	if _, err := r.Enqueue(ctx, time.Time{}, "t", "ok"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Enqueue(ctx, time.Time{}, "t", "lost"); !errors.Is(err, errPoison) {
		t.Fatalf("Enqueue during a failed commit = %v, want it to wrap %v", err, errPoison)
	}
	if _, err := r.Enqueue(ctx, time.Time{}, "t", "after"); !errors.Is(err, errPoison) {
		t.Errorf("Enqueue after the failure = %v, want the first failure", err)
	}
	if err := r.Run(ctx); !errors.Is(err, errPoison) {
		t.Errorf("Run after the failure = %v, want the first failure", err)
	}
}

// failingCodec decodes every payload except "undecodable".
type failingCodec struct{ Codec[string] }

func (c failingCodec) Decode(b []byte) (string, error) {
	s, err := c.Codec.Decode(b)
	if err == nil && s == "undecodable" {
		return "", errors.New("schema changed")
	}
	return s, err
}

func TestDriverUndecodablePayloadFailsTheAttempt(t *testing.T) {
	var ran atomic.Int64
	r, err := Open(t.TempDir(), Config{Logger: quiet}, Codec[string](failingCodec{JSON[string]()}),
		func(context.Context, Job[string]) Outcome { ran.Add(1); return Succeeded() })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	bad, _ := r.Enqueue(ctx, time.Time{}, "t", "undecodable")
	good, _ := r.Enqueue(ctx, time.Time{}, "t", "fine")
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if j, _ := r.Get(good); j.State != StateSucceeded {
		t.Errorf("good job %+v, want succeeded", j)
	}
	j, err := r.Get(bad)
	if j.State != StateDead || j.Reason != "permanent" || !strings.Contains(j.LastErr, "schema changed") || err == nil {
		t.Errorf("undecodable job %+v (Get err %v), want dead (permanent) naming the decode error, and Get reporting it", j, err)
	}
	if ran.Load() != 1 {
		t.Errorf("handler ran %d times, want 1 (never for the undecodable payload)", ran.Load())
	}
}

func TestDriverEnqueueReturnsWhenItsContextEnds(t *testing.T) {
	cfg := Config{Logger: quiet}
	cfg, _ = cfg.withDefaults()
	eng := newFakeEngine(1, 1, time.Second)
	hold := make(chan struct{})
	eng.onCommit = func() { <-hold } // every commit waits: an fsync that takes forever
	r := newRunner[string](eng, cfg, JSON[string](), succeedString, &counter{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := r.Enqueue(ctx, time.Time{}, "t", "x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Enqueue with a stuck commit = %v, want the context's error", err)
	}
	close(hold)
	_ = r.Close()
}

func succeedString(context.Context, Job[string]) Outcome { return Succeeded() }

// TestDriverLostCompactionFailsAtOnce: a commit whose batch was durable but after which the
// engine is poisoned (a compaction lost after the rename) acknowledges its commands, then
// fails the runner at once: Run returns the failure without waiting for its context or for
// the next commit, which an idle runner would reach only at its next wake (an hour here).
func TestDriverLostCompactionFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, err := Config{Logger: quiet}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		eng := newFakeEngine(1, 1, time.Second)
		eng.lose = `"lose"`
		r := newRunner[string](eng, cfg, JSON[string](), func(context.Context, Job[string]) Outcome { return Succeeded() }, &counter{})
		defer r.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 24*time.Hour)
		defer cancel()
		ran := make(chan error, 1)
		go func() { ran <- r.Run(ctx) }()
		synctest.Wait()
		if _, err := r.Enqueue(ctx, time.Now().Add(time.Hour), "t", "lose"); err != nil {
			t.Fatalf("Enqueue whose batch was durable = %v, want its acknowledgement", err)
		}
		acked := time.Now() // the bubble's clock: it moves only when every goroutine waits
		if err := <-ran; !errors.Is(err, errLost) {
			t.Errorf("Run = %v, want %v", err, errLost)
		}
		if d := time.Since(acked); d != 0 {
			t.Errorf("Run returned %v after the lost compaction; want at once", d)
		}
	})
}
