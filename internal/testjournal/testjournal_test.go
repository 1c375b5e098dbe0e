package testjournal_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testjournal"
)

type row struct {
	ID              uint64
	Payload, Target string
	State           sluice.State
	Reason          sluice.Reason
	LastErr         string
}

// TestClosedHoldsTheDocumentedJobs: the directory holds the five jobs of the package doc,
// and Reopen takes it back with the pending job still pending.
func TestClosedHoldsTheDocumentedJobs(t *testing.T) {
	dir := testjournal.Closed(t)
	in, err := sluice.Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []row
	for _, j := range in.Jobs {
		got = append(got, row{j.ID, string(j.Payload), j.Target, j.State, j.Reason, j.LastErr})
	}
	want := []row{
		{1, `"ok-1"`, "a.example", sluice.StateSucceeded, "", ""},
		{2, `"bad-1"`, "a.example", sluice.StateDead, sluice.ReasonPermanent, "smtp 550: mailbox unavailable"},
		{3, `"ok-2"`, "b.example", sluice.StateSucceeded, "", ""},
		{4, `"later"`, "a.example", sluice.StatePending, "", ""},
		{5, `"bad-2"`, "b.example", sluice.StateDead, sluice.ReasonPermanent, "smtp 550: mailbox unavailable"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	r := testjournal.Reopen(t, dir)
	if j, err := r.Get(context.Background(), 4); err != nil || j.State != sluice.StatePending || j.Payload != "later" {
		t.Errorf("job 4 after Reopen = %+v, %v; want the pending \"later\"", j, err)
	}
}
