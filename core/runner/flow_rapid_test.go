package runner

import (
	"flag"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/flow"
	"github.com/sluicehq/sluice/core/retry"
)

// The flow model: a plain statement of the flow-control rules (docs/runner.md), beside the
// real engine. It does not predict which job starts; it judges every start the engine makes
// against the rules, and after every commit asks whether a job the rules let start was left
// waiting while a unit was free (promptness), replaying the rates' buckets from its own starts.

// fJob is the model's job.
type fJob struct {
	kind, key, group string
	hold             bool
	state            JobState
	due              time.Time
	timeout          time.Duration
}

// fKind is a kind's drawn flow control.
type fKind struct {
	cfg KindConfig
}

type flowModel struct {
	kinds  map[string]fKind
	jobs   map[uint64]*fJob
	paused map[string]bool // as the engine has it now (a Pause applies when proposed)
	// durablePaused is paused as of the last commit: what a crash keeps.
	durablePaused map[string]bool
	running       map[Token]string // attempt → "kind\x00key"
	// starts are the start times per kind and per kind NUL key, across crashes.
	starts map[string][]time.Time
	// skipped counts, per fair key, the starts of other keys since it had a due job waiting.
	skipped map[string]int
	keysDue map[string]map[string]bool // the keys due at some time while it waited (its own too)
	// buckets replay the rates' token buckets from the model's own starts: empty at each
	// open (openAt), a token per start.
	buckets map[string]*flow.Bucket
	openAt  time.Time
	log     []string // the fair kind's starts, for a failure's report
}

type flowMachine struct {
	w      *world
	m      *flowModel
	cfg    Config
	defect Defect // planted (TestFlowModelCatchesPlantedDefects)
	only   string // enqueue only this kind (the planted-defect test aims at one rule)
}

var flowKinds = []string{"lim", "fair", "rate", "krate", "seq"}

func (fm *flowMachine) init(t *rapid.T) {
	kinds := []KindConfig{
		{Name: "lim", KeyLimit: rapid.IntRange(1, 2).Draw(t, "keyLimit"), Timeout: rapid.SampledFrom([]time.Duration{0, 5 * time.Second}).Draw(t, "limTimeout")},
		{Name: "fair", Fair: true},
		{Name: "rate", Rate: Rate{Count: rapid.IntRange(1, 3).Draw(t, "rateCount"), Per: time.Duration(rapid.IntRange(1, 4).Draw(t, "ratePer")) * time.Second,
			Burst: rapid.IntRange(0, 2).Draw(t, "rateBurst")},
			KeyRate: Rate{Count: 1, Per: time.Duration(rapid.IntRange(1, 3).Draw(t, "keyRatePer")) * time.Second}},
		// A key rate alone: with the kind's rate above, keys rarely get to wait for their own.
		{Name: "krate", KeyRate: Rate{Count: 1, Per: time.Duration(rapid.IntRange(1, 3).Draw(t, "krateKeyPer")) * time.Second,
			Burst: rapid.IntRange(0, 2).Draw(t, "krateBurst")}},
		{Name: "seq", Limit: rapid.IntRange(0, 2).Draw(t, "seqLimit")},
	}
	fm.cfg = Config{
		Policy: retry.Policy{Attempts: rapid.IntRange(1, 3).Draw(t, "attempts"), Base: time.Second, Cap: 2 * time.Second},
		// The breaker never opens: its deferrals would be one more reason to wait.
		Circuit:      breaker.Circuit{Threshold: 1 << 20, Window: time.Second, Cooldown: time.Second, Probes: 1},
		Capacity:     rapid.IntRange(1, 4).Draw(t, "capacity"),
		CompactBytes: rapid.SampledFrom([]int64{1 << 30, 2000}).Draw(t, "compactBytes"),
		Retention:    rapid.SampledFrom([]int{1 << 30, 1}).Draw(t, "retention"),
		AgeMax:       time.Hour, // out of the way of the fair share's bound
		Kinds:        kinds,
		KindsOnly:    true,
		Defect:       fm.defect,
	}
	fm.w = newWorld(rapid.Int64().Draw(t, "seed"), fm.cfg)
	fm.m = &flowModel{kinds: map[string]fKind{}, jobs: map[uint64]*fJob{}, paused: map[string]bool{},
		durablePaused: map[string]bool{}, running: map[Token]string{}, starts: map[string][]time.Time{}, skipped: map[string]int{}, keysDue: map[string]map[string]bool{}, buckets: map[string]*flow.Bucket{}, openAt: fm.w.now}
	for _, k := range kinds {
		fm.m.kinds[k.Name] = fKind{cfg: k}
	}
	if err := fm.w.open(); err != nil {
		t.Fatalf("open: %v", err)
	}
}

