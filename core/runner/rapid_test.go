package runner

import (
	"errors"
	"flag"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/sim/disk"
)

// mBreaker is the model's plain re-statement of docs/runner.md, used to judge every start.
type mBreaker struct {
	failures []time.Time
	open     bool
	until    time.Time
	half     bool
	phase    int
	inFlight int
}

// mAttempt is a dispatched attempt the model expects an outcome for.
type mAttempt struct {
	target string
	kind   string
	phase  int // half-open phase it probes, 0 if not a probe
}

// model is a plain model of the runner: jobs as runner.Job values predicted from the rules of
// docs/runner.md, plus what was acknowledged.
type model struct {
	cfg      Config
	jobs     map[uint64]*Job
	nextID   uint64
	acked    map[uint64]bool // ids whose enqueue was acknowledged
	pending  []Ticket        // tickets submitted since the last commit
	inflight map[Token]mAttempt
	breakers map[string]*mBreaker
	durable  Snapshot // engine state after the last successful commit (checked against the model)
	// limits are the registered kinds' limits (0: none); a kind not in it is unregistered.
	limits map[string]int
	// windows: a unique key (kind NUL key) a succeeded job keeps until a time.
	windows map[string]mWindow
	// scheds are the schedules (schedule_rapid_test.go).
	scheds map[string]*Schedule
}

type mWindow struct {
	id    uint64
	until time.Time
}

// startable: jobs of kind may start at all (registered, or the machine runs every kind).
func (m *model) startable(kind string) bool {
	_, ok := m.limits[kind]
	return ok || !m.cfg.KindsOnly
}

// atLimit: kind has as many attempts in flight as its limit allows.
func (m *model) atLimit(kind string) bool {
	l := m.limits[kind]
	if l == 0 {
		return false
	}
	n := 0
	for _, a := range m.inflight {
		if a.kind == kind {
			n++
		}
	}
	return n >= l
}

func (m *model) br(target string) *mBreaker {
	b := m.breakers[target]
	if b == nil {
		b = &mBreaker{}
		m.breakers[target] = b
	}
	return b
}

// admit reports whether the model breaker lets an attempt start at now, and its probe phase.
func (m *model) admit(target string, now time.Time) (ok bool, phase int, until time.Time) {
	b := m.br(target)
	if b.open {
		if now.Before(b.until) {
			return false, 0, b.until
		}
		b.open, b.half, b.inFlight = false, true, 0
		b.phase++
	}
	if !b.half {
		return true, 0, time.Time{}
	}
	if b.inFlight < m.cfg.Circuit.Probes {
		b.inFlight++
		return true, b.phase, time.Time{}
	}
	return false, 0, now.Add(m.cfg.Circuit.Cooldown)
}

// record feeds an outcome; it reports whether a probe's success closed the breaker.
func (m *model) record(target string, now time.Time, failure bool, phase int) (closed bool) {
	b := m.br(target)
	c := m.cfg.Circuit
	switch {
	case b.half:
		if phase == 0 || phase != b.phase {
			return false
		}
		b.inFlight--
		b.half = false
		if failure {
			b.open, b.until = true, now.Add(c.Cooldown)
		}
		return !failure
	case b.open:
	default:
		if !failure {
			b.failures = nil
			return
		}
		var keep []time.Time
		for _, f := range append(b.failures, now) {
			if now.Sub(f) <= c.Window {
				keep = append(keep, f)
			}
		}
		b.failures = keep
		if len(keep) >= c.Threshold {
			b.failures, b.open, b.until = nil, true, now.Add(c.Cooldown)
		}
	}
	return false
}

type runnerMachine struct {
	w       *world
	m       *model
	tickets map[Ticket]uint64
	batches map[Ticket][]uint64 // EnqueueMany's ids by ticket
	dups    map[Ticket]bool     // single enqueues the model expects answered as duplicates
}

// policyOf is the model's per-job policy: the runner's, with the job's own attempts and deadline.
func (m *model) policyOf(j *Job) retry.Policy {
	p := m.cfg.Policy
	if j.Opts.AttemptsMax > 0 {
		p.Attempts = j.Opts.AttemptsMax
	}
	if j.Opts.Deadline > 0 {
		p.Deadline = j.Opts.Deadline
	}
	return p
}

var ignoreTermSeq = cmpopts.IgnoreFields(Job{}, "TermSeq", "History") // history: checked by ListPages, scenarios and the round trip

