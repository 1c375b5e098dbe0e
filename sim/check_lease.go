package sim

import (
	"time"

	"github.com/sluicehq/sluice/sim/queue"
)

// LeaseParams is what the lease invariants need of the worker configuration.
type LeaseParams struct {
	Window  time.Duration // W: the visibility window a receive asks for
	Ceiling time.Duration // C: how long after receipt a message may stay hidden (SQS: 12 h)
	Margin  time.Duration // the workers' stop margin; 0: lease.StopMarginFor(Window)
}

type receiptModel struct {
	worker       int
	msg          string
	t0           time.Duration
	dropped      bool
	began        bool // disposition began: the handler's result reached the worker
	dispositions int
	retryOK      bool // the last disposition call failed retryably: it may go out again
	renewing     int  // renewal calls in flight
	working      bool
	dead         bool // its worker crashed
	visible      bool // seen visible at the queue while its handler ran (only under slack)
	visibleSince time.Duration
	started      bool          // its handler started
	beganAt      time.Duration // when its disposition began
	lease        *leaseModel   // the checker's own account of its lease timing (check_prompt.go)
	// ref is the receipt resolved at the queue, once (refOK), for CheckHidden's caller.
	ref   queue.Ref
	refOK bool
}

// overlap is a second consumer that started on a message while the first still ran, excused
// for the timing slack: the first must have stopped or dropped by the deadline.
type overlap struct {
	first, second string
	by            time.Duration
}

// SetHiddenSlack declares the scheduling families' slack: a timer (a handler's local deadline)
// may fire up to d late, so a handler may run up to d past its visibility, and a second
// consumer may overlap the first for up to d.
func (c *Checker) SetHiddenSlack(d time.Duration) { c.hiddenSlack = d }

// LeaseConfigured declares the lease parameters every worker uses.
func (c *Checker) LeaseConfigured(p LeaseParams) { c.lease = p }

func (c *Checker) receipt(r string) *receiptModel {
	m := c.receipts[r]
	if m == nil {
		panic("sim: fact about unknown receipt " + r)
	}
	return m
}

// Received: worker received msg under receipt; t0 is when it sent the receive call.
func (c *Checker) Received(worker int, msg, receipt string, t0 time.Duration) {
	m := &receiptModel{worker: worker, msg: msg, t0: t0, lease: c.newLease(t0)}
	c.receipts[receipt] = m
	c.received++
	for i := range c.working {
		if c.working[i].r == receipt {
			c.working[i].m = m // the model the map holds, as a lookup by receipt finds it
		}
	}
}

// HandlerStarted: worker started the handler for receipt's message.
func (c *Checker) HandlerStarted(receipt string) {
	m := c.receipt(receipt)
	if !c.holds(InvLeaseNoCallAfter, !m.dropped) {
		c.check(InvLeaseNoCallAfter, false, "handler started for dropped receipt %s", receipt)
	}
	for _, w := range c.working {
		other, o := w.r, w.m
		if o.msg == m.msg && !o.dropped {
			if c.hiddenSlack > 0 {
				c.overlaps = append(c.overlaps, overlap{first: other, second: receipt, by: c.now + c.hiddenSlack})
				continue
			}
			c.check(InvNoConcurrent, false, "message %s handled under receipt %s (worker %d) while receipt %s (worker %d) holds its lease",
				m.msg, receipt, m.worker, other, o.worker)
		}
	}
	c.check(InvNoConcurrent, true, "")
	m.working, m.started = true, true
	c.working = append(c.working, workingRef{receipt, m})
}

// HandlerEnded: the handler for receipt stopped (finished, was cancelled, or its worker died).
func (c *Checker) HandlerEnded(receipt string) {
	m := c.receipt(receipt)
	if !m.working {
		return
	}
	m.working = false
	for i, w := range c.working {
		if w.r == receipt {
			c.working = append(c.working[:i], c.working[i+1:]...)
			break
		}
	}
}

// DispositionBegan: the handler's result for receipt reached its worker.
func (c *Checker) DispositionBegan(receipt string) {
	m := c.receipt(receipt)
	if !m.dropped {
		m.began, m.beganAt = true, c.now
	}
}

// RenewSent: a renewal of receipt asking for requested left the worker at now.
func (c *Checker) RenewSent(receipt string, requested time.Duration) {
	m := c.receipt(receipt)
	if !c.holds(InvLeaseNoCallAfter, !m.dropped && !m.dead) {
		c.check(InvLeaseNoCallAfter, false, "renewal of receipt %s sent after it was dropped", receipt)
	}
	if !c.holds(InvLeaseNoRenewAfter, !m.began) {
		c.check(InvLeaseNoRenewAfter, false, "renewal of receipt %s sent after its disposition began", receipt)
	}
	if !c.holds(InvLeaseNoCallAfter, m.dispositions == 0) {
		c.check(InvLeaseNoCallAfter, false, "renewal of receipt %s sent after its disposition call", receipt)
	}
	left := m.t0 + c.lease.Ceiling - c.now
	want := c.lease.Window
	if left < want {
		want = left / time.Second * time.Second
	}
	if left < time.Second {
		c.check(InvLeaseRequestExact, false, "renewal of receipt %s sent with %s left before its ceiling (under 1 s)",
			receipt, left)
	} else {
		if !c.holds(InvLeaseRequestExact, requested == want) {
			c.check(InvLeaseRequestExact, false, "renewal of receipt %s asked for %s, request(now) = %s (t0 %s, W %s, C %s)",
				receipt, requested, want, Offset(m.t0), c.lease.Window, c.lease.Ceiling)
		}
	}
	c.renewSent(receipt, m, requested)
	m.renewing++
}

