package qjobs

import (
	"encoding/json"
	"errors"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/core"
)

// foreignMsg is a job message carrying other producers' attributes of each type, as a
// transport that reports types delivers it.
func foreignMsg(a Attrs, payload string, count int) core.Message {
	m := msg(a, payload, count)
	m.Typed = map[string]core.Attribute{
		"trace":  {Type: "String", String: "t-1"},
		"n":      {Type: "Number.int", String: "42"},
		"sig":    {Type: "Binary", Binary: []byte{0, 1, 0xff}},
		AttrKind: {Type: "String", String: a.Kind}, // the job's own: written anew, not copied
	}
	return m
}

// TestDeadLetterKeepsWhatCameIn: a dead letter keeps the body and every attribute of other
// producers with its type; the job's own attributes carry the reason, the attempts, the lost
// deliveries and the last error. A message that is not a job goes as it came, Binary kept.
func TestDeadLetterKeepsWhatCameIn(t *testing.T) {
	m := host(t, "mail")
	step(t, m, Deliver{Now: t0, Receipt: "r", Message: foreignMsg(job("smtp"), "body", 3)})
	rd := step(t, m, AttemptDone{Receipt: "r", Now: t0, Outcome: Outcome{Result: Permanent, Err: "550 no such user"}})
	if len(rd.Sends) != 1 {
		t.Fatalf("sends %+v, want one dead letter", rd.Sends)
	}
	s := rd.Sends[0]
	want := map[string]core.Attribute{
		"trace": {Type: "String", String: "t-1"},
		"n":     {Type: "Number.int", String: "42"},
		"sig":   {Type: "Binary", Binary: []byte{0, 1, 0xff}},
	}
	if diff := cmp.Diff(want, s.Message.Typed); diff != "" {
		t.Errorf("typed attributes (-want +got):\n%s", diff)
	}
	if string(s.Message.Body) != "body" {
		t.Errorf("body %q", s.Message.Body)
	}
	got, _, err := Decode(core.Message{Body: s.Message.Body, Attributes: s.Message.Attributes})
	if err != nil {
		t.Fatal(err)
	}
	if got.Reason != ReasonPermanent || got.LastErr != "550 no such user" || got.Attempts != 1 || got.Lost != 2 {
		t.Errorf("dead letter attrs %+v, want permanent, its error, 1 attempt, 2 lost deliveries", got)
	}
	bin := core.Message{ID: "x", Body: []byte("?"), ReceiveCount: 1,
		Typed: map[string]core.Attribute{AttrKind: {Type: "Binary", Binary: []byte("mail")}}}
	rd = step(t, m, Deliver{Now: t0, Receipt: "b", Message: bin})
	if len(rd.Sends) != 1 || rd.Sends[0].Why != WhyNotJob || !cmp.Equal(bin.Typed, rd.Sends[0].Message.Typed) {
		t.Errorf("a Binary sluice-kind: %+v, want not a job, sent on with its typed attributes", rd.Sends)
	}
}

