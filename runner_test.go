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

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/runneropt"
	"github.com/sluicehq/sluice/sim/disk"
)

// The driver tests run the real engine (core/runner) over sim/disk through the internal FS
// option, so write, fsync and rename failures and crashes reach the driver as they would in
// production; a few run over the real directory too. Tests that depend on time run inside
// testing/synctest bubbles: waits are on the bubble's clock, never the wall clock.

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// openOn opens a string runner over fsys with cfg (the logger made quiet).
func openOn(t *testing.T, fsys core.FS, cfg Config, h Handler[string]) *Kind[string] {
	t.Helper()
	return openCodecOn(t, fsys, cfg, JSON[string](), h)
}

func openCodecOn(t *testing.T, fsys core.FS, cfg Config, codec Codec[string], h Handler[string]) *Kind[string] {
	t.Helper()
	cfg.Logger = quiet
	cfg.opts = runneropt.Options{FS: fsys, SyncEveryRecord: cfg.opts.SyncEveryRecord}
	r, err := Open("", cfg, codec, h)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// openFn opens a runner for a driver test; the same tests run over sim/disk and a directory.
type openFn func(t *testing.T, cfg Config, h Handler[string]) *Kind[string]

func forEachOpener(t *testing.T, f func(t *testing.T, open openFn)) {
	t.Run("simdisk", func(t *testing.T) {
		f(t, func(t *testing.T, cfg Config, h Handler[string]) *Kind[string] {
			return openOn(t, disk.New(1), cfg, h)
		})
	})
	t.Run("dir", func(t *testing.T) {
		f(t, func(t *testing.T, cfg Config, h Handler[string]) *Kind[string] {
			cfg.Logger = quiet
			r, err := Open(t.TempDir(), cfg, JSON[string](), h)
			if err != nil {
				t.Fatal(err)
			}
			return r
		})
	})
}

func succeedString(context.Context, Job[string]) error { return nil }

func TestDriverEnqueueDrainSucceedsAll(t *testing.T) {
	forEachOpener(t, func(t *testing.T, open openFn) {
		var runs atomic.Int64
		r := open(t, Config{Capacity: 4}, func(ctx context.Context, j Job[string]) error {
			runs.Add(1)
			if j.Payload != fmt.Sprint("p", j.ID) {
				return Permanent(fmt.Errorf("payload %q for job %d", j.Payload, j.ID))
			}
			return nil
		})
		defer r.Close()
		ctx := context.Background()
		const n = 200
		var wg sync.WaitGroup
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
				errs[i] = err
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
		st := readStats(t, r)
		if st.Succeeded != n || runs.Load() != n || st.LastID != n {
			t.Fatalf("after drain: %+v, runs %d; want %d succeeded, %d runs", st, runs.Load(), n, n)
		}
		j, err := r.Get(context.Background(), 7)
		if err != nil || j.State != StateSucceeded || j.Attempts != 1 || j.Payload != "p7" {
			t.Errorf("Get(7) = %+v, %v; want succeeded after 1 attempt with payload p7", j, err)
		}
		if _, err := r.Get(context.Background(), n+1); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%d) err = %v, want ErrNotFound", n+1, err)
		}
	})
}

// holdFS holds every file Sync while hold is armed, until release is closed: an fsync that
// takes as long as the test wants.
type holdFS struct {
	core.FS
	mu      sync.Mutex
	armed   bool
	release chan struct{}
	held    chan struct{} // closed when a Sync is first held
}

func newHoldFS(fsys core.FS) *holdFS {
	return &holdFS{FS: fsys, release: make(chan struct{}), held: make(chan struct{})}
}

func (h *holdFS) arm() { h.mu.Lock(); h.armed = true; h.mu.Unlock() }

func (h *holdFS) Create(name string) (core.File, error) {
	f, err := h.FS.Create(name)
	return holdFile{f, h}, err
}

func (h *holdFS) Open(name string) (core.File, error) {
	f, err := h.FS.Open(name)
	return holdFile{f, h}, err
}

type holdFile struct {
	core.File
	h *holdFS
}

