package sim

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/lease"
)

// The misuse family of the lease machine. The worker machine guards its lease machine (it
// checks calls, receipts and times before they reach it), so a worker process probes the
// lease controller as a driver of its own would use it: on a drawn receive reply it builds a
// lease machine (after a refused configuration), lets it hold the reply's receipts, makes the
// buggy calls (a Step without a time, a receive without a stamp or with a stamp after the
// reply, a window that is not whole seconds or too short for the stop margin, more receipts
// than the limit, replies to no call or of the wrong length, a disposition of an unknown
// receipt, of an unknown kind, with a negative delay, or a second one) and checks each is
// refused with its documented error and changes nothing. Between them it drives the machine
// through a renewal, a disposition that waits behind it, a failed delete, an abandon, a
// handler ending after the stop point, and a shutdown with a renewal in flight, and checks
// lease.Describe names each effect. No trace line: the world's run is unchanged.

// leaseProbe is one probe's machine and what it has checked.
type leaseProbe struct {
	p      *workerProc
	r      *rand.Rand
	m      *lease.Machine
	now    time.Time
	window time.Duration
	margin time.Duration
	keys   []string
	failed bool
}

func (lp *leaseProbe) fail(inv, format string, args ...any) {
	if !lp.failed {
		lp.failed = true
		lp.p.w.chk.Fail(inv, "%s: lease probe: "+format, append([]any{lp.p.name}, args...)...)
	}
}

type leaseView struct {
	status lease.Status
	wake   time.Time
	leases []lease.Lease
}

func (lp *leaseProbe) view() leaseView {
	v := leaseView{status: lp.m.Status(), wake: lp.m.WakeAt()}
	for _, k := range lp.keys {
		if l, ok := lp.m.Lease(k); ok {
			v.leases = append(v.leases, l)
		}
	}
	return v
}

// refuse steps ev, which must be refused with want, and checks nothing changed.
func (lp *leaseProbe) refuse(ev lease.Event, want error) {
	if lp.failed {
		return
	}
	before := lp.view()
	err := lp.m.Step(ev)
	if !errors.Is(err, want) {
		lp.fail(InvMisuseRefused, "%T %+v: error %v, want %v", ev, ev, err, want)
		return
	}
	if after := lp.view(); !reflect.DeepEqual(before, after) {
		lp.fail(InvMisuseRefused, "the refused %T (%v) changed the machine: %+v, then %+v", ev, err, before, after)
	}
}

// step steps a legitimate ev and returns the effects as lease.Describe renders them.
func (lp *leaseProbe) step(ev lease.Event) (lease.Ready, string) {
	if lp.failed {
		return lease.Ready{}, ""
	}
	if err := lp.m.Step(ev); err != nil {
		lp.fail(InvMachine, "%T refused: %v", ev, err)
		return lease.Ready{}, ""
	}
	if err := lp.m.CheckInvariants(); err != nil {
		lp.fail(InvMachine, "after %T: %v", ev, err)
	}
	rd := lp.m.Ready()
	return rd, lease.Describe(rd, lp.m.WakeAt(), Epoch)
}

// expect checks that a rendering holds every line in want.
func (lp *leaseProbe) expect(text string, want ...string) {
	if lp.failed {
		return
	}
	for _, line := range want {
		if !strings.Contains(text, line+"\n") {
			lp.fail(InvMisuseRefused, "effects rendered %q, want a line %q", text, line)
			return
		}
	}
}