// TestSuccessorFitLadder: a successor that would not fit has its error cut; a dead letter that
// still cannot fit (too many attributes) is not sent: the original is hidden with the send
// backoff, which grows with its receives, and counted.
func TestSuccessorFitLadder(t *testing.T) {
	c := testConfig()
	c.MessageMax = 4 << 10
	m := newMachine(t, c)
	step(t, m, Register{Kind: "mail"})
	big := strings.Repeat("x", c.MessageMax-SuccessorRoom-200)
	step(t, m, Deliver{Now: t0, Receipt: "r", Message: msg(job("smtp"), big, 1)})
	rd := step(t, m, AttemptDone{Receipt: "r", Now: t0, Outcome: Outcome{Result: Permanent, Err: strings.Repeat("é", 2000)}})
	if len(rd.Sends) != 1 || Size(rd.Sends[0].Message) > c.MessageMax {
		t.Fatalf("sends %+v, want one dead letter within %d bytes", rd.Sends, c.MessageMax)
	}
	if e := rd.Sends[0].Attrs.LastErr; len(e) > errCutLong || !strings.HasSuffix(e, "…(cut)") {
		t.Errorf("error of %d bytes, want it cut to at most %d and marked", len(e), errCutLong)
	}
	crowded := msg(job("smtp"), "p", 1)
	crowded.Typed = map[string]core.Attribute{}
	for k, v := range crowded.Attributes {
		crowded.Typed[k] = core.Attribute{Type: "String", String: v}
	}
	for i := range AttrsMax - len(crowded.Attributes) {
		crowded.Typed["x"+strconv.Itoa(i)] = core.Attribute{Type: "String", String: "v"}
	}
	crowded.ReceiveCount = 1
	step(t, m, Deliver{Now: t0, Receipt: "e", Message: crowded})
	rd = step(t, m, AttemptDone{Receipt: "e", Now: t0, Outcome: Outcome{Result: Permanent, Err: "bad"}})
	var env Envelope
	if len(rd.Sends) != 1 || len(rd.Sends[0].Message.Attributes)+len(rd.Sends[0].Message.Typed) != 0 {
		t.Fatalf("11 attributes: %+v, want an attribute-free dead letter", rd.Sends)
	} else if err := json.Unmarshal(rd.Sends[0].Message.Body, &env); err != nil || env.DeadLetter != 1 || env.Body != "p" ||
		len(env.Attributes) != AttrsMax+1 || !strings.Contains(env.Attributes[AttrOpts].String, `"r":"permanent"`) {
		t.Fatalf("envelope %+v (%v), want every attribute, the reason and the payload", env, err)
	}
	step(t, m, SendDone{Receipt: "e", Now: t0})
	crowded.Body = []byte(strings.Repeat("y", c.MessageMax-SuccessorRoom))
	for _, count := range []int{1, 2, 5, 30} {
		crowded.ReceiveCount = count
		r := "c" + strconv.Itoa(count)
		// Receive 30 is past the delivery budget: dead at admission, as unsendable.
		if rd = step(t, m, Deliver{Now: t0, Receipt: r, Message: crowded}); len(rd.Runs) == 1 {
			rd = step(t, m, AttemptDone{Receipt: r, Now: t0, Outcome: Outcome{Result: Permanent, Err: "bad"}})
		}
		want := min(SendRetryDelay<<(count-1), SendRetryMax)
		if len(rd.Done) != 1 || rd.Done[0].Disposition != Hide || rd.Done[0].Visibility != want {
			t.Errorf("receive %d: %+v, want hidden %v (it cannot fit: 11 attributes, the payload too large for an envelope)", count, rd.Done, want)
		}
	}
	if st := m.Status(); st.Unsendable != 4 {
		t.Errorf("Unsendable %d, want 4", st.Unsendable)
	}
}

// TestLostDeliveriesSpendNoAttempt: receives without an outcome count against the delivery
// budget (LostMax), never the attempts; past it the job is dead-lettered with its last error.
func TestLostDeliveriesSpendNoAttempt(t *testing.T) {
	c := testConfig()
	c.LostMax = 2
	m := newMachine(t, c)
	a := job("smtp")
	a.Attempts, a.LastErr = 1, "421 busy"
	for _, tc := range []struct {
		count int
		want  action
	}{{1, actRun}, {3, actRun}, {4, actDeadLetter}} {
		p := m.admit(t0, delivery{Attrs: a, ReceiveCount: tc.count, ReceivedAt: t0})
		if p.Action != tc.want {
			t.Errorf("receive %d: %v, want %v", tc.count, p.Action, tc.want)
		}
		if p.Action == actRun && p.Attempt != 2 {
			t.Errorf("receive %d: attempt %d, want 2", tc.count, p.Attempt)
		}
		if p.Action == actDeadLetter && (p.Send.Attrs.Reason != ReasonLost || p.Send.Attrs.LastErr != "421 busy" || p.Send.Attrs.Lost != 3) {
			t.Errorf("receive %d: dead letter %+v, want deliveries-lost, 3 lost, the last error", tc.count, p.Send.Attrs)
		}
		if p.Action == actRun {
			m.abandon(a.Target, p.Probe)
		}
	}
}