func (fm *flowMachine) Enqueue(t *rapid.T) {
	kind := rapid.SampledFrom(flowKinds).Draw(t, "kind")
	if fm.only != "" {
		kind = fm.only
	}
	keys := []string{"a", "b", "c"}
	if fm.only != "" {
		keys = keys[:2] // one kind alone: fewer keys, more jobs each
	}
	o := Opts{Kind: kind, Key: rapid.SampledFrom(keys).Draw(t, "key")}
	if kind == "seq" {
		o.Group = rapid.SampledFrom([]string{"g", "h"}).Draw(t, "group")
		o.Hold = rapid.Bool().Draw(t, "hold")
	}
	if rapid.IntRange(0, 3).Draw(t, "timeoutDraw") == 0 {
		o.Timeout = 2 * time.Second
	}
	due := fm.w.now.Add(time.Duration(rapid.IntRange(0, 2).Draw(t, "dueSeconds")) * time.Second)
	_, id, err := fm.w.e.EnqueueJob(fm.w.now, NewJob{Due: due, Target: "t", Opts: o})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	fm.m.jobs[id] = &fJob{kind: kind, key: o.Key, group: o.Group, hold: o.Hold, state: Waiting, due: norm(due), timeout: o.Timeout}
}

func (fm *flowMachine) Pause(t *rapid.T) {
	kind := rapid.SampledFrom(flowKinds).Draw(t, "pauseKind")
	on := rapid.Bool().Draw(t, "pauseOn")
	var err error
	if on {
		_, err = fm.w.e.Pause(fm.w.now, kind)
	} else {
		_, err = fm.w.e.Resume(fm.w.now, kind)
	}
	if err != nil {
		t.Fatalf("pause %v %s: %v", on, kind, err)
	}
	fm.m.paused[kind] = on
}

func (fm *flowMachine) Advance(t *rapid.T) {
	fm.w.now = fm.w.now.Add(time.Duration(rapid.IntRange(0, 1500).Draw(t, "advanceMillis")) * time.Millisecond)
}

func (fm *flowMachine) AttemptDone(t *rapid.T) {
	m := fm.m
	var toks []Token
	for tok := range m.running {
		toks = append(toks, tok)
	}
	if len(toks) == 0 {
		t.Skip("nothing running")
	}
	sort.Slice(toks, func(a, b int) bool { return toks[a].ID < toks[b].ID })
	tok := rapid.SampledFrom(toks).Draw(t, "token")
	var o Outcome
	switch rapid.SampledFrom([]string{"success", "retryable", "permanent"}).Draw(t, "outcome") {
	case "success":
		o = Success()
	case "retryable":
		o = Failure("again", true)
	case "permanent":
		o = Failure("bad", false)
	}
	if err := fm.w.e.AttemptDone(fm.w.now, tok, o); err != nil {
		t.Fatalf("attempt done: %v", err)
	}
	delete(m.running, tok)
	fm.sync(tok.ID)
}