func (rm *runnerMachine) init(t *rapid.T) {
	cfg := Config{
		Policy: retry.Policy{Attempts: rapid.IntRange(1, 5).Draw(t, "attempts"), Base: time.Second, Cap: 4 * time.Second,
			Deadline: rapid.SampledFrom([]time.Duration{0, 3 * time.Second, 12 * time.Second}).Draw(t, "deadline")},
		Circuit: breaker.Circuit{Threshold: rapid.IntRange(1, 3).Draw(t, "threshold"), Window: 10 * time.Second,
			Cooldown: rapid.SampledFrom([]time.Duration{time.Second, 3 * time.Second}).Draw(t, "cooldown"),
			Probes:   rapid.IntRange(1, 2).Draw(t, "probes")},
		Capacity:     rapid.IntRange(1, 3).Draw(t, "capacity"),
		CompactBytes: rapid.SampledFrom([]int64{1 << 30, 1500}).Draw(t, "compactBytes"),
		Retention:    1 << 30,
		AgeMax:       rapid.SampledFrom([]time.Duration{2 * time.Second, 10 * time.Second, time.Minute}).Draw(t, "ageMax"),
		// Kinds: email and sms registered with drawn limits; bulk never registered (with
		// KindsOnly its jobs wait for good).
		Kinds: []KindConfig{{Name: "email", Limit: rapid.IntRange(0, 2).Draw(t, "emailLimit")},
			{Name: "sms", Limit: rapid.IntRange(0, 1).Draw(t, "smsLimit")}},
		KindsOnly: rapid.Bool().Draw(t, "kindsOnly"),
	}
	rm.w = newWorld(rapid.Int64().Draw(t, "seed"), cfg)
	rm.m = &model{cfg: cfg, jobs: map[uint64]*Job{}, nextID: 1, acked: map[uint64]bool{},
		inflight: map[Token]mAttempt{}, breakers: map[string]*mBreaker{}, windows: map[string]mWindow{}, scheds: map[string]*Schedule{},
		limits: map[string]int{"email": cfg.Kinds[0].Limit, "sms": cfg.Kinds[1].Limit}}
	rm.tickets = map[Ticket]uint64{}
	rm.batches = map[Ticket][]uint64{}
	rm.dups = map[Ticket]bool{}
	if err := rm.w.open(); err != nil {
		t.Fatalf("open: %v", err)
	}
	rm.m.durable = rm.w.e.State()
}

func (rm *runnerMachine) pickID(t *rapid.T) uint64 {
	return rapid.Uint64Range(1, rm.m.nextID).Draw(t, "id") // nextID itself: unknown
}

// drawJob draws a job: due around now, a target, a payload and per-job options (priority,
// attempts, deadline) that are mostly the defaults.
func (rm *runnerMachine) drawJob(t *rapid.T) NewJob {
	w := rm.w
	nj := NewJob{
		Due:     w.now.Add(time.Duration(rapid.IntRange(-2, 8).Draw(t, "dueSeconds")) * time.Second),
		Target:  rapid.SampledFrom([]string{"a", "a", "b"}).Draw(t, "target"),
		Payload: []byte(rapid.StringN(0, 4, -1).Draw(t, "payload")),
	}
	nj.Opts.Priority = rapid.SampledFrom([]int{0, 0, 1, -1, 5}).Draw(t, "priority")
	nj.Opts.AttemptsMax = rapid.SampledFrom([]int{0, 0, 1, 3}).Draw(t, "attemptsMax")
	nj.Opts.Deadline = rapid.SampledFrom([]time.Duration{0, 0, 2 * time.Second}).Draw(t, "jobDeadline")
	nj.Opts.Kind = rapid.SampledFrom([]string{"email", "email", "sms", "bulk"}).Draw(t, "kind")
	nj.Opts.Unique = rapid.SampledFrom([]string{"", "", "k1", "k2"}).Draw(t, "unique")
	if nj.Opts.Unique != "" {
		nj.Opts.UniqueFor = rapid.SampledFrom([]time.Duration{0, 0, 3 * time.Second}).Draw(t, "uniqueFor")
	}
	return nj
}

// holder is the model's job holding o's unique key at now (a non-terminal one, or a succeeded
// one inside its window), or 0.
func (m *model) holder(o Opts, now time.Time) uint64 {
	if o.Unique == "" {
		return 0
	}
	for id, j := range m.jobs { // at most one matches: order does not matter
		if !j.State.Terminal() && j.Opts.Kind == o.Kind && j.Opts.Unique == o.Unique {
			return id
		}
	}
	if w, ok := m.windows[o.Kind+"\x00"+o.Unique]; ok && norm(now).Before(w.until) {
		return w.id
	}
	return 0
}

// admitJob adds an enqueued job to the model.
func (m *model) admitJob(id uint64, nj NewJob) {
	if len(nj.Payload) == 0 {
		nj.Payload = nil
	}
	delete(m.windows, nj.Opts.Kind+"\x00"+nj.Opts.Unique)
	m.jobs[id] = &Job{ID: id, Target: nj.Target, Payload: nj.Payload, State: Waiting, FirstDue: norm(nj.Due), Due: norm(nj.Due), Opts: nj.Opts}
}

