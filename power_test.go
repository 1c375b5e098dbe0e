package sluice

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adapters/osfs"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/faultfs"
	"github.com/sluicehq/sluice/internal/runneropt"
)

// A randomized workload on the real disk: the runner over adapters/osfs wrapped in faultfs
// (observed: osfs is held to the syncs it really made), enqueues one by one and in batches,
// unique keys, cancels, attempts (DrainDue of the jobs due now), closes, compactions small
// enough to happen often, and a power cut at a
// random disk operation of any of them, or of an open. After each cut faultfs rewrites the
// real files to what the disk may have kept; the reopened runner must hold every
// acknowledged job (cancelled if its cancel was acknowledged), never reuse an id, and open
// without a refusal (no synced data is damaged).
//
// SLUICE_POWER_ROUNDS sets the rounds (default 12); docs/journal.md has a longer sweep.
func TestPowerCutsLoseNoAcknowledgedJob(t *testing.T) {
	rounds := 12
	if n, err := strconv.Atoi(os.Getenv("SLUICE_POWER_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	start := time.Now()
	var cuts, jobs, compactions, succeeded int
	for round := range rounds {
		w := newPowerWorld(t, int64(round))
		for life := 0; life < 6; life++ {
			w.live(t)
		}
		w.final(t)
		cuts += w.cuts
		jobs += len(w.acked)
		compactions += w.compactions
		succeeded += w.succeeded
	}
	t.Logf("%d rounds: %d power cuts, %d acknowledged jobs (each checked after every later open, %d succeeded at the end), %d compactions, in %v",
		rounds, cuts, jobs, succeeded, compactions, time.Since(start).Round(time.Millisecond))
	if cuts == 0 || compactions == 0 || succeeded == 0 {
		t.Errorf("%d cuts, %d compactions, %d jobs run: the workload missed what it is for", cuts, compactions, succeeded)
	}
}

// powerWorld is one directory on the real disk and what its runners acknowledged.
type powerWorld struct {
	rng   *rand.Rand
	seed  int64
	fs    *faultfs.FS
	acked map[uint64]string // id: payload
	// cancelled are the acknowledged cancels, tried every cancel sent.
	cancelled, tried             map[uint64]bool
	lastID                       uint64
	cuts, compactions, succeeded int
}

func newPowerWorld(t *testing.T, seed int64) *powerWorld {
	var f *faultfs.FS
	o, err := osfs.NewWith(t.TempDir(), osfs.Options{Synced: func(in core.File) { f.Observe(in) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	if f, err = faultfs.Wrap(o, faultfs.Options{Observed: true}); err != nil {
		t.Fatal(err)
	}
	return &powerWorld{rng: rand.New(rand.NewSource(seed)), seed: seed, fs: f,
		acked: map[uint64]string{}, cancelled: map[uint64]bool{}, tried: map[uint64]bool{}}
}

// live opens a runner, checks what it recovered, runs a burst of commands, and either
// closes it or cuts power somewhere in the middle (the open included).
func (w *powerWorld) live(t *testing.T) {
	cfg := Config{Logger: quiet, Capacity: 1, CompactBytes: int64(1+w.rng.Intn(4)) << 10,
		CompactOnClose: w.rng.Intn(3) == 0}
	cfg.opts = runneropt.Options{FS: w.fs}
	cutting := w.rng.Intn(3) != 0
	if cutting {
		w.fs.CutAfter(1 + w.rng.Intn(60))
	}
	r, err := Open("", cfg, JSON[string](), succeed)
	if err == nil {
		w.check(t, r)
		err = w.burst(r)
		r.Close()
		w.compactions += int(readStats(t, r).Compactions)
	}
	if err != nil && !errors.Is(err, faultfs.ErrPowerCut) {
		t.Fatalf("seed %d: %v", w.seed, err)
	}
	if cutting {
		w.cuts++
		if err := w.fs.PowerCut(w.rng); err != nil {
			t.Fatal(err)
		}
	}
}

// final opens the directory once more and checks it.
func (w *powerWorld) final(t *testing.T) {
	cfg := Config{Logger: quiet, Capacity: 1}
	cfg.opts = runneropt.Options{FS: w.fs}
	r, err := Open("", cfg, JSON[string](), succeed)
	if err != nil {
		t.Fatalf("seed %d: the last open: %v (cut: %s)", w.seed, err, w.fs.LastCut())
	}
	defer r.Close()
	w.check(t, r)
	w.succeeded += readStats(t, r).Succeeded
}

// check holds a freshly opened runner to everything acknowledged.
func (w *powerWorld) check(t *testing.T, r *Kind[string]) {
	t.Helper()
	if last := readStats(t, r).LastID; last < w.lastID {
		t.Fatalf("seed %d: last id %d after the cut, but %d was acknowledged (cut: %s)", w.seed, last, w.lastID, w.fs.LastCut())
	}
	for id, payload := range w.acked {
		j, err := r.Get(context.Background(), id)
		if err != nil || payload != "" && j.Payload != payload {
			t.Fatalf("seed %d: acknowledged job %d lost: %+v, %v (cut: %s)", w.seed, id, j, err, w.fs.LastCut())
		}
		if w.cancelled[id] && j.State != StateCancelled {
			t.Fatalf("seed %d: job %d's cancel was acknowledged, state %v (cut: %s)", w.seed, id, j.State, w.fs.LastCut())
		}
	}
}

// burst runs up to 40 commands; the first error (a power cut) ends it.
func (w *powerWorld) burst(r *Kind[string]) error {
	ctx := context.Background()
	due := time.Now().Add(time.Hour)
	for range 40 {
		due := due
		if w.rng.Intn(3) == 0 {
			due = time.Time{} // now: a DrainDue runs it
		}
		switch p := w.rng.Intn(11); {
		case p == 10:
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := r.DrainDue(dctx)
			cancel()
			if err != nil {
				return err
			}
		case p < 5:
			payload := fmt.Sprintf("s%d/%d", w.seed, w.rng.Int())
			var opts []JobOption
			if w.rng.Intn(3) == 0 {
				opts = append(opts, WithUnique(fmt.Sprint("k", w.rng.Intn(5))))
			}
			var dup bool
			id, err := r.Enqueue(ctx, due, "t", payload, append(opts, WasDuplicate(&dup))...)
			if err != nil {
				return err
			}
			w.ack(id, payload, dup)
		case p < 8:
			batch := make([]NewJob[string], 1+w.rng.Intn(8))
			dups := make([]bool, len(batch))
			for i := range batch {
				batch[i] = NewJob[string]{Due: due, Target: "t", Payload: fmt.Sprintf("m%d/%d", w.seed, w.rng.Int()),
					Options: []JobOption{WasDuplicate(&dups[i])}}
				if w.rng.Intn(4) == 0 {
					batch[i].Options = append(batch[i].Options, WithUnique(fmt.Sprint("k", w.rng.Intn(5))))
				}
			}
			ids, err := r.EnqueueMany(ctx, batch)
			if err != nil {
				return err
			}
			for i, id := range ids {
				w.ack(id, batch[i].Payload, dups[i])
			}
		default:
			if w.lastID == 0 {
				continue
			}
			id := 1 + uint64(w.rng.Int63n(int64(w.lastID)))
			if _, ok := w.acked[id]; !ok || w.cancelled[id] || w.tried[id] {
				continue
			}
			w.tried[id] = true // a cancel cut before its ack may still have reached the disk
			err := r.Cancel(ctx, id)
			if errors.Is(err, ErrTerminal) {
				continue // it ran and succeeded first
			}
			if err != nil {
				return err
			}
			w.cancelled[id] = true
		}
	}
	return nil
}

// ack records an acknowledged job. A duplicate's id is its holder's, which may be a job whose
// enqueue was cut before its ack and still reached the disk: its payload is not known ("").
func (w *powerWorld) ack(id uint64, payload string, dup bool) {
	if _, ok := w.acked[id]; !ok {
		if dup {
			payload = ""
		}
		w.acked[id] = payload
	}
	w.lastID = max(w.lastID, id)
}
