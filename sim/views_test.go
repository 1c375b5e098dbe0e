package sim

import (
	"math/rand"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim/disk"
)

// TestLiveViewsEqualStateViews: over enqueues (some with unique keys), cancels, successes,
// failures, breaker deferrals and retries of an engine, liveViews after every commit equals the views of the
// full state, and the views it returned the commit before (which the checker holds) are
// left intact by the buffer it now writes.
func TestLiveViewsEqualStateViews(t *testing.T) {
	cfg := runner.Config{Policy: retry.Policy{Attempts: 3, Base: time.Second, Cap: 4 * time.Second},
		Circuit:  breaker.Circuit{Threshold: 1, Window: 10 * time.Second, Cooldown: time.Second, Probes: 1},
		Capacity: 3, Rand: rand.New(rand.NewSource(1))}
	now := Epoch
	e, err := runner.Open(disk.New(1), journalName, cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Dispatch(now, true); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(2))
	w := &World{}
	var prev, held []JobView
	var running []runner.Attempt
	for step := range 400 {
		now = now.Add(time.Duration(r.Intn(1500)) * time.Millisecond)
		switch k := r.Intn(10); {
		case k < 4:
			opts := runner.Opts{}
			if r.Intn(3) == 0 {
				opts.Unique, opts.UniqueFor = "u"+strconv.Itoa(r.Intn(5)), time.Duration(r.Intn(3))*time.Second
			}
			e.EnqueueJob(now, runner.NewJob{Due: now, Target: "t" + strconv.Itoa(r.Intn(2)), Payload: []byte("p" + strconv.Itoa(r.Intn(4))), Opts: opts})
		case k < 5 && e.Status().NextID > 1:
			e.Cancel(1 + uint64(r.Int63n(int64(e.Status().NextID-1))))
		case k < 8 && len(running) > 0:
			i := r.Intn(len(running))
			out := runner.Success()
			if r.Intn(2) == 0 { // a failure opens the breaker: its waiting jobs are deferred, again and again
				out = runner.Failure("boom", r.Intn(2) == 0)
			}
			e.AttemptDone(now, running[i].Token, out)
			running = slices.Delete(running, i, i+1)
		}
		res, err := e.Commit(now)
		if err != nil {
			t.Fatalf("step %d: commit: %v", step, err)
		}
		running = append(running, res.Starts...)
		got := w.liveViews(1, prev, e)
		if diff := cmp.Diff(jobViews(e.State()), got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("step %d: live views differ from the state's (-want +got):\n%s", step, diff)
		}
		if diff := cmp.Diff(held, prev, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("step %d: building the views overwrote the previous commit's (-was +now):\n%s", step, diff)
		}
		prev, held = got, slices.Clone(got)
	}
	if st := e.Status(); st.NextID < 100 {
		t.Fatalf("only %d jobs in 400 steps", st.NextID-1)
	}
}
