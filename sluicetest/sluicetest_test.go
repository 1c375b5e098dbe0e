package sluicetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/core/runner"
)

type order struct {
	ID string `json:"id"`
}

// charge builds a scenario whose handler calls a "pay" service once per job, with or without
// an idempotency key, over faults f.
func charge(idem bool, f ServiceFaults) Scenario[order] {
	return Scenario[order]{
		Config: sluice.Config{Policy: sluice.Policy{Attempts: 10, Base: 100 * time.Millisecond, Cap: time.Second}},
		Setup: func(env *Env) sluice.Handler[order] {
			pay := env.Service("pay", f)
			return func(ctx context.Context, j sluice.Job[order]) error {
				key := ""
				if idem {
					key = "charge-" + j.Payload.ID
				}
				_, err := pay.Do(ctx, Request{Op: "charge", Key: j.Payload.ID, IdempotencyKey: key})
				return err
			}
		},
		Workload: func(r *rand.Rand, p *Plan[order]) {
			for i := range 1 + r.Intn(6) {
				p.Enqueue(time.Duration(r.Int63n(int64(5*time.Second))), "pay", order{ID: fmt.Sprint(i)})
			}
		},
		Invariants: []Invariant[order]{ExactlyOnce("pay", func(o order) string { return o.ID })},
	}
}

// TestCrashBetweenEffectAndSuccessRepeatsTheEffect: with a service that never fails, only a
// crash (or a disk fault, which poisons the runner and restarts it) between the charge and the
// journaled success can charge twice; the sweep must find it, and the shrunk run must keep one.
func TestCrashBetweenEffectAndSuccessRepeatsTheEffect(t *testing.T) {
	f, err := Find(charge(false, ServiceFaults{}), Seeds(300), TimelineDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if f == nil {
		t.Fatal("300 seeds found no double charge")
	}
	if k := f.Shrunk.Knobs; k.Crashes == 0 && !k.DiskFaults {
		t.Fatalf("shrunk run has neither crashes nor disk faults (which poison and restart the runner), yet the service never fails:\n%s", f)
	}
	if _, err := os.Stat(f.Timeline); err != nil {
		t.Fatalf("timeline file: %v", err)
	}
}

// TestIdempotencyKeyChargesOnceUnderEveryFault: the same handler with a key passes a sweep
// with every fault on.
func TestIdempotencyKeyChargesOnceUnderEveryFault(t *testing.T) {
	Check(t, charge(true, ServiceFaults{Fail: 0.1, ApplyThenFail: 0.1, Timeout: 0.1}), Seeds(200))
}

// TestReplayTokenReproducesTheRun: a failure's token, parsed back, gives the same violation.
func TestReplayTokenReproducesTheRun(t *testing.T) {
	sc := charge(false, ServiceFaults{ApplyThenFail: 0.3})
	f, err := Find(sc, Seeds(100), TimelineDir(t.TempDir()))
	if err != nil || f == nil {
		t.Fatalf("no failure to replay: %v", err)
	}
	sp, err := parseToken(f.Shrunk.Token())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f.Shrunk.Knobs, *sp.knobs); diff != "" {
		t.Fatalf("token knobs (-want +got):\n%s", diff)
	}
	got := run(&sc, sp.seed, *sp.knobs).violation
	if got == nil || got.Error() != f.Shrunk.Error() {
		t.Fatalf("replay gave %v, want %v", got, f.Shrunk)
	}
}

// TestCorpusKeepsAndReplaysFailures: a failure is appended to the corpus and replayed first.
func TestCorpusKeepsAndReplaysFailures(t *testing.T) {
	path := filepath.Join(t.TempDir(), "testdata", "pay.corpus")
	sc := charge(false, ServiceFaults{ApplyThenFail: 0.3})
	f, err := Find(sc, Seeds(100), Corpus(path), TimelineDir(t.TempDir()))
	if err != nil || f == nil {
		t.Fatalf("no failure: %v", err)
	}
	toks, err := readCorpus(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{f.Shrunk.Token()}, toks); diff != "" {
		t.Fatalf("corpus (-want +got):\n%s", diff)
	}
	o := buildOptions([]Option{Seeds(1), Corpus(path)})
	specs, err := o.specs()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := specs[0].label, "corpus="+f.Shrunk.Token(); got != want {
		t.Fatalf("first run %q, want %q", got, want)
	}
}

