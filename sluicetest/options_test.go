package sluicetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// migrations is a sequence of steps that must apply in order: each step's handler writes
// "step" to service db. With group set, the plan enqueues the steps WithGroup(group).
func migrations(group string) Scenario[int] {
	return Scenario[int]{
		Config: sluice.Config{Capacity: 4, Policy: sluice.Policy{Attempts: 20, Base: 100 * time.Millisecond, Cap: time.Second}},
		Setup: func(env *Env) sluice.Handler[int] {
			db := env.Service("db", ServiceFaults{LatencyMin: 50 * time.Millisecond, LatencyMax: 300 * time.Millisecond, Fail: 0.1})
			return func(ctx context.Context, j sluice.Job[int]) error {
				_, err := db.Do(ctx, Request{Op: "migrate", Key: "schema", Value: strconv.Itoa(j.Payload)})
				return err
			}
		},
		Workload: func(r *rand.Rand, p *Plan[int]) {
			at := time.Duration(0)
			for step := range 6 {
				var opts []sluice.JobOption
				if group != "" {
					opts = append(opts, sluice.WithGroup(group))
				}
				p.Enqueue(at, "db", step, opts...)
				at += time.Duration(r.Int63n(int64(200 * time.Millisecond)))
			}
		},
		JobsMax: 6,
		Invariants: []Invariant[int]{{Name: "steps apply in order", Check: func(v View[int]) error {
			last := -1
			for _, c := range v.Calls("db") {
				step, _ := strconv.Atoi(c.Value)
				if step < last {
					return fmt.Errorf("step %d issued after step %d", step, last)
				}
				last = step
			}
			return nil
		}}},
	}
}

// TestPlannedSequenceKeepsItsOrder: the plan's WithGroup reaches the simulated runner: under
// crashes, stops and failing calls, the steps of a sequence are issued in enqueue order (a
// step may repeat, never go back). Without the option the sweep finds steps out of order,
// so the check can fail.
func TestPlannedSequenceKeepsItsOrder(t *testing.T) {
	Check(t, migrations("schema"), Seeds(300))
	f, err := Find(migrations(""), Seeds(300), TimelineDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if f == nil || f.Found.Invariant != "steps apply in order" {
		t.Fatalf("without WithGroup, 300 seeds found no steps out of order: %v", f)
	}
}

// TestPlannedSequenceHeldByADeadJob: with the kind's WithHoldOnDead and the plan's
// WithGroup, a dead step holds the later ones: they never run, and "acknowledged jobs settle"
// accepts them as held (by the world's records, not the runner's word). A manual Retry of the
// dead step, planned later, lets them all run. Without WithHoldOnDead the dead step releases
// them.
func TestPlannedSequenceHeldByADeadJob(t *testing.T) {
	for _, tc := range []struct{ hold, retry bool }{{true, false}, {true, true}, {false, false}} {
		t.Run(fmt.Sprintf("hold=%v,retry=%v", tc.hold, tc.retry), func(t *testing.T) {
			ran := map[int]int{}
			var kind []sluice.KindOption
			if tc.hold {
				kind = append(kind, sluice.WithHoldOnDead())
			}
			retry := tc.retry
			sc := Scenario[int]{
				Config: sluice.Config{Policy: sluice.Policy{Attempts: 1}},
				Kind:   kind,
				Setup: func(env *Env) sluice.Handler[int] {
					return func(ctx context.Context, j sluice.Job[int]) error {
						ran[j.Payload]++
						if j.Payload == 0 && ran[0] == 1 {
							return errors.New("lock timeout")
						}
						return nil
					}
				},
				Workload: func(r *rand.Rand, p *Plan[int]) {
					first := p.Enqueue(0, "db", 0, sluice.WithGroup("schema"))
					p.Enqueue(0, "db", 1, sluice.WithGroup("schema"))
					p.Enqueue(0, "db", 2, sluice.WithGroup("schema"))
					if retry {
						p.Retry(5*time.Second, first)
					}
				},
			}
			res := run(&sc, 1, Knobs{Jobs: 3, Horizon: time.Second})
			if res.violation != nil {
				t.Fatalf("violation: %v\n%s", res.violation, strings.Join(res.timeline, "\n"))
			}
			want := map[int]int{0: 1}
			switch {
			case retry:
				want = map[int]int{0: 2, 1: 1, 2: 1}
			case !tc.hold:
				want = map[int]int{0: 1, 1: 1, 2: 1}
			}
			if fmt.Sprint(ran) != fmt.Sprint(want) {
				t.Errorf("attempts per step %v, want %v\n%s", ran, want, strings.Join(res.timeline, "\n"))
			}
			if tl := strings.Join(res.timeline, "\n"); tc.hold && !strings.Contains(tl, `group="schema" hold`) {
				t.Errorf("the timeline does not show the enqueues' options:\n%s", tl)
			}
		})
	}
}

// TestPlannedJobOptionRefused: an option Enqueue would refuse is a violation at the start of
// the run, naming the option.
func TestPlannedJobOptionRefused(t *testing.T) {
	sc := Scenario[int]{
		Setup: func(env *Env) sluice.Handler[int] {
			return func(context.Context, sluice.Job[int]) error { return nil }
		},
		Workload: func(r *rand.Rand, p *Plan[int]) { p.Enqueue(0, "db", 0, sluice.WithKey("")) },
	}
	res := run(&sc, 1, Knobs{Jobs: 1, Horizon: time.Second})
	v := res.violation
	if v == nil || v.Invariant != "the workload's job options" || !errors.Is(v.Err, sluice.ErrInvalidJob) || !strings.Contains(v.Err.Error(), `WithKey("")`) {
		t.Fatalf("violation %v, want the workload's job options naming WithKey(\"\")", v)
	}
}

// TestPlannedKeyFromTheKindsKeyFunc: the kind's WithKeyFunc keys the plan's jobs as
// Kind.Enqueue would; a job's own WithKey replaces it.
func TestPlannedKeyFromTheKindsKeyFunc(t *testing.T) {
	sc := Scenario[int]{
		Kind: []sluice.KindOption{sluice.WithKeyFunc(func(n int) string { return fmt.Sprint("tenant-", n%2) }),
			sluice.WithKeyConcurrency(1)},
		Setup: func(env *Env) sluice.Handler[int] {
			return func(context.Context, sluice.Job[int]) error { return nil }
		},
		Workload: func(r *rand.Rand, p *Plan[int]) {
			p.Enqueue(0, "db", 0)
			p.Enqueue(0, "db", 1)
			p.Enqueue(0, "db", 2, sluice.WithKey("own"))
		},
	}
	res := run(&sc, 1, Knobs{Jobs: 3, Horizon: time.Second})
	if res.violation != nil {
		t.Fatalf("violation: %v", res.violation)
	}
	tl := strings.Join(res.timeline, "\n")
	for _, want := range []string{`ref 0 target=db due=+0s key="tenant-0"`, `ref 1 target=db due=+0s key="tenant-1"`, `ref 2 target=db due=+0s key="own"`} {
		if !strings.Contains(tl, want) {
			t.Errorf("timeline without %s:\n%s", want, tl)
		}
	}
}