func (f holdFile) Sync() error {
	f.h.mu.Lock()
	armed := f.h.armed
	if armed {
		f.h.armed = false
		close(f.h.held)
	}
	f.h.mu.Unlock()
	if armed {
		<-f.h.release
	}
	return f.File.Sync()
}

// TestDriverGroupCommitGathersConcurrentEnqueues: while one commit's fsync is held, 63 more
// enqueues arrive; they must all share the next commit.
func TestDriverGroupCommitGathersConcurrentEnqueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHoldFS(disk.New(1))
		r := openOn(t, h, Config{Capacity: 1}, succeedString)
		defer r.Close()
		h.arm()
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := r.Enqueue(context.Background(), time.Time{}, "t", "first"); err != nil {
				t.Error(err)
			}
		})
		<-h.held
		wg.Go(func() { enqueueConcurrently(t, r, 63) })
		synctest.Wait() // every enqueue is in the owner's channel, the owner in its fsync
		close(h.release)
		wg.Wait()
		if st := readStats(t, r); st.LastID != 64 || st.Commits != 2 {
			t.Errorf("64 enqueues, the last 63 during one fsync: LastID %d in %d commits, want 64 in 2", st.LastID, st.Commits)
		}
	})
}

// enqueueConcurrently enqueues n jobs due now, each from its own goroutine, and returns when
// all are acknowledged (a failed Enqueue fails the test).
func enqueueConcurrently(t *testing.T, r *Kind[string], n int) {
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

// TestDriverSyncEveryRecordCommitsEachCommand: the benchmark's internal baseline gives every
// command its own commit.
func TestDriverSyncEveryRecordCommitsEachCommand(t *testing.T) {
	cfg := Config{}
	cfg.opts.SyncEveryRecord = true
	r := openOn(t, disk.New(1), cfg, succeedString)
	defer r.Close()
	enqueueConcurrently(t, r, 32)
	if st := readStats(t, r); st.Commits != 32 {
		t.Errorf("commits = %d for 32 enqueues with SyncEveryRecord, want 32", st.Commits)
	}
}

// TestDriverSyncEveryRecordCommitsEachOutcome: the baseline gives every outcome its own
// commit too, however many wait together in the outbox: 16 jobs draining take one commit for
// their 16 Started records and one per Finished record.
func TestDriverSyncEveryRecordCommitsEachOutcome(t *testing.T) {
	cfg := Config{Capacity: 16}
	cfg.opts.SyncEveryRecord = true
	r := openOn(t, disk.New(1), cfg, succeedString)
	defer r.Close()
	jobs := make([]NewJob[string], 16)
	for i := range jobs {
		jobs[i] = NewJob[string]{Target: "t", Payload: "x"}
	}
	if _, err := r.EnqueueMany(context.Background(), jobs); err != nil {
		t.Fatal(err)
	}
	c0 := readStats(t, r).Commits
	if err := r.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := readStats(t, r).Commits - c0; n != 1+16 {
		t.Errorf("commits while 16 jobs drained with SyncEveryRecord = %d, want 17 (the starts, then one per outcome)", n)
	}
}

// drainOne enqueues one job due now and runs Drain in a goroutine; wait waits for Drain and
// fails the test on its error.
func drainOne(t *testing.T, r *Kind[string]) (id uint64, wait func()) {
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
	synctest.Test(t, func(t *testing.T) {
		running := make(chan struct{})
		var cause atomic.Value
		r := openOn(t, disk.New(1), Config{Capacity: 1}, func(ctx context.Context, j Job[string]) error {
			close(running)
			<-ctx.Done()
			cause.Store(context.Cause(ctx))
			return ctx.Err()
		})
		defer r.Close()
		id, drained := drainOne(t, r)
		<-running
		if err := r.Cancel(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		drained()
		if c, _ := cause.Load().(error); !errors.Is(c, ErrJobCancelled) {
			t.Errorf("handler's context.Cause = %v, want ErrJobCancelled", c)
		}
		if j, _ := r.Get(context.Background(), id); j.State != StateCancelled {
			t.Errorf("state = %v, want cancelled (the running attempt's outcome is ignored)", j.State)
		}
	})
}

func TestDriverRetryWaitsForBackoffOnTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var starts []time.Time
		var mu sync.Mutex
		r := openOn(t, disk.New(1), Config{Capacity: 1, Policy: Policy{Attempts: 3, Base: time.Minute, Cap: time.Minute}},
			func(ctx context.Context, j Job[string]) error {
				mu.Lock()
				starts = append(starts, time.Now())
				mu.Unlock()
				if j.Attempt < 3 {
					return errors.New("flaky")
				}
				return nil
			})
		defer r.Close()
		ctx := context.Background()
		id, err := r.Enqueue(ctx, time.Time{}, "t", "x")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		j, _ := r.Get(context.Background(), id)
		if j.State != StateSucceeded || j.Attempts != 3 || len(starts) != 3 {
			t.Fatalf("job %+v after %d starts, want succeeded on attempt 3", j, len(starts))
		}
		// Each retry waits between Base/2 and Base (equal jitter), on the runner's clock.
		for i := 1; i < 3; i++ {
			if gap := starts[i].Sub(starts[i-1]); gap < 30*time.Second || gap > time.Minute+wakeMin {
				t.Errorf("gap before attempt %d = %v, want within [30s, 1m]", i+1, gap)
			}
		}
	})
}