// probeLease runs the lease probe over a receive reply: msgs received at now, the call sent at t0.
func (p *workerProc) probeLease(r *rand.Rand, t0, now time.Time, msgs []core.Message) {
	w := p.w
	win := w.cfg.Visibility
	// A refused configuration first: the error must wrap ErrConfig and name the field.
	bad := []struct {
		field string
		cfg   lease.Config
	}{
		{"Pacing", lease.Config{Pacing: []time.Duration{time.Second, 0}}},
		{"Coalesce", lease.Config{Coalesce: -time.Millisecond}},
		{"ReceiptsMax", lease.Config{ReceiptsMax: -1}},
		{"StopMargin", lease.Config{StopMargin: -time.Nanosecond}},
	}[r.Intn(4)]
	if _, err := lease.New(bad.cfg); !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), bad.field) {
		w.chk.Fail(InvConfigRefused, "%s: lease.New with a bad %s: %v, want %v naming it", p.name, bad.field, err, lease.ErrConfig)
		return
	}
	// The receipts limit leaves room for exactly these messages half the time; the stop
	// margin is the default, given or left zero.
	cfg := lease.Config{}
	extra := 1 + r.Intn(3)
	if r.Intn(2) == 0 {
		cfg.ReceiptsMax = len(msgs) + extra - 1
		cfg.StopMargin = lease.StopMarginFor(win)
	}
	m, err := lease.New(cfg)
	if err != nil {
		w.chk.Fail(InvMachine, "%s: lease probe: lease.New(%+v): %v", p.name, cfg, err)
		return
	}
	lp := &leaseProbe{p: p, r: r, m: m, now: now, window: win, margin: lease.StopMarginFor(win)}
	for _, msg := range msgs {
		lp.keys = append(lp.keys, msg.Receipt)
	}
	recv := lease.Received{Now: now, Stamp: t0, Window: win, Ceiling: ceiling, Messages: msgs}

	lp.refuse(lease.Tick{}, lease.ErrBadEvent)
	noStamp := recv
	noStamp.Stamp = time.Time{}
	lp.refuse(noStamp, lease.ErrBadEvent)
	odd := recv
	odd.Window += 500 * time.Millisecond
	lp.refuse(odd, lease.ErrBadEvent)
	early := recv
	early.Stamp = now.Add(time.Millisecond)
	lp.refuse(early, lease.ErrBadEvent)
	_, text := lp.step(recv)
	if wake := m.WakeAt(); !wake.IsZero() {
		lp.expect(text, "wake "+lease.Offset(wake, Epoch))
	}

	fresh := func(n int) []core.Message {
		out := make([]core.Message, n)
		for i := range out {
			out[i] = core.Message{ID: fmt.Sprintf("probe-m%d", i), Receipt: fmt.Sprintf("probe-r%d", i)}
		}
		return out
	}
	var held []string
	for _, k := range lp.keys {
		if _, ok := m.Lease(k); ok {
			held = append(held, k)
		}
	}
	if cfg.ReceiptsMax > 0 {
		st := m.Status()
		lp.refuse(lease.Received{Now: now, Stamp: t0, Window: win, Ceiling: ceiling, Messages: fresh(cfg.ReceiptsMax - st.Held - st.Disposing + 1)}, lease.ErrFull)
		// A window too short for the configured stop margin (it must stay under a tenth).
		if short := (10 * cfg.StopMargin).Truncate(time.Second); short >= time.Second {
			lp.refuse(lease.Received{Now: now, Stamp: t0, Window: short, Ceiling: ceiling}, lease.ErrBadEvent)
		}
	}
	lp.refuse(lease.RenewResult{Call: 1 << 40, Now: now}, lease.ErrUnknownCall)
	lp.refuse(lease.DisposeResult{Call: 1 << 40, Now: now}, lease.ErrUnknownCall)
	lp.refuse(lease.Dispose{Now: now, Receipt: "no-such-receipt", Disposition: lease.Disposition{Kind: lease.Ack}}, lease.ErrUnknownReceipt)
	if len(held) == 0 {
		return // the reply came after every window lapsed: nothing is held
	}
	k := held[r.Intn(len(held))]
	lp.refuse(lease.Dispose{Now: now, Receipt: k, Disposition: lease.Disposition{Kind: lease.Kind(r.Intn(2) * 9)}}, lease.ErrBadEvent)
	lp.refuse(lease.Dispose{Now: now, Receipt: k, Disposition: lease.Disposition{Kind: lease.Release, After: -time.Second}}, lease.ErrBadEvent)
	if lp.failed {
		return
	}

	// The first renewal: its reply of the wrong length is refused; a disposition arriving
	// meanwhile waits behind it, and a second one is refused.
	first := lp.keys[0]
	l, _ := m.Lease(first)
	at := m.WakeAt()
	if at.Before(now) || !l.Deadline.After(at) {
		return // nothing left to renew (the reply came too late to hold them)
	}
	lp.now = at
	rd, _ := lp.step(lease.Tick{Now: at})
	if len(rd.Changes) == 0 {
		return // dropped at the margin or the ceiling: nothing more to probe here
	}
	renew := rd.Changes[0]
	if renew.Purpose != lease.Renewal {
		lp.fail(InvMachine, "first call %+v is no renewal", renew)
		return
	}
	lp.refuse(lease.RenewResult{Call: renew.Call, Now: at, Entries: make([]error, len(renew.Entries)+1)}, lease.ErrBadEvent)
	waiter := renew.Entries[0].Receipt
	lp.step(lease.Dispose{Now: at, Receipt: waiter, Disposition: lease.Disposition{Kind: lease.Ack}})
	lp.refuse(lease.Dispose{Now: at, Receipt: waiter, Disposition: lease.Disposition{Kind: lease.Abandon}}, lease.ErrDisposed)
	if lp.failed {
		return
	}
	// The renewal succeeds: the waiting ack goes out as a delete, which the queue says is gone.
	reply := at.Add(time.Millisecond)
	rd, _ = lp.step(lease.RenewResult{Call: renew.Call, Now: reply, Entries: make([]error, len(renew.Entries))})
	if len(rd.Deletes) != 1 || rd.Deletes[0].Receipts[0] != waiter {
		lp.fail(InvMachine, "after the renewal the waiting ack of %s left as %+v, want one delete", waiter, rd)
		return
	}
	del := rd.Deletes[0]
	// The queue says the receipt is gone; or the delete fails retryably and the wake for its
	// retry comes only at retryUntil (a late timer): too late to send, the lease ends.
	var failure error = &core.TransportError{Class: core.Gone, Op: "delete", Err: errors.New("probe: no such receipt")}
	late := r.Intn(2) == 0
	if late {
		failure = &core.TransportError{Class: core.Retryable, Op: "delete", Code: "ThrottlingException", Err: errors.New("probe: slow down")}
	}
	wl, _ := m.Lease(waiter)
	entries := make([]error, len(del.Receipts))
	entries[0] = failure
	_, text = lp.step(lease.DisposeResult{Call: del.Call, Now: reply, Entries: entries})
	if late {
		lp.now = wl.Deadline.Add(-win / 10)
		_, text = lp.step(lease.Tick{Now: lp.now})
	} else {
		lp.now = reply
	}
	lp.expect(text, fmt.Sprintf("ended %s ack err=%v", waiter, failure))
	// Of the others still held: one abandoned, one whose handler ends at its local deadline
	// (after the stop point: no disposition, dropped as expired).
	var rest []string
	for _, e := range renew.Entries[1:] {
		if m.Held(e.Receipt) {
			rest = append(rest, e.Receipt)
		}
	}
	if len(rest) > 0 {
		_, text = lp.step(lease.Dispose{Now: lp.now, Receipt: rest[0], Disposition: lease.Disposition{Kind: lease.Abandon}})
		lp.expect(text, "ended "+rest[0]+" abandon")
		rest = rest[1:]
	}
	if len(rest) > 0 {
		if l, ok := m.Lease(rest[0]); ok && m.Held(rest[0]) && !l.Deadline.Before(lp.now) {
			_, text = lp.step(lease.Dispose{Now: l.Deadline, Receipt: rest[0], Disposition: lease.Disposition{Kind: lease.Ack}})
			lp.expect(text, "cancel "+rest[0]+" (expired)")
			lp.now = l.Deadline
		}
	}
	// A worker holding many receipts releases all but one in one step: the releases leave in
	// batches of at most ten.
	if cfg.ReceiptsMax == 0 {
		n := 11 + r.Intn(64)
		many := fresh(n)
		lp.step(lease.Received{Now: lp.now, Stamp: lp.now, Window: win, Ceiling: ceiling, Messages: many})
		for _, msg := range many[:n-1] {
			lp.keys = append(lp.keys, msg.Receipt)
			if err := m.Step(lease.Dispose{Now: lp.now, Receipt: msg.Receipt, Disposition: lease.Disposition{Kind: lease.Release}}); err != nil {
				lp.fail(InvMachine, "release of %s refused: %v", msg.Receipt, err)
				return
			}
		}
		rd, _ := lp.step(lease.Tick{Now: lp.now})
		entries := 0
		for _, c := range rd.Changes {
			if c.Purpose == lease.Disposal && len(c.Entries) <= 10 {
				entries += len(c.Entries)
			}
		}
		if !lp.failed && entries != n-1 {
			lp.fail(InvMachine, "%d releases in one step left as %d entries of batches of at most ten: %+v", n-1, entries, rd.Changes)
		}
		lp.keys = append(lp.keys, many[n-1].Receipt)
	}
	// The last receipt: its renewal goes out, then one of four endings, each checked.
	last := "probe-last"
	lp.keys = append(lp.keys, last)
	lp.step(lease.Received{Now: lp.now, Stamp: lp.now, Window: win, Ceiling: ceiling, Messages: []core.Message{{ID: "probe-mlast", Receipt: last}}})
	var call lease.CallID
	size := 0 // entries of the renewal call naming last
	for i := 0; i < 8 && call == 0 && !lp.failed; i++ {
		wake := m.WakeAt()
		if wake.IsZero() || !m.Held(last) {
			break
		}
		lp.now = maxTime(lp.now, wake)
		rd, _ := lp.step(lease.Tick{Now: lp.now})
		for _, c := range rd.Changes {
			if c.Purpose != lease.Renewal {
				continue
			}
			for _, e := range c.Entries {
				if e.Receipt == last {
					call, size = c.Call, len(c.Entries)
				}
			}
		}
	}
	if call == 0 || lp.failed {
		return
	}
	l, _ = m.Lease(last)
	stop := l.Deadline.Add(-lp.margin)
	var want []string
	switch r.Intn(4) {
	case 0: // a shutdown with the renewal in flight: dropped, the call abandoned
		want = append(want, "cancel "+last+" (shutdown)", fmt.Sprintf("abandon call=%d", call))
	case 1: // no reply by the stop point: dropped there, the call abandoned
		lp.now = stop
		_, text = lp.step(lease.Tick{Now: stop})
		lp.expect(text, "cancel "+last+" (expired)")
	case 2: // a success that arrives at the stop point (its timer fired late): too late
		lp.now = stop
		_, text = lp.step(lease.RenewResult{Call: call, Now: stop, Entries: make([]error, size)})
		lp.expect(text, "cancel "+last+" (late)")
	case 3: // a disposition waits behind the renewal, which fails retryably at the stop point
		lp.step(lease.Dispose{Now: lp.now, Receipt: last, Disposition: lease.Disposition{Kind: lease.Ack}})
		lp.now = stop
		_, text = lp.step(lease.RenewResult{Call: call, Now: stop, Err: &core.TransportError{Class: core.Retryable, Op: "change-visibility", Err: errors.New("probe: timeout")}})
		lp.expect(text, "cancel "+last+" (expired)")
	}
	for _, k := range lp.keys {
		if m.Held(k) && k != last {
			want = append(want, "cancel "+k+" (shutdown)")
		}
	}
	_, text = lp.step(lease.Shutdown{Now: lp.now})
	lp.expect(text, want...)
	if st := m.Status(); !lp.failed && st.Held != 0 {
		lp.fail(InvMachine, "%d receipts still held after the shutdown", st.Held)
	}
	if !lp.failed {
		w.chk.Pass(InvMisuseRefused)
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
