package runner

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// crashRun is a fixed workload over one world: enqueues, outcomes (all kinds), cancels, a
// manual retry and compactions, committing after each step. It stops at the first error and
// reports what had been acknowledged and the states a reopen may legally find.
type crashRun struct {
	acked   map[uint64]bool
	durable Snapshot // state after the last successful commit or compaction
	failed  Snapshot // the state the failing operation would have made durable
}

func runWorkload(w *world) (crashRun, error) {
	r := crashRun{acked: map[uint64]bool{}, durable: w.e.State(), failed: w.e.State()}
	e := w.e
	commit := func() error {
		res, err := e.Commit(w.now)
		if err != nil {
			r.failed = e.State() // what the failed batch would have made durable
			return err
		}
		for _, a := range res.Acks {
			r.acked[a.ID] = true
		}
		if res.CompactErr != nil {
			return res.CompactErr
		}
		r.durable = e.State()
		for i, a := range res.Starts {
			out := []Outcome{Success(), Failure("503", true), Failure("bad", false), Panicked("boom")}[(int(a.Token.ID)+i)%4]
			if err := e.AttemptDone(w.now, a.Token, out); err != nil {
				return err
			}
		}
		return nil
	}
	for round := 0; round < 6; round++ {
		for i := 0; i < 3; i++ {
			if _, _, err := e.Enqueue(epoch, w.now, fmt.Sprintf("t%d", i), []byte("job")); err != nil {
				return r, err
			}
		}
		if err := commit(); err != nil {
			return r, err
		}
		if round >= 2 { // cancel the first live job, if any
			for _, j := range e.State().Jobs {
				if !j.State.Terminal() {
					if _, err := e.Cancel(j.ID); err != nil {
						return r, fmt.Errorf("cancel: %w", err)
					}
					break
				}
			}
		}
		for _, j := range e.State().Jobs {
			if j.State == Dead && j.Reason == Permanent {
				if _, err := e.Retry(w.now, j.ID); err != nil {
					return r, err
				}
				break
			}
		}
		w.now = w.now.Add(2 * time.Second)
		if err := commit(); err != nil {
			return r, err
		}
		if round%2 == 1 {
			res, err := e.Flush(w.now) // Compact needs everything committed
			if err != nil {
				r.failed = e.State()
				return r, err
			}
			for _, a := range res.Acks {
				r.acked[a.ID] = true
			}
			r.durable, r.failed = e.State(), e.State()
			if err := e.Compact(); err != nil {
				return r, err
			}
			r.durable = e.State()
		}
	}
	return r, nil
}

// TestCrashAtEveryDiskOpLosesNoAck enumerates crash points (pebble's pattern): run the
// workload once to count its disk operations, then for every k crash at the k-th, reopen and
// check that every acknowledged job is there and the recovered state is the last acknowledged
// one or the failing batch's, never a mix.
func TestCrashAtEveryDiskOpLosesNoAck(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { crashAtEveryOp(t, seed) })
	}
}

func crashAtEveryOp(t *testing.T, seed int64) {
	cfg := Config{Capacity: 2, CompactBytes: 1 << 30}
	w := newWorld(seed, cfg)
	if err := w.open(); err != nil {
		t.Fatal(err)
	}
	start := w.d.Ops()
	if _, err := runWorkload(w); err != nil {
		t.Fatalf("workload without a crash: %v", err)
	}
	total := w.d.Ops() - start
	if total < 20 {
		t.Fatalf("workload made only %d disk ops", total)
	}
	t.Logf("%d disk ops", total)
	for k := 1; k <= total; k++ {
		w := newWorld(seed, cfg)
		if err := w.open(); err != nil {
			t.Fatal(err)
		}
		w.d.CrashAfter(k)
		r, err := runWorkload(w)
		if err == nil {
			t.Fatalf("k=%d: the workload met no crash", k)
		}
		w.crash()
		got, err := w.replay()
		if err != nil {
			t.Fatalf("k=%d: replay: %v", k, err)
		}
		if cmp.Diff(r.durable, got) != "" && cmp.Diff(r.failed, got) != "" {
			t.Fatalf("k=%d: recovered state is neither the acknowledged nor the failed batch's (-acked +recovered)\n%s",
				k, cmp.Diff(r.durable, got))
		}
		have := map[uint64]bool{}
		for _, j := range got.Jobs {
			have[j.ID] = true
		}
		for id := range r.acked {
			if !have[id] {
				t.Fatalf("k=%d: acknowledged job %d lost", k, id)
			}
		}
		if err := w.open(); err != nil {
			t.Fatalf("k=%d: reopen: %v", k, err)
		}
		if err := w.e.CheckInvariants(); err != nil {
			t.Fatalf("k=%d: %v", k, err)
		}
	}
}
