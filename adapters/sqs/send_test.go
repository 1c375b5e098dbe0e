package sqs_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/adapters/sqs"
	"github.com/sluicehq/sluice/core"
)

// TestSenderOnFauxqs sends one message (SendMessage) and a batch of ten (SendMessageBatch),
// one of them delayed, and receives exactly the nine undelayed bodies plus the first; an
// empty or oversized batch is refused without a call.
func TestSenderOnFauxqs(t *testing.T) {
	_, c, url := newQueue(t)
	ctx := context.Background()
	snd := newSender(t, c, url)
	if errs, err := snd.SendBatch(ctx, []core.Outgoing{{Body: []byte("one")}}); err != nil || errs[0] != nil {
		t.Fatalf("send one: %v %v", errs, err)
	}
	var batch []core.Outgoing
	for i := range 10 {
		m := core.Outgoing{Body: []byte(fmt.Sprint("b", i))}
		if i == 9 {
			m.Delay = 60 * time.Second
		}
		batch = append(batch, m)
	}
	errs, err := snd.SendBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Errorf("entry %d: %v", i, e)
		}
	}
	for _, n := range []int{0, 11} {
		if _, err := snd.SendBatch(ctx, make([]core.Outgoing, n)); core.ClassOf(err) != core.Fatal {
			t.Errorf("batch of %d: %v, want a fatal refusal", n, err)
		}
	}
	tr := newTransport(t, c, url)
	var got []string
	for range 5 {
		msgs, err := tr.Receive(ctx, 10, time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			got = append(got, string(m.Body))
		}
	}
	sort.Strings(got)
	want := []string{"b0", "b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "one"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("received (-want +got):\n%s", diff)
	}
	if _, err := sqs.NewSender(c, sqs.Config{QueueURL: "jobs"}); err == nil {
		t.Error("NewSender accepted a queue name for a URL")
	}
}

// TestAttributesRoundTripOnFauxqs sends attributes with SendMessage and SendMessageBatch and
// receives them as sent; a message sent without attributes is received with none.
func TestAttributesRoundTripOnFauxqs(t *testing.T) {
	_, c, url := newQueue(t)
	ctx := context.Background()
	snd := newSender(t, c, url)
	want := map[string]map[string]string{
		"one":  {"sluice-kind": "email", "sluice-target": "smtp.example.com"},
		"b0":   {"sluice-attempt": "2", "sluice-opts": `{"m":5}`},
		"bare": nil,
	}
	if errs, err := snd.SendBatch(ctx, []core.Outgoing{{Body: []byte("one"), Attributes: want["one"]}}); err != nil || errs[0] != nil {
		t.Fatalf("send one: %v %v", errs, err)
	}
	errs, err := snd.SendBatch(ctx, []core.Outgoing{{Body: []byte("b0"), Attributes: want["b0"]}, {Body: []byte("bare")}})
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("send batch: %v %v", errs, err)
	}
	tr := newTransport(t, c, url)
	got := map[string]map[string]string{}
	for range 5 {
		msgs, err := tr.Receive(ctx, 10, time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			got[string(m.Body)] = m.Attributes
		}
		if len(got) == len(want) {
			break
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attributes by body (-want +got):\n%s", diff)
	}
}
