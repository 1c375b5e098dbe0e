package runner

import (
	"log/slog"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/retry"
	"pgregory.net/rapid"
)

// TestHeapMinIsSmallestOfASortedModel drives one heap (run and binary heap together) with
// pushes, removals and re-keys drawn so that most pushes ascend (the run's case) and some do
// not, and checks after every action that its minimum and length are a sorted list's and its
// order and every job's index hold.
func TestHeapMinIsSmallestOfASortedModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := heap{slot: slotPrio, prio: rapid.Bool().Draw(t, "prio")}
		var in []*job // the model: the jobs in the heap
		nextID := uint64(1)
		due := int64(0)
		steps := rapid.IntRange(1, 300).Draw(t, "steps")
		for range steps {
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op < 5 || len(in) == 0: // push, mostly ascending
				if rapid.IntRange(0, 3).Draw(t, "jump") > 0 {
					due += int64(rapid.IntRange(0, 2).Draw(t, "later"))
				} else {
					due -= int64(rapid.IntRange(0, 5).Draw(t, "earlier"))
				}
				j := &job{ID: nextID, Opts: &Opts{Priority: rapid.IntRange(-1, 1).Draw(t, "priority")}, dueKey: due}
				j.idx = [slots]int32{-1, -1, -1}
				nextID++
				q.push(j)
				in = append(in, j)
			case op < 7: // remove the minimum
				j := q.min()
				q.remove(j)
				in = slices.DeleteFunc(in, func(x *job) bool { return x == j })
			case op < 9: // remove any
				i := rapid.IntRange(0, len(in)-1).Draw(t, "victim")
				q.remove(in[i])
				if in[i].idx[q.slot] != -1 {
					t.Fatalf("job %d removed but indexed %d", in[i].ID, in[i].idx[q.slot])
				}
				in = slices.Delete(in, i, i+1)
			default: // re-key any
				j := in[rapid.IntRange(0, len(in)-1).Draw(t, "rekeyed")]
				j.dueKey += int64(rapid.IntRange(-3, 3).Draw(t, "by"))
				q.fix(j)
			}
			if at := q.disorder(); at != "" {
				t.Fatalf("out of order: %s", at)
			}
			if q.len() != len(in) {
				t.Fatalf("len %d, model %d", q.len(), len(in))
			}
			for _, j := range in {
				e := q.entryOf(j)
				p := int(j.idx[q.slot])
				if ok := (p >= 0 && p < len(q.h) && q.h[p] == e) || (p < -1 && runPos(p) < len(q.run) && q.run[runPos(p)] == e); !ok {
					t.Fatalf("job %d indexed %d, not there", j.ID, p)
				}
			}
			if len(in) > 0 {
				want := slices.MinFunc(in, func(a, b *job) int {
					if q.less(q.entryOf(a), q.entryOf(b)) {
						return -1
					}
					return 1
				})
				if got := q.min(); got != want {
					t.Fatalf("min is job %d, model's is %d", got.ID, want.ID)
				}
			}
		}
	})
}

// TestJobFindsEveryIdAfterAnyPrune enqueues jobs, cancels and prunes random ones in rounds,
// and checks that job(id) finds exactly the jobs a scan of order finds, for every id from 0
// past nextID.
func TestJobFindsEveryIdAfterAnyPrune(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := mustMachine(MachineConfig{Policy: retry.DefaultPolicy(), Circuit: breaker.DefaultCircuit(), Capacity: 1,
			RecordMax: 1 << 20, Logger: slog.New(slog.DiscardHandler), Rand: rand.New(rand.NewSource(1))})
		for range rapid.IntRange(1, 5).Draw(t, "rounds") {
			for range rapid.IntRange(0, 40).Draw(t, "enqueued") {
				if err := m.Step(Enqueue{Now: epoch, Due: epoch.Add(time.Hour), Target: "a"}); err != nil {
					t.Fatal(err)
				}
			}
			var pruned []uint64
			for _, j := range slices.Clone(m.order) {
				if rapid.IntRange(0, 2).Draw(t, "cancel") == 0 && !j.State.Terminal() {
					if err := m.Step(Cancel{ID: j.ID}); err != nil {
						t.Fatal(err)
					}
					pruned = append(pruned, j.ID)
				}
			}
			m.Prune(pruned)
			for id := uint64(0); id <= m.nextID+2; id++ {
				var want *job
				for _, j := range m.order {
					if j.ID == id {
						want = j
					}
				}
				if got := m.job(id); got != want {
					t.Fatalf("job(%d) = %v, a scan finds %v", id, got, want)
				}
			}
			if err := m.checkInvariants(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