// TestDeterminismGuardNamesTheWallClock: a handler that sends the wall clock is caught by the
// double run, and the message says what to use instead.
func TestDeterminismGuardNamesTheWallClock(t *testing.T) {
	sc := charge(true, ServiceFaults{})
	sc.Setup = func(env *Env) sluice.Handler[order] {
		svc := env.Service("audit", ServiceFaults{})
		return func(ctx context.Context, j sluice.Job[order]) error {
			_, err := svc.Do(ctx, Request{Op: "log", Key: time.Now().Format(time.RFC3339Nano)})
			return err
		}
	}
	sc.Invariants = nil
	_, err := Find(sc, Seeds(1))
	if err == nil || !strings.Contains(err.Error(), "sluicetest.Now(ctx)") {
		t.Fatalf("want a determinism error naming sluicetest.Now, got %v", err)
	}
}

// TestNoEffectAfterCancelCatchesWithoutCancel: a handler that keeps charging through
// context.WithoutCancel after its job was cancelled breaks the provided invariant.
func TestNoEffectAfterCancelCatchesWithoutCancel(t *testing.T) {
	sc := Scenario[order]{
		Setup: func(env *Env) sluice.Handler[order] {
			pay := env.Service("pay", ServiceFaults{LatencyMin: 100 * time.Millisecond, LatencyMax: 100 * time.Millisecond})
			return func(ctx context.Context, j sluice.Job[order]) error {
				_, _ = pay.Do(ctx, Request{Op: "reserve", Key: j.Payload.ID})
				_, err := pay.Do(context.WithoutCancel(ctx), Request{Op: "charge", Key: j.Payload.ID + "-charge"})
				return err
			}
		},
		Workload: func(r *rand.Rand, p *Plan[order]) {
			j := p.Enqueue(0, "pay", order{ID: "a"})
			p.Cancel(50*time.Millisecond, j)
		},
		JobsMax: 1,
	}
	res := run(&sc, 1, Knobs{Jobs: 1, Horizon: time.Second})
	if res.violation == nil || res.violation.Invariant != "no effect after cancel" {
		t.Fatalf("want %q broken, got %v\n%s", "no effect after cancel", res.violation, strings.Join(res.timeline, "\n"))
	}
}

// TestBlockedHandlerIsReported: a handler waiting on something the world cannot see is
// reported, not hung on.
func TestBlockedHandlerIsReported(t *testing.T) {
	old := watchdog
	watchdog = 50 * time.Millisecond
	defer func() { watchdog = old }()
	release := make(chan struct{})
	defer close(release)
	sc := Scenario[order]{
		Setup: func(env *Env) sluice.Handler[order] {
			return func(ctx context.Context, j sluice.Job[order]) error {
				<-release
				return nil
			}
		},
		Workload: func(r *rand.Rand, p *Plan[order]) { p.Enqueue(0, "t", order{ID: "a"}) },
	}
	res := run(&sc, 1, Knobs{Jobs: 1, Horizon: time.Second})
	if res.violation == nil || res.violation.Invariant != "handler blocked" {
		t.Fatalf("want a blocked handler reported, got %v", res.violation)
	}
}

// TestSameSeedSameTimeline: a run is a function of its seed and knobs.
func TestSameSeedSameTimeline(t *testing.T) {
	sc := charge(true, ServiceFaults{Fail: 0.2, ApplyThenFail: 0.1, Timeout: 0.1})
	for seed := int64(1); seed <= 20; seed++ {
		k := sc.knobs(seed)
		a, b := run(&sc, seed, k), run(&sc, seed, k)
		if diff := cmp.Diff(a.timeline, b.timeline); diff != "" {
			t.Fatalf("seed %d (-first +second):\n%s", seed, diff)
		}
	}
}

func TestParseToken(t *testing.T) {
	k := Knobs{Jobs: 3, Crashes: 2, Stops: 1, DiskFaults: true, Horizon: 1500 * time.Millisecond}
	sp, err := parseToken("42:" + k.String())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(k, *sp.knobs); diff != "" || sp.seed != 42 {
		t.Fatalf("seed %d, knobs (-want +got):\n%s", sp.seed, diff)
	}
	if sp, err := parseToken("7"); err != nil || sp.knobs != nil || sp.seed != 7 {
		t.Fatalf("parseToken(7) = %+v, %v", sp, err)
	}
	if _, err := parseToken("7:jobs=x"); err == nil {
		t.Fatal("a bad token parsed")
	}
}

func TestRecorderRoundTripsThroughTheCodec(t *testing.T) {
	type msg struct {
		To   string `json:"to"`
		note string // unexported: JSON drops it
	}
	r := &Recorder[msg]{Codec: sluice.JSON[msg]()}
	due := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	if _, err := r.Enqueue(context.Background(), due, "smtp", msg{To: "ada", note: "lost"}); err != nil {
		t.Fatal(err)
	}
	RequireEnqueued(t, r, []Enqueued[msg]{{Due: due, Target: "smtp", Payload: msg{To: "ada"}}}, cmp.AllowUnexported(msg{}))
	r.Err = errors.New("down")
	if _, err := r.Enqueue(context.Background(), due, "smtp", msg{}); err == nil {
		t.Fatal("Err not returned")
	}
}