func (rm *runnerMachine) Enqueue(t *rapid.T) { rm.enqueue(t, rm.drawJob(t)) }

func (rm *runnerMachine) enqueue(t *rapid.T, nj NewJob) {
	w, m := rm.w, rm.m
	tk, id, err := w.e.EnqueueJob(w.now, nj)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	if h := m.holder(nj.Opts, w.now); h != 0 {
		if id != h {
			t.Fatalf("enqueue of held key %q got id %d, model's holder is %d", nj.Opts.Unique, id, h)
		}
		m.pending = append(m.pending, tk)
		rm.tickets[tk] = id
		rm.dups[tk] = true
		return
	}
	if id != m.nextID {
		t.Fatalf("enqueue got id %d, model expects %d", id, m.nextID)
	}
	m.nextID++
	m.admitJob(id, nj)
	m.pending = append(m.pending, tk)
	rm.tickets[tk] = id
}

// EnqueueMany submits 1 to 4 jobs in one batch: consecutive ids, one ack listing them.
func (rm *runnerMachine) EnqueueMany(t *rapid.T) {
	w, m := rm.w, rm.m
	jobs := make([]NewJob, rapid.IntRange(1, 4).Draw(t, "batch"))
	for i := range jobs {
		jobs[i] = rm.drawJob(t)
	}
	tk, ids, err := w.e.EnqueueMany(w.now, jobs)
	if err != nil {
		t.Fatalf("enqueue many: %v", err)
	}
	for i, id := range ids {
		if h := m.holder(jobs[i].Opts, w.now); h != 0 {
			if id != h {
				t.Fatalf("enqueue many: job %d with held key %q got id %d, model's holder is %d", i, jobs[i].Opts.Unique, id, h)
			}
			continue
		}
		if id != m.nextID {
			t.Fatalf("enqueue many got id %d, model expects %d", id, m.nextID)
		}
		m.nextID++
		m.admitJob(id, jobs[i])
	}
	m.pending = append(m.pending, tk)
	rm.tickets[tk] = ids[0]
	rm.batches[tk] = ids
}

func (rm *runnerMachine) Cancel(t *rapid.T) {
	w, m := rm.w, rm.m
	id := rm.pickID(t)
	tk, err := w.e.Cancel(id)
	j := m.jobs[id]
	switch {
	case j == nil:
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("cancel of unknown %d: %v", id, err)
		}
	case j.State.Terminal():
		if !errors.Is(err, ErrTerminal) {
			t.Fatalf("cancel of %v job %d: %v", j.State, id, err)
		}
	default:
		if err != nil {
			t.Fatalf("cancel %d: %v", id, err)
		}
		j.State, j.Deferred = Cancelled, false
		m.pending = append(m.pending, tk)
		rm.tickets[tk] = id
	}
}

func (rm *runnerMachine) Retry(t *rapid.T) {
	w, m := rm.w, rm.m
	id := rm.pickID(t)
	tk, err := w.e.Retry(w.now, id)
	j := m.jobs[id]
	switch {
	case j == nil:
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("retry of unknown %d: %v", id, err)
		}
	case j.State != Dead:
		if !errors.Is(err, ErrNotDead) {
			t.Fatalf("retry of %v job %d: %v", j.State, id, err)
		}
	case m.holder(j.Opts, w.now) != 0:
		if !errors.Is(err, ErrDuplicate) {
			t.Fatalf("retry of dead job %d whose key %q job %d holds: %v", id, j.Opts.Unique, m.holder(j.Opts, w.now), err)
		}
	default:
		if err != nil {
			t.Fatalf("retry %d: %v", id, err)
		}
		if j.Opts.Unique != "" {
			delete(m.windows, j.Opts.Kind+"\x00"+j.Opts.Unique)
		}
		j.State, j.Reason, j.Attempts, j.FirstDue, j.Due = Waiting, NoReason, 0, norm(w.now), norm(w.now)
		m.pending = append(m.pending, tk)
		rm.tickets[tk] = id
	}
}