func TestDriverPanicIsRecordedDead(t *testing.T) {
	forEachOpener(t, func(t *testing.T, open openFn) {
		var settled []Settled
		var mu sync.Mutex
		cfg := Config{Capacity: 2, OnSettled: func(s Settled) { mu.Lock(); settled = append(settled, s); mu.Unlock() }}
		r := open(t, cfg, func(ctx context.Context, j Job[string]) error { panic("boom") })
		defer r.Close()
		ctx := context.Background()
		id, _ := r.Enqueue(ctx, time.Time{}, "t", "x")
		if err := r.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		j, _ := r.Get(context.Background(), id)
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

// TestDriverGracefulStopReleasesTheAttempt: with Policy.Attempts 1, Run's context ends while
// a handler runs. The quick handler finishes within the grace and succeeds; the stuck one is
// cancelled when the grace ends (cause ErrShutdown) and returns its context's error: that
// attempt is released, so after a reopen the job is pending with no attempt counted, its
// breaker (threshold 1) never opened, and it runs and succeeds.
func TestDriverGracefulStopReleasesTheAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := disk.New(1)
		cfg := Config{Capacity: 2, Grace: 5 * time.Second, Policy: Policy{Attempts: 1}, Circuit: Circuit{Threshold: 1}}
		started := make(chan struct{}, 2)
		var cause atomic.Value
		var cancelledAfter atomic.Int64
		t0 := time.Now()
		r := openOn(t, d, cfg, func(ctx context.Context, j Job[string]) error {
			started <- struct{}{}
			if j.Payload == "quick" {
				time.Sleep(2 * time.Second) // within the grace
				return nil
			}
			<-ctx.Done()
			cancelledAfter.Store(int64(time.Since(t0)))
			cause.Store(context.Cause(ctx))
			return ctx.Err()
		})
		ctx, cancel := context.WithCancel(context.Background())
		quick, _ := r.Enqueue(ctx, time.Time{}, "a", "quick")
		stuck, _ := r.Enqueue(ctx, time.Time{}, "b", "stuck")
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		<-started
		<-started
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v, want nil after a graceful stop", err)
		}
		if at := time.Duration(cancelledAfter.Load()); at != 5*time.Second {
			t.Errorf("stuck handler cancelled after %v, want when the 5s grace ended", at)
		}
		if c, _ := cause.Load().(error); !errors.Is(c, ErrShutdown) {
			t.Errorf("context.Cause = %v, want ErrShutdown", c)
		}
		if _, err := r.Enqueue(context.Background(), time.Time{}, "a", "late"); !errors.Is(err, ErrClosed) {
			t.Errorf("Enqueue after Run returned: %v, want ErrClosed", err)
		}
		if st := readStats(t, r); st.Succeeded != 1 || st.Waiting != 1 || st.LastID != 2 {
			t.Errorf("Stats after close = %+v, want the values at close (1 succeeded, 1 waiting)", st)
		}

		ran := make(chan string, 1)
		r = openOn(t, d, cfg, func(ctx context.Context, j Job[string]) error { ran <- j.Payload; return nil })
		defer r.Close()
		if j, _ := r.Get(context.Background(), quick); j.State != StateSucceeded {
			t.Errorf("quick job after reopen: %+v, want succeeded", j)
		}
		if j, _ := r.Get(context.Background(), stuck); j.State != StatePending || j.Attempts != 0 {
			t.Errorf("stuck job after reopen: %+v, want pending with no attempt counted", j)
		}
		if err := r.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		if j, _ := r.Get(context.Background(), stuck); j.State != StateSucceeded || j.Attempts != 1 || <-ran != "stuck" {
			t.Errorf("released job after a drain: %+v, want succeeded on attempt 1", j)
		}
	})
}