// Cancel cancels a waiting job, or a dead one holding its group.
func (fm *flowMachine) Cancel(t *rapid.T) {
	var ids []uint64
	for id, j := range fm.m.jobs {
		if j.state == Waiting || j.state == Dead && j.hold && j.group != "" && fm.head(j.kind, j.group) == id {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		t.Skip("nothing to cancel")
	}
	slices.Sort(ids)
	id := rapid.SampledFrom(ids).Draw(t, "cancelID")
	if _, err := fm.w.e.Cancel(id); err != nil {
		t.Fatalf("cancel %d: %v", id, err)
	}
	fm.m.jobs[id].state = Cancelled
}

// Retry retries a dead job.
func (fm *flowMachine) Retry(t *rapid.T) {
	var ids []uint64
	for id, j := range fm.m.jobs {
		if _, kept := fm.w.e.Get(id); j.state == Dead && kept { // retention may have pruned it
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		t.Skip("nothing dead")
	}
	slices.Sort(ids)
	id := rapid.SampledFrom(ids).Draw(t, "retryID")
	if _, err := fm.w.e.Retry(fm.w.now, id); err != nil {
		t.Fatalf("retry %d: %v", id, err)
	}
	fm.sync(id)
}

// sync adopts the engine's state and due for job id (after an outcome: the backoff is the
// engine's draw, which the main model checks).
func (fm *flowMachine) sync(id uint64) {
	j, ok := fm.w.e.Get(id)
	if !ok {
		return
	}
	mj := fm.m.jobs[id]
	mj.state, mj.due = j.State, j.Due
}

// head is the lowest-id job of the group not ended (a dead job with hold counts as not ended).
func (fm *flowMachine) head(kind, group string) uint64 {
	var best uint64
	for id, j := range fm.m.jobs {
		if j.kind != kind || j.group != group {
			continue
		}
		ended := j.state == Succeeded || j.state == Cancelled || j.state == Dead && !j.hold
		if !ended && (best == 0 || id < best) {
			best = id
		}
	}
	return best
}

func (fm *flowMachine) runningOf(key string) int {
	n := 0
	for _, k := range fm.m.running {
		if k == key {
			n++
		}
	}
	return n
}

// eligible reports whether the rules (not rates, not the pool) let waiting job id start now.
func (fm *flowMachine) eligible(id uint64, now time.Time) bool {
	j := fm.m.jobs[id]
	k := fm.m.kinds[j.kind].cfg
	if j.state != Waiting || j.due.After(now) || fm.m.paused[j.kind] {
		return false
	}
	if j.group != "" && fm.head(j.kind, j.group) != id {
		return false
	}
	for oid, o := range fm.m.jobs { // one at a time: a retried head waits for a later one
		if oid != id && j.group != "" && o.kind == j.kind && o.group == j.group && o.state == Running {
			return false
		}
	}
	if k.KeyLimit > 0 && fm.runningOf(j.kind+"\x00"+j.key) >= k.KeyLimit {
		return false
	}
	if k.Limit > 0 {
		n := 0
		for _, key := range fm.m.running {
			if len(key) >= len(j.kind) && key[:len(j.kind)] == j.kind && key[len(j.kind)] == 0 {
				n++
			}
		}
		if n >= k.Limit {
			return false
		}
	}
	return true
}

func (fm *flowMachine) Commit(t *rapid.T) {
	w, m := fm.w, fm.m
	now := norm(w.now)
	// Keys of the fair kind with an eligible job before this commit's starts.
	dueKeys := map[string]bool{}
	for id, j := range m.jobs {
		if j.kind == "fair" && fm.eligible(id, now) {
			dueKeys[j.key] = true
		}
	}
	res, err := w.e.Commit(w.now)
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	for _, a := range res.Starts {
		fm.judgeStart(t, a, now, dueKeys)
	}
	for _, s := range res.Settled {
		fm.sync(s.ID) // not s.State: an orphan's settling comes with the first commit, maybe after a cancel
	}
	for _, tr := range res.Transitions {
		fm.sync(tr.ID)
	}
	m.durablePaused = map[string]bool{}
	for k, on := range m.paused {
		if on {
			m.durablePaused[k] = true
		}
	}
	fm.prompt(t, now)
}

// judgeStart checks one start against the rules, then counts it.
func (fm *flowMachine) judgeStart(t *rapid.T, a Attempt, now time.Time, dueKeys map[string]bool) {
	m := fm.m
	j := m.jobs[a.Token.ID]
	if j == nil {
		t.Fatalf("start of unknown job %v", a.Token)
	}
	k := m.kinds[j.kind].cfg
	if !fm.eligible(a.Token.ID, now) {
		h := fm.head(j.kind, j.group)
		hj, _ := fm.w.e.Get(h)
		t.Fatalf("job %d of kind %q (key %q, group %q) started though the rules hold it (paused %v, head %d: %v in the engine, %+v in the model, key running %d/%d)",
			a.Token.ID, j.kind, j.key, j.group, m.paused[j.kind], h, hj.State, m.jobs[h], fm.runningOf(j.kind+"\x00"+j.key), k.KeyLimit)
	}
	want := k.Timeout
	if j.timeout > 0 {
		want = j.timeout
	}
	if a.Timeout != want {
		t.Fatalf("job %d started with timeout %v, want %v", a.Token.ID, a.Timeout, want)
	}
	key := j.kind + "\x00" + j.key
	for _, c := range []struct {
		name string
		r    Rate
	}{{j.kind, k.Rate}, {key, k.KeyRate}} {
		if !c.r.On() {
			continue
		}
		fm.bucket(c.name, c.r).Take(c.r, now.UnixNano())
		s := append(m.starts[c.name], now)
		m.starts[c.name] = s
		for i := range s {
			if n := int64(len(s) - i); n > c.r.Allowed(now.Sub(s[i])) {
				t.Fatalf("%q: %d starts in %v (from %v), rate %+v allows %d", c.name, n, now.Sub(s[i]), s[i].Sub(epoch), c.r, c.r.Allowed(now.Sub(s[i])))
			}
		}
	}
	if k.Fair {
		m.log = append(m.log, fmt.Sprintf("%v start %v key %s due %v", now.Sub(epoch), a.Token, j.key, dueKeys))
		j.state = Running // a key whose last due job this is no longer waits
		for other := range dueKeys {
			if other != j.key && fm.keyWaits(other, now) {
				m.skipped[other]++
				if m.keysDue[other] == nil {
					m.keysDue[other] = map[string]bool{}
				}
				for k := range dueKeys { // a union: order does not matter
					m.keysDue[other][k] = true
				}
				m.keysDue[other][j.key] = true
				n := len(m.keysDue[other])
				// The bound (docs/runner.md): the rest of the round its key last started in,
				// and the next round up to its turn.
				if m.skipped[other] > 2*(n-1) {
					t.Fatalf("fair share: key %q waited through %d starts of other keys with %d keys due during the wait:\n%s", other, m.skipped[other], n, strings.Join(m.log, "\n"))
				}
			}
		}
		m.skipped[j.key] = 0
		delete(m.keysDue, j.key)
	}
	j.state = Running
	m.running[a.Token] = key
}

// bucket is the model's bucket for a kind or a kind NUL key under r.
func (fm *flowMachine) bucket(name string, r Rate) *flow.Bucket {
	b := fm.m.buckets[name]
	if b == nil {
		nb := flow.Fresh(r, fm.m.openAt.UnixNano())
		b = &nb
		fm.m.buckets[name] = b
	}
	return b
}

// rateReady reports whether j's kind and key rates allow a start at now (model buckets).
func (fm *flowMachine) rateReady(j *fJob, now time.Time) bool {
	k := fm.m.kinds[j.kind].cfg
	if k.Rate.On() && fm.bucket(j.kind, k.Rate).ReadyAt(k.Rate) > now.UnixNano() {
		return false
	}
	return !k.KeyRate.On() || fm.bucket(j.kind+"\x00"+j.key, k.KeyRate).ReadyAt(k.KeyRate) <= now.UnixNano()
}

// keyWaits reports whether the fair kind's key has a job the rules let start.
func (fm *flowMachine) keyWaits(key string, now time.Time) bool {
	for id, j := range fm.m.jobs {
		if j.kind == "fair" && j.key == key && fm.eligible(id, now) {
			return true
		}
	}
	return false
}

// prompt fails when a unit is free and a job the rules and the model's buckets let start was
// left waiting.
func (fm *flowMachine) prompt(t *rapid.T, now time.Time) {
	// A key with no job the rules let start has ended its wait, whatever the pool holds.
	for k := range fm.m.skipped {
		if !fm.keyWaits(k, now) {
			delete(fm.m.skipped, k)
			delete(fm.m.keysDue, k)
		}
	}
	st := fm.w.e.Status()
	if st.InFlight >= st.Capacity {
		return
	}
	var ids []uint64
	for id := range fm.m.jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		j := fm.m.jobs[id]
		if fm.eligible(id, now) && fm.rateReady(j, now) {
			t.Fatalf("job %d of kind %q may start at %v (%d of %d units used) but waits: %s",
				id, j.kind, now.Sub(epoch), st.InFlight, st.Capacity, fm.w.e.Blocked(id))
		}
	}
}

// CrashAndReopen crashes after a commit (nothing pending) and reopens: a pause acknowledged
// survives, and every job is as the journal says.
func (fm *flowMachine) CrashAndReopen(t *rapid.T) {
	fm.Commit(t)
	w, m := fm.w, fm.m
	w.crash()
	if err := w.open(); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	got := w.e.Paused()
	var want []string
	for k := range m.durablePaused {
		want = append(want, k)
	}
	slices.Sort(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("paused after a crash %v, acknowledged %v", got, want)
	}
	m.paused = map[string]bool{}
	for _, k := range got {
		m.paused[k] = true
	}
	m.running = map[Token]string{}
	m.buckets, m.openAt = map[string]*flow.Bucket{}, w.now
	m.skipped, m.keysDue = map[string]int{}, map[string]map[string]bool{}
	m.log = append(m.log, "crash")
	for id := range m.jobs {
		fm.sync(id)
	}
}

func (fm *flowMachine) check(t *rapid.T) {
	if err := fm.w.e.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func (fm *flowMachine) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"Enqueue":        fm.Enqueue,
		"EnqueueMore":    fm.Enqueue,
		"Pause":          fm.Pause,
		"Advance":        fm.Advance,
		"AttemptDone":    fm.AttemptDone,
		"AttemptDone2":   fm.AttemptDone,
		"Commit":         fm.Commit,
		"Commit2":        fm.Commit,
		"Cancel":         fm.Cancel,
		"Retry":          fm.Retry,
		"CrashAndReopen": fm.CrashAndReopen,
		"":               fm.check,
	}
}

