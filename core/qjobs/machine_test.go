package qjobs

import (
	"errors"
	"math/rand"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/retry"
	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newMachine(t testing.TB, cfg Config) *Machine {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func testConfig() Config {
	return Config{
		Policy:  retry.Policy{Attempts: 3, Base: time.Minute, Cap: 8 * time.Hour},
		Circuit: breaker.Circuit{Threshold: 2, Window: time.Hour, Cooldown: 10 * time.Minute, Probes: 1},
		Margin:  30 * time.Second,
		IDs:     rand.New(rand.NewSource(7)),
	}
}

func job(target string) Attrs { return Attrs{Kind: "mail", Target: target, FirstDue: t0} }

// TestEnvelopeRoundTripsAndRefusesNonJobs: every attribute comes back from the message
// attributes and the body is the payload as given; a message missing or mangling an attribute
// is not a job.
func TestEnvelopeRoundTripsAndRefusesNonJobs(t *testing.T) {
	a := Attrs{Kind: "mail", Target: "smtp", FirstDue: t0, NotBefore: t0.Add(time.Hour), Attempts: 2,
		AttemptsMax: 7, Deadline: time.Hour, LastErr: "boom", Reason: ReasonSpent}
	payload := []byte("sj1\x00 any bytes")
	out := Encode(a, payload)
	if string(out.Body) != string(payload) {
		t.Errorf("body = %q, want the payload %q", out.Body, payload)
	}
	got, body, err := Decode(core.Message{Body: out.Body, Attributes: out.Attributes})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("attrs (-want +got):\n%s", diff)
	}
	if string(body) != string(payload) {
		t.Errorf("payload = %q, want %q", body, payload)
	}
	plain := Encode(job("smtp"), nil)
	if diff := cmp.Diff(map[string]string{AttrKind: "mail", AttrTarget: "smtp", AttrFirstDue: "2026-01-01T00:00:00Z", AttrAttempt: "0"}, plain.Attributes); diff != "" {
		t.Errorf("attributes of a plain job (-want +got):\n%s", diff)
	}
	with := func(k, v string) map[string]string {
		m := Encode(job("smtp"), nil).Attributes
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for name, attrs := range map[string]map[string]string{
		"none":          nil,
		"no kind":       with(AttrKind, ""),
		"no target":     with(AttrTarget, ""),
		"no first due":  with(AttrFirstDue, ""),
		"bad first due": with(AttrFirstDue, "yesterday"),
		"no attempt":    with(AttrAttempt, ""),
		"bad attempt":   with(AttrAttempt, "-1"),
		"bad opts":      with(AttrOpts, "{"),
		"negative max":  with(AttrOpts, `{"m":-1}`),
	} {
		if _, _, err := Decode(core.Message{Body: []byte("x"), Attributes: attrs}); !errors.Is(err, ErrEnvelope) {
			t.Errorf("%s: Decode = %v, want ErrEnvelope", name, err)
		}
	}
}

func TestConfigRefused(t *testing.T) {
	for _, c := range []Config{
		{Margin: 13 * time.Hour},
		{Policy: retry.Policy{Attempts: -1}},
		{Circuit: breaker.Circuit{Probes: -1}},
		{VisibilityMax: time.Millisecond},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
}

// TestPlans walks one job through the table of decisions.
func TestPlans(t *testing.T) {
	m := newMachine(t, testConfig())
	d := delivery{Attrs: job("smtp"), ReceiveCount: 1, ReceivedAt: t0}
	type step struct {
		name string
		got  plan
		want plan
	}
	run := m.admit(t0, d)
	fail := Outcome{Result: Retryable, Err: "boom"}
	steps := []step{{"first delivery runs attempt 1", run, plan{Action: actRun, Attempt: 1}}}
	r1 := Attrs{Kind: "mail", Target: "smtp", FirstDue: t0, Attempts: 1, NotBefore: t0.Add(time.Minute + time.Second), LastErr: "boom"}
	steps = append(steps, step{"a retry re-sends the job with the attempt, its error and the backoff", m.finish(t0.Add(time.Second), d, 1, run.Probe, fail),
		plan{Action: actResend, Send: outgoing{Attrs: r1, Delay: time.Minute}}})
	d = delivery{Attrs: r1, ReceiveCount: 2, ReceivedAt: t0.Add(2 * time.Minute)}
	run = m.admit(t0.Add(2*time.Minute), d)
	steps = append(steps, step{"its second delivery (the first was lost) is attempt 2", run, plan{Action: actRun, Attempt: 2}})
	r2 := Attrs{Kind: "mail", Target: "smtp", FirstDue: t0, Attempts: 2, Lost: 1, NotBefore: t0.Add(4 * time.Minute), LastErr: "boom"}
	steps = append(steps, step{"second failure opens the breaker; the lost delivery is carried", m.finish(t0.Add(2*time.Minute), d, 2, run.Probe, fail),
		plan{Action: actResend, Send: outgoing{Attrs: r2, Delay: 2 * time.Minute}}})
	d = delivery{Attrs: r2, ReceiveCount: 1, ReceivedAt: t0.Add(4 * time.Minute)}
	def := r2
	def.NotBefore = t0.Add(12 * time.Minute)
	steps = append(steps, step{"breaker open: defer by re-sending with attempts made, none spent", m.admit(t0.Add(4*time.Minute), d),
		plan{Action: actResend, Deferred: true, Send: outgoing{Attrs: def, Delay: 8 * time.Minute}}})
	d = delivery{Attrs: def, ReceiveCount: 1, ReceivedAt: t0.Add(12 * time.Minute)}
	run = m.admit(t0.Add(12*time.Minute), d)
	steps = append(steps, step{"after the cooldown the re-sent job runs attempt 3 as a probe", run, plan{Action: actRun, Attempt: 3, Probe: 1}})
	dead := def
	dead.LastErr, dead.Reason, dead.Attempts, dead.NotBefore = "boom", ReasonSpent, 3, time.Time{}
	steps = append(steps, step{"third failure spends the budget: dead-lettered with the error", m.finish(t0.Add(13*time.Minute), d, 3, run.Probe, fail),
		plan{Action: actDeadLetter, Send: outgoing{Attrs: dead}}})
	for _, s := range steps {
		if diff := cmp.Diff(s.want, s.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s.name, diff)
		}
	}
}

func TestRetryBeyondVisibilityResends(t *testing.T) {
	c := testConfig()
	c.Policy.Base = 13 * time.Hour
	c.Policy.Cap = 13 * time.Hour
	m := newMachine(t, c)
	d := delivery{Attrs: job("a"), ReceiveCount: 1, ReceivedAt: t0}
	run := m.admit(t0, d)
	got := m.finish(t0.Add(time.Minute), d, run.Attempt, run.Probe, Outcome{Result: Retryable, Err: "later"})
	want := Attrs{Kind: "mail", Target: "a", FirstDue: t0, Attempts: 1, NotBefore: t0.Add(13*time.Hour + time.Minute), LastErr: "later"}
	if diff := cmp.Diff(plan{Action: actResend, Send: outgoing{Attrs: want, Delay: 15 * time.Minute}}, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	// The re-sent message arrives early (the delay caps at 15 min): deferred again, no attempt.
	d = delivery{Attrs: want, ReceiveCount: 1, ReceivedAt: t0.Add(16 * time.Minute)}
	p := m.admit(t0.Add(16*time.Minute), d)
	if p.Action != actResend || !p.Deferred || p.Send.Attrs.Attempts != 1 {
		t.Fatalf("early delivery: %+v, want a deferring re-send keeping 1 attempt", p)
	}
}

func TestPerJobDeadlineAndAttempts(t *testing.T) {
	m := newMachine(t, testConfig())
	a := job("a")
	a.Deadline = time.Hour
	p := m.admit(t0.Add(time.Hour), delivery{Attrs: a, ReceiveCount: 1, ReceivedAt: t0})
	if p.Action != actDeadLetter || p.Send.Attrs.Reason != ReasonLate {
		t.Errorf("past its own deadline: %+v, want dead-letter (deadline)", p)
	}
	a = job("a")
	a.AttemptsMax = 1
	p = m.admit(t0, delivery{Attrs: a, ReceiveCount: 2, ReceivedAt: t0})
	if p.Action != actRun || p.Attempt != 1 {
		t.Errorf("second delivery of a 1-attempt job (the first crashed): %+v, want attempt 1 (a lost delivery spends none)", p)
	}
	a.LastErr = "421"
	p = m.admit(t0, delivery{Attrs: a, ReceiveCount: LostFloor + LostPerAttempt + 2, ReceivedAt: t0})
	if p.Action != actDeadLetter || p.Send.Attrs.Reason != ReasonLost || p.Send.Attrs.Lost != LostFloor+LostPerAttempt+1 || p.Send.Attrs.LastErr != "421" {
		t.Errorf("delivery budget spent: %+v, want dead-letter (deliveries-lost) with the last error", p)
	}
	p = m.admit(t0, delivery{Attrs: job("a"), ReceiveCount: 1, ReceivedAt: t0})
	if got := m.finish(t0, delivery{Attrs: job("a"), ReceiveCount: 1}, p.Attempt, p.Probe, Outcome{Result: Permanent, Err: "bad"}); got.Action != actDeadLetter || got.Send.Attrs.Reason != ReasonPermanent || got.Send.Attrs.LastErr != "bad" {
		t.Errorf("permanent failure: %+v, want dead-letter (permanent, bad)", got)
	}
}

func TestUnregisteredKindWaits(t *testing.T) {
	m := newMachine(t, testConfig())
	a := job("a")
	a.Attempts = 1
	p := m.admit(t0, delivery{Attrs: a, ReceiveCount: 3, ReceivedAt: t0, Unregistered: true})
	want := a
	want.Lost, want.NotBefore = 2, t0.Add(DelayMaxDefault)
	if diff := cmp.Diff(plan{Action: actResend, Deferred: true, Send: outgoing{Attrs: want, Delay: DelayMaxDefault}}, p); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestAbandonGivesProbeBack(t *testing.T) {
	m := newMachine(t, testConfig())
	d := delivery{Attrs: job("a"), ReceiveCount: 1, ReceivedAt: t0}
	for i := range 2 {
		p := m.admit(t0, d)
		m.finish(t0, d, p.Attempt, p.Probe, Outcome{Result: Retryable, Err: "x"})
		_ = i
	}
	later := t0.Add(time.Hour)
	p := m.admit(later, d)
	if p.Action != actRun || p.Probe == 0 {
		t.Fatalf("after cooldown: %+v, want a probe", p)
	}
	if q := m.admit(later, d); q.Action != actResend || !q.Deferred {
		t.Fatalf("second while the probe runs: %+v, want deferred", q)
	}
	m.abandon("a", p.Probe)
	if q := m.admit(later, d); q.Action != actRun {
		t.Fatalf("after the probe was abandoned: %+v, want run", q)
	}
}

// TestAttemptsNeverExceedBudgetAndEveryJobEnds is the machine's property: for any sequence of
// outcomes, crashes (deliveries that never finish), lost leases and breaker defers, a job runs
// at most its budget of attempts, no attempt starts at or after its deadline, a defer spends
// none, and every job ends acked or dead-lettered with the error of its last failed attempt.
func TestAttemptsNeverExceedBudgetAndEveryJobEnds(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := Config{
			IDs: rand.New(rand.NewSource(1)),
			Policy: retry.Policy{Attempts: rapid.IntRange(1, 6).Draw(rt, "attempts"),
				Base: time.Duration(rapid.IntRange(1, 3600).Draw(rt, "base")) * time.Second},
			Circuit: breaker.Circuit{Threshold: rapid.IntRange(1, 3).Draw(rt, "threshold"), Window: time.Hour,
				Cooldown: time.Duration(rapid.IntRange(1, 120).Draw(rt, "cooldown")) * time.Minute, Probes: 1},
			VisibilityMax: time.Duration(rapid.IntRange(60, 43200).Draw(rt, "vismax")) * time.Second,
		}
		c.Policy.Cap = c.Policy.Base * time.Duration(rapid.IntRange(1, 64).Draw(rt, "capx"))
		if rapid.Bool().Draw(rt, "deadline") {
			c.Policy.Deadline = time.Duration(rapid.IntRange(1, 48).Draw(rt, "deadlineh")) * time.Hour
		}
		m := newMachine(t, c)
		a := job("t")
		now := t0
		count := 1
		runs, crashed := 0, false
		lastErr := ""
		for step := 0; ; step++ {
			if step > 1000 {
				rt.Fatalf("job not ended after 1000 deliveries")
			}
			d := delivery{Attrs: a, ReceiveCount: count, ReceivedAt: now}
			p := m.admit(now, d)
			switch p.Action {
			case actRun:
				runs++
				if p.Attempt > c.Policy.Attempts {
					rt.Fatalf("attempt %d started, budget %d", p.Attempt, c.Policy.Attempts)
				}
				if c.Policy.Late(a.FirstDue, now) {
					rt.Fatalf("attempt started at %v, past the deadline", now.Sub(t0))
				}
				if p.Attempt != runs {
					rt.Fatalf("attempt %d numbered, %d runs so far", p.Attempt, runs)
				}
			case actResend:
				if !p.Deferred || p.Send.Attrs.Attempts != runs {
					rt.Fatalf("admission re-send %+v after %d runs, want a defer keeping them", p, runs)
				}
				a, count = p.Send.Attrs, 1
				now = now.Add(max(p.Send.Delay, time.Second))
				continue
			case actDeadLetter:
				got := p.Send.Attrs
				if got.Attempts != runs || got.LastErr == "" {
					rt.Fatalf("dead letter %+v after %d runs, want them and an error", got, runs)
				}
				if got.Reason == ReasonSpent {
					rt.Fatalf("dead at admission (spent): Finish should have dead-lettered it")
				}
				if got.Reason == ReasonLost && (!crashed || got.Lost <= LostFloor+LostPerAttempt*c.Policy.Attempts) {
					rt.Fatalf("dead (deliveries lost) with %d lost, crashed %v", got.Lost, crashed)
				}
				return
			default:
				rt.Fatalf("admit planned %v", p.Action)
			}
			now = now.Add(time.Duration(rapid.IntRange(0, 600).Draw(rt, "took")) * time.Second)
			switch rapid.IntRange(0, 9).Draw(rt, "fate") {
			case 0: // the process crashed or lost the lease: redelivered after the window
				crashed = true
				m.abandon(a.Target, p.Probe)
				runs-- // no outcome: the attempt is made again
				count++
				now = now.Add(30 * time.Second)
				continue
			case 1:
				if m.finish(now, d, p.Attempt, p.Probe, Outcome{Result: Success}).Action != actAck {
					rt.Fatalf("success not acked")
				}
				return
			}
			lastErr, crashed = "boom", false
			f := m.finish(now, d, p.Attempt, p.Probe, Outcome{Result: Retryable, Err: lastErr})
			switch f.Action {
			case actHide:
				if now.Sub(d.ReceivedAt)+f.Visibility > c.VisibilityMax {
					rt.Fatalf("hid for %v at %v after the receive, beyond %v", f.Visibility, now.Sub(d.ReceivedAt), c.VisibilityMax)
				}
				count++
				now = now.Add(f.Visibility)
			case actResend:
				if f.Send.Attrs.Attempts != runs || f.Send.Delay > c.WithDefaults().DelayMax {
					rt.Fatalf("retry re-send %+v after %d runs", f, runs)
				}
				a, count = f.Send.Attrs, 1
				now = now.Add(f.Send.Delay)
			case actDeadLetter:
				if f.Send.Attrs.Attempts != runs || f.Send.Attrs.LastErr != lastErr {
					rt.Fatalf("dead letter %+v after %d runs", f.Send.Attrs, runs)
				}
				return
			default:
				rt.Fatalf("finish planned %v", f.Action)
			}
			if err := m.CheckInvariants(); err != nil {
				rt.Fatal(err)
			}
		}
	})
}