// TestDriverAbandonsAHandlerIgnoringTheStop: a handler that ignores cancellation is abandoned
// after the second grace; Run returns, its later outcome is ignored, and the next open counts
// the attempt as interrupted (Attempts 1: dead, spent), as after a crash.
func TestDriverAbandonsAHandlerIgnoringTheStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := disk.New(1)
		cfg := Config{Capacity: 1, Grace: 5 * time.Second, Policy: Policy{Attempts: 1}}
		started, finish := make(chan struct{}), make(chan struct{})
		r := openOn(t, d, cfg, func(ctx context.Context, j Job[string]) error {
			close(started)
			<-finish // ignores ctx
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		id, _ := r.Enqueue(ctx, time.Time{}, "a", "deaf")
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		<-started
		t0 := time.Now()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if took := time.Since(t0); took != 10*time.Second {
			t.Errorf("Run returned %v after its context ended, want two graces (10s)", took)
		}
		close(finish) // its outcome goes nowhere
		synctest.Wait()
		r = openOn(t, d, cfg, succeedString)
		defer r.Close()
		if j, _ := r.Get(context.Background(), id); j.State != StateDead || j.Reason != "spent" || j.LastErr != "interrupted" {
			t.Errorf("abandoned job after reopen: %+v, want dead (spent) after an interrupted attempt", j)
		}
	})
}

// TestDriverCrashCountsTheAttempt: the runner dropped without Close (the disk crashes under
// it) with a job running: the next open on the same disk counts the attempt as interrupted,
// and keeps every acknowledged job.
func TestDriverCrashCountsTheAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := disk.New(1)
		cfg := Config{Capacity: 1, Policy: Policy{Attempts: 1}}
		started, finish := make(chan struct{}), make(chan struct{})
		old := openOn(t, d, cfg, func(ctx context.Context, j Job[string]) error {
			close(started)
			<-finish
			return nil
		})
		ctx := context.Background()
		running, _ := old.Enqueue(ctx, time.Time{}, "a", "x")
		waiting, _ := old.Enqueue(ctx, time.Now().Add(time.Hour), "a", "y")
		go func() { _ = old.Drain(ctx) }()
		<-started
		synctest.Wait() // the old owner idles in its select: the disk is ours
		d.Crash()
		r := openOn(t, d, cfg, succeedString)
		if j, _ := r.Get(context.Background(), running); j.State != StateDead || j.Reason != "spent" || j.LastErr != "interrupted" {
			t.Errorf("running job after the crash: %+v, want dead (spent) after an interrupted attempt", j)
		}
		if j, _ := r.Get(context.Background(), waiting); j.State != StatePending {
			t.Errorf("acknowledged waiting job after the crash: %+v, want pending", j)
		}
		_ = r.Close()
		close(finish)
		_ = old.Close() // its disk crashed under it: whatever it reports, nothing of it counts
	})
}

