package sluice

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestInspectReadsFlowFromTheJournal: Get and Inspect report a job's flow key, sequence and
// hold; Inspect also reports the paused kinds and why a waiting job waits where the journal
// alone decides it (a paused kind, a sequence held by a dead job), with the runner closed.
func TestInspectReadsFlowFromTheJournal(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	r, err := New(dir, Config{Capacity: 2, Policy: Policy{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	mail, err := Register(r, "mail", JSON[string](), func(context.Context, Job[string]) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	migrate, err := Register(r, "migrate", JSON[string](), func(_ context.Context, j Job[string]) error {
		if j.Payload == "step 1" {
			return errors.New("lock timeout")
		}
		return nil
	}, WithHoldOnDead())
	if err != nil {
		t.Fatal(err)
	}
	if err := mail.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	m1, err := mail.Enqueue(ctx, time.Time{}, "smtp", "hi", WithKey("acme"))
	if err != nil {
		t.Fatal(err)
	}
	s1, err := migrate.Enqueue(ctx, time.Time{}, "db", "step 1", WithGroup("schema"))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := migrate.Enqueue(ctx, time.Time{}, "db", "step 2", WithGroup("schema"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if j, err := mail.Get(ctx, m1); err != nil || j.Key != "acme" || j.Group != "" {
		t.Fatalf("Get(%d) = key %q, group %q, %v; want key acme", m1, j.Key, j.Group, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	in, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	type flowOf struct {
		State      State
		Key, Group string
		HoldOnDead bool
		Blocked    string
	}
	got := map[uint64]flowOf{}
	for _, j := range in.Jobs {
		got[j.ID] = flowOf{j.State, j.Key, j.Group, j.HoldOnDead, j.Blocked}
	}
	want := map[uint64]flowOf{
		m1: {StatePending, "acme", "", false, "its kind is paused"},
		s1: {StateDead, "", "schema", true, ""},
		s2: {StatePending, "", "schema", true, fmt.Sprintf(`sequence "schema" is held by dead job %d (retry or cancel it)`, s1)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Inspect's jobs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"mail"}, in.Paused); diff != "" {
		t.Errorf("Inspect's paused kinds (-want +got):\n%s", diff)
	}
}
