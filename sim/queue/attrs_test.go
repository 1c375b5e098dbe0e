package queue

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/core"
)

// TestAttributesKeptThroughSendReceiveAndRedrive: a message's attributes come back with every
// delivery and with its dead-letter copy, and a sender's later write to its map reaches neither.
func TestAttributesKeptThroughSendReceiveAndRedrive(t *testing.T) {
	dlq := New(Config{Name: "dlq"}, nil)
	q := New(Config{Name: "q", MaxReceiveCount: 1, DeadLetter: dlq}, nil)
	now := Epoch
	attrs := map[string]string{"sluice-kind": "k", "sluice-target": "t"}
	want := map[string]string{"sluice-kind": "k", "sluice-target": "t"}
	if errs, err := q.Sender(func() time.Time { return now }).SendBatch(context.Background(), []core.Outgoing{{Body: []byte("x"), Attributes: attrs}}); err != nil || errs[0] != nil {
		t.Fatal(errs, err)
	}
	attrs["sluice-kind"] = "changed"
	got := q.Receive(now, 1, time.Second)
	if len(got) != 1 {
		t.Fatalf("received %d messages, want 1", len(got))
	}
	if diff := cmp.Diff(want, got[0].Attributes); diff != "" {
		t.Errorf("first delivery (-want +got):\n%s", diff)
	}
	now = now.Add(2 * time.Second)
	if got := q.Receive(now, 1, time.Second); len(got) != 0 {
		t.Fatalf("past MaxReceiveCount: received %d, want a redrive", len(got))
	}
	dead := dlq.Receive(now, 1, time.Second)
	if len(dead) != 1 {
		t.Fatalf("dead-letter queue holds %d messages, want 1", len(dead))
	}
	if diff := cmp.Diff(want, dead[0].Attributes); diff != "" {
		t.Errorf("dead-letter copy (-want +got):\n%s", diff)
	}
	if bare := q.SendDelayed(now, []byte("y"), 0); bare == "" {
		t.Fatal("no id")
	}
	if got := q.Receive(now, 1, time.Second); len(got) != 1 || got[0].Attributes != nil {
		t.Errorf("message sent without attributes: %+v, want one with nil attributes", got)
	}
}