// TestDriverFsyncFailureFailsEverything: a failed fsync poisons the journal; the enqueue in
// that batch is not acknowledged, later commands get the first failure, Run returns it.
func TestDriverFsyncFailureFailsEverything(t *testing.T) {
	for _, op := range []disk.Op{disk.OpSync, disk.OpWrite} {
		t.Run(op.String(), func(t *testing.T) {
			d := disk.New(1)
			r := openOn(t, d, Config{}, succeedString)
			defer r.Close()
			ctx := context.Background()
			if _, err := r.Enqueue(ctx, time.Time{}, "t", "ok"); err != nil {
				t.Fatal(err)
			}
			d.FailNext(op, disk.ErrInjected)
			if _, err := r.Enqueue(ctx, time.Time{}, "t", "lost"); !errors.Is(err, disk.ErrInjected) || !errors.Is(err, ErrPoisoned) {
				t.Fatalf("Enqueue in the failed batch = %v, want ErrPoisoned wrapping the injected fault", err)
			}
			if _, err := r.Enqueue(ctx, time.Time{}, "t", "after"); !errors.Is(err, disk.ErrInjected) {
				t.Errorf("Enqueue after the failure = %v, want the first failure", err)
			}
			if err := r.Run(ctx); !errors.Is(err, disk.ErrInjected) {
				t.Errorf("Run after the failure = %v, want the first failure", err)
			}
		})
	}
}

// TestDriverRenameFailureKeepsTheOldJournal: a compaction whose rename fails is kept (the old
// journal stands): the runner goes on and every job survives a reopen.
func TestDriverRenameFailureKeepsTheOldJournal(t *testing.T) {
	d := disk.New(1)
	cfg := Config{CompactBytes: 512}
	r := openOn(t, d, cfg, succeedString)
	ctx := context.Background()
	d.FailNext(disk.OpRename, disk.ErrInjected)
	for i := range 20 {
		if _, err := r.Enqueue(ctx, time.Now().Add(time.Hour), "t", fmt.Sprint("payload ", i)); err != nil {
			t.Fatalf("enqueue %d after a kept compaction failure: %v", i, err)
		}
	}
	st := readStats(t, r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if st.Compactions == 0 {
		t.Errorf("no compaction succeeded after the failed rename: %+v", st)
	}
	r = openOn(t, d, cfg, succeedString)
	defer r.Close()
	if st := readStats(t, r); st.LastID != 20 || st.Waiting != 20 {
		t.Errorf("after reopen: %+v, want all 20 jobs waiting", st)
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

// TestDriverUndecodablePayloadFailsTheJob: the engine's decode check turns a payload the codec
// refuses into a permanent failure; the handler never sees it.
func TestDriverUndecodablePayloadFailsTheJob(t *testing.T) {
	var ran atomic.Int64
	r := openCodecOn(t, disk.New(1), Config{}, Codec[string](failingCodec{JSON[string]()}),
		func(context.Context, Job[string]) error { ran.Add(1); return nil })
	defer r.Close()
	ctx := context.Background()
	bad, _ := r.Enqueue(ctx, time.Time{}, "t", "undecodable")
	good, _ := r.Enqueue(ctx, time.Time{}, "t", "fine")
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if j, _ := r.Get(context.Background(), good); j.State != StateSucceeded {
		t.Errorf("good job %+v, want succeeded", j)
	}
	j, err := r.Get(context.Background(), bad)
	if j.State != StateDead || j.Reason != "permanent" || !strings.Contains(j.LastErr, "schema changed") || err == nil {
		t.Errorf("undecodable job %+v (Get err %v), want dead (permanent) naming the decode error, and Get reporting it", j, err)
	}
	if ran.Load() != 1 {
		t.Errorf("handler ran %d times, want 1 (never for the undecodable payload)", ran.Load())
	}
}

// TestDriverEnqueueReturnsWhenItsContextEnds: with an fsync that does not return, Enqueue
// returns its context's error when the context ends.
func TestDriverEnqueueReturnsWhenItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHoldFS(disk.New(1))
		r := openOn(t, h, Config{}, succeedString)
		h.arm()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := r.Enqueue(ctx, time.Time{}, "t", "x"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Enqueue with a stuck fsync = %v, want the context's error", err)
		}
		close(h.release)
		_ = r.Close()
	})
}

