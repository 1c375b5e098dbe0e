package sluice

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sim/disk"
)

// TestListFilterIsBounded: List refuses a state list longer than the states that exist (a
// visitor's 200,000 repeated names made the runner check every name against every job), a
// value that is no state, and names over NameMax; a page is read in chunks and still returns
// every match in order, payloads omitted when asked.
func TestListFilterIsBounded(t *testing.T) {
	k := openOn(t, disk.New(1), Config{}, succeedString)
	defer k.Close()
	ctx := context.Background()
	long := strings.Repeat("k", NameMax+1)
	many := make([]State, 200_000)
	for i := range many {
		many[i] = StateDead
	}
	for _, f := range []ListFilter{
		{States: many},
		{States: []State{StateDead, 0}},
		{States: []State{StateCancelled + 1}},
		{Kind: long},
		{Target: long},
	} {
		if _, err := k.Runner.List(ctx, f); !errors.Is(err, ErrInvalidJob) || len(err.Error()) > 200 {
			t.Errorf("List(%d states, kind %d bytes) = %v; want a short ErrInvalidJob", len(f.States), len(f.Kind), err)
		}
	}
	jobs := make([]NewJob[string], 5000)
	for i := range jobs {
		jobs[i] = NewJob[string]{Due: time.Now().Add(time.Hour), Target: "t", Payload: "p"}
		if i%1000 == 999 {
			jobs[i].Target = "rare"
		}
	}
	if _, err := k.EnqueueMany(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	p, err := k.Runner.List(ctx, ListFilter{Target: "rare", Limit: 10, OmitPayload: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, j := range p.Jobs {
		ids = append(ids, j.ID)
		if j.Payload != nil {
			t.Errorf("job %d: payload %q with OmitPayload", j.ID, j.Payload)
		}
	}
	if len(ids) != 5 || ids[0] != 1000 || ids[4] != 5000 || p.More {
		t.Errorf("rare jobs across chunks = %v (more %v), want 1000, 2000, ... 5000", ids, p.More)
	}
	typed, err := k.List(ctx, ListFilter{Target: "rare", Limit: 2, OmitPayload: true})
	if err != nil || len(typed.Jobs) != 2 || !typed.More || typed.Next != 2000 {
		t.Errorf("Kind.List with OmitPayload = %d jobs, more %v, next %d, %v", len(typed.Jobs), typed.More, typed.Next, err)
	}
}
