package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/lease"
)

// TestDispositionTable pins docs/worker.md: each handler result, with and without a redrive
// policy, becomes one disposition.
func TestDispositionTable(t *testing.T) {
	seven := 7 * time.Second
	for _, tc := range []struct {
		name    string
		redrive int
		count   int
		result  Result
		want    lease.Disposition
	}{
		{"success acks", 0, 1, Result{Outcome: Success}, lease.Disposition{Kind: lease.Ack}},
		{"permanent acks without redrive", 0, 1, Result{Outcome: Permanent}, lease.Disposition{Kind: lease.Ack}},
		{"permanent hides for redrive", 4, 1, Result{Outcome: Permanent}, lease.Disposition{Kind: lease.TerminalBackoff}},
		{"retryable, first delivery: Delay(0)", 0, 1, Result{Outcome: Retryable}, lease.Disposition{Kind: lease.Release, After: time.Second}},
		{"retryable, third delivery: Delay(2)", 0, 3, Result{Outcome: Retryable}, lease.Disposition{Kind: lease.Release, After: 4 * time.Second}},
		{"retryable, capped at 5m", 0, 20, Result{Outcome: Retryable}, lease.Disposition{Kind: lease.Release, After: 5 * time.Minute}},
		{"retryable with a server wait", 0, 1, Result{Outcome: Retryable, After: &seven}, lease.Disposition{Kind: lease.Release, After: 7 * time.Second}},
		{"terminal", 0, 1, Result{Outcome: Terminal}, lease.Disposition{Kind: lease.TerminalBackoff}},
	} {
		e, err := New(Config{RedriveMaxReceives: tc.redrive})
		if err != nil {
			t.Fatal(err)
		}
		got := e.disposition(core.Message{ID: "m", ReceiveCount: tc.count}, tc.result)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// newTicked makes an machine from cfg and steps its first Tick, at epoch, which it returns.
func newTicked(t *testing.T, cfg Config) (*Machine, time.Time) {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Step(Tick{Now: epoch}); err != nil {
		t.Fatal(err)
	}
	return e, epoch
}

// TestMisuseLeavesTheMachineUnchanged: a HandlerDone with an outcome outside the table, or a
// second reply to a receive, is refused and changes nothing.
func TestMisuseLeavesTheMachineUnchanged(t *testing.T) {
	e, t0 := newTicked(t, Config{Concurrency: 1})
	rc := e.Ready().Receive
	if err := e.Step(ReceiveDone{Call: rc.Call, Now: t0.Add(time.Second),
		Messages: []core.Message{{ID: "m1", Receipt: "r1", ReceiveCount: 1}}}); err != nil {
		t.Fatal(err)
	}
	e.Ready()
	before := deliveries(e)
	for _, tc := range []struct {
		ev   Event
		want error
	}{
		{HandlerDone{Receipt: "r1", Now: t0.Add(2 * time.Second), Result: Result{}}, ErrBadResult},
		{HandlerDone{Receipt: "r1", Now: t0.Add(2 * time.Second), Result: Result{Outcome: Terminal + 1}}, ErrBadResult},
		{ReceiveDone{Call: rc.Call, Now: t0.Add(2 * time.Second)}, ErrUnknownCall},
	} {
		if err := e.Step(tc.ev); !errors.Is(err, tc.want) {
			t.Errorf("Step(%+v) = %v, want %v", tc.ev, err, tc.want)
		}
		if diff := cmp.Diff(before, deliveries(e)); diff != "" {
			t.Errorf("after refused %T (-want +got):\n%s", tc.ev, diff)
		}
		if err := e.checkInvariants(); err != nil {
			t.Error(err)
		}
	}
	if err := e.Step(HandlerDone{Receipt: "r1", Now: t0.Add(3 * time.Second), Result: Result{Outcome: Success}}); err != nil {
		t.Fatalf("a valid result after the refused ones: %v", err)
	}
}

// TestRefusedReceiveReplyChangesNothing: a receive reply naming a receipt twice (a broken
// transport, or a driver feeding one reply twice) is refused by the lease machine, and the
// receive stays in flight: the same call's good reply is still taken.
func TestRefusedReceiveReplyChangesNothing(t *testing.T) {
	e, t0 := newTicked(t, Config{Concurrency: 2})
	rc := e.Ready().Receive
	before, wake := e.Status(), e.WakeAt()
	m1 := core.Message{ID: "m1", Receipt: "r1", ReceiveCount: 1}
	for _, msgs := range [][]core.Message{{m1, m1}, {{ID: "m0"}}} {
		err := e.Step(ReceiveDone{Call: rc.Call, Now: t0.Add(time.Second), Messages: msgs})
		if !errors.Is(err, lease.ErrDuplicate) {
			t.Fatalf("reply %v: %v, want %v", msgs, err, lease.ErrDuplicate)
		}
		if diff := cmp.Diff(before, e.Status()); diff != "" || !e.WakeAt().Equal(wake) {
			t.Fatalf("a refused reply changed the status (-want +got):\n%s", diff)
		}
	}
	if err := e.Step(ReceiveDone{Call: rc.Call, Now: t0.Add(time.Second), Messages: []core.Message{m1}}); err != nil {
		t.Fatalf("the good reply after the refused ones: %v", err)
	}
}

// TestDropInABurstWithdrawsAStartNotHandedOut: a handler's result frees a slot, so the next
// delivery is started; a renewal reply stepped in the same burst says its receipt is gone.
// Ready must neither start it nor cancel it (a Cancel beside its Start names a handler the
// driver has not started: the production loop called a nil cancel func).
func TestDropInABurstWithdrawsAStartNotHandedOut(t *testing.T) {
	e, t0 := newTicked(t, Config{Concurrency: 1, Prefetch: 1, Window: 30 * time.Second})
	rc := e.Ready().Receive
	if err := e.Step(ReceiveDone{Call: rc.Call, Now: t0, Messages: []core.Message{
		{ID: "m1", Receipt: "r1", ReceiveCount: 1}, {ID: "m2", Receipt: "r2", ReceiveCount: 1}}}); err != nil {
		t.Fatal(err)
	}
	if rd := e.Ready(); len(rd.Start) != 1 || rd.Start[0].Receipt != "r1" {
		t.Fatalf("first Ready starts %+v, want r1", rd.Start)
	}
	at := e.WakeAt()
	if err := e.Step(Tick{Now: at}); err != nil {
		t.Fatal(err)
	}
	rd := e.Ready()
	if len(rd.Changes) != 1 || len(rd.Changes[0].Entries) != 2 {
		t.Fatalf("renewals %+v, want one call for r1 and r2", rd.Changes)
	}
	renew := rd.Changes[0]
	entries := make([]error, 2)
	for i, en := range renew.Entries {
		if en.Receipt == "r2" {
			entries[i] = &core.TransportError{Class: core.Gone, Op: "change-visibility", Err: errors.New("gone")}
		}
	}
	// The burst: r1's handler returns (r2 is started), then the renewal reply drops r2.
	if err := e.Step(HandlerDone{Receipt: "r1", Now: at, Result: Result{Outcome: Success}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Step(CallDone{Call: renew.Call, Now: at, Entries: entries}); err != nil {
		t.Fatal(err)
	}
	rd = e.Ready()
	for _, s := range rd.Start {
		t.Errorf("Ready starts %s after its lease was dropped in the burst", s.Receipt)
	}
	for _, c := range rd.Cancel {
		t.Errorf("Ready cancels %s (%s), whose handler it never handed out", c.Receipt, c.Reason)
	}
	if st := e.Status(); st.Started != 1 || st.Running != 0 || st.Dropped != 1 {
		t.Errorf("status started=%d running=%d dropped=%d, want 1 0 1", st.Started, st.Running, st.Dropped)
	}
	if err := e.checkInvariants(); err != nil {
		t.Error(err)
	}
}

func TestBudget(t *testing.T) {
	for _, tc := range []struct {
		budget, redrive, want int
	}{
		{0, 0, 5}, {3, 0, 3}, {5, 7, 8}, {10, 7, 10}, {1, 0, 1},
	} {
		e, err := New(Config{Budget: tc.budget, RedriveMaxReceives: tc.redrive})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, e.Status().Budget); diff != "" {
			t.Errorf("budget %d redrive %d (-want +got):\n%s", tc.budget, tc.redrive, diff)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Window: 1500 * time.Millisecond},
		{Window: time.Minute, Ceiling: 30 * time.Second},
		{BatchMax: 11},
		{Concurrency: -1},
		{Prefetch: -1},
		{Budget: -1},
		{Grace: -time.Second},
		{ReceiveBackoff: []time.Duration{0}},
		{Lease: lease.Config{ReceiptsMax: 5}},
		{Window: 30 * time.Second, Wait: 21 * time.Second},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v, want ErrConfig", cfg, err)
		}
	}
}

func TestDefaultWaitStaysInsideTwoThirdsOfTheWindow(t *testing.T) {
	for _, tc := range []struct {
		window, want time.Duration
		none         bool
	}{
		{30 * time.Second, WaitDefault, false},
		{time.Minute, WaitDefault, false},
		{3 * time.Second, 2 * time.Second, false},
		{time.Second, 0, true},
	} {
		cfg := Config{Window: tc.window}.withDefaults()
		if diff := cmp.Diff([2]any{tc.want, tc.none}, [2]any{cfg.Wait, cfg.WaitNone}); diff != "" {
			t.Errorf("window %v (-want +got):\n%s", tc.window, diff)
		}
		if err := cfg.validate(); err != nil {
			t.Errorf("window %v: defaults do not validate: %v", tc.window, err)
		}
	}
}

// wModel is what the property test knows of the machine from its effects.
type wModel struct {
	e         *Machine
	cfg       Config
	now       time.Time
	recv      *Receive
	calls     map[lease.CallID][]string
	msgs      map[string]core.Message
	stamp     map[string]time.Time
	started   map[string]bool
	done      map[string]bool // handler reported
	running   map[string]bool // started, not reported
	cancel    map[string]bool
	disposed  map[string]bool // a disposition call named it
	redispose map[string]bool // its disposition call failed retryably: it may go out again
	finished  map[string]bool // handler succeeded or failed (not cancelled): disposition began
	waiting   map[string]bool // received, admitted to run, not started
	renewing  map[string]lease.CallID
	pending   map[string]bool // to be released when its in-flight renewal returns
	shut      bool
	abandoned bool // the machine cancelled the receive in flight
	n         int
}

func (w *wModel) sorted(set map[string]bool) []string {
	var ks []string
	for k, v := range set {
		if v {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

func (w *wModel) step(t *rapid.T, ev Event) {
	if err := w.e.Step(ev); err != nil {
		t.Fatalf("step %T: %v", ev, err)
	}
	w.check(t, w.e.Ready(), ev)
}

func (w *wModel) check(t *rapid.T, rd Ready, ev Event) {
	named := func(r, what string) {
		if w.redispose[r] && (what == "delete" || what == "release") {
			delete(w.redispose, r)
			return
		}
		if w.disposed[r] {
			t.Fatalf("%s names %s after its disposition call", what, r)
		}
		if w.cancel[r] && what != "cancel" {
			t.Fatalf("%s names %s after its lease was dropped", what, r)
		}
	}
	for _, c := range rd.Cancel {
		if !w.running[c.Receipt] || w.cancel[c.Receipt] {
			t.Fatalf("cancel of %s which is not a running handler", c.Receipt)
		}
		w.cancel[c.Receipt] = true
	}
	for _, c := range rd.Changes {
		for _, en := range c.Entries {
			named(en.Receipt, c.Purpose.String())
			if c.Purpose == lease.Renewal {
				w.renewing[en.Receipt] = c.Call
				if w.finished[en.Receipt] {
					t.Fatalf("renewal of %s after its handler finished", en.Receipt)
				}
				req, ok := request(w.stamp[en.Receipt], w.cfg.Window, w.cfg.Ceiling, w.now)
				if !ok || req != en.Timeout {
					t.Fatalf("%s renewal asks %v, request(now) = %v", en.Receipt, en.Timeout, req)
				}
			} else {
				w.disposed[en.Receipt] = true
			}
			w.calls[c.Call] = append(w.calls[c.Call], en.Receipt)
		}
	}
	for _, d := range rd.Deletes {
		for _, r := range d.Receipts {
			named(r, "delete")
			w.disposed[r] = true
		}
		w.calls[d.Call] = d.Receipts
	}
	released := map[string]bool{}
	for _, c := range rd.Changes {
		for _, en := range c.Entries {
			if c.Purpose == lease.Disposal && en.Timeout == 0 {
				released[en.Receipt] = true
			}
		}
	}
	if _, ok := ev.(Shutdown); ok {
		// Every waiting delivery still held is released at once, or as soon as its
		// in-flight renewal returns (a disposition never overlaps a renewal).
		for _, r := range w.sorted(w.waiting) {
			if _, held := w.e.Lease(r); !held || released[r] {
				continue
			}
			if _, out := w.renewing[r]; out {
				w.pending[r] = true
				continue
			}
			t.Fatalf("waiting %s not released at shutdown", r)
		}
	}
	if rd, ok := ev.(ReceiveDone); ok && w.shut {
		// Whatever a receive returns after shutdown is released at once, never run.
		for _, m := range rd.Messages {
			if _, held := w.e.Lease(m.Receipt); held && !released[m.Receipt] {
				t.Fatalf("%s received after shutdown and not released", m.Receipt)
			}
		}
	}
	if rd.AbandonReceive != 0 {
		if !w.shut || w.recv == nil || w.recv.Call != rd.AbandonReceive || w.abandoned {
			t.Fatalf("abandon of receive %d: shut=%v in flight=%+v abandoned before=%v", rd.AbandonReceive, w.shut, w.recv, w.abandoned)
		}
		w.abandoned = true
	}
	if cd, ok := ev.(CallDone); ok {
		for _, r := range w.sorted(w.pending) {
			if w.renewing[r] != cd.Call {
				continue
			}
			delete(w.pending, r)
			if l, held := w.e.Lease(r); held && l.Phase != "disposing" && !released[r] {
				t.Fatalf("waiting %s not released when its renewal returned", r)
			}
		}
	}
	for _, s := range rd.Start {
		r := s.Receipt
		named(r, "start")
		if w.started[r] {
			t.Fatalf("%s started twice", r)
		}
		if !w.waiting[r] {
			t.Fatalf("%s started but it was not admitted (poison, retired or unknown)", r)
		}
		if w.shut {
			t.Fatalf("%s started after shutdown", r)
		}
		w.started[r], w.running[r] = true, true
		delete(w.waiting, r)
	}
	if rd.Receive != nil {
		if w.shut {
			t.Fatal("receive after shutdown")
		}
		if w.recv != nil {
			t.Fatal("two receives in flight")
		}
		if !rd.Receive.Stamp.Equal(w.now) {
			t.Fatalf("receive stamp %v, now %v", rd.Receive.Stamp, w.now)
		}
		w.recv = rd.Receive
		w.abandoned = false
	}
	if len(w.sorted(w.running)) > w.cfg.Concurrency {
		t.Fatalf("%d handlers running, limit %d", len(w.sorted(w.running)), w.cfg.Concurrency)
	}
	// Hidden while working: a running, uncancelled handler's lease is held past now.
	for _, r := range w.sorted(w.running) {
		if w.cancel[r] {
			continue
		}
		l, ok := w.e.Lease(r)
		margin := w.cfg.StopMargin
		if margin == 0 {
			margin = lease.StopMarginFor(w.cfg.Window)
		}
		if !ok || !l.Deadline.Add(-margin).After(w.now) {
			t.Fatalf("handler for %s runs without a live lease (%v, %+v)", r, ok, l)
		}
	}
	if err := w.e.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestWorkerKeepsHandlersUnderLease(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := Config{
			Window:      rapid.SampledFrom([]time.Duration{5 * time.Second, 30 * time.Second}).Draw(t, "window"),
			Ceiling:     rapid.SampledFrom([]time.Duration{time.Minute, 12 * time.Hour}).Draw(t, "ceiling"),
			Concurrency: rapid.IntRange(1, 4).Draw(t, "concurrency"),
			Prefetch:    rapid.IntRange(0, 3).Draw(t, "prefetch"),
			Budget:      rapid.IntRange(1, 4).Draw(t, "budget"),
			Grace:       time.Duration(rapid.IntRange(0, 40).Draw(t, "graceS")) * time.Second,
			Decode: func(m core.Message) error {
				if strings.HasPrefix(m.ID, "p") {
					return errors.New("poison")
				}
				return nil
			},
		}
		e, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w := &wModel{e: e, cfg: e.cfg, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			calls: map[lease.CallID][]string{}, msgs: map[string]core.Message{}, stamp: map[string]time.Time{},
			started: map[string]bool{}, done: map[string]bool{}, running: map[string]bool{}, cancel: map[string]bool{},
			disposed: map[string]bool{}, redispose: map[string]bool{}, finished: map[string]bool{}, waiting: map[string]bool{},
			renewing: map[string]lease.CallID{}, pending: map[string]bool{}}
		w.step(t, Tick{Now: w.now})
		latency := func(label string) time.Duration {
			return time.Duration(rapid.Int64Range(0, 8000).Draw(t, label)) * time.Millisecond
		}
		t.Repeat(map[string]func(*rapid.T){
			"advance": func(t *rapid.T) {
				w.now = w.now.Add(latency("advanceMs"))
				w.step(t, Tick{Now: w.now})
			},
			"wake": func(t *rapid.T) {
				wake := w.e.WakeAt()
				if wake.IsZero() || wake.Before(w.now) {
					t.Skip("no timer")
				}
				w.now = wake
				w.step(t, Tick{Now: w.now})
			},
			"receiveReply": func(t *rapid.T) {
				if w.recv == nil {
					t.Skip("no receive in flight")
				}
				rc := w.recv
				w.recv = nil
				w.now = w.now.Add(latency("receiveMs"))
				ev := ReceiveDone{Call: rc.Call, Now: w.now}
				if w.abandoned && rapid.Bool().Draw(t, "cancelWins") {
					ev.Err = context.Canceled
					w.step(t, ev)
					return
				}
				if rapid.IntRange(0, 5).Draw(t, "fail") == 0 {
					ev.Err = &core.TransportError{Class: core.Retryable, Op: "receive", Err: errors.New("503")}
					w.step(t, ev)
					return
				}
				n := rapid.IntRange(0, rc.Max).Draw(t, "n")
				for range n {
					w.n++
					id := fmt.Sprintf("m%d", w.n)
					if rapid.IntRange(0, 6).Draw(t, "poison") == 0 {
						id = fmt.Sprintf("p%d", w.n)
					}
					count := rapid.IntRange(1, 6).Draw(t, "count")
					m := core.Message{ID: id, Receipt: fmt.Sprintf("%s/%d", id, count), ReceiveCount: count}
					ev.Messages = append(ev.Messages, m)
					w.msgs[m.Receipt], w.stamp[m.Receipt] = m, rc.Stamp
					late := !w.now.Before(rc.Stamp.Add(w.cfg.Window))
					if !w.shut && !late && id[0] == 'm' && count < max(2, w.e.budget) {
						w.waiting[m.Receipt] = true
					}
				}
				w.step(t, ev)
				// Waiting deliveries the lease dropped in this step are not waiting any more.
				for _, r := range w.sorted(w.waiting) {
					if _, held := w.e.Lease(r); !held {
						delete(w.waiting, r)
					}
				}
			},
			"handlerDone": func(t *rapid.T) {
				rs := w.sorted(w.running)
				if len(rs) == 0 {
					t.Skip("no handler running")
				}
				r := rapid.SampledFrom(rs).Draw(t, "receipt")
				w.now = w.now.Add(latency("handlerMs"))
				o := rapid.SampledFrom([]Outcome{Success, Retryable, Permanent, Terminal}).Draw(t, "outcome")
				delete(w.running, r)
				w.done[r] = true
				if !w.cancel[r] {
					w.finished[r] = true
				}
				w.step(t, HandlerDone{Receipt: r, Now: w.now, Result: Result{Outcome: o}})
			},
			"callReply": func(t *rapid.T) {
				var ids []lease.CallID
				for id := range w.calls {
					ids = append(ids, id)
				}
				if len(ids) == 0 {
					t.Skip("no call in flight")
				}
				slices.Sort(ids)
				id := rapid.SampledFrom(ids).Draw(t, "call")
				rs := w.calls[id]
				delete(w.calls, id)
				for _, r := range rs {
					if w.renewing[r] == id {
						defer delete(w.renewing, r)
					}
				}
				w.now = w.now.Add(latency("callMs"))
				ev := CallDone{Call: id, Now: w.now}
				for range rs {
					var err error
					switch rapid.IntRange(0, 9).Draw(t, "class") {
					case 0:
						err = &core.TransportError{Class: core.Retryable, Op: "call", Err: errors.New("503")}
						if r := rs[len(ev.Entries)]; w.disposed[r] {
							w.redispose[r] = true
						}
					case 1:
						err = &core.TransportError{Class: core.Gone, Op: "call", Err: errors.New("gone")}
					case 2:
						err = &core.TransportError{Class: core.Fatal, Op: "call", Err: errors.New("denied")}
					}
					ev.Entries = append(ev.Entries, err)
				}
				w.step(t, ev)
			},
			"shutdown": func(t *rapid.T) {
				if w.shut {
					t.Skip("already shut down")
				}
				w.shut = true
				w.step(t, Shutdown{Now: w.now})
				w.waiting = map[string]bool{}
			},
		})
	})
}

// TestShortPollOnAnEmptyQueueWaitsIdleDelay: after a receive that returned nothing, the next
// is issued no sooner than IdleDelay after it, so a short poll does not spin; a receive that
// returned messages is followed at once.
func TestShortPollOnAnEmptyQueueWaitsIdleDelay(t *testing.T) {
	e, t0 := newTicked(t, Config{WaitNone: true, Concurrency: 2})
	rc := e.Ready().Receive
	if rc == nil || rc.Wait != 0 {
		t.Fatalf("first receive = %+v, want a short poll", rc)
	}
	if err := e.Step(ReceiveDone{Call: rc.Call, Now: t0.Add(20 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	rd := e.Ready()
	if rd.Receive != nil {
		t.Fatalf("receive issued right after an empty one: %+v", rd.Receive)
	}
	if want := t0.Add(IdleDelayDefault); !e.WakeAt().Equal(want) {
		t.Fatalf("WakeAt = %v, want %v", e.WakeAt(), want)
	}
	if err := e.Step(Tick{Now: t0.Add(IdleDelayDefault)}); err != nil {
		t.Fatal(err)
	}
	rc = e.Ready().Receive
	if rc == nil {
		t.Fatal("no receive after IdleDelay")
	}
	at := t0.Add(IdleDelayDefault + 20*time.Millisecond)
	if err := e.Step(ReceiveDone{Call: rc.Call, Now: at,
		Messages: []core.Message{{ID: "m1", Receipt: "r1", ReceiveCount: 1}}}); err != nil {
		t.Fatal(err)
	}
	if rd := e.Ready(); rd.Receive == nil {
		t.Fatal("no receive right after one that returned a message")
	}
}

// TestShutdownBeforeReadyWithdrawsAnUnsentReceive: a driver may step several events before it
// reads Ready (the simulator's bursts do). A receive decided at a Tick and a Shutdown stepped
// before Ready is read must not come out as a Receive plus an AbandonReceive of a call that was
// never sent: the receive is withdrawn and the machine is done at once.
func TestShutdownBeforeReadyWithdrawsAnUnsentReceive(t *testing.T) {
	e, t0 := newTicked(t, Config{Concurrency: 2})
	if err := e.Step(Shutdown{Now: t0.Add(time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	rd := e.Ready()
	if rd.Receive != nil || rd.AbandonReceive != 0 {
		t.Fatalf("Ready after Shutdown = receive %+v, abandon %d; want neither", rd.Receive, rd.AbandonReceive)
	}
	if st := e.Status(); !st.Done {
		t.Fatalf("status %+v, want Done: nothing is in flight", st)
	}
}

// TestReplyBeforeReadyWithdrawsTheAbandon: a Shutdown decides to abandon the receive in
// flight; its reply stepped in the same burst, before Ready is read, completes the call, so
// Ready must not name it in AbandonReceive (the driver has nothing in flight to cancel; swarm
// seed 214 found the stale abandon). What the reply carried is released.
func TestReplyBeforeReadyWithdrawsTheAbandon(t *testing.T) {
	e, t0 := newTicked(t, Config{Concurrency: 2})
	rc := e.Ready().Receive
	if rc == nil {
		t.Fatal("no receive after the first tick")
	}
	if err := e.Step(Shutdown{Now: t0.Add(time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	if err := e.Step(ReceiveDone{Call: rc.Call, Now: t0.Add(2 * time.Millisecond),
		Messages: []core.Message{{ID: "m1", Receipt: "r1", ReceiveCount: 1}}}); err != nil {
		t.Fatal(err)
	}
	rd := e.Ready()
	if rd.AbandonReceive != 0 {
		t.Fatalf("Ready names abandoned receive %d, whose reply was stepped already", rd.AbandonReceive)
	}
	if st := e.Status(); st.ReceivesAbandoned != 0 {
		t.Fatalf("ReceivesAbandoned = %d, want 0: the abandon was withdrawn", st.ReceivesAbandoned)
	}
	if err := e.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