func TestRunJobRecoversPanicsAndReadsNow(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var seen time.Time
	h := func(ctx context.Context, j sluice.Job[int]) error {
		seen = Now(ctx)
		if j.Payload < 0 {
			panic("negative")
		}
		return nil
	}
	if out := RunJob(WithNow(context.Background(), at), h, FakeJob(1)); out != nil || !seen.Equal(at) {
		t.Fatalf("outcome %v, Now %v; want succeeded at %v", out, seen, at)
	}
	if out := RunJob(context.Background(), h, FakeJob(-1)); sluice.OutcomeName(out) != "panicked" {
		t.Fatalf("outcome %v, want panicked", out)
	}
}

// TestCrashInsideCloseRestartsLikeAnyCrash: a commit crash armed before a graceful stop may
// fire inside the runner's Close; the world must treat it as a crash and restart (the bug the
// webhook corpus first caught). The sweep must contain such a run, and every run must pass.
func TestCrashInsideCloseRestartsLikeAnyCrash(t *testing.T) {
	sc := charge(true, ServiceFaults{})
	sc.Horizon = 5 * time.Second
	seen := 0
	for seed := int64(1); seed <= 400 && seen == 0; seed++ {
		k := sc.knobs(seed)
		k.Stops, k.Crashes = 2, 3
		res := run(&sc, seed, k)
		if res.violation != nil {
			t.Fatalf("seed %d: %v", seed, res.violation)
		}
		for _, l := range res.timeline {
			if strings.Contains(l, "close failed") {
				seen++
			}
		}
	}
	if seen == 0 {
		t.Fatal("no run crashed inside Close: the test no longer covers it")
	}
}

// TestSweepLeaksNoGoroutines: a failing sweep (shrinking included) ends every handler it left
// parked in a service call.
func TestSweepLeaksNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	f, err := Find(charge(false, ServiceFaults{ApplyThenFail: 0.3, LatencyMin: time.Second, LatencyMax: 2 * time.Second}), Seeds(50), TimelineDir(t.TempDir()))
	if err != nil || f == nil {
		t.Fatalf("want a failure, got %v", err)
	}
	if after := runtime.NumGoroutine(); after > before+2 {
		t.Fatalf("%d goroutines before the sweep, %d after", before, after)
	}
}

func TestInvalidConfigNamesTheField(t *testing.T) {
	sc := charge(true, ServiceFaults{})
	sc.Config.Policy.Base = -time.Second
	_, err := Find(sc, Seeds(1))
	if err == nil || !strings.Contains(err.Error(), "Policy.Base") {
		t.Fatalf("want an error naming Policy.Base, got %v", err)
	}
}

// TestGoroutineOutlivingItsHandlerIsReported: a goroutine that calls a service after its
// handler returned is reported with what to change.
func TestGoroutineOutlivingItsHandlerIsReported(t *testing.T) {
	ch, done := make(chan struct{}), make(chan struct{})
	sc := Scenario[order]{
		Config: sluice.Config{Capacity: 1},
		Setup: func(env *Env) sluice.Handler[order] {
			svc := env.Service("audit", ServiceFaults{})
			return func(ctx context.Context, j sluice.Job[order]) error {
				if j.Payload.ID == "first" {
					go func() {
						<-ch
						_, _ = svc.Do(ctx, Request{Op: "late", Key: "x"})
						close(done)
					}()
					return nil
				}
				close(ch)
				<-done
				return nil
			}
		},
		Workload: func(r *rand.Rand, p *Plan[order]) {
			p.Enqueue(0, "t", order{ID: "first"})
			p.Enqueue(time.Second, "t", order{ID: "second"})
		},
	}
	res := run(&sc, 1, Knobs{Jobs: 2, Horizon: 2 * time.Second})
	if res.violation == nil || res.violation.Invariant != "determinism" || !strings.Contains(res.violation.Err.Error(), "outlived") {
		t.Fatalf("want the outliving goroutine reported, got %v", res.violation)
	}
}

