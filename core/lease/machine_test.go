package lease

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/core"
)

// mReceipt is the plain model of one receipt: what the machine was told and what it sent.
type mReceipt struct {
	t0        time.Time
	w, c      time.Duration
	deadline  time.Time // bought by the initial grant or the last successful renewal
	call      CallID    // renewal in flight
	sentAt    time.Time
	requested time.Duration
	attempt   int
	disp      *Disposition // disposition began
	dispCall  CallID       // disposition call sent
	dattempt  int          // failed disposition sends
	disposing bool         // a disposition call went out (maybe to be retried)
	hidden    time.Time    // a release retries only before this (its first call's effect)
	dropped   bool
	ended     bool
}

// stop is the model's stop point: the deadline minus the default stop margin.
func (r *mReceipt) stop() time.Time { return r.deadline.Add(-StopMarginFor(r.w)) }

type mCall struct {
	purpose  Purpose
	receipts []string
}

type leaseModel struct {
	m     *Machine
	now   time.Time
	rs    map[string]*mReceipt
	calls map[CallID]mCall
	n     int

	// set by an action for the checks of its step
	expectDrop map[string]DropReason
	justify    func(key string, r *mReceipt, why DropReason) bool
	replied    map[string]bool // disposition replies in this step
}

func (lm *leaseModel) live(key string) bool {
	r := lm.rs[key]
	return r != nil && !r.dropped && !r.ended && r.dispCall == 0 && !r.disposing
}

