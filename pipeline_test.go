package sluice

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim/disk"
)

// gateFS is an in-memory disk (sim/disk) that records the order of the journal's writes and
// syncs, holds each journal sync until the test opens the gate, and keeps the image of what the
// last sync made durable, so a test can replay exactly the synced journal at any moment.
type gateFS struct {
	core.FS
	mu     sync.Mutex
	log    []string // "write" and "sync<" (a journal sync began), "sync>" (it returned)
	gated  bool
	gate   chan struct{}
	image  []byte // the journal as written
	synced []byte // the journal as of its last sync
}

func newGateFS() *gateFS { return &gateFS{FS: disk.New(1), gate: make(chan struct{})} }

// Open starts the image from the file as opened: the journal creates its file under another
// name, syncs it and renames it in, so it is synced whole.
func (g *gateFS) Open(name string) (core.File, error) {
	f, err := g.FS.Open(name)
	if err != nil || name != journalName {
		return f, err
	}
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.image, g.synced = data, append([]byte(nil), data...)
	g.mu.Unlock()
	return &gateFile{File: f, g: g}, nil
}

func (g *gateFS) note(s string) {
	g.mu.Lock()
	g.log = append(g.log, s)
	g.mu.Unlock()
}

// syncedState replays the journal as of its last sync.
func (g *gateFS) syncedState() (runner.Snapshot, error) {
	g.mu.Lock()
	data := append([]byte(nil), g.synced...)
	g.mu.Unlock()
	cp := disk.New(1)
	f, err := cp.Create(journalName)
	if err != nil {
		return runner.Snapshot{}, err
	}
	if _, err := f.Write(data); err != nil {
		return runner.Snapshot{}, err
	}
	if err := f.Sync(); err != nil {
		return runner.Snapshot{}, err
	}
	return runner.Replay(cp, journalName, runner.Config{Capacity: 1})
}

type gateFile struct {
	core.File
	g *gateFS
}

func (f *gateFile) Write(p []byte) (int, error) {
	if allZero(p) {
		f.g.note("zeros") // the journal extending its file ahead of a batch
	} else {
		f.g.note("write")
	}
	n, err := f.File.Write(p)
	f.g.mu.Lock()
	f.g.image = append(f.g.image, p[:n]...)
	f.g.mu.Unlock()
	return n, err
}

func (f *gateFile) WriteAt(p []byte, off int64) (int, error) {
	f.g.note("write") // a batch over preallocated zeros, or the header's mark
	n, err := f.File.WriteAt(p, off)
	f.g.mu.Lock()
	copy(f.g.image[off:], p[:n])
	f.g.mu.Unlock()
	return n, err
}

func (f *gateFile) Truncate(size int64) error {
	err := f.File.Truncate(size)
	f.g.mu.Lock()
	f.g.image = f.g.image[:min(int64(len(f.g.image)), size)]
	f.g.mu.Unlock()
	return err
}

func (f *gateFile) Sync() error {
	f.g.note("sync<")
	f.g.mu.Lock()
	gated := f.g.gated
	f.g.mu.Unlock()
	if gated {
		<-f.g.gate
	}
	err := f.File.Sync()
	f.g.mu.Lock()
	if err == nil {
		f.g.synced = append(f.g.synced[:0], f.g.image...)
	}
	f.g.log = append(f.g.log, "sync>")
	f.g.mu.Unlock()
	return err
}

// checkWriteSyncOrder returns an error unless every journal write is followed by its sync's
// start and return before the next write: batch N+1 is never written before sync N returned.
// A batch may be preceded by zeros that extend the file (preallocation), under its sync.
func checkWriteSyncOrder(log []string) error {
	state := "synced" // after Open's own syncs
	for i, op := range log {
		switch {
		case op == "zeros" && state == "synced":
			state = "extended"
		case op == "write" && (state == "synced" || state == "extended"):
			state = "written"
		case op == "sync<" && state != "syncing":
			state = "syncing"
		case op == "sync>" && state == "syncing":
			state = "synced"
		default:
			return fmt.Errorf("op %d %q after %q: %s", i, op, state, strings.Join(log, " "))
		}
	}
	return nil
}