func (rm *runnerMachine) AttemptDone(t *rapid.T) {
	w, m := rm.w, rm.m
	var toks []Token
	for tok := range m.inflight {
		toks = append(toks, tok)
	}
	sort.Slice(toks, func(a, b int) bool {
		return toks[a].ID < toks[b].ID || toks[a].ID == toks[b].ID && toks[a].Attempt < toks[b].Attempt
	})
	stale := len(toks) == 0 || rapid.IntRange(0, 9).Draw(t, "staleDraw") == 0
	var tok Token
	if stale {
		tok = Token{ID: rm.pickID(t), Attempt: rapid.IntRange(1, 5).Draw(t, "attempt")}
		if _, ok := m.inflight[tok]; ok {
			stale = false
		}
	} else {
		tok = rapid.SampledFrom(toks).Draw(t, "token")
	}
	kind := rapid.SampledFrom([]string{"success", "retryable", "permanent", "panic"}).Draw(t, "outcome")
	var o Outcome
	switch kind {
	case "success":
		o = Success()
	case "retryable":
		o = Failure("timeout", true)
		if rapid.IntRange(0, 3).Draw(t, "afterDraw") == 0 {
			a := time.Duration(rapid.IntRange(0, 6).Draw(t, "afterSeconds")) * time.Second
			o.After = &a
		}
	case "permanent":
		o = Failure("bad input", false)
	case "panic":
		o = Panicked("nil map")
	}
	before := w.e.State()
	if err := w.e.AttemptDone(w.now, tok, o); err != nil {
		t.Fatalf("attempt done: %v", err)
	}
	a, known := m.inflight[tok]
	if !known {
		if diff := cmp.Diff(before, w.e.State()); diff != "" {
			t.Fatalf("stale outcome for %v changed the state (-before +after)\n%s", tok, diff)
		}
		return
	}
	delete(m.inflight, tok)
	m.record(a.target, norm(w.now), kind == "retryable" || kind == "panic", a.phase)
	j := m.jobs[tok.ID]
	if j.State != Running || j.Attempts != tok.Attempt {
		return // cancelled: ignored
	}
	now := norm(w.now)
	switch kind {
	case "success":
		j.State = Succeeded
		if j.Opts.UniqueFor > 0 {
			m.windows[j.Opts.Kind+"\x00"+j.Opts.Unique] = mWindow{id: j.ID, until: now.Add(j.Opts.UniqueFor)}
		}
		return
	case "permanent":
		j.State, j.Reason, j.LastErr = Dead, Permanent, o.Err
		return
	case "panic":
		j.State, j.Reason, j.LastErr = Dead, Panic, o.Err
		return
	}
	j.LastErr = o.Err
	p := m.policyOf(j)
	if j.Attempts >= p.Attempts {
		j.State, j.Reason = Dead, Spent
		return
	}
	// Jitter is the engine's draw: check its bounds, then adopt it.
	lo, hi := now.Add(p.Delay(j.Attempts-1)/2), now.Add(p.Delay(j.Attempts-1))
	if o.After != nil {
		lo = now.Add(min(*o.After, p.Cap))
		hi = lo
	}
	got, _ := w.e.Get(tok.ID)
	deadline, hasDeadline := p.DeadlineAt(j.FirstDue)
	switch {
	case got.State == Waiting:
		if got.Due.Before(lo) || got.Due.After(hi) || (hasDeadline && !got.Due.Before(deadline)) {
			t.Fatalf("job %d retry due %v outside [%v, %v] or past deadline %v", tok.ID, got.Due.Sub(epoch), lo.Sub(epoch), hi.Sub(epoch), deadline.Sub(epoch))
		}
		j.State, j.Due = Waiting, got.Due
	case got.State == Dead && got.Reason == Late:
		if !hasDeadline || hi.Before(deadline) {
			t.Fatalf("job %d dead(late) though its retry could land by %v before deadline %v", tok.ID, hi.Sub(epoch), deadline.Sub(epoch))
		}
		j.State, j.Reason = Dead, Late
	default:
		t.Fatalf("job %d after a retryable failure of attempt %d: %v(%v)", tok.ID, tok.Attempt, got.State, got.Reason)
	}
}

func (rm *runnerMachine) Advance(t *rapid.T) {
	// Larger steps first: rapid favours the first choices and small numbers.
	step := rapid.SampledFrom([]time.Duration{3 * time.Second, time.Second, 0, 4 * time.Second}).Draw(t, "advanceStep")
	rm.w.now = rm.w.now.Add(step + time.Duration(rapid.IntRange(0, 999).Draw(t, "advanceMillis"))*time.Millisecond)
}

func (rm *runnerMachine) Commit(t *rapid.T) {
	w := rm.w
	res, err := w.e.Commit(w.now)
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	rm.afterCommit(t, res)
}

