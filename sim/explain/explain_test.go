package explain

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/sim"
)

// A count's ladder lists lo..lo+3, then fractions of the current value, ascending, without
// repeats, all below the current value.
func TestLadder(t *testing.T) {
	for _, c := range []struct {
		lo, cur int64
		want    []int64
	}{
		{0, 2, []int64{0, 1}},
		{1, 64, []int64{1, 2, 3, 4, 8, 16, 32, 48, 63}},
		{1000, 41000, []int64{1000, 1001, 1002, 1003, 2562, 5125, 10250, 20500, 30750, 40999}},
		{5, 5, nil},
	} {
		if diff := cmp.Diff(c.want, ladder(c.lo, c.cur)); diff != "" {
			t.Errorf("ladder(%d, %d) (-want +got):\n%s", c.lo, c.cur, diff)
		}
	}
}

// A violation naming a job and a node focuses on the job's events (by id, token and batch
// range) and on the node's, each cut to the last focusLinesMax.
func TestFocusOf(t *testing.T) {
	v := &sim.Violation{Invariant: sim.InvNoLostAck, Detail: "node/1: job 7 was acknowledged and is gone"}
	lines := []string{
		"1.000s node/1 enqueue id=7 t1",
		"1.000s node/2 enqueue id=7 t1",
		"2.000s node/1 start 7#1 t1 for 5ms -> failed",
		"3.000s node/1 commit: enqueued ids=5..9",
		"4.000s node/1 enqueue id=17 t2",
		"5.000s worker/1 handle q/1/1 for 1s -> success",
	}
	want := []sim.Focus{
		{Entity: "job 7 on node/1", Lines: []string{lines[0], lines[2], lines[3]}},
		{Entity: "node/1", Lines: []string{lines[0], lines[2], lines[3], lines[4]}},
	}
	if diff := cmp.Diff(want, focusOf(v, lines)); diff != "" {
		t.Errorf("focus (-want +got):\n%s", diff)
	}
}

// A timeline drawn from a few events has a lane per node, target and worker, a lease bar
// closed by its delete with a renewal tick, and a crash mark.
func TestRenderTimelineFromEvents(t *testing.T) {
	evs := []tlEvent{
		{time.Second, "node/1", "start 5#1 t1 for 639ms -> failed"},
		{2 * time.Second, "worker/1", "received q/3/1"},
		{3 * time.Second, "worker/1", "renew q/3/1=30s"},
		{4 * time.Second, "worker/1", "delete q/3/1"},
		{5 * time.Second, "node/1", "CRASH at disk op 3"},
	}
	res := &sim.Result{End: 6 * time.Second}
	var b bytes.Buffer
	if err := renderTimeline(&b, res, evs); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{`data-lane="node/1"`, `data-lane="node/1 breaker t1"`, `data-lane="worker/1"`,
		`class="bar att bad"`, `class="bar lease delete"`, `class="tick renew"`, `class="mark crash"`} {
		if !strings.Contains(page, want) {
			t.Errorf("timeline lacks %s:\n%s", want, page)
		}
	}
}