// RenewReplied: a renewal call of receipt ended (reply, error, or timeout seen by the worker);
// err is its entry's error (nil: renewed).
func (c *Checker) RenewReplied(receipt string, err error) {
	if m := c.receipt(receipt); m.renewing > 0 {
		m.renewing--
		c.renewReplied(m, err)
	}
}

// DispositionSent: a disposition call (delete, release, terminal backoff) for receipt left the worker.
func (c *Checker) DispositionSent(receipt string, op string) {
	m := c.receipt(receipt)
	if !c.holds(InvLeaseNoCallAfter, !m.dropped && !m.dead) {
		c.check(InvLeaseNoCallAfter, false, "%s of receipt %s sent after it was dropped", op, receipt)
	}
	if !c.holds(InvSingleDisposition, m.dispositions == 0 || m.retryOK) {
		c.check(InvSingleDisposition, false, "%s of receipt %s is its disposition number %d", op, receipt, m.dispositions+1)
	}
	m.retryOK = false
	if !c.holds(InvLeaseNoOverlap, m.renewing == 0) {
		c.check(InvLeaseNoOverlap, false, "%s of receipt %s sent while %d renewal(s) of it are in flight",
			op, receipt, m.renewing)
	}
	m.dispositions++
}

// DispositionFailed: a disposition call of receipt failed retryably; the worker may retry it.
func (c *Checker) DispositionFailed(receipt string) { c.receipt(receipt).retryOK = true }

// CallAtQueue: a call about receipt reached the queue now; stop was the receipt's stop point
// (local deadline minus the stop margin) when the call was sent. Under the scheduling
// families (SetHiddenSlack) an arrival may be delivered up to the slack late, beyond the
// latency bound: the call was sent in time, the world held it.
func (c *Checker) CallAtQueue(receipt string, stop time.Duration) {
	if !c.holds(InvCallWithinLease, c.now <= stop+c.hiddenSlack) {
		c.check(InvCallWithinLease, false, "call about receipt %s reached the queue at %s, after its stop point %s (timing slack %s)",
			receipt, Offset(c.now), Offset(stop), c.hiddenSlack)
	}
}

// Dropped: the worker gave receipt up (lost lease, gone, fatal, margin reached).
func (c *Checker) Dropped(receipt string) { c.receipt(receipt).dropped = true }

// WorkerCrashed: worker died; its handlers stopped and its receipts can make no more calls.
func (c *Checker) WorkerCrashed(worker int) {
	keep := c.working[:0]
	for _, w := range c.working {
		if m := w.m; m.worker == worker {
			m.working = false
			continue
		}
		keep = append(keep, w)
	}
	c.working = keep
	for _, m := range c.receipts { // order does not matter: each is marked alike
		if m.worker == worker {
			m.dead = true
		}
	}
}

// CheckHidden checks hidden-while-working for every running handler: hidden(m, receipt)
// reports whether the queue still hides m's message under receipt at now (m is the receipt's
// model, where hidden may keep what it resolved). No receipt is exempted for
// latency: the local deadline (sent-at + requested) is never later than the queue's (applied
// at arrival + requested), and the worker cancels the handler at the local deadline, so the
// promise holds under any latency, spikes beyond the margin included.
//
// Under the scheduling families (SetHiddenSlack) a handler may run up to the slack past the
// instant its message was first seen visible, and a second consumer's overlap must end within it.
func (c *Checker) CheckHidden(hidden func(m *receiptModel, receipt string) bool) {
	for _, w := range c.working {
		r, m := w.r, w.m
		ok := hidden(m, r)
		if !ok && c.hiddenSlack > 0 {
			if !m.visible {
				m.visible, m.visibleSince = true, c.now
			}
			ok = c.now-m.visibleSince <= c.hiddenSlack
		}
		if ok { // counted without building the failure's arguments (this runs after every step)
			c.checks[idxHiddenWhileWork]++
			continue
		}
		c.check(InvHiddenWhileWork, false, "handler of message %s (receipt %s, worker %d) runs while the message is visible at the queue",
			m.msg, r, m.worker)
	}
	c.checkOverlaps()
}

func (c *Checker) checkOverlaps() {
	keep := c.overlaps[:0]
	for _, o := range c.overlaps {
		f := c.receipts[o.first]
		if !f.working || f.dropped {
			continue
		}
		if c.now > o.by {
			c.check(InvNoConcurrent, false, "message %s handled under receipt %s (worker %d) while receipt %s (worker %d) holds its lease, %s past the timing slack",
				f.msg, o.second, c.receipts[o.second].worker, o.first, f.worker, Offset(c.now-o.by))
			continue
		}
		keep = append(keep, o)
	}
	c.overlaps = keep
}

// CheckHiddenUntilEnd checks hidden-while-working for one handler that ends now: hidden says
// whether the queue hid its message up to the instant before now (the handler ran until now,
// perhaps with no step in between at which CheckHidden could look).
func (c *Checker) CheckHiddenUntilEnd(receipt string, hidden bool) {
	m := c.receipt(receipt)
	if !m.working {
		return
	}
	if !hidden && c.hiddenSlack > 0 {
		hidden = !m.visible || c.now-m.visibleSince <= c.hiddenSlack
	}
	if !c.holds(InvHiddenWhileWork, hidden) {
		c.check(InvHiddenWhileWork, false, "handler of message %s (receipt %s, worker %d) ran until %s, after the message became visible at the queue",
			m.msg, receipt, m.worker, Offset(c.now))
	}
}