// afterCommit judges a successful commit against the model.
func (rm *runnerMachine) afterCommit(t *rapid.T, res Result) {
	w, m := rm.w, rm.m
	now := norm(w.now)
	var acked []Ticket
	for _, a := range res.Acks {
		acked = append(acked, a.Ticket)
		if id := rm.tickets[a.Ticket]; id != a.ID {
			t.Fatalf("ack of ticket %d names job %d, want %d", a.Ticket, a.ID, id)
		}
		if a.Duplicate != rm.dups[a.Ticket] {
			t.Fatalf("ack of ticket %d: duplicate %v, model %v", a.Ticket, a.Duplicate, rm.dups[a.Ticket])
		}
		if diff := cmp.Diff(rm.batches[a.Ticket], a.IDs); diff != "" {
			t.Fatalf("ack of ticket %d: ids (-want +got)\n%s", a.Ticket, diff)
		}
		for _, id := range a.IDs[min(1, len(a.IDs)):] {
			if m.jobs[id] != nil {
				m.acked[id] = true
			}
		}
		if j := m.jobs[a.ID]; j != nil {
			m.acked[a.ID] = true
		}
	}
	if diff := cmp.Diff(m.pending, acked); diff != "" {
		t.Fatalf("acks (-want +got)\n%s", diff)
	}
	m.pending = nil
	m.fireModel(now)
	// Walk the due jobs in admission's order: those due for AgeMax or longer first, in (due,
	// id) order; then the rest by priority (higher first), then (due, id).
	var due []*Job
	for _, j := range m.jobs {
		if j.State == Waiting && !j.Due.After(now) {
			due = append(due, j)
		}
	}
	aged := func(j *Job) bool { return !now.Before(j.Due.Add(m.cfg.AgeMax)) }
	sort.Slice(due, func(a, b int) bool {
		x, y := due[a], due[b]
		if aged(x) != aged(y) {
			return aged(x)
		}
		if !aged(x) && x.Opts.Priority != y.Opts.Priority {
			return x.Opts.Priority > y.Opts.Priority
		}
		if !x.Due.Equal(y.Due) {
			return x.Due.Before(y.Due)
		}
		return x.ID < y.ID
	})
	starts := res.Starts
	full := false
	for _, j := range due {
		p := m.policyOf(j)
		got, _ := w.e.Get(j.ID)
		if !m.startable(j.Opts.Kind) || m.atLimit(j.Opts.Kind) {
			// Left out of the pick: unregistered, or its kind at its limit.
			if got.State != Waiting || !got.Due.Equal(j.Due) || (len(starts) > 0 && starts[0].Token.ID == j.ID) {
				t.Fatalf("job %d of kind %q (startable %v, at its limit %v) changed (%v) or started", j.ID, j.Opts.Kind,
					m.startable(j.Opts.Kind), m.atLimit(j.Opts.Kind), got.State)
			}
			continue
		}
		if len(starts) > 0 && starts[0].Token.ID == j.ID {
			s := starts[0]
			starts = starts[1:]
			if full {
				t.Fatalf("job %d started after an earlier due job found no unit", j.ID)
			}
			if len(m.inflight) >= m.cfg.Capacity {
				t.Fatalf("job %d started with %d attempts running, capacity %d", j.ID, len(m.inflight), m.cfg.Capacity)
			}
			if s.Token.Attempt != j.Attempts+1 || s.Token.Attempt > p.Attempts {
				t.Fatalf("job %d started attempt %d after %d (max %d)", j.ID, s.Token.Attempt, j.Attempts, p.Attempts)
			}
			if p.Late(j.FirstDue, now) {
				t.Fatalf("job %d started at %v, at or after its deadline", j.ID, now.Sub(epoch))
			}
			ok, phase, _ := m.admit(j.Target, now)
			if !ok || (phase != 0) != s.Probe {
				t.Fatalf("job %d started (probe %v) while the model breaker of %q admits=%v phase=%d", j.ID, s.Probe, j.Target, ok, phase)
			}
			if s.Target != j.Target || string(s.Payload) != string(j.Payload) {
				t.Fatalf("job %d started with target %q payload %q", j.ID, s.Target, s.Payload)
			}
			j.State, j.Attempts, j.Deferred = Running, s.Token.Attempt, false
			if s.Kind != j.Opts.Kind {
				t.Fatalf("job %d of kind %q started as kind %q", j.ID, j.Opts.Kind, s.Kind)
			}
			m.inflight[s.Token] = mAttempt{target: j.Target, kind: j.Opts.Kind, phase: phase}
			continue
		}
		if full || len(m.inflight) >= m.cfg.Capacity {
			full = true
			if got.State != Waiting || !got.Due.Equal(j.Due) {
				t.Fatalf("job %d changed (%v) though no unit was free", j.ID, got.State)
			}
			continue
		}
		switch {
		case p.Late(j.FirstDue, now):
			j.State, j.Reason, j.Deferred = Dead, Late, false
		case p.Spent(j.Attempts):
			j.State, j.Reason, j.Deferred = Dead, Spent, false
		default:
			ok, _, until := m.admit(j.Target, now)
			if ok {
				t.Fatalf("job %d due at %v neither started nor deferred though a unit was free and the breaker admits", j.ID, j.Due.Sub(epoch))
			}
			j.Due, j.Deferred = until, true
		}
	}
	if len(starts) > 0 {
		t.Fatalf("unexpected starts %v", starts)
	}
	if res.Compacted || res.CompactErr != nil {
		if res.CompactErr != nil {
			t.Fatalf("compaction: %v", res.CompactErr)
		}
	}
	rm.compareLive(t)
	// Settled names every job that became terminal durably, and only terminal jobs.
	settled := map[uint64]Settled{} // the last report per job (a job may settle, be retried and settle again)
	for _, st := range res.Settled {
		if !st.State.Terminal() {
			t.Fatalf("settled %+v is not terminal", st)
		}
		settled[st.ID] = st
	}
	for id, st := range settled {
		// (A job settled dead may have been retried since, inside the same batch.)
		if j := m.jobs[id]; j == nil || (j.State != st.State && !(st.State == Dead && !j.State.Terminal())) {
			t.Fatalf("settled %+v, model job %+v", st, j)
		}
	}
	for _, j := range m.durable.Jobs {
		if _, ok := settled[j.ID]; !ok && !j.State.Terminal() && m.jobs[j.ID].State.Terminal() {
			t.Fatalf("job %d became %v but was not reported settled", j.ID, m.jobs[j.ID].State)
		}
	}
	// Transitions report only durable ends and deferrals: an attempt end is in the job's
	// history with the same end time, and every transition names the job's target.
	for _, tr := range res.Transitions {
		j, ok := w.e.Get(tr.ID)
		if !ok {
			continue // pruned by a compaction in this commit
		}
		if tr.Target != j.Target {
			t.Fatalf("transition %+v names target %q, job has %q", tr, tr.Target, j.Target)
		}
		if tr.Tag == TagDeferred {
			continue
		}
		found := len(j.History) == HistoryMax // older attempts leave the history
		for _, h := range j.History {
			found = found || (h.Attempt == tr.Attempt && h.End.Equal(tr.End) && h.Outcome != AttemptRunning)
		}
		if !found {
			t.Fatalf("transition %+v has no ended attempt in the job's history %+v", tr, j.History)
		}
	}
	m.durable = w.e.State()
	// Replay equals live.
	s, err := w.replay()
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if diff := cmp.Diff(m.durable, s); diff != "" {
		t.Fatalf("replay differs from live (-live +replay)\n%s", diff)
	}
}

