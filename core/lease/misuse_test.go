package lease

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/core"
)

// The misuse family of the lease machine, as a driver of its own would misuse it. On a drawn
// receive reply the test builds a machine (after a refused configuration), lets it hold the
// reply's receipts, makes the buggy calls (a Step without a time, a receive without a stamp or
// with a stamp after the reply, a window that is not whole seconds or too short for the stop
// margin, more receipts than the limit, replies to no call or of the wrong length, a
// disposition of an unknown receipt, of an unknown kind, with a negative delay, or a second
// one) and checks each is refused with its documented error and changes nothing. Between them
// it drives the machine through a renewal, a disposition that waits behind it, a failed
// delete, an abandon, a handler ending after the stop point, and a shutdown with a renewal in
// flight, and checks Describe names each effect.

const misuseCeiling = 12 * time.Hour

// misuseProbe is one run's machine and where it stands.
type misuseProbe struct {
	t      *rapid.T
	m      *Machine
	now    time.Time
	margin time.Duration
	keys   []string
}

type misuseView struct {
	status Status
	wake   time.Time
	leases []Lease
}

func (p *misuseProbe) view() misuseView {
	v := misuseView{status: p.m.Status(), wake: p.m.WakeAt()}
	for _, k := range p.keys {
		if l, ok := p.m.Lease(k); ok {
			v.leases = append(v.leases, l)
		}
	}
	return v
}

// refuse steps ev, which must be refused with want, and checks nothing changed.
func (p *misuseProbe) refuse(ev Event, want error) {
	p.t.Helper()
	before := p.view()
	err := p.m.Step(ev)
	if !errors.Is(err, want) {
		p.t.Fatalf("%T %+v: error %v, want %v", ev, ev, err, want)
	}
	if after := p.view(); !reflect.DeepEqual(before, after) {
		p.t.Fatalf("the refused %T (%v) changed the machine: %+v, then %+v", ev, err, before, after)
	}
}

// step steps a legitimate ev and returns the effects as Describe renders them.
func (p *misuseProbe) step(ev Event) (Ready, string) {
	p.t.Helper()
	if err := p.m.Step(ev); err != nil {
		p.t.Fatalf("%T refused: %v", ev, err)
	}
	if err := p.m.CheckInvariants(); err != nil {
		p.t.Fatalf("after %T: %v", ev, err)
	}
	rd := p.m.Ready()
	return rd, Describe(rd, p.m.WakeAt(), epoch)
}

// expect checks that a rendering holds every line in want.
func (p *misuseProbe) expect(text string, want ...string) {
	p.t.Helper()
	for _, line := range want {
		if !strings.Contains(text, line+"\n") {
			p.t.Fatalf("effects rendered %q, want a line %q", text, line)
		}
	}
}

func misuseMessages(prefix string, n int) []core.Message {
	out := make([]core.Message, n)
	for i := range out {
		out[i] = core.Message{ID: fmt.Sprintf("%s-m%d", prefix, i), Receipt: fmt.Sprintf("%s-r%d", prefix, i)}
	}
	return out
}

