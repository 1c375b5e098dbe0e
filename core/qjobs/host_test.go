package qjobs

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sluicehq/sluice/core"
	"pgregory.net/rapid"
)

// host is a machine with the test's kinds registered.
func host(t *testing.T, kinds ...string) *Machine {
	t.Helper()
	m := newMachine(t, testConfig())
	for _, k := range kinds {
		if err := m.Step(Register{Kind: k}); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func step(t *testing.T, m *Machine, ev Event) Ready {
	t.Helper()
	if err := m.Step(ev); err != nil {
		t.Fatalf("Step(%T): %v", ev, err)
	}
	if err := m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	return m.Ready()
}

// msg is the message a send of a would deliver, received count times.
func msg(a Attrs, payload string, count int) core.Message {
	out := Encode(a, []byte(payload))
	return core.Message{ID: "m1", Body: out.Body, Attributes: out.Attributes, ReceiveCount: count}
}

func enqueued(a Attrs, payload string, delay time.Duration) Send {
	out := Encode(a, []byte(payload))
	out.Delay = delay
	return Send{To: ToQueue, Why: WhyEnqueue, Message: out, Attrs: a}
}

// ignoreErrs compares refusals' errors by ErrTooLarge or ErrInvalidJob.
var ignoreErrs = cmp.Comparer(func(a, b error) bool {
	return errors.Is(a, ErrTooLarge) == errors.Is(b, ErrTooLarge) && errors.Is(a, ErrInvalidJob) == errors.Is(b, ErrInvalidJob)
})

// TestEnqueueDecidesDueDelayAndSize: the due (zero or past: now), the not-before time, the
// first message's delay (clamped to DelayMax before it is rounded up to whole seconds, so a
// due in year 9999 is a 15 min hop, not an overflow to a zero delay) and the size limit.
func TestEnqueueDecidesDueDelayAndSize(t *testing.T) {
	far := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	job := func(due time.Time, payload string) NewJob {
		return NewJob{Kind: "mail", Target: "smtp", Due: due, Payload: []byte(payload)}
	}
	attrs := func(due, notBefore time.Time) Attrs {
		return Attrs{Kind: "mail", Target: "smtp", FirstDue: due, NotBefore: notBefore}
	}
	big := strings.Repeat("x", MessageMaxDefault)
	for _, tc := range []struct {
		name string
		jobs []NewJob
		want Ready
	}{
		{"a zero due is now, sent at once", []NewJob{job(time.Time{}, "a")},
			Ready{Sends: []Send{enqueued(attrs(t0, time.Time{}), "a", 0)}}},
		{"a past due is now", []NewJob{job(t0.Add(-time.Hour), "a")},
			Ready{Sends: []Send{enqueued(attrs(t0, time.Time{}), "a", 0)}}},
		{"a due 90.5 s ahead: not before it, delayed 91 s", []NewJob{job(t0.Add(90500*time.Millisecond), "a")},
			Ready{Sends: []Send{enqueued(attrs(t0.Add(90500*time.Millisecond), t0.Add(90500*time.Millisecond)), "a", 91*time.Second)}}},
		{"a due past the longest delay: delayed 15 min, then deferred", []NewJob{job(t0.Add(3*time.Hour), "a")},
			Ready{Sends: []Send{enqueued(attrs(t0.Add(3*time.Hour), t0.Add(3*time.Hour)), "a", DelayMaxDefault)}}},
		{"a due in year 9999: clamped before rounding", []NewJob{job(far, "a")},
			Ready{Sends: []Send{enqueued(attrs(far, far), "a", DelayMaxDefault)}}},
		{"too large with its attributes: refused, nothing sent", []NewJob{job(time.Time{}, "a"), job(time.Time{}, big)},
			Ready{Refused: []Refusal{{Index: 1, Size: Size(Encode(attrs(t0, time.Time{}), []byte(big))), Err: ErrTooLarge}}}},
		{"an empty target: refused", []NewJob{{Kind: "mail", Payload: []byte("a")}},
			Ready{Refused: []Refusal{{Index: 0, Err: ErrInvalidJob}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := host(t, "mail")
			got := step(t, m, Enqueue{Now: t0, Jobs: tc.jobs})
			for i, s := range got.Sends { // ids are random: each non-zero, carried, then ignored
				if s.Attrs.ID == 0 || s.Message.Attributes[AttrID] != strconv.FormatUint(s.Attrs.ID, 10) {
					t.Errorf("send %d: id %d, attribute %q", i, s.Attrs.ID, s.Message.Attributes[AttrID])
				}
				got.Sends[i].Attrs.ID = 0
				delete(got.Sends[i].Message.Attributes, AttrID)
			}
			for _, r := range got.Refused { // its size counts the random id: compared apart
				if errors.Is(r.Err, ErrTooLarge) && r.Size <= MessageMaxDefault {
					t.Errorf("refused as too large at %d bytes", r.Size)
				}
			}
			if diff := cmp.Diff(tc.want, got, ignoreErrs, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(Refusal{}, "Size")); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestDelayClampsBeforeRounding: the largest wait (what time.Sub saturates to for a
// far-future time) rounds to DelayMax; rounding it up first overflowed to a negative delay,
// which the old code clamped to 0: a re-send at once, forever.
func TestDelayClampsBeforeRounding(t *testing.T) {
	m := host(t)
	for _, d := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, DelayMaxDefault + 1} {
		if got := m.delay(d); got != DelayMaxDefault {
			t.Errorf("delay(%v) = %v, want %v", d, got, DelayMaxDefault)
		}
	}
	if got := m.delay(math.MinInt64); got != 0 {
		t.Errorf("delay(min) = %v, want 0", got)
	}
}

// TestDeliveryEffects walks deliveries through the host, comparing every Ready.
func TestDeliveryEffects(t *testing.T) {
	a := job("smtp")
	later := Attrs{Kind: "mail", Target: "smtp", FirstDue: t0, NotBefore: t0.Add(time.Hour)}
	deferred := later
	stranger := core.Message{ID: "m1", Body: []byte("hello"), Attributes: map[string]string{"x": "y"}, ReceiveCount: 1}
	send := func(why Why, to Destination, a Attrs, delay time.Duration) Send {
		out := Encode(a, []byte("p"))
		out.Delay = delay
		return Send{Receipt: "r", To: to, Why: why, Message: out, Attrs: a}
	}
	dead := Attrs{Kind: "mail", Target: "smtp", FirstDue: t0, Attempts: 1, LastErr: "bad", Reason: ReasonPermanent}
	type ev struct {
		ev   Event
		want Ready
	}
	for _, tc := range []struct {
		name   string
		events []ev
	}{
		{"success: run, then delete", []ev{
			{Deliver{Now: t0, Receipt: "r", Message: msg(a, "p", 1)}, Ready{Runs: []Run{{Receipt: "r", Attempt: 1, Attrs: a, Payload: []byte("p")}}}},
			{AttemptDone{Receipt: "r", Now: t0, Outcome: Outcome{Result: Success}}, Ready{Done: []Done{{Receipt: "r", Disposition: Delete}}}},
		}},
		{"a retryable failure re-sends the job with the attempt, its error and the backoff", []ev{
			{Deliver{Now: t0, Receipt: "r", Message: msg(a, "p", 1)}, Ready{Runs: []Run{{Receipt: "r", Attempt: 1, Attrs: a, Payload: []byte("p")}}}},
			{AttemptDone{Receipt: "r", Now: t0, Outcome: Outcome{Result: Retryable, Err: "421"}}, Ready{Sends: []Send{send(WhyRetry, ToQueue,
				Attrs{Kind: "mail", Target: "smtp", FirstDue: t0, Attempts: 1, NotBefore: t0.Add(time.Minute), LastErr: "421"}, time.Minute)}}},
			{SendDone{Receipt: "r", Now: t0}, Ready{Done: []Done{{Receipt: "r", Disposition: Delete}}}},
		}},
		{"cancelled and failed: abandoned, the queue redelivers", []ev{
			{Deliver{Now: t0, Receipt: "r", Message: msg(a, "p", 1)}, Ready{Runs: []Run{{Receipt: "r", Attempt: 1, Attrs: a, Payload: []byte("p")}}}},
			{AttemptDone{Receipt: "r", Now: t0, Outcome: Outcome{Result: Retryable, Err: "context canceled"}, Cancelled: true},
				Ready{Done: []Done{{Receipt: "r", Disposition: Release, Err: "abandoned: context canceled"}}}},
		}},
		{"cancelled but succeeded: the success stands", []ev{
			{Deliver{Now: t0, Receipt: "r", Message: msg(a, "p", 1)}, Ready{Runs: []Run{{Receipt: "r", Attempt: 1, Attrs: a, Payload: []byte("p")}}}},
			{AttemptDone{Receipt: "r", Now: t0, Outcome: Outcome{Result: Success}, Cancelled: true}, Ready{Done: []Done{{Receipt: "r", Disposition: Delete}}}},
		}},
		{"a permanent failure: dead letter, then delete once sent", []ev{
			{Deliver{Now: t0, Receipt: "r", Message: msg(a, "p", 1)}, Ready{Runs: []Run{{Receipt: "r", Attempt: 1, Attrs: a, Payload: []byte("p")}}}},
			{AttemptDone{Receipt: "r", Now: t0, Outcome: Outcome{Result: Permanent, Err: "bad"}}, Ready{
				Sends: []Send{send(WhyDead, ToDeadLetter, dead, 0)},
				Notes: []Note{{Level: NoteWarn, Text: "job dead", Args: []string{"message", "m1", "id", "0", "kind", "mail", "target", "smtp", "reason", "permanent", "attempts", "1", "lost", "0", "err", "bad"}}}}},
			{SendDone{Receipt: "r", Now: t0}, Ready{Done: []Done{{Receipt: "r", Disposition: Delete}}}},
		}},
		{"a failed dead-letter send is not done: hidden with the send backoff, decided again", []ev{
			{Deliver{Now: t0, Receipt: "r", Message: msg(a, "p", 1)}, Ready{Runs: []Run{{Receipt: "r", Attempt: 1, Attrs: a, Payload: []byte("p")}}}},
			{AttemptDone{Receipt: "r", Now: t0, Outcome: Outcome{Result: Permanent, Err: "bad"}}, Ready{
				Sends: []Send{send(WhyDead, ToDeadLetter, dead, 0)},
				Notes: []Note{{Level: NoteWarn, Text: "job dead", Args: []string{"message", "m1", "id", "0", "kind", "mail", "target", "smtp", "reason", "permanent", "attempts", "1", "lost", "0", "err", "bad"}}}}},
			{SendDone{Receipt: "r", Now: t0, Err: errors.New("throttled")}, Ready{
				Done:  []Done{{Receipt: "r", Disposition: Hide, Visibility: SendRetryDelay, Err: "send failed: throttled"}},
				Notes: []Note{{Level: NoteWarn, Text: "send failed; the message comes back", Args: []string{"message", "m1", "send", "dead", "after", "1s", "err", "throttled"}}}}},
		}},
		{"before its not-before time: deferred by a re-send, no attempt spent", []ev{
			{Deliver{Now: t0.Add(10 * time.Minute), Receipt: "r", Message: msg(later, "p", 1)}, Ready{Sends: []Send{send(WhyDefer, ToQueue, deferred, DelayMaxDefault)}}},
			{SendDone{Receipt: "r", Now: t0}, Ready{Done: []Done{{Receipt: "r", Disposition: Delete}}}},
		}},
		{"not a job: to the dead-letter queue as it came", []ev{
			{Deliver{Now: t0, Receipt: "r", Message: stranger}, Ready{
				Sends: []Send{{Receipt: "r", To: ToDeadLetter, Why: WhyNotJob, Message: core.Outgoing{Body: []byte("hello"), Attributes: map[string]string{"x": "y"}}}},
				Notes: []Note{{Level: NoteError, Text: "a message that is not a job; moving it to the dead-letter queue", Args: []string{"message", "m1", "err", "qjobs: not a job message: no sluice-kind attribute"}}}}},
			{SendDone{Receipt: "r", Now: t0}, Ready{Done: []Done{{Receipt: "r", Disposition: Delete}}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := host(t, "mail")
			for i, e := range tc.events {
				got := step(t, m, e.ev)
				if diff := cmp.Diff(e.want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("event %d %T (-want +got):\n%s", i, e.ev, diff)
				}
			}
			if st := m.Status(); st.Deliveries != 0 {
				t.Errorf("%d deliveries left after Done", st.Deliveries)
			}
		})
	}
}

// TestUnregisteredKindWarnsOnce: a kind this process lacks waits in the queue (a defer at the
// longest delay, no attempt spent), warned about once.
func TestUnregisteredKindWarnsOnce(t *testing.T) {
	m := host(t)
	warn := Note{Level: NoteWarn, Text: "jobs of a kind not registered in this process wait in the queue (warned once per kind)", Args: []string{"kind", "mail", "message", "m1"}}
	for i, want := range [][]Note{{warn}, nil} {
		r := "r" + string(rune('0'+i))
		got := step(t, m, Deliver{Now: t0, Receipt: r, Message: msg(job("smtp"), "p", 1)})
		if diff := cmp.Diff(want, got.Notes, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("delivery %d notes (-want +got):\n%s", i, diff)
		}
		if len(got.Sends) != 1 || got.Sends[0].Why != WhyDefer || got.Sends[0].Message.Delay != DelayMaxDefault {
			t.Errorf("delivery %d: %+v, want one defer delayed %v", i, got.Sends, DelayMaxDefault)
		}
	}
}

// TestStepRefusesMisuse: a reply nothing waits for, or a receipt delivered twice.
func TestStepRefusesMisuse(t *testing.T) {
	m := host(t, "mail")
	step(t, m, Deliver{Now: t0, Receipt: "r", Message: msg(job("smtp"), "p", 1)})
	for _, ev := range []Event{
		Deliver{Now: t0, Receipt: "r", Message: msg(job("smtp"), "p", 1)},
		Deliver{Now: t0, Message: msg(job("smtp"), "p", 1)},
		SendDone{Receipt: "r", Now: t0},
		AttemptDone{Receipt: "other", Now: t0, Outcome: Outcome{Result: Success}},
		AttemptDone{Receipt: "r", Now: t0},
		Register{},
	} {
		if err := m.Step(ev); !errors.Is(err, ErrMisuse) {
			t.Errorf("Step(%+v) = %v, want ErrMisuse", ev, err)
		}
	}
	if got := m.Ready(); !got.IsEmpty() {
		t.Errorf("misuse produced effects: %+v", got)
	}
}

// TestEveryDeliveryEndsWithOneDone is the host's protocol property: for any outcomes,
// cancellations and failed sends, each delivery has exactly one effect outstanding after every
// step, ends with exactly one Done, deletes its message after a send only once the send
// succeeded, and every send's delay is whole seconds within DelayMax.
func TestEveryDeliveryEndsWithOneDone(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newMachine(t, testConfig())
		if err := m.Step(Register{Kind: "mail"}); err != nil {
			rt.Fatal(err)
		}
		now := t0
		for i := range rapid.IntRange(1, 30).Draw(rt, "deliveries") {
			receipt := "r" + string(rune('a'+i%26)) + string(rune('0'+i/26))
			a := job("t" + string(rune('0'+rapid.IntRange(0, 2).Draw(rt, "target"))))
			if rapid.IntRange(0, 3).Draw(rt, "later") == 0 {
				a.NotBefore = now.Add(time.Duration(rapid.Int64Range(0, math.MaxInt64/2).Draw(rt, "ahead")))
			}
			ev := Event(Deliver{Now: now, Receipt: receipt, Message: msg(a, "p", rapid.IntRange(1, 4).Draw(rt, "count"))})
			if rapid.IntRange(0, 9).Draw(rt, "stranger") == 0 {
				ev = Deliver{Now: now, Receipt: receipt, Message: core.Message{ID: "x", Body: []byte("?"), ReceiveCount: 1}}
			}
			sendFailed := false
			for step := 0; ; step++ {
				if step > 3 {
					rt.Fatalf("delivery %s not done after 3 replies", receipt)
				}
				if err := m.Step(ev); err != nil {
					rt.Fatal(err)
				}
				if err := m.CheckInvariants(); err != nil {
					rt.Fatal(err)
				}
				rd := m.Ready()
				if n := len(rd.Runs) + len(rd.Sends) + len(rd.Done); n != 1 || len(rd.Refused) > 0 {
					rt.Fatalf("step %d of %s: %d effects outstanding (%+v), want 1", step, receipt, n, rd)
				}
				now = now.Add(time.Duration(rapid.IntRange(0, 120).Draw(rt, "took")) * time.Second)
				switch {
				case len(rd.Done) == 1:
					if d := rd.Done[0]; d.Receipt != receipt || d.Disposition == Delete && sendFailed {
						rt.Fatalf("Done %+v after a failed send %v", d, sendFailed)
					}
					if st := m.Status(); st.Deliveries != 0 {
						rt.Fatalf("%d deliveries held after Done", st.Deliveries)
					}
				case len(rd.Runs) == 1:
					o := Outcome{Result: Result(rapid.IntRange(int(Success), int(Panicked)).Draw(rt, "result")), Err: "e"}
					ev = AttemptDone{Receipt: receipt, Now: now, Outcome: o, Cancelled: rapid.IntRange(0, 4).Draw(rt, "cancel") == 0}
					continue
				default:
					s := rd.Sends[0]
					if d := s.Message.Delay; d < 0 || d > DelayMaxDefault || d%time.Second != 0 {
						rt.Fatalf("send delayed %v", d)
					}
					var err error
					if sendFailed = rapid.IntRange(0, 3).Draw(rt, "sendfail") == 0; sendFailed {
						err = errors.New("throttled")
					}
					ev = SendDone{Receipt: receipt, Now: now, Err: err}
					continue
				}
				break
			}
		}
	})
}