// compareLive compares the model's jobs with the engine's.
func (rm *runnerMachine) compareLive(t *rapid.T) {
	var want []Job
	for id := uint64(1); id < rm.m.nextID; id++ {
		if j := rm.m.jobs[id]; j != nil {
			want = append(want, *j)
		}
	}
	got := rm.w.e.State()
	if got.NextID != rm.m.nextID {
		t.Fatalf("next id %d, model %d", got.NextID, rm.m.nextID)
	}
	if diff := cmp.Diff(want, got.Jobs, ignoreTermSeq, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("jobs (-model +engine)\n%s", diff)
	}
	var wantW []UniqueWindow
	for k, mw := range rm.m.windows {
		kind, key, _ := strings.Cut(k, "\x00")
		wantW = append(wantW, UniqueWindow{Kind: kind, Unique: key, ID: mw.id, Until: mw.until})
	}
	sort.Slice(wantW, func(a, b int) bool {
		return wantW[a].Kind < wantW[b].Kind || (wantW[a].Kind == wantW[b].Kind && wantW[a].Unique < wantW[b].Unique)
	})
	now := norm(rm.w.now)
	if diff := cmp.Diff(open(wantW, now), open(got.Windows, now), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("open unique windows (-model +engine)\n%s", diff)
	}
	rm.compareSchedules(t, got.Schedules)
}

// open is the windows not ended at now (ended ones may or may not have been pruned yet).
func open(ws []UniqueWindow, now time.Time) []UniqueWindow {
	var out []UniqueWindow
	for _, w := range ws {
		if w.Until.After(now) {
			out = append(out, w)
		}
	}
	return out
}

// openState is s with only the windows open at now.
func openState(s Snapshot, now time.Time) Snapshot {
	s.Windows = open(s.Windows, now)
	return s
}

// CrashAndReopen crashes the process (sometimes inside a commit or a compaction, with faults
// on the disk), reopens and checks recovery against the model.
func (rm *runnerMachine) CrashAndReopen(t *rapid.T) {
	w, m := rm.w, rm.m
	maybe := m.durable
	switch rapid.SampledFrom([]string{"idle", "in-commit", "in-compact"}).Draw(t, "crashPoint") {
	case "in-commit":
		w.d.CrashAfter(rapid.IntRange(1, 2).Draw(t, "crashAfter"))
		if _, err := w.e.Commit(w.now); err == nil {
			// Nothing was written: the batch was empty; fine.
			maybe = w.e.State()
		} else {
			maybe = w.e.State()
		}
	case "in-compact":
		if len(m.pending) > 0 || w.e.m.seq != w.e.m.synced {
			rm.Commit(t)
			maybe = m.durable
		}
		w.d.CrashAfter(rapid.IntRange(1, 5).Draw(t, "crashAfter"))
		_ = w.e.Compact() // kept or lost: either way the state on disk is unchanged
	}
	w.crash()
	rm.reopen(t, maybe)
}

