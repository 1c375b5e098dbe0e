package worker

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/lease"
	"github.com/sluicehq/sluice/sim/queue"
)

// A production driver can have bugs. Between the steps of a world of two machines (the world
// of world_test.go, with its faults), the driver makes the call a buggy driver would (a Step
// without a time, a reply to a call that is not in flight, a result for a handler that is not
// running or outside the outcome table, a receive reply naming a receipt twice, one already
// held or an empty one) and checks that the machine refuses it with the documented error and
// that nothing changed: its status, its wake time and every lease it holds.

// misuseView is what a probe compares before and after.
type misuseView struct {
	status Status
	wake   time.Time
	leases []lease.Lease
}

func viewOf(e *Machine) misuseView {
	v := misuseView{status: e.Status(), wake: e.WakeAt()}
	for _, r := range sortedReceipts(e) {
		if l, ok := e.Lease(r); ok {
			v.leases = append(v.leases, l)
		}
	}
	return v
}

func sortedReceipts(e *Machine) []string {
	rs := make([]string, 0, len(e.deliveries))
	for r := range e.deliveries {
		rs = append(rs, r)
	}
	slices.Sort(rs)
	return rs
}

// probeMisuse steps ev, which must be refused with want (or, when want is nil, an error
// saying what), and reports how it was not refused or what it changed.
func probeMisuse(e *Machine, ev Event, want error, what string) error {
	before := viewOf(e)
	err := e.Step(ev)
	refused := err != nil && (want == nil || errors.Is(err, want)) && (what == "" || strings.Contains(err.Error(), what))
	if !refused {
		return fmt.Errorf("the machine took the misuse %T %+v: error %v, want %v %q", ev, ev, err, want, what)
	}
	if after := viewOf(e); !reflect.DeepEqual(before, after) {
		return fmt.Errorf("the refused %T (%v) changed the machine: %+v, then %+v", ev, err, before, after)
	}
	return nil
}

// drawMisuse draws one misuse of e at now: its name, the event, and what refuses it. ok is
// false when the drawn misuse has nothing to aim at in e's state.
func drawMisuse(r *rand.Rand, e *Machine, now time.Time) (name string, ev Event, want error, what string, ok bool) {
	rs := sortedReceipts(e)
	switch r.Intn(6) {
	case 0:
		return "no time", Tick{}, nil, "without a time", true
	case 1:
		return "unknown receive", ReceiveDone{Call: CallID(1 << 40), Now: now}, ErrUnknownCall, "", true
	case 2:
		return "unknown call", CallDone{Call: lease.CallID(1 << 40), Now: now}, ErrUnknownCall, "", true
	case 3:
		// A result for a receipt whose handler is not running: unknown, waiting, or finished
		// (a second disposition).
		receipt := "no-such-receipt"
		if len(rs) > 0 && r.Intn(2) == 0 {
			receipt = rs[r.Intn(len(rs))]
			if d := e.deliveries[receipt]; d.state == running || d.state == cancelled {
				return "", nil, nil, "", false // a running handler: its result would be legitimate
			}
		}
		return "handler not running", HandlerDone{Receipt: receipt, Now: now, Result: Result{Outcome: Success}}, ErrUnknownHandler, "", true
	case 4:
		// An outcome outside the table for a running handler.
		for _, receipt := range rs {
			if e.deliveries[receipt].state == running {
				bad := []Outcome{0, Terminal + 1}[r.Intn(2)]
				return "outcome outside the table", HandlerDone{Receipt: receipt, Now: now, Result: Result{Outcome: bad}}, ErrBadResult, "", true
			}
		}
	case 5:
		// A reply to the receive in flight naming one receipt twice, one already held, or an
		// empty one.
		if e.recvCall == 0 {
			return "", nil, nil, "", false
		}
		m := core.Message{ID: "probe-m", Receipt: "probe-r", ReceiveCount: 1}
		msgs := []core.Message{m, m}
		switch {
		case len(rs) > 0 && r.Intn(2) == 0:
			m.Receipt = rs[r.Intn(len(rs))]
			if !e.Leased(m.Receipt) {
				return "", nil, nil, "", false
			}
			msgs = []core.Message{m}
		case r.Intn(4) == 0:
			m.Receipt = ""
			msgs = []core.Message{m}
		}
		return "bad receive reply", ReceiveDone{Call: e.recvCall, Now: now, Messages: msgs}, lease.ErrDuplicate, "", true
	}
	return "", nil, nil, "", false
}

// TestMisuseIsRefusedAndChangesNothing probes the machines of a faulty two-machine world
// every few hundred milliseconds of its time, and checks every kind of misuse was made.
func TestMisuseIsRefusedAndChangesNothing(t *testing.T) {
	made := map[string]int{}
	for seed := int64(1); seed <= 6; seed++ {
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		w := &world{t: t, rng: rand.New(rand.NewSource(seed)), now: start,
			q: queue.New(queue.Config{Name: "q", Epoch: start}, rand.New(rand.NewSource(-seed))), running: map[string]runningOn{}, faults: true}
		for k := range 30 {
			w.q.Send(start, fmt.Appendf(nil, "m%02d", k))
		}
		for i := range 2 {
			e, err := New(Config{Concurrency: 3, Prefetch: 2, Budget: 20, Rand: rand.New(rand.NewSource(seed*10 + int64(i)))})
			if err != nil {
				t.Fatal(err)
			}
			w.machines = append(w.machines, e)
			w.at(start, func() { w.step(i, Tick{Now: w.now}) })
		}
		r := rand.New(rand.NewSource(seed + 1000))
		var probe func()
		probe = func() {
			i := r.Intn(len(w.machines))
			if name, ev, want, what, ok := drawMisuse(r, w.machines[i], w.now); ok {
				if err := probeMisuse(w.machines[i], ev, want, what); err != nil {
					t.Fatalf("seed %d, machine %d at %s: %v", seed, i, w.now.Sub(start), err)
				}
				made[name]++
			}
			w.at(w.now.Add(time.Duration(1+r.Intn(500))*time.Millisecond), probe)
		}
		w.at(start, probe)
		w.run(start.Add(5 * time.Minute))
	}
	for _, name := range []string{"no time", "unknown receive", "unknown call", "handler not running", "outcome outside the table", "bad receive reply"} {
		if made[name] == 0 {
			t.Errorf("no probe made the misuse %q (made %v): the probes test nothing there", name, made)
		}
	}
}

// A probe that expects a legitimate call refused reports that the machine took it: the probe
// can fail.
func TestMisuseProbeFiresOnALegitimateCall(t *testing.T) {
	e, t0 := newTicked(t, Config{Concurrency: 1})
	if err := probeMisuse(e, Tick{Now: t0.Add(time.Second)}, ErrUnknownCall, ""); err == nil || !strings.Contains(err.Error(), "took the misuse") {
		t.Fatalf("probing a legitimate Tick as misuse: %v, want it reported as taken", err)
	}
}