// releaseFlights releases the journal's held syncs one by one until done reports true; each
// returns to the test while its sync is held, and onFlight (if set) runs then. A moment with
// nothing in flight and not done waits for a handler's sleep or a backoff.
func (g *gateFS) releaseFlights(t *testing.T, done func() bool, onFlight func()) {
	t.Helper()
	for {
		synctest.Wait()
		g.mu.Lock()
		inFlight := len(g.log) > 0 && g.log[len(g.log)-1] == "sync<"
		err := checkWriteSyncOrder(g.log)
		g.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if done() {
			return
		}
		if !inFlight {
			time.Sleep(time.Millisecond)
			continue
		}
		if onFlight != nil {
			onFlight()
		}
		g.gate <- struct{}{}
	}
}

// stopGated ends a gated test's runner: producers done, syncs no longer held, Run stopped
// without error, the runner closed, and the write/sync order checked over the whole run.
func (g *gateFS) stopGated(t *testing.T, r interface{ Close() error }, wg *sync.WaitGroup, cancel context.CancelFunc, ran <-chan error) {
	t.Helper()
	wg.Wait()
	g.mu.Lock()
	g.gated = false
	g.mu.Unlock()
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := checkWriteSyncOrder(g.log); err != nil {
		t.Fatal(err)
	}
}

// TestPipelinedCommitWritesBatchNPlus1OnlyAfterSyncNReturned holds every journal sync of a
// running runner until the test releases it, while producers keep enqueueing and attempts keep
// ending: the owner takes that work into the engine during each flight, but the journal's
// log of writes and syncs must alternate (write, sync began, sync returned, write, ...): no
// write while a sync is in flight. It also checks that the commands sent during a flight were
// taken into the engine then (none left queued behind the fsync) and that every job settled.
func TestPipelinedCommitWritesBatchNPlus1OnlyAfterSyncNReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGateFS()
		const jobs, producers = 60, 6
		var mu sync.Mutex
		settled := 0
		cfg := Config{Capacity: 4, OnSettled: func(Settled) { mu.Lock(); settled++; mu.Unlock() }}
		r := openOn(t, g, cfg, func(ctx context.Context, j Job[string]) error {
			time.Sleep(time.Millisecond)
			return nil
		})
		g.mu.Lock()
		g.gated, g.log = true, nil
		g.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- r.Run(ctx) }()
		var wg sync.WaitGroup
		enqueued := 0
		for p := range producers {
			wg.Go(func() {
				for i := p; i < jobs; i += producers {
					if _, err := r.Enqueue(ctx, time.Time{}, "t", "x"); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					enqueued++
					mu.Unlock()
				}
			})
		}
		flights, prepared := 0, 0
		done := func() bool { mu.Lock(); defer mu.Unlock(); return settled == jobs }
		g.releaseFlights(t, done, func() {
			flights++
			mu.Lock()
			defer mu.Unlock()
			if enqueued < jobs {
				// Producers are waiting for acknowledgements: their commands must have been
				// taken into the engine during this flight, not left queued behind the fsync.
				if n := len(r.cmds); n != 0 {
					t.Errorf("%d commands left queued while a sync was in flight", n)
				}
				prepared++
			}
		})
		g.stopGated(t, r, &wg, cancel, ran)
		// Group commit while a sync was held: far fewer batches than the 60 enqueues, 60
		// starts and 60 ends.
		if flights == 0 || flights > jobs || prepared == 0 {
			t.Errorf("%d batches for %d jobs, %d of them with commands prepared during the flight", flights, jobs, prepared)
		}
	})
}