// TestFIFOSendsCarryIdsAndNoDelay: on a FIFO queue an enqueue deduplicates on the job id and
// groups by WithGroup's key (else the id); a successor deduplicates on the id and the message it
// replaces; no send carries a delay, and a wait for the not-before time is a hide whose
// receives do not count as lost deliveries.
func TestFIFOSendsCarryIdsAndNoDelay(t *testing.T) {
	c := testConfig()
	c.FIFO = true
	m := newMachine(t, c)
	step(t, m, Register{Kind: "mail"})
	rd := step(t, m, Enqueue{Now: t0, Jobs: []NewJob{
		{Kind: "mail", Target: "smtp", Payload: []byte("a")},
		{Kind: "mail", Target: "smtp", Group: "user-7", Due: t0.Add(time.Hour), Payload: []byte("b")},
	}})
	if len(rd.Sends) != 2 {
		t.Fatalf("sends %+v", rd.Sends)
	}
	for i, s := range rd.Sends {
		id := strconv.FormatUint(s.Attrs.ID, 10)
		group := []string{id, "user-7"}[i]
		if s.Message.DedupID != id || s.Message.GroupID != group || s.Message.Delay != 0 || !s.Deduplicated {
			t.Errorf("send %d: dedup %q group %q delay %v deduplicated %v; want %s, %s, 0, true", i, s.Message.DedupID, s.Message.GroupID, s.Message.Delay, s.Deduplicated, id, group)
		}
	}
	later := rd.Sends[1]
	in := core.Message{ID: "m9", Body: later.Message.Body, Attributes: later.Message.Attributes, ReceiveCount: 1}
	rd = step(t, m, Deliver{Now: t0.Add(time.Second), Receipt: "r", Message: in})
	if len(rd.Done) != 1 || rd.Done[0].Disposition != Hide || rd.Done[0].Visibility != time.Hour-time.Second {
		t.Fatalf("early FIFO delivery: %+v, want hidden until its not-before time", rd)
	}
	in.ReceiveCount = 2
	rd = step(t, m, Deliver{Now: t0.Add(time.Hour), Receipt: "r2", Message: in})
	if len(rd.Runs) != 1 || rd.Runs[0].Attempt != 1 {
		t.Fatalf("FIFO delivery at its time: %+v, want attempt 1", rd)
	}
	rd = step(t, m, AttemptDone{Receipt: "r2", Now: t0.Add(time.Hour), Outcome: Outcome{Result: Retryable, Err: "later"}})
	s := rd.Sends[0]
	if s.Attrs.Lost != 0 || s.Message.Delay != 0 || s.Message.DedupID != strconv.FormatUint(s.Attrs.ID, 10)+"-m9" || s.Message.GroupID != "user-7" {
		t.Errorf("FIFO retry %+v (lost %d), want no lost delivery, no delay, dedup id-m9, group user-7", s.Message, s.Attrs.Lost)
	}
}

// TestIDsAreDrawnAndRequired: New refuses a config without an id source; ids are never 0.
func TestIDsAreDrawnAndRequired(t *testing.T) {
	c := testConfig()
	c.IDs = nil
	if _, err := New(c); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "IDs") {
		t.Errorf("New without IDs = %v, want a refusal naming IDs", err)
	}
	c.IDs = rand.New(rand.NewSource(1))
	m := newMachine(t, c)
	seen := map[uint64]bool{}
	for range 1000 {
		id := m.newID()
		if id == 0 || id>>63 != 0 || seen[id] {
			t.Fatalf("id %d: zero, over 63 bits or repeated", id)
		}
		seen[id] = true
	}
}

func TestEnqueueFate(t *testing.T) {
	unknown := &core.TransportError{Class: core.Retryable, Op: "send", Err: core.ErrSendUnknown}
	refused := &core.TransportError{Class: core.Fatal, Op: "send", Err: errors.New("InvalidParameterValue")}
	fifo, standard := Send{Deduplicated: true}, Send{}
	for _, c := range []struct {
		name string
		s    Send
		err  error
		try  int
		want EnqueueFate
	}{
		{"stored", standard, nil, 0, EnqueueStored},
		{"standard, answer lost", standard, unknown, 0, EnqueueUnknown},
		{"FIFO, answer lost", fifo, unknown, 0, EnqueueAgain},
		{"FIFO, answer lost again", fifo, unknown, UnknownRetriesMax - 1, EnqueueAgain},
		{"FIFO, answer lost past the bound", fifo, unknown, UnknownRetriesMax, EnqueueUnknown},
		{"refused", fifo, refused, 0, EnqueueFailed},
		{"refused, standard", standard, refused, 0, EnqueueFailed},
	} {
		if got := c.s.Fate(c.err, c.try); got != c.want {
			t.Errorf("%s: fate %d, want %d", c.name, got, c.want)
		}
	}
}
