package breaker

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestValidateNamesField(t *testing.T) {
	if err := DefaultCircuit().Validate(); err != nil {
		t.Fatal(err)
	}
	want := Circuit{Threshold: 5, Window: 30 * time.Second, Cooldown: 30 * time.Second, Probes: 1}
	if diff := cmp.Diff(want, DefaultCircuit()); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	for _, tc := range []struct {
		c     Circuit
		field string
	}{
		{Circuit{Threshold: 0, Window: 1, Cooldown: 1, Probes: 1}, "Threshold"},
		{Circuit{Threshold: 1, Window: 0, Cooldown: 1, Probes: 1}, "Window"},
		{Circuit{Threshold: 1, Window: 1, Cooldown: 0, Probes: 1}, "Cooldown"},
		{Circuit{Threshold: 1, Window: 1, Cooldown: 1, Probes: 0}, "Probes"},
	} {
		err := tc.c.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Validate(%+v) = %v, want an ErrInvalid naming %s", tc.c, err, tc.field)
		}
	}
}

func TestResultCounts(t *testing.T) {
	got := map[Result]bool{}
	for _, r := range []Result{Success, RetryableFailure, PermanentFailure, Panic} {
		got[r] = r.Counts()
	}
	want := map[Result]bool{Success: false, RetryableFailure: true, PermanentFailure: false, Panic: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
}

// step is one action on a breaker: admit at a time (recording the answer under a name), or
// record/release a named admission's outcome.
type step struct {
	at      time.Duration
	admit   string // name for the admission, "" when this is a record
	record  string // name of an earlier admission
	result  Result
	release bool
}

func run(t *testing.T, c Circuit, steps []step) []string {
	t.Helper()
	b := mustNew(t, c, 0)
	probes := map[string]Probe{}
	var out []string
	for _, s := range steps {
		now := t0.Add(s.at)
		switch {
		case s.admit != "":
			d := admit(b, now)
			probes[s.admit] = d.Probe
			line := fmt.Sprintf("%v admit %s: %v", s.at, s.admit, d.Verdict)
			if d.Verdict == Refused {
				line += fmt.Sprintf(" until %v", d.Until.Sub(t0))
			}
			out = append(out, line+" -> "+b.Status().State.String())
		case s.release:
			release(b, probes[s.record])
			out = append(out, fmt.Sprintf("%v release %s -> %v", s.at, s.record, b.Status().State))
		default:
			record(b, now, s.result, probes[s.record])
			out = append(out, fmt.Sprintf("%v record %s -> %v", s.at, s.record, b.Status().State))
		}
		if err := b.checkInvariants(); err != nil {
			t.Fatalf("after %q: %v", out[len(out)-1], err)
		}
	}
	return out
}

func TestTransitions(t *testing.T) {
	c := Circuit{Threshold: 2, Window: 10 * time.Second, Cooldown: 5 * time.Second, Probes: 1}
	c2 := c
	c2.Probes = 2
	s := time.Second
	for _, tc := range []struct {
		name  string
		c     Circuit
		steps []step
		want  []string
	}{
		{"threshold failures within window open", c, []step{
			{at: 0, admit: "a"}, {at: 0, admit: "b"},
			{at: 1 * s, record: "a", result: RetryableFailure},
			{at: 2 * s, record: "b", result: Panic},
			{at: 3 * s, admit: "c"},
		}, []string{
			"0s admit a: normal -> closed", "0s admit b: normal -> closed",
			"1s record a -> closed", "2s record b -> open",
			"3s admit c: refused until 7s -> open",
		}},
		{"failures older than window are dropped", c, []step{
			{at: 0, admit: "a"}, {at: 0, admit: "b"},
			{at: 1 * s, record: "a", result: RetryableFailure},
			{at: 11*s + 1, record: "b", result: RetryableFailure},
		}, []string{
			"0s admit a: normal -> closed", "0s admit b: normal -> closed",
			"1s record a -> closed", "11.000000001s record b -> closed",
		}},
		{"a failure exactly Window old still counts", c, []step{
			{at: 0, admit: "a"}, {at: 0, admit: "b"},
			{at: 1 * s, record: "a", result: RetryableFailure},
			{at: 11 * s, record: "b", result: RetryableFailure},
		}, []string{
			"0s admit a: normal -> closed", "0s admit b: normal -> closed",
			"1s record a -> closed", "11s record b -> open",
		}},
		{"success clears failures; permanent failure counts as success", c, []step{
			{at: 0, admit: "a"}, {at: 0, admit: "b"}, {at: 0, admit: "c"},
			{at: 1 * s, record: "a", result: RetryableFailure},
			{at: 2 * s, record: "b", result: PermanentFailure},
			{at: 3 * s, record: "c", result: RetryableFailure},
		}, []string{
			"0s admit a: normal -> closed", "0s admit b: normal -> closed", "0s admit c: normal -> closed",
			"1s record a -> closed", "2s record b -> closed", "3s record c -> closed",
		}},
		{"cooldown ends at until: half-open admits one probe, refuses the rest", c, []step{
			{at: 0, admit: "a"}, {at: 0, admit: "b"},
			{at: 0, record: "a", result: RetryableFailure}, {at: 0, record: "b", result: RetryableFailure},
			{at: 5*s - 1, admit: "early"},
			{at: 5 * s, admit: "p"},
			{at: 6 * s, admit: "q"},
		}, []string{
			"0s admit a: normal -> closed", "0s admit b: normal -> closed",
			"0s record a -> closed", "0s record b -> open",
			"4.999999999s admit early: refused until 5s -> open",
			"5s admit p: probe -> half-open",
			"6s admit q: refused until 11s -> half-open",
		}},
		{"probe success closes", c, []step{
			{at: 0, admit: "a"}, {at: 0, admit: "b"},
			{at: 0, record: "a", result: Panic}, {at: 0, record: "b", result: Panic},
			{at: 5 * s, admit: "p"}, {at: 6 * s, record: "p", result: Success},
			{at: 6 * s, admit: "x"},
		}, []string{
			"0s admit a: normal -> closed", "0s admit b: normal -> closed",
			"0s record a -> closed", "0s record b -> open",
			"5s admit p: probe -> half-open", "6s record p -> closed",
			"6s admit x: normal -> closed",
		}},
		{"probe failure reopens with a fresh cooldown", c, []step{
			{at: 0, admit: "a"}, {at: 0, admit: "b"},
			{at: 0, record: "a", result: Panic}, {at: 0, record: "b", result: Panic},
			{at: 5 * s, admit: "p"}, {at: 8 * s, record: "p", result: RetryableFailure},
			{at: 12 * s, admit: "x"}, {at: 13 * s, admit: "y"},
		}, []string{
			"0s admit a: normal -> closed", "0s admit b: normal -> closed",
			"0s record a -> closed", "0s record b -> open",
			"5s admit p: probe -> half-open", "8s record p -> open",
			"12s admit x: refused until 13s -> open", "13s admit y: probe -> half-open",
		}},
		{"a stale pre-open outcome does not close a half-open breaker", c, []step{
			{at: 0, admit: "a"}, {at: 0, admit: "b"}, {at: 0, admit: "old"},
			{at: 0, record: "a", result: Panic}, {at: 0, record: "b", result: Panic},
			{at: 5 * s, admit: "p"},
			{at: 6 * s, record: "old", result: Success},
			{at: 6 * s, admit: "q"},
		}, []string{
			"0s admit a: normal -> closed", "0s admit b: normal -> closed", "0s admit old: normal -> closed",
			"0s record a -> closed", "0s record b -> open",
			"5s admit p: probe -> half-open",
			"6s record old -> half-open",
			"6s admit q: refused until 11s -> half-open",
		}},
		{"a probe of an earlier phase does not decide the current one", c2, []step{
			{at: 0, admit: "a"}, {at: 0, admit: "b"},
			{at: 0, record: "a", result: Panic}, {at: 0, record: "b", result: Panic},
			{at: 5 * s, admit: "p1"}, {at: 5 * s, admit: "p2"}, {at: 5 * s, admit: "p3"},
			{at: 6 * s, record: "p1", result: Panic},
			{at: 11 * s, admit: "n1"},
			{at: 12 * s, record: "p2", result: Success},
			{at: 12 * s, admit: "n2"}, {at: 12 * s, admit: "n3"},
		}, []string{
			"0s admit a: normal -> closed", "0s admit b: normal -> closed",
			"0s record a -> closed", "0s record b -> open",
			"5s admit p1: probe -> half-open", "5s admit p2: probe -> half-open",
			"5s admit p3: refused until 10s -> half-open",
			"6s record p1 -> open",
			"11s admit n1: probe -> half-open",
			"12s record p2 -> half-open",
			"12s admit n2: probe -> half-open", "12s admit n3: refused until 17s -> half-open",
		}},
		{"outcomes while open are ignored", c, []step{
			{at: 0, admit: "a"}, {at: 0, admit: "b"}, {at: 0, admit: "c"},
			{at: 0, record: "a", result: Panic}, {at: 0, record: "b", result: Panic},
			{at: 1 * s, record: "c", result: Success},
			{at: 2 * s, admit: "x"},
		}, []string{
			"0s admit a: normal -> closed", "0s admit b: normal -> closed", "0s admit c: normal -> closed",
			"0s record a -> closed", "0s record b -> open",
			"1s record c -> open", "2s admit x: refused until 5s -> open",
		}},
		{"a released probe lets the phase admit another", c, []step{
			{at: 0, admit: "a"}, {at: 0, admit: "b"},
			{at: 0, record: "a", result: Panic}, {at: 0, record: "b", result: Panic},
			{at: 5 * s, admit: "p"}, {at: 5 * s, release: true, record: "p"}, {at: 5 * s, admit: "q"},
		}, []string{
			"0s admit a: normal -> closed", "0s admit b: normal -> closed",
			"0s record a -> closed", "0s record b -> open",
			"5s admit p: probe -> half-open", "5s release p -> half-open", "5s admit q: probe -> half-open",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, run(t, tc.c, tc.steps)); diff != "" {
				t.Fatalf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestIdleMeansDecidesAsNew: a breaker is idle only when Closed with no failure inside the
// Window; open and half-open ones never are.
func TestIdleMeansDecidesAsNew(t *testing.T) {
	c := Circuit{Threshold: 2, Window: 10 * time.Second, Cooldown: 5 * time.Second, Probes: 1}
	b := mustNew(t, c, 0)
	got := []bool{b.Idle(t0)}
	record(b, t0, RetryableFailure, 0)
	got = append(got, b.Idle(t0.Add(10*time.Second)), b.Idle(t0.Add(10*time.Second+1)))
	record(b, t0.Add(time.Second), RetryableFailure, 0) // opens
	got = append(got, b.Idle(t0.Add(time.Hour)))
	d := admit(b, t0.Add(time.Hour)) // half-open probe
	got = append(got, b.Idle(t0.Add(time.Hour)))
	record(b, t0.Add(time.Hour), Success, d.Probe) // closes
	got = append(got, b.Idle(t0.Add(time.Hour)))
	want := []bool{true, false, true, false, false, true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
}

// TestNewAfterNeverTakesAForgottenProbe: a probe admitted by a breaker that was then
// forgotten does not decide the half-open phase of the breaker made after it.
func TestNewAfterNeverTakesAForgottenProbe(t *testing.T) {
	c := Circuit{Threshold: 1, Window: time.Minute, Cooldown: time.Second, Probes: 2}
	old := mustNew(t, c, 0)
	record(old, t0, RetryableFailure, 0)
	stale := admit(old, t0.Add(time.Second)) // probe of phase 1
	fresh := admit(old, t0.Add(time.Second))
	record(old, t0.Add(time.Second), Success, fresh.Probe) // closes; the stale probe is still out
	if !old.Idle(t0.Add(2 * time.Second)) {
		t.Fatal("closed breaker with no failures is not idle")
	}
	b := mustNew(t, c, old.Status().Phase)
	record(b, t0.Add(2*time.Second), RetryableFailure, 0) // opens
	if d := admit(b, t0.Add(3*time.Second)); d.Verdict != AsProbe {
		t.Fatalf("after the cooldown: %+v, want a probe", d)
	}
	record(b, t0.Add(3*time.Second), Success, stale.Probe) // the forgotten probe's outcome
	if got := b.Status().State; got != HalfOpen {
		t.Fatalf("a forgotten breaker's probe decided the new one: state %v, want half-open", got)
	}
}

func mustNew(t *testing.T, c Circuit, after uint64) *Breaker {
	t.Helper()
	b, err := New(Config{Circuit: c, PhaseAfter: after})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func admit(b *Breaker, now time.Time) Decision {
	b.Step(Admit{Now: now})
	return *b.Ready().Decision
}

func record(b *Breaker, now time.Time, r Result, p Probe) {
	b.Step(Record{Now: now, Result: r, Probe: p})
}

func release(b *Breaker, p Probe) { b.Step(Release{Probe: p}) }