// TestFlowMatchesModel runs the flow model against the engine (docs/runner.md, flow control).
func TestFlowMatchesModel(t *testing.T) {
	// Longer runs than rapid's default 30 steps build the backlogs the rules park.
	if flag.Lookup("rapid.steps").Value.String() == "30" {
		if err := flag.Set("rapid.steps", "60"); err != nil {
			t.Fatal(err)
		}
		defer flag.Set("rapid.steps", "30")
	}
	// All kinds at once, then each alone: one rule's corners need several jobs of its kind.
	for _, only := range []string{"", "lim", "fair", "rate", "krate", "seq"} {
		t.Run("kind="+only, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				fm := &flowMachine{only: only}
				fm.init(t)
				t.Repeat(fm.actions())
			})
		})
	}
}

// failRecorder is a rapid.TB that records a failure instead of failing the test, for the
// planted-defect test.
type failRecorder struct {
	name   string
	failed bool
	msg    string
}

func (r *failRecorder) Helper()              {}
func (r *failRecorder) Name() string         { return r.name }
func (r *failRecorder) Logf(string, ...any)  {}
func (r *failRecorder) Log(...any)           {}
func (r *failRecorder) Skipf(string, ...any) { runtime.Goexit() }
func (r *failRecorder) Skip(...any)          { runtime.Goexit() }
func (r *failRecorder) SkipNow()             { runtime.Goexit() }
func (r *failRecorder) Errorf(f string, a ...any) {
	r.failed, r.msg = true, fmt.Sprintf(f, a...)
}
func (r *failRecorder) Error(a ...any) { r.failed, r.msg = true, fmt.Sprint(a...) }
func (r *failRecorder) Fatalf(f string, a ...any) {
	r.Errorf(f, a...)
	runtime.Goexit()
}
func (r *failRecorder) Fatal(a ...any) {
	r.Error(a...)
	runtime.Goexit()
}
func (r *failRecorder) FailNow()     { r.failed = true; runtime.Goexit() }
func (r *failRecorder) Fail()        { r.failed = true }
func (r *failRecorder) Failed() bool { return r.failed }