func TestMisuseIsRefusedAndChangesNothing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// A refused configuration first: the error must wrap ErrConfig and name the field.
		bad := rapid.SampledFrom([]struct {
			field string
			cfg   Config
		}{
			{"Pacing", Config{Pacing: []time.Duration{time.Second, 0}}},
			{"Coalesce", Config{Coalesce: -time.Millisecond}},
			{"ReceiptsMax", Config{ReceiptsMax: -1}},
			{"StopMargin", Config{StopMargin: -time.Nanosecond}},
		}).Draw(t, "badConfig")
		if _, err := New(bad.cfg); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), bad.field) {
			t.Fatalf("New with a bad %s: %v, want %v naming it", bad.field, err, ErrConfig)
		}
		win := time.Duration(rapid.IntRange(3, 60).Draw(t, "windowSeconds")) * time.Second
		msgs := misuseMessages("q", rapid.IntRange(1, 10).Draw(t, "messages"))
		t0 := epoch
		now := t0.Add(time.Duration(rapid.Int64Range(0, int64(win/time.Millisecond)+500).Draw(t, "replyMs")) * time.Millisecond)
		// The receipts limit leaves room for exactly these messages half the time; the stop
		// margin is the default, given or left zero.
		cfg := Config{}
		extra := rapid.IntRange(1, 3).Draw(t, "extra")
		if rapid.Bool().Draw(t, "limited") {
			cfg.ReceiptsMax = len(msgs) + extra - 1
			cfg.StopMargin = StopMarginFor(win)
		}
		m, err := New(cfg)
		if err != nil {
			t.Fatalf("New(%+v): %v", cfg, err)
		}
		p := &misuseProbe{t: t, m: m, now: now, margin: StopMarginFor(win)}
		for _, msg := range msgs {
			p.keys = append(p.keys, msg.Receipt)
		}
		held := p.receive(cfg, Received{Now: now, Stamp: t0, Window: win, Ceiling: misuseCeiling, Messages: msgs})
		if len(held) == 0 {
			return // the reply came after every window lapsed: nothing is held
		}
		k := rapid.SampledFrom(held).Draw(t, "disposed")
		p.refuse(Dispose{Now: now, Receipt: k, Disposition: Disposition{Kind: rapid.SampledFrom([]Kind{0, 9}).Draw(t, "badKind")}}, ErrBadEvent)
		p.refuse(Dispose{Now: now, Receipt: k, Disposition: Disposition{Kind: Release, After: -time.Second}}, ErrBadEvent)
		renew, ok := p.firstRenewal(win)
		if !ok {
			return
		}
		p.others(renew)
		if cfg.ReceiptsMax == 0 {
			p.releaseMany(win)
		}
		p.lastReceipt(win)
	})
}

// receive makes the misuses around a receive reply, steps recv and returns the receipts held.
func (p *misuseProbe) receive(cfg Config, recv Received) []string {
	m, now, win := p.m, recv.Now, recv.Window
	p.refuse(Tick{}, ErrBadEvent)
	noStamp := recv
	noStamp.Stamp = time.Time{}
	p.refuse(noStamp, ErrBadEvent)
	odd := recv
	odd.Window += 500 * time.Millisecond
	p.refuse(odd, ErrBadEvent)
	early := recv
	early.Stamp = now.Add(time.Millisecond)
	p.refuse(early, ErrBadEvent)
	_, text := p.step(recv)
	if wake := m.WakeAt(); !wake.IsZero() {
		p.expect(text, "wake "+Offset(wake, epoch))
	}
	var held []string
	for _, k := range p.keys {
		if _, ok := m.Lease(k); ok {
			held = append(held, k)
		}
	}
	if cfg.ReceiptsMax > 0 {
		st := m.Status()
		more := misuseMessages("more", cfg.ReceiptsMax-st.Held-st.Disposing+1)
		p.refuse(Received{Now: now, Stamp: recv.Stamp, Window: win, Ceiling: misuseCeiling, Messages: more}, ErrFull)
		// A window too short for the configured stop margin (it must stay under a tenth).
		if short := (10 * cfg.StopMargin).Truncate(time.Second); short >= time.Second {
			p.refuse(Received{Now: now, Stamp: recv.Stamp, Window: short, Ceiling: misuseCeiling}, ErrBadEvent)
		}
	}
	p.refuse(RenewResult{Call: 1 << 40, Now: now}, ErrUnknownCall)
	p.refuse(DisposeResult{Call: 1 << 40, Now: now}, ErrUnknownCall)
	p.refuse(Dispose{Now: now, Receipt: "no-such-receipt", Disposition: Disposition{Kind: Ack}}, ErrUnknownReceipt)
	return held
}