func (rm *runnerMachine) reopen(t *rapid.T, maybe Snapshot) {
	w, m := rm.w, rm.m
	replayed, err := w.replay()
	if err != nil {
		t.Fatalf("replay after crash: %v", err)
	}
	now0 := norm(w.now)
	if cmp.Diff(openState(m.durable, now0), openState(replayed, now0)) != "" && cmp.Diff(openState(maybe, now0), openState(replayed, now0)) != "" {
		t.Fatalf("recovered state is neither the last acknowledged one nor the failed batch's:\n(-durable +replayed)\n%s",
			cmp.Diff(m.durable, replayed))
	}
	for id := range m.acked {
		found := false
		for _, j := range replayed.Jobs {
			found = found || j.ID == id
		}
		if !found {
			t.Fatalf("acknowledged job %d lost", id)
		}
	}
	if err := w.open(); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	// Rebase the model on the recovered state, then requeue its orphans by the rules.
	m.jobs = map[uint64]*Job{}
	m.nextID = replayed.NextID
	m.pending = nil
	m.inflight = map[Token]mAttempt{}
	m.breakers = map[string]*mBreaker{}
	rm.tickets = map[Ticket]uint64{}
	rm.batches = map[Ticket][]uint64{}
	rm.dups = map[Ticket]bool{}
	now := norm(w.now)
	orphans := 0
	m.windows = map[string]mWindow{}
	for _, u := range replayed.Windows {
		m.windows[u.Kind+"\x00"+u.Unique] = mWindow{id: u.ID, until: u.Until}
	}
	m.rebaseSchedules(replayed.Schedules)
	for _, j := range replayed.Jobs {
		j := j
		m.jobs[j.ID] = &j
		if j.State != Running {
			continue
		}
		orphans++
		mj := m.jobs[j.ID]
		mj.LastErr = Interrupted
		p := m.policyOf(mj)
		got, _ := w.e.Get(j.ID)
		deadline, hasDeadline := p.DeadlineAt(j.FirstDue)
		lo, hi := now.Add(p.Delay(j.Attempts-1)/2), now.Add(p.Delay(j.Attempts-1))
		switch {
		case p.Spent(j.Attempts):
			mj.State, mj.Reason = Dead, Spent
		case got.State == Waiting && !got.Due.Before(lo) && !got.Due.After(hi) && (!hasDeadline || got.Due.Before(deadline)):
			mj.State, mj.Due = Waiting, got.Due
		case got.State == Dead && got.Reason == Late && hasDeadline && !hi.Before(deadline):
			mj.State, mj.Reason = Dead, Late
		default:
			t.Fatalf("orphan %d attempt %d requeued as %v(%v) due %v", j.ID, j.Attempts, got.State, got.Reason, got.Due.Sub(epoch))
		}
	}
	if w.e.Orphans() != orphans {
		t.Fatalf("engine requeued %d orphans, model %d", w.e.Orphans(), orphans)
	}
	rm.compareLive(t)
	m.durable = w.e.State()
}

// ListPages walks every job with List in pages of a drawn size and a drawn filter (priority
// ≥ 0 or none): the pages, joined, are exactly the matching jobs of State, in id order.
func (rm *runnerMachine) ListPages(t *rapid.T) {
	w := rm.w
	size := rapid.IntRange(1, 4).Draw(t, "pageSize")
	filtered := rapid.Bool().Draw(t, "filtered")
	match := func(j *Job) bool { return !filtered || j.Opts.Priority >= 0 }
	var want, got []Job
	for _, j := range w.e.State().Jobs {
		if match(&j) {
			want = append(want, j)
		}
	}
	after := uint64(0)
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("List never ended")
		}
		jobs, next, more := w.e.List(after+1, math.MaxUint64, match, size, 1<<20)
		got = append(got, jobs...)
		if !more {
			break
		}
		after = next
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("List pages (-want +got)\n%s", diff)
	}
}

// CommitWithFault makes the next commit's write or sync fail: nothing is acknowledged, the
// engine is poisoned, and reopening recovers a legal state.
func (rm *runnerMachine) CommitWithFault(t *rapid.T) {
	w := rm.w
	nj := rm.drawJob(t)
	nj.Opts.Unique, nj.Opts.UniqueFor = "", 0 // never a duplicate: the batch is never empty, so the armed fault fires
	rm.enqueue(t, nj)
	op := rapid.SampledFrom([]disk.Op{disk.OpWrite, disk.OpSync}).Draw(t, "faultOp")
	w.d.FailNext(op, disk.ErrInjected)
	_, err := w.e.Commit(w.now)
	if !errors.Is(err, ErrPoisoned) {
		t.Fatalf("failed commit: %v, want ErrPoisoned", err)
	}
	if _, _, err := w.e.Enqueue(w.now, w.now, "a", nil); !errors.Is(err, ErrPoisoned) {
		t.Fatalf("enqueue on a poisoned engine: %v", err)
	}
	maybe := w.e.State()
	w.crash()
	rm.reopen(t, maybe)
}