// TestFlowModelCatchesPlantedDefects plants each flow-control defect in the machine and
// requires the flow model (or the machine's own invariants) to fail, with the message that
// names the rule. Without the defect the same property passes (TestFlowMatchesModel).
func TestFlowModelCatchesPlantedDefects(t *testing.T) {
	// A fixed seed, more checks, little shrinking and no fail files: each defect is found the
	// same way every run, in seconds.
	for name, v := range map[string]string{"rapid.seed": "1", "rapid.checks": "1000", "rapid.shrinktime": "1s", "rapid.nofailfile": "true"} {
		old := flag.Lookup(name).Value.String()
		if err := flag.Set(name, v); err != nil {
			t.Fatal(err)
		}
		defer flag.Set(name, old)
	}
	for _, c := range []struct {
		d    Defect
		want string // a part of the failure's message
		only string
	}{
		{DefectPauseIgnored, "started though the rules hold it", ""},
		{DefectBurstAtOpen, "starts in", "rate"},
		{DefectKeyLimitPlusOne, "key running", "lim"},
		{DefectGroupUnordered, "group", "seq"},
		{DefectHoldIgnored, "group", "seq"},
		{DefectFairOff, "fair share", "fair"},
		{DefectTimeoutTriple, "started with timeout", ""},
		{DefectKindRateIgnored, "starts in", "rate"},
	} {
		rec := &failRecorder{name: t.Name()}
		done := make(chan struct{})
		go func() {
			defer close(done)
			rapid.Check(rec, func(rt *rapid.T) {
				fm := &flowMachine{defect: c.d, only: c.only}
				fm.init(rt)
				rt.Repeat(fm.actions())
			})
		}()
		<-done
		if !rec.failed || !strings.Contains(rec.msg, c.want) {
			t.Errorf("defect %d: failed %v with %q, want a failure saying %q", c.d, rec.failed, firstLine(rec.msg), c.want)
			continue
		}
		t.Logf("defect %d caught: %s", c.d, firstLine(rec.msg))
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimPrefix(s, "[rapid] "), "\n")
	return s
}