// firstRenewal drives the first renewal: its reply of the wrong length is refused; a
// disposition arriving meanwhile waits behind it, and a second one is refused. The renewal
// succeeds, and the waiting ack goes out as a delete that fails: the queue says the receipt
// is gone, or it fails retryably and the wake for its retry comes only at retryUntil (a late
// timer): too late to send, the lease ends. ok is false when nothing was left to renew.
func (p *misuseProbe) firstRenewal(win time.Duration) (renew ChangeVisibility, ok bool) {
	t, m := p.t, p.m
	l, _ := m.Lease(p.keys[0])
	at := m.WakeAt()
	if at.Before(p.now) || !l.Deadline.After(at) {
		return ChangeVisibility{}, false // nothing left to renew (the reply came too late to hold them)
	}
	p.now = at
	rd, _ := p.step(Tick{Now: at})
	if len(rd.Changes) == 0 {
		return ChangeVisibility{}, false // dropped at the margin or the ceiling: nothing more to probe here
	}
	renew = rd.Changes[0]
	if renew.Purpose != Renewal {
		t.Fatalf("first call %+v is no renewal", renew)
	}
	p.refuse(RenewResult{Call: renew.Call, Now: at, Entries: make([]error, len(renew.Entries)+1)}, ErrBadEvent)
	waiter := renew.Entries[0].Receipt
	p.step(Dispose{Now: at, Receipt: waiter, Disposition: Disposition{Kind: Ack}})
	p.refuse(Dispose{Now: at, Receipt: waiter, Disposition: Disposition{Kind: Abandon}}, ErrDisposed)
	reply := at.Add(time.Millisecond)
	rd, _ = p.step(RenewResult{Call: renew.Call, Now: reply, Entries: make([]error, len(renew.Entries))})
	if len(rd.Deletes) != 1 || rd.Deletes[0].Receipts[0] != waiter {
		t.Fatalf("after the renewal the waiting ack of %s left as %+v, want one delete", waiter, rd)
	}
	del := rd.Deletes[0]
	var failure error = &core.TransportError{Class: core.Gone, Op: "delete", Err: errors.New("test: no such receipt")}
	late := rapid.Bool().Draw(t, "lateRetry")
	if late {
		failure = &core.TransportError{Class: core.Retryable, Op: "delete", Code: "ThrottlingException", Err: errors.New("test: slow down")}
	}
	wl, _ := m.Lease(waiter)
	entries := make([]error, len(del.Receipts))
	entries[0] = failure
	_, text := p.step(DisposeResult{Call: del.Call, Now: reply, Entries: entries})
	if late {
		p.now = wl.Deadline.Add(-win / 10)
		_, text = p.step(Tick{Now: p.now})
	} else {
		p.now = reply
	}
	p.expect(text, fmt.Sprintf("ended %s ack err=%v", waiter, failure))
	return renew, true
}

// others ends two of the other receipts the renewal named: one abandoned, one whose handler
// ends at its local deadline (after the stop point: no disposition, dropped as expired).
func (p *misuseProbe) others(renew ChangeVisibility) {
	m := p.m
	var rest []string
	for _, e := range renew.Entries[1:] {
		if m.Held(e.Receipt) {
			rest = append(rest, e.Receipt)
		}
	}
	if len(rest) > 0 {
		_, text := p.step(Dispose{Now: p.now, Receipt: rest[0], Disposition: Disposition{Kind: Abandon}})
		p.expect(text, "ended "+rest[0]+" abandon")
		rest = rest[1:]
	}
	if len(rest) > 0 {
		if l, ok := m.Lease(rest[0]); ok && m.Held(rest[0]) && !l.Deadline.Before(p.now) {
			_, text := p.step(Dispose{Now: l.Deadline, Receipt: rest[0], Disposition: Disposition{Kind: Ack}})
			p.expect(text, "cancel "+rest[0]+" (expired)")
			p.now = l.Deadline
		}
	}
}