// TestPipelinedAttemptStartsOnlyAfterItsStartedRecordIsSynced checks, inside every handler,
// that the journal as of its last sync already holds the attempt: replayed, the job is running
// with this attempt's number. Each sync is held until the test releases it, so records of the
// next batch (Started ones among them) are prepared while it is in flight; a handler that
// started from an unsynced record would see the job waiting, or at an earlier attempt.
func TestPipelinedAttemptStartsOnlyAfterItsStartedRecordIsSynced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGateFS()
		const jobs = 24
		var mu sync.Mutex
		var bad []string
		starts, settled := 0, 0
		cfg := Config{Capacity: 3, Policy: Policy{Attempts: 3, Base: time.Millisecond, Cap: time.Millisecond},
			OnSettled: func(Settled) { mu.Lock(); settled++; mu.Unlock() }}
		r := openOn(t, g, cfg, func(ctx context.Context, j Job[string]) error {
			s, err := g.syncedState()
			mu.Lock()
			defer mu.Unlock()
			starts++
			found := false
			for _, sj := range s.Jobs {
				if sj.ID == j.ID {
					found = true
					if sj.State != runner.Running || sj.Attempts != j.Attempt {
						bad = append(bad, fmt.Sprintf("job %d attempt %d started; synced journal: %v attempts %d", j.ID, j.Attempt, sj.State, sj.Attempts))
					}
				}
			}
			if err != nil || !found {
				bad = append(bad, fmt.Sprintf("job %d attempt %d started; synced journal lacks it (%v)", j.ID, j.Attempt, err))
			}
			if j.ID%2 == 0 && j.Attempt == 1 {
				return errors.New("once") // a retry: its Started shares later batches
			}
			return nil
		})
		g.mu.Lock()
		g.gated = true
		g.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- r.Run(ctx) }()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range jobs / 4 {
					if _, err := r.Enqueue(ctx, time.Time{}, "t", "x"); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		done := func() bool { mu.Lock(); defer mu.Unlock(); return settled == jobs }
		g.releaseFlights(t, done, nil) // a moment with nothing in flight waits out a retry's backoff
		g.stopGated(t, r, &wg, cancel, ran)
		if want := jobs + jobs/2; starts != want {
			t.Errorf("%d attempts started, want %d", starts, want)
		}
		for _, b := range bad {
			t.Error(b)
		}
	})
}

// TestCheckWriteSyncOrderRefusesAWriteDuringAFlight shows the order check can fail: a write
// while a sync is in flight, or a sync that returns twice, is refused.
func TestCheckWriteSyncOrderRefusesAWriteDuringAFlight(t *testing.T) {
	for _, good := range [][]string{
		{"write", "sync<", "sync>", "write", "sync<", "sync>"},
		{"zeros", "write", "sync<", "sync>", "write", "sync<", "sync>"},
	} {
		if err := checkWriteSyncOrder(good); err != nil {
			t.Fatalf("a well-ordered log refused: %v", err)
		}
	}
	for _, bad := range [][]string{
		{"write", "sync<", "write", "sync>"},
		{"write", "write", "sync<", "sync>"},
		{"write", "sync<", "sync>", "sync>"},
		{"write", "sync<", "zeros", "sync>"},
		{"write", "zeros", "sync<", "sync>"},
	} {
		if checkWriteSyncOrder(bad) == nil {
			t.Errorf("accepted %v", bad)
		}
	}
}

// allZero reports whether every byte of p is zero.
func allZero(p []byte) bool {
	for _, c := range p {
		if c != 0 {
			return false
		}
	}
	return true
}

// TestReadsAreBoundedByTheirContext: Get, Stats and Breakers wait for the owner, which answers
// a read only once everything produced is durable. With a journal sync held, each returns its
// context's error when the context ends; once the sync returns, they answer again.
func TestReadsAreBoundedByTheirContext(t *testing.T) {
	g := newGateFS()
	r := openOn(t, g, Config{}, succeed)
	defer r.Close()
	g.mu.Lock()
	g.gated = true
	g.mu.Unlock()
	enq := make(chan error, 1)
	go func() {
		_, err := r.Enqueue(context.Background(), time.Now().Add(time.Hour), "t", "x")
		enq <- err
	}()
	for i := 0; ; i++ { // until the enqueue's sync is held
		g.mu.Lock()
		held := len(g.log) > 0 && g.log[len(g.log)-1] == "sync<"
		g.mu.Unlock()
		if held {
			break
		}
		if i == 5000 {
			t.Fatal("the enqueue's sync did not begin within 5s")
		}
		time.Sleep(time.Millisecond)
	}
	reads := map[string]func(context.Context) error{
		"Stats":    func(ctx context.Context) error { _, err := r.Stats(ctx); return err },
		"Get":      func(ctx context.Context) error { _, err := r.Get(ctx, 1); return err },
		"Breakers": func(ctx context.Context) error { _, err := r.Breakers(ctx); return err },
	}
	for name, read := range reads {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- read(ctx) }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s with a sync held: %v, want context.DeadlineExceeded", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s with a sync held did not return within 5s of its context's deadline", name)
		}
		cancel()
	}
	g.mu.Lock()
	g.gated = false
	g.mu.Unlock()
	g.gate <- struct{}{}
	if err := <-enq; err != nil {
		t.Fatal(err)
	}
	for name, read := range reads {
		if err := read(context.Background()); err != nil {
			t.Errorf("%s after the sync: %v", name, err)
		}
	}
}