func (rm *runnerMachine) Compact(t *rapid.T) {
	if len(rm.m.pending) > 0 || rm.w.e.m.seq != rm.w.e.m.synced {
		rm.Commit(t)
	}
	if err := rm.w.e.Compact(); err != nil {
		t.Fatalf("compact: %v", err)
	}
	s, err := rm.w.replay()
	if err != nil {
		t.Fatalf("replay after compaction: %v", err)
	}
	now := norm(rm.w.now)
	if diff := cmp.Diff(openState(rm.m.durable, now), openState(s, now)); diff != "" {
		t.Fatalf("compaction changed the replayed state, open windows aside (-before +after)\n%s", diff)
	}
}

func (rm *runnerMachine) check(t *rapid.T) {
	if rm.w.e == nil {
		t.Fatalf("no engine")
	}
	if err := rm.w.e.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if got := rm.w.e.Status().InFlight; got > rm.m.cfg.Capacity || got < len(rm.m.inflight) {
		t.Fatalf("in flight %d, model %d, capacity %d", got, len(rm.m.inflight), rm.m.cfg.Capacity)
	}
	for tok := range rm.m.inflight {
		if p := rm.m.policyOf(rm.m.jobs[tok.ID]); tok.Attempt > p.Attempts {
			t.Fatalf("attempt %v beyond %d", tok, p.Attempts)
		}
	}
	rm.compareLive(t)
}

// TestRunnerMatchesModelAndSurvivesCrashes: the engine agrees with a plain model through
// enqueues, cancels, retries, outcomes, time, compaction and crashes (idle, inside a commit,
// inside a compaction, after a failed write or sync): no acknowledged job is lost, replay equals
// live, at most Capacity attempts run, attempts ≤ Attempts, nothing starts at or after its
// deadline, while its breaker is open (probes aside), or once cancelled or terminal; a kind
// never has more attempts in flight than its limit, an unregistered kind (KindsOnly) never
// starts, and a unique key is held by its non-terminal job or, after a success, for its
// window, across crashes and compaction; schedules fire each period once, at the model's
// periods, with the catch-up policy, and survive crashes and compaction. Longer:
// SLUICE_LONG=1 (5,000 checks) or -rapid.checks=N.
func TestRunnerMatchesModelAndSurvivesCrashes(t *testing.T) {
	if os.Getenv("SLUICE_LONG") != "" && flag.Lookup("rapid.checks").Value.String() == "100" {
		if err := flag.Set("rapid.checks", "5000"); err != nil {
			t.Fatal(err)
		}
		defer flag.Set("rapid.checks", "100")
	}
	// Longer runs than rapid's default 30 steps reach the breaker's half-open paths.
	if flag.Lookup("rapid.steps").Value.String() == "30" {
		if err := flag.Set("rapid.steps", "80"); err != nil {
			t.Fatal(err)
		}
		defer flag.Set("rapid.steps", "30")
	}
	rapid.Check(t, func(t *rapid.T) {
		rm := &runnerMachine{}
		rm.init(t)
		// Crashes reset the breakers, so they are drawn less often than the steps that build
		// up state (rapid picks actions uniformly; the doubled ones weigh twice).
		rare := func(f func(*rapid.T)) func(*rapid.T) {
			return func(t *rapid.T) {
				if rapid.IntRange(0, 3).Draw(t, "rare") != 3 { // rapid favours small draws
					t.Skip("rare action not drawn")
				}
				f(t)
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"Enqueue":         rm.Enqueue,
			"EnqueueMore":     rm.Enqueue,
			"EnqueueMany":     rm.EnqueueMany,
			"Cancel":          rm.Cancel,
			"Retry":           rm.Retry,
			"AttemptDone":     rm.AttemptDone,
			"AttemptDoneMore": rm.AttemptDone,
			"Advance":         rm.Advance,
			"Commit":          rm.Commit,
			"CommitMore":      rm.Commit,
			"CrashAndReopen":  rare(rm.CrashAndReopen),
			"CommitWithFault": rare(rm.CommitWithFault),
			"Compact":         rare(rm.Compact),
			"ListPages":       rm.ListPages,
			"SetSchedule":     rm.SetSchedule,
			"RemoveSchedule":  rm.RemoveSchedule,
			"":                rm.check,
		})
	})
}