// TestDriverLostCompactionFailsAtOnce: a commit whose batch was durable but whose compaction
// failed after the rename (the directory fsync) acknowledges its command, then fails the
// runner at once: Run returns without waiting for the next commit, which an idle runner would
// reach only at its next wake (an hour here).
func TestDriverLostCompactionFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := disk.New(1)
		r := openOn(t, d, Config{CompactBytes: 1}, succeedString)
		defer r.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 24*time.Hour)
		defer cancel()
		ran := make(chan error, 1)
		go func() { ran <- r.Run(ctx) }()
		synctest.Wait()
		d.FailNext(disk.OpSyncDir, disk.ErrInjected)
		if _, err := r.Enqueue(ctx, time.Now().Add(time.Hour), "t", "x"); err != nil {
			t.Fatalf("Enqueue whose batch was durable = %v, want its acknowledgement", err)
		}
		acked := time.Now() // the bubble's clock: it moves only when every goroutine waits
		if err := <-ran; !errors.Is(err, ErrPoisoned) || !errors.Is(err, disk.ErrInjected) {
			t.Errorf("Run = %v, want the lost compaction (ErrPoisoned wrapping the injected fault)", err)
		}
		if d := time.Since(acked); d != 0 {
			t.Errorf("Run returned %v after the lost compaction; want at once", d)
		}
	})
}

// TestInspectWritesNothingAndReportsInterrupted: inspecting the directory of a crashed runner
// (its lock dropped with it) or of a live one changes no byte, takes no lock from the live
// runner, and reports the running attempt as interrupted without recording it.
func TestInspectWritesNothingAndReportsInterrupted(t *testing.T) {
	d := disk.New(1)
	started, finish := make(chan struct{}), make(chan struct{})
	r := openOn(t, d, Config{Capacity: 1}, func(ctx context.Context, j Job[string]) error {
		close(started)
		<-finish
		return nil
	})
	defer func() { close(finish); _ = r.Close() }()
	ctx := context.Background()
	run, _ := r.Enqueue(ctx, time.Time{}, "a", "x")
	wait, _ := r.Enqueue(ctx, time.Now().Add(time.Hour), "a", "y")
	go func() { _ = r.Drain(ctx) }()
	<-started
	readStats(t, r) // a read answered after the commit that started the attempt: the disk is idle
	before := diskDigest(t, d)
	in, err := inspectFS(d)
	if err != nil {
		t.Fatal(err)
	}
	if after := diskDigest(t, d); after != before {
		t.Errorf("inspection changed the disk:\n%s\n----\n%s", before, after)
	}
	var got []string
	for _, j := range in.Jobs {
		got = append(got, fmt.Sprintf("%d %v attempts=%d", j.ID, j.State, j.Attempts))
	}
	want := []string{fmt.Sprintf("%d running attempts=1", run), fmt.Sprintf("%d pending attempts=0", wait)}
	if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(in.Interrupted) != fmt.Sprint([]uint64{run}) || in.LastID != 2 {
		t.Errorf("Inspect = %v interrupted %v last %d; want %v interrupted [%d] last 2", got, in.Interrupted, in.LastID, want, run)
	}
}

// diskDigest renders every file of d with its bytes.
func diskDigest(t *testing.T, d *disk.Disk) string {
	t.Helper()
	names, err := d.List()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, n := range names {
		f, err := d.Open(n)
		if err != nil {
			t.Fatal(err)
		}
		size, _ := f.Size()
		buf := make([]byte, size)
		if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		_ = f.Close()
		fmt.Fprintf(&b, "%s %x\n", n, buf)
	}
	return b.String()
}

// statsOf is s.Stats, failing tb on an error.
func readStats(tb testing.TB, s interface {
	Stats(context.Context) (Stats, error)
}) Stats {
	tb.Helper()
	st, err := s.Stats(context.Background())
	if err != nil {
		tb.Fatalf("Stats: %v", err)
	}
	return st
}