func (lm *leaseModel) sortedKeys(pred func(string, *mReceipt) bool) []string {
	var ks []string
	for k, r := range lm.rs {
		if pred(k, r) {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, func(a, b string) int {
		var x, y int
		fmt.Sscanf(a, "r%d", &x)
		fmt.Sscanf(b, "r%d", &y)
		return cmp.Compare(x, y)
	})
	return ks
}

func (lm *leaseModel) callIDs(p Purpose) []CallID {
	var ids []CallID
	for id, c := range lm.calls {
		if c.purpose == p {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func drawLatency(t *rapid.T, label string) time.Duration {
	// Mostly short, sometimes longer than a whole window.
	if rapid.IntRange(0, 9).Draw(t, label+"Slow") == 0 {
		return time.Duration(rapid.Int64Range(0, 70_000).Draw(t, label+"Ms")) * time.Millisecond
	}
	return time.Duration(rapid.Int64Range(0, 1500).Draw(t, label+"Ms")) * time.Millisecond
}

var classes = []string{"ok", "retryable", "gone", "fatal"}

func errOf(c string) error {
	switch c {
	case "retryable":
		return &core.TransportError{Class: core.Retryable, Op: "change-visibility", Err: errors.New("throttled")}
	case "gone":
		return &core.TransportError{Class: core.Gone, Op: "change-visibility", Err: errors.New("not in flight")}
	case "fatal":
		return &core.TransportError{Class: core.Fatal, Op: "change-visibility", Err: errors.New("denied")}
	}
	return nil
}

// step feeds ev and checks the step's effects against the model.
func (lm *leaseModel) step(t *rapid.T, ev Event, now time.Time) {
	if err := lm.m.Step(ev); err != nil {
		t.Fatalf("step %T: %v", ev, err)
	}
	lm.now = now
	lm.check(t, lm.m.Ready())
}

func (lm *leaseModel) check(t *rapid.T, rd Ready) {
	now := lm.now
	if got := machineNow(lm.m); !got.Equal(now) {
		t.Fatalf("machine time %v, model %v", got, now)
	}
	// Drops: each justified by a rule, each predicted one present, in this same step.
	cancelled := map[string]bool{}
	for _, c := range rd.Cancel {
		r := lm.rs[c.Receipt]
		if r == nil || r.dropped || r.ended || r.dispCall != 0 {
			t.Fatalf("cancel for %s which is not held", c.Receipt)
		}
		if want, ok := lm.expectDrop[c.Receipt]; ok && want != c.Reason {
			t.Fatalf("%s dropped as %v, want %v", c.Receipt, c.Reason, want)
		}
		if _, ok := lm.expectDrop[c.Receipt]; !ok && !lm.justified(c.Receipt, r, c.Reason) {
			t.Fatalf("%s dropped as %v at %v without cause (deadline %v, attempt %d)", c.Receipt, c.Reason, Offset(now, epoch), Offset(r.deadline, epoch), r.attempt)
		}
		r.dropped = true
		r.call = 0
		cancelled[c.Receipt] = true
	}
	for k, why := range lm.expectDrop {
		if !cancelled[k] {
			t.Fatalf("%s should have been dropped (%v) in this step", k, why)
		}
	}
	for _, c := range rd.Changes {
		if len(c.Entries) == 0 || len(c.Entries) > core.BatchMax {
			t.Fatalf("call %d with %d entries", c.Call, len(c.Entries))
		}
		mc := mCall{purpose: c.Purpose}
		for _, e := range c.Entries {
			r := lm.rs[e.Receipt]
			mc.receipts = append(mc.receipts, e.Receipt)
			if c.Purpose == Disposal {
				lm.dispatched(t, e.Receipt, c.Call)
				want := r.disp.After
				if r.disp.Kind == TerminalBackoff {
					want = TerminalBackoffDuration
				}
				want = (want + time.Second - 1).Truncate(time.Second)
				want = min(want, max(0, r.t0.Add(r.c).Sub(now).Truncate(time.Second)))
				if e.Timeout != want {
					t.Fatalf("%s released with %v, want %v", e.Receipt, e.Timeout, want)
				}
				if r.hidden.IsZero() {
					r.hidden = now.Add(e.Timeout)
				}
				if c.Deadline.After(r.stop()) || !c.Deadline.After(now) {
					t.Fatalf("disposal call %d may run until %v; %s stops at %v", c.Call, Offset(c.Deadline, epoch), e.Receipt, Offset(r.stop(), epoch))
				}
				continue
			}
			// Renewal rules.
			if r == nil || !lm.live(e.Receipt) || r.disp != nil {
				t.Fatalf("renewal of %s after its disposition began or its drop", e.Receipt)
			}
			if r.call != 0 {
				t.Fatalf("renewal of %s while call %d is in flight", e.Receipt, r.call)
			}
			req, ok := Request(r.t0, r.w, r.c, now)
			if !ok || e.Timeout != req {
				t.Fatalf("%s asked %v at %v, request(now) = %v %v", e.Receipt, e.Timeout, Offset(now, epoch), req, ok)
			}
			if r.t0.Add(r.c).Sub(now) < time.Second {
				t.Fatalf("%s renewed with under 1 s left", e.Receipt)
			}
			if !now.Before(RetryUntil(r.w, r.deadline)) {
				t.Fatalf("%s renewed at %v, at or after retryUntil %v", e.Receipt, Offset(now, epoch), Offset(RetryUntil(r.w, r.deadline), epoch))
			}
			r.call, r.sentAt, r.requested = c.Call, now, e.Timeout
			if c.Deadline.After(RetryUntil(r.w, r.deadline)) {
				t.Fatalf("renewal call %d may run until %v, past %s's retryUntil %v", c.Call,
					Offset(c.Deadline, epoch), e.Receipt, Offset(RetryUntil(r.w, r.deadline), epoch))
			}
		}
		lm.calls[c.Call] = mc
	}
	for _, d := range rd.Deletes {
		if len(d.Receipts) == 0 || len(d.Receipts) > core.BatchMax {
			t.Fatalf("delete call %d with %d entries", d.Call, len(d.Receipts))
		}
		for _, k := range d.Receipts {
			lm.dispatched(t, k, d.Call)
			if r := lm.rs[k]; d.Deadline.After(r.stop()) || !d.Deadline.After(now) {
				t.Fatalf("delete call %d may run until %v; %s stops at %v", d.Call, Offset(d.Deadline, epoch), k, Offset(r.stop(), epoch))
			}
			if lm.rs[k].disp.Kind != Ack {
				t.Fatalf("%s deleted with disposition %v", k, lm.rs[k].disp.Kind)
			}
		}
		lm.calls[d.Call] = mCall{purpose: Disposal, receipts: d.Receipts}
	}
	for _, e := range rd.Ended {
		r := lm.rs[e.Receipt]
		late := r.disposing && r.dispCall == 0 && !now.Before(RetryUntil(r.w, r.deadline))
		if !(lm.replied[e.Receipt] || late || (r.disp != nil && r.disp.Kind == Abandon)) || r.ended {
			t.Fatalf("ended %s without its disposition reply", e.Receipt)
		}
		r.ended = true
		r.call = 0
	}
	for k := range lm.replied {
		if !lm.rs[k].ended {
			t.Fatalf("%s's disposition reply did not end it", k)
		}
	}
	lm.checkHeld(t)
	lm.expectDrop, lm.justify, lm.replied = nil, nil, nil
}

// checkHeld is the state part of Check: the machine holds exactly the model's live receipts,
// none past the deadline its last successful renewal bought, and its invariants hold.
func (lm *leaseModel) checkHeld(t *rapid.T) {
	now := lm.now
	for k, r := range lm.rs {
		held := lm.m.Held(k)
		if held != lm.live(k) {
			t.Fatalf("%s: machine holds %v, model %v", k, held, lm.live(k))
		}
		if _, ok := lm.m.Lease(k); ok != lm.m.Knows(k) {
			t.Fatalf("%s: Lease finds it %v, Knows %v", k, ok, lm.m.Knows(k))
		}
		if !held {
			continue
		}
		if !now.Before(r.stop()) {
			t.Fatalf("%s held at %v past its stop point %v", k, Offset(now, epoch), Offset(r.stop(), epoch))
		}
		l, _ := lm.m.Lease(k)
		if !l.Deadline.Equal(r.deadline) {
			t.Fatalf("%s deadline %v, model %v", k, Offset(l.Deadline, epoch), Offset(r.deadline, epoch))
		}
		if l.Phase == "held" && !l.Next.Before(l.Deadline) {
			t.Fatalf("%s next action %v not before its deadline", k, Offset(l.Next, epoch))
		}
	}
	if err := lm.m.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

func (lm *leaseModel) dispatched(t *rapid.T, k string, call CallID) {
	r := lm.rs[k]
	if r == nil || r.disp == nil || r.dropped || r.ended {
		t.Fatalf("disposition call for %s which has no live disposition", k)
	}
	if r.dispCall != 0 {
		t.Fatalf("second disposition call for %s", k)
	}
	if r.call != 0 {
		t.Fatalf("disposition of %s while renewal %d is in flight", k, r.call)
	}
	r.dispCall = call
	r.disposing = true
}

// justified says whether a drop the action did not predict follows from a timer rule.
func (lm *leaseModel) justified(k string, r *mReceipt, why DropReason) bool {
	now := lm.now
	if lm.justify != nil && lm.justify(k, r, why) {
		return true
	}
	switch why {
	case DropExpired:
		return !now.Before(r.stop())
	case DropMargin:
		return r.call == 0 && !now.Before(RetryUntil(r.w, r.deadline))
	case DropCeiling:
		return r.call == 0 && (r.t0.Add(r.c).Sub(now) < time.Second || !now.Before(RetryUntil(r.w, r.deadline)))
	}
	return false
}

func TestLeaseMachineKeepsLeaseRules(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lm := &leaseModel{
			m:     mustNew(Config{}),
			now:   epoch,
			rs:    map[string]*mReceipt{},
			calls: map[CallID]mCall{},
		}
		t.Repeat(map[string]func(*rapid.T){
			// Check, after every action. Each action also checks the effects of its own step
			// (drops in the same step, what each call names and asks for) as it steps.
			"": lm.checkHeld,
			"receive": func(t *rapid.T) {
				if len(lm.sortedKeys(func(k string, r *mReceipt) bool { return lm.live(k) })) >= 40 {
					t.Skip("enough held")
				}
				n := rapid.IntRange(1, 10).Draw(t, "n")
				w := rapid.SampledFrom([]time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second}).Draw(t, "window")
				c := rapid.SampledFrom([]time.Duration{w, 3 * w, 100 * time.Second, 12 * time.Hour}).Draw(t, "ceiling")
				c = max(c, w)
				stamp := lm.now
				at := stamp.Add(drawLatency(t, "receiveLatency"))
				ev := Received{Now: at, Stamp: stamp, Window: w, Ceiling: c}
				lm.expectDrop = map[string]DropReason{}
				for range n {
					lm.n++
					k := fmt.Sprintf("r%d", lm.n)
					ev.Messages = append(ev.Messages, core.Message{ID: "m" + k, Receipt: k, ReceiveCount: 1})
					lm.rs[k] = &mReceipt{t0: stamp, w: w, c: c, deadline: stamp.Add(w)}
					if !at.Before(stamp.Add(w - StopMarginFor(w))) {
						lm.expectDrop[k] = DropLate
					}
				}
				lm.step(t, ev, at)
			},
			"advance": func(t *rapid.T) {
				now := lm.now.Add(time.Duration(rapid.Int64Range(1, 20_000).Draw(t, "advanceMs")) * time.Millisecond)
				lm.step(t, Tick{Now: now}, now)
			},
			"wake": func(t *rapid.T) {
				wake := lm.m.WakeAt()
				if wake.IsZero() || wake.Before(lm.now) {
					t.Skip("no timer")
				}
				lm.step(t, Tick{Now: wake}, wake)
			},
			"replyRenewal": func(t *rapid.T) {
				ids := lm.callIDs(Renewal)
				if len(ids) == 0 {
					t.Skip("no renewal in flight")
				}
				id := rapid.SampledFrom(ids).Draw(t, "call")
				c := lm.calls[id]
				at := lm.now.Add(drawLatency(t, "replyLatency"))
				ev := RenewResult{Call: id, Now: at}
				cls := make([]string, len(c.receipts))
				if rapid.IntRange(0, 4).Draw(t, "wholeCall") == 0 {
					cl := rapid.SampledFrom(classes[1:]).Draw(t, "wholeClass")
					ev.Err = errOf(cl)
					for i := range cls {
						cls[i] = cl
					}
				} else {
					for i := range cls {
						cls[i] = rapid.SampledFrom(classes).Draw(t, "class")
						ev.Entries = append(ev.Entries, errOf(cls[i]))
					}
				}
				delete(lm.calls, id)
				lm.expectDrop = map[string]DropReason{}
				margin := map[string]bool{}
				for i, k := range c.receipts {
					r := lm.rs[k]
					if r.dropped || r.ended || r.call != id {
						continue // dropped meanwhile: the reply is stale
					}
					// Timers up to at run after the reply; a reply is applied at its own time.
					switch {
					case cls[i] == "gone":
						lm.expectDrop[k] = DropGone
					case cls[i] == "fatal":
						lm.expectDrop[k] = DropFatal
					case cls[i] == "ok" && (!at.Before(r.stop()) || !at.Before(DeadlineAfter(r.sentAt, r.requested).Add(-StopMarginFor(r.w)))):
						lm.expectDrop[k] = DropLate
					case cls[i] == "ok":
						r.deadline = DeadlineAfter(r.sentAt, r.requested)
						r.attempt = 0
					case r.disp == nil:
						pace := PacingDefault()[min(r.attempt, 2)]
						r.attempt++
						if !at.Add(pace).Before(RetryUntil(r.w, r.deadline)) {
							margin[k] = true
						}
					}
					r.call = 0
				}
				lm.justify = func(k string, r *mReceipt, why DropReason) bool {
					return margin[k] && (why == DropMargin || why == DropCeiling)
				}
				lm.step(t, ev, maxTime(lm.now, at))
				for k := range margin {
					if !lm.rs[k].dropped {
						t.Fatalf("%s not dropped at the margin", k)
					}
				}
			},
			"dispose": func(t *rapid.T) {
				keys := lm.sortedKeys(func(k string, r *mReceipt) bool { return lm.live(k) && r.disp == nil })
				if len(keys) == 0 {
					t.Skip("nothing to dispose")
				}
				k := rapid.SampledFrom(keys).Draw(t, "receipt")
				kind := rapid.SampledFrom([]Kind{Ack, Release, TerminalBackoff, Abandon}).Draw(t, "kind")
				after := time.Duration(rapid.Int64Range(0, 400_000).Draw(t, "afterMs")) * time.Millisecond
				at := lm.now.Add(time.Duration(rapid.Int64Range(0, 3000).Draw(t, "disposeDelayMs")) * time.Millisecond)
				r := lm.rs[k]
				d := Disposition{Kind: kind, After: after}
				r.disp = &d
				lm.expectDrop = map[string]DropReason{}
				if !at.Before(r.stop()) {
					lm.expectDrop[k] = DropExpired
				}
				lm.step(t, Dispose{Now: at, Receipt: k, Disposition: d}, at)
				if r.dropped {
					return
				}
				if kind == Abandon && !r.ended {
					t.Fatalf("abandoned %s did not end at once", k)
				}
				if kind != Abandon && r.call == 0 && r.dispCall == 0 {
					t.Fatalf("disposition of %s with no renewal in flight did not go out", k)
				}
			},
			"disposeAgain": func(t *rapid.T) {
				keys := lm.sortedKeys(func(k string, r *mReceipt) bool { return r.disp != nil && !r.ended && !r.dropped })
				if len(keys) == 0 {
					t.Skip("no disposition under way")
				}
				k := rapid.SampledFrom(keys).Draw(t, "receipt")
				err := lm.m.Step(Dispose{Now: lm.now, Receipt: k, Disposition: Disposition{Kind: Ack}})
				if !errors.Is(err, ErrDisposed) {
					t.Fatalf("second disposition of %s: %v, want ErrDisposed", k, err)
				}
				lm.check(t, lm.m.Ready())
			},
			"replyDisposal": func(t *rapid.T) {
				ids := lm.callIDs(Disposal)
				if len(ids) == 0 {
					t.Skip("no disposition in flight")
				}
				id := rapid.SampledFrom(ids).Draw(t, "call")
				c := lm.calls[id]
				delete(lm.calls, id)
				at := lm.now.Add(drawLatency(t, "disposeLatency"))
				ev := DisposeResult{Call: id, Now: at}
				lm.replied = map[string]bool{}
				for _, k := range c.receipts {
					cl := rapid.SampledFrom(classes).Draw(t, "class")
					ev.Entries = append(ev.Entries, errOf(cl))
					r := lm.rs[k]
					pace := PacingDefault()[min(r.dattempt, 2)]
					safe := r.disp.Kind == Ack || at.Add(pace).Before(r.hidden)
					if cl == "retryable" && safe && at.Add(pace).Before(RetryUntil(r.w, r.deadline)) {
						// Retried later with the renewal pacing: not ended yet.
						r.dispCall = 0
						r.dattempt++
						continue
					}
					lm.replied[k] = true
				}
				lm.step(t, ev, maxTime(lm.now, at))
			},
			"shutdown": func(t *rapid.T) {
				lm.expectDrop = map[string]DropReason{}
				for _, k := range lm.sortedKeys(func(k string, r *mReceipt) bool { return lm.live(k) && r.disp == nil }) {
					lm.expectDrop[k] = DropShutdown
				}
				lm.step(t, Shutdown{Now: lm.now}, lm.now)
			},
		})
	})
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