// releaseMany: a worker holding many receipts releases all but one in one step; the releases
// leave in batches of at most ten.
func (p *misuseProbe) releaseMany(win time.Duration) {
	t, m := p.t, p.m
	n := rapid.IntRange(11, 74).Draw(t, "many")
	many := misuseMessages("many", n)
	p.step(Received{Now: p.now, Stamp: p.now, Window: win, Ceiling: misuseCeiling, Messages: many})
	for _, msg := range many[:n-1] {
		p.keys = append(p.keys, msg.Receipt)
		if err := m.Step(Dispose{Now: p.now, Receipt: msg.Receipt, Disposition: Disposition{Kind: Release}}); err != nil {
			t.Fatalf("release of %s refused: %v", msg.Receipt, err)
		}
	}
	rd, _ := p.step(Tick{Now: p.now})
	entries := 0
	for _, c := range rd.Changes {
		if c.Purpose == Disposal && len(c.Entries) <= 10 {
			entries += len(c.Entries)
		}
	}
	if entries != n-1 {
		t.Fatalf("%d releases in one step left as %d entries of batches of at most ten: %+v", n-1, entries, rd.Changes)
	}
	p.keys = append(p.keys, many[n-1].Receipt)
}

// lastReceipt: the last receipt's renewal goes out, then one of four endings, each checked,
// and a shutdown cancels every receipt still held.
func (p *misuseProbe) lastReceipt(win time.Duration) {
	t, m := p.t, p.m
	last := "last-r"
	p.keys = append(p.keys, last)
	p.step(Received{Now: p.now, Stamp: p.now, Window: win, Ceiling: misuseCeiling, Messages: []core.Message{{ID: "last-m", Receipt: last}}})
	var call CallID
	size := 0 // entries of the renewal call naming last
	for i := 0; i < 8 && call == 0; i++ {
		wake := m.WakeAt()
		if wake.IsZero() || !m.Held(last) {
			break
		}
		p.now = maxTime(p.now, wake)
		rd, _ := p.step(Tick{Now: p.now})
		for _, c := range rd.Changes {
			if c.Purpose != Renewal {
				continue
			}
			for _, e := range c.Entries {
				if e.Receipt == last {
					call, size = c.Call, len(c.Entries)
				}
			}
		}
	}
	if call == 0 {
		return
	}
	l, _ := m.Lease(last)
	stop := l.Deadline.Add(-p.margin)
	var want []string
	switch rapid.IntRange(0, 3).Draw(t, "ending") {
	case 0: // a shutdown with the renewal in flight: dropped, the call abandoned
		want = append(want, "cancel "+last+" (shutdown)", fmt.Sprintf("abandon call=%d", call))
	case 1: // no reply by the stop point: dropped there, the call abandoned
		p.now = stop
		_, text := p.step(Tick{Now: stop})
		p.expect(text, "cancel "+last+" (expired)")
	case 2: // a success that arrives at the stop point (its timer fired late): too late
		p.now = stop
		_, text := p.step(RenewResult{Call: call, Now: stop, Entries: make([]error, size)})
		p.expect(text, "cancel "+last+" (late)")
	case 3: // a disposition waits behind the renewal, which fails retryably at the stop point
		p.step(Dispose{Now: p.now, Receipt: last, Disposition: Disposition{Kind: Ack}})
		p.now = stop
		_, text := p.step(RenewResult{Call: call, Now: stop, Err: &core.TransportError{Class: core.Retryable, Op: "change-visibility", Err: errors.New("test: timeout")}})
		p.expect(text, "cancel "+last+" (expired)")
	}
	for _, k := range p.keys {
		if m.Held(k) && k != last {
			want = append(want, "cancel "+k+" (shutdown)")
		}
	}
	_, text := p.step(Shutdown{Now: p.now})
	p.expect(text, want...)
	if st := m.Status(); st.Held != 0 {
		t.Fatalf("%d receipts still held after the shutdown", st.Held)
	}
}