// TestConfigMiddlewareAndHooksRunInTheWorld: the world runs the scenario's Config as a Runner
// does: its middleware wraps every attempt (here it makes a charge the service refused
// permanent, which the handler alone would retry) and every hook reports.
func TestConfigMiddlewareAndHooksRunInTheWorld(t *testing.T) {
	var mu sync.Mutex
	count := map[string]int{}
	note := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		count[what]++
	}
	sc := charge(true, ServiceFaults{Fail: 0.2})
	sc.Config.AgeMax = time.Minute
	sc.Config.Middleware = []sluice.Middleware{func(next sluice.CallHandler) sluice.CallHandler {
		return func(ctx context.Context, c sluice.Call) error {
			note("middleware")
			err := next(ctx, c)
			if err != nil {
				note("made permanent")
				return sluice.Permanent(err)
			}
			return nil
		}
	}}
	sc.Config.OnAttemptStarted = func(sluice.AttemptStarted) { note("started") }
	sc.Config.OnAttemptEnded = func(e sluice.AttemptEnded) { note("ended " + e.Outcome()) }
	sc.Config.OnCommitted = func(sluice.Committed) { note("committed") }
	sc.Config.OnSettled = func(s sluice.Settled) { note("settled " + s.State.String()) }
	Check(t, sc, Seeds(20))
	for _, what := range []string{"middleware", "made permanent", "started", "ended succeeded", "ended permanent", "committed", "settled succeeded", "settled dead"} {
		if count[what] == 0 {
			t.Errorf("%q never happened in 20 seeds: %v", what, count)
		}
	}
	if count["ended retry"] != 0 {
		t.Errorf("%d attempts ended retry, want none: the middleware makes every failure permanent", count["ended retry"])
	}
}

// TestGracefulStopCheckSeesALostOutcome plants a Close that did not write the closing runner's
// last outcome (the first job it held gets one attempt more than the journal): the world must
// report the job it reopens older than it closed.
func TestGracefulStopCheckSeesALostOutcome(t *testing.T) {
	afterClose = func(last *runner.Snapshot) {
		if len(last.Jobs) > 0 {
			last.Jobs[0].Attempts++
		}
	}
	defer func() { afterClose = nil }()
	sc := charge(true, ServiceFaults{})
	caught := 0
	for seed := int64(1); seed <= 100; seed++ {
		k := sc.knobs(seed)
		k.Stops, k.Crashes, k.DiskFaults = 2, 0, false
		if v := run(&sc, seed, k).violation; v != nil {
			if v.Invariant != "a graceful stop keeps every outcome" {
				t.Fatalf("seed %d: %v", seed, v)
			}
			caught++
		}
	}
	if caught == 0 {
		t.Fatal("no seed saw the lost outcome")
	}
	t.Logf("%d of 100 seeds saw the lost outcome", caught)
}

// TestAttemptTimeoutEndsTheHandlersContext: a kind option of the scenario (WithAttemptTimeout)
// reaches the simulated runner: each attempt's context ends at the timeout on the simulated
// clock with cause ErrAttemptTimeout, while the handler waits on a slow service, and the job
// is retried by its policy until it dies.
func TestAttemptTimeoutEndsTheHandlersContext(t *testing.T) {
	var mu sync.Mutex
	causes, kinds := map[error]int{}, map[string]int{}
	sc := Scenario[order]{
		Config: sluice.Config{Policy: sluice.Policy{Attempts: 2, Base: 100 * time.Millisecond, Cap: time.Second}},
		Kind:   []sluice.KindOption{sluice.WithAttemptTimeout(200 * time.Millisecond)},
		Setup: func(env *Env) sluice.Handler[order] {
			slow := env.Service("slow", ServiceFaults{LatencyMin: time.Second, LatencyMax: 2 * time.Second, TimeoutAfter: time.Minute})
			return func(ctx context.Context, j sluice.Job[order]) error {
				_, err := slow.Do(ctx, Request{Op: "work", Key: j.Payload.ID})
				mu.Lock()
				causes[context.Cause(ctx)]++
				kinds[j.Kind]++
				mu.Unlock()
				return err
			}
		},
		Workload: func(r *rand.Rand, p *Plan[order]) {
			p.Enqueue(0, "slow", order{ID: "a"})
			p.Enqueue(0, "slow", order{ID: "b"})
		},
		Invariants: []Invariant[order]{{Name: "every attempt timed out", Check: func(v View[order]) error {
			for _, j := range v.Jobs() {
				if v.Final() && (j.State != sluice.StateDead || j.Attempts != 2) {
					return fmt.Errorf("job %d %v after %d attempts, want dead after 2", j.ID, j.State, j.Attempts)
				}
			}
			return nil
		}}},
	}
	res := run(&sc, 1, Knobs{Jobs: 2, Horizon: time.Second})
	if res.violation != nil {
		t.Fatalf("violation: %v\n%s", res.violation, strings.Join(res.timeline, "\n"))
	}
	if causes[sluice.ErrAttemptTimeout] != 4 || len(causes) != 1 || kinds[sluice.DefaultKind] != 4 {
		t.Errorf("handlers saw causes %v and kinds %v, want ErrAttemptTimeout and %q four times", causes, kinds, sluice.DefaultKind)
	}
	if tl := strings.Join(res.timeline, "\n"); !strings.Contains(tl, "timeout 1#1 after 200ms") {
		t.Errorf("timeline without the timeout:\n%s", tl)
	}
}
