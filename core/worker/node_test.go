package worker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/lease"
)

// recorder is an Executor that writes down what it was asked, in order.
type recorder struct{ got []string }

func (r *recorder) CancelHandler(c CancelHandler) { r.got = append(r.got, "cancel "+c.Receipt) }
func (r *recorder) AbandonReceive(id CallID) {
	r.got = append(r.got, fmt.Sprint("abandon-receive ", id))
}
func (r *recorder) AbandonCall(id lease.CallID) {
	r.got = append(r.got, fmt.Sprint("abandon-call ", id))
}
func (r *recorder) ChangeVisibility(c lease.ChangeVisibility) {
	r.got = append(r.got, fmt.Sprint("change ", c.Call))
}
func (r *recorder) Delete(d lease.Delete)       { r.got = append(r.got, fmt.Sprint("delete ", d.Call)) }
func (r *recorder) Receive(rc Receive)          { r.got = append(r.got, fmt.Sprint("receive ", rc.Call)) }
func (r *recorder) StartHandler(s StartHandler) { r.got = append(r.got, "start "+s.Receipt) }

func TestPerformOrder(t *testing.T) {
	rd := Ready{
		Start:          []StartHandler{{Receipt: "s1"}, {Receipt: "s2"}},
		Receive:        &Receive{Call: 7},
		Deletes:        []lease.Delete{{Call: 5}},
		Changes:        []lease.ChangeVisibility{{Call: 3}, {Call: 4}},
		AbandonCalls:   []lease.CallID{2},
		AbandonReceive: 6,
		Cancel:         []CancelHandler{{Receipt: "c1"}},
	}
	var r recorder
	rd.Perform(&r)
	want := []string{"cancel c1", "abandon-receive 6", "abandon-call 2", "change 3", "change 4", "delete 5", "receive 7", "start s1", "start s2"}
	if diff := cmp.Diff(want, r.got); diff != "" {
		t.Fatalf("Perform order (-want +got):\n%s", diff)
	}
	if rd.Empty() || !(Ready{}).Empty() {
		t.Fatalf("Empty: %v for a full Ready, %v for the zero one", rd.Empty(), (Ready{}).Empty())
	}
}

var fatalErr = &core.TransportError{Class: core.Fatal, Op: "receive", Code: "AccessDenied", Err: errors.New("denied")}

// turn steps ev, reads Ready and advances, failing t on any misuse.
func turn(t *testing.T, n *Node, ev Event) (Ready, Next) {
	t.Helper()
	if err := n.Step(ev); err != nil {
		t.Fatalf("Step(%T): %v", ev, err)
	}
	rd := n.Ready()
	return rd, n.Advance()
}

// TestNodeExit: how each way of stopping ends (or does not end) the executor. Times are
// seconds from the epoch.
func TestNodeExit(t *testing.T) {
	at := func(s float64) time.Time { return epoch.Add(time.Duration(s * float64(time.Second))) }
	type step struct {
		ev   Event
		want Next
	}
	for _, tc := range []struct {
		name  string
		steps func(recv CallID) []step
	}{
		{"fatal receive ends at once when nothing runs", func(c CallID) []step {
			return []step{{ReceiveDone{Call: c, Now: at(1), Err: fatalErr}, Next{Exit: true, Err: fatalErr}}}
		}},
		{"retryable receive backs off", func(c CallID) []step {
			err := &core.TransportError{Class: core.Retryable, Op: "receive", Err: errors.New("503")}
			return []step{{ReceiveDone{Call: c, Now: at(1), Err: err}, Next{Wake: at(1.2)}}}
		}},
		{"unclassified receive error backs off", func(c CallID) []step {
			return []step{{ReceiveDone{Call: c, Now: at(1), Err: errors.New("reset")}, Next{Wake: at(1.2)}}}
		}},
		{"shutdown with nothing in flight but the receive", func(c CallID) []step {
			return []step{
				{Shutdown{Now: at(1)}, Next{}},
				{ReceiveDone{Call: c, Now: at(1.1), Err: errors.New("context canceled")}, Next{Exit: true}},
			}
		}},
		{"fatal receive waits for the running handler", func(c CallID) []step {
			msg := core.Message{ID: "m1", Receipt: "m1/1", ReceiveCount: 1}
			renew := at(1).Add(29 * time.Second / 3) // a third of what is left of the window
			return []step{
				{ReceiveDone{Call: c, Now: at(1), Messages: []core.Message{msg}}, Next{Wake: renew}},
				{ReceiveDone{Call: c + 1, Now: at(2), Err: fatalErr}, Next{Wake: renew}},
				{HandlerDone{Receipt: "m1/1", Now: at(3), Result: Result{Outcome: Retryable}}, Next{}},
				{CallDone{Call: 1, Now: at(3.1), Entries: []error{nil}}, Next{Exit: true, Err: fatalErr}},
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := NewNode(Config{Concurrency: 2})
			if err != nil {
				t.Fatal(err)
			}
			rd, next := turn(t, n, Tick{Now: at(0)})
			if rd.Receive == nil || next.Exit {
				t.Fatalf("first Tick: %+v, %+v; want a receive", rd, next)
			}
			for i, s := range tc.steps(rd.Receive.Call) {
				_, got := turn(t, n, s.ev)
				if diff := cmp.Diff(s.want, got, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
					t.Fatalf("step %d %T: Advance (-want +got):\n%s", i, s.ev, diff)
				}
				if err := n.CheckInvariants(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestNodeMisuse: the Node refuses a Step between Ready and Advance and after the exit, and
// the refusal changes nothing.
func TestNodeMisuse(t *testing.T) {
	n, err := NewNode(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Step(Tick{Now: epoch}); err != nil {
		t.Fatal(err)
	}
	rd := n.Ready()
	before := n.Status()
	if err := n.Step(ReceiveDone{Call: rd.Receive.Call, Now: epoch.Add(time.Second)}); !errors.Is(err, ErrNotAdvanced) {
		t.Fatalf("Step before Advance: %v, want ErrNotAdvanced", err)
	}
	if diff := cmp.Diff(before, n.Status()); diff != "" {
		t.Fatalf("a refused Step changed the Status (-before +after):\n%s", diff)
	}
	mustPanic(t, "Ready twice", func() { n.Ready() })
	n.Advance()
	mustPanic(t, "Advance twice", func() { n.Advance() })
	_, next := turn(t, n, ReceiveDone{Call: rd.Receive.Call, Now: epoch.Add(time.Second), Err: fatalErr})
	if !next.Exit || next.Err != fatalErr {
		t.Fatalf("after a fatal receive: %+v, want the exit with its error", next)
	}
	if err := n.Step(Tick{Now: epoch.Add(2 * time.Second)}); !errors.Is(err, ErrExited) {
		t.Fatalf("Step after the exit: %v, want ErrExited", err)
	}
	mustPanic(t, "Ready after the exit", func() { n.Ready() })
}

func mustPanic(t *testing.T, what string, fn func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatalf("%s did not panic", what)
		}
	}()
	fn()
}
