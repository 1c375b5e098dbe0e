package sim

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/lease"
)

// Promptness: late is a bug too. The invariants below check that what is due happens by a
// deadline, recomputed from the checker's own record of the state (the committed job views, its
// breaker model, its receipts), never from the machine's own timers. Each deadline allows only
// what the world's fault model explains: the drawn sync delay (one commit cycle) and the
// scheduling families' slack (a timer late by LateMax, rounded up to the bunching grain), once
// per event on the path. docs/simulator.md gives each tolerance and why.

// Promptness invariant names.
const (
	InvWorkConserving    = "runner-work-conserving"
	InvRetryOnTime       = "retry-on-time"
	InvDeferredOnTime    = "deferred-on-time"
	InvHandlerPrompt     = "worker-handler-prompt"
	InvDispositionPrompt = "disposition-prompt"
	InvRenewalOnTime     = "renewal-on-time"
	InvDropAtMargin      = "drop-at-margin"
	InvWakeAtNotLate     = "wakeat-not-late"
	InvStartWhenFree     = "start-when-free"
	InvAckPrompt         = "ack-prompt"
)

// never is a deadline that never comes.
const never = time.Duration(1<<63 - 1)

// waitModel is a job seen waiting in a committed (or recovered) state: since when, with which
// due, and the latest due the checker's own model allows (0: the job's own due).
type waitModel struct {
	due      time.Duration
	deferred bool
	attempts int
	since    time.Duration
	cap      time.Duration
}

// SetSyncDelay declares the drawn sync delay: a commit runs that long after it is asked for.
func (c *Checker) SetSyncDelay(d time.Duration) { c.syncDelay = d }

// CommandAnswered: node's runner acknowledged a command it took at took (ack-prompt): the
// commit that writes it runs within one commit cycle, and a batch in flight lands at once.
func (c *Checker) CommandAnswered(node int, took time.Duration) {
	c.check(InvAckPrompt, c.now-took <= c.cycle(), "node %d acknowledged a command taken at %s at %s, later than one commit cycle (%s)",
		node, Offset(took), Offset(c.now), c.cycle())
}

// cycle is one commit cycle as the world can stretch it: the event that asks for the commit and
// the commit itself may each be late by the scheduling slack, and the commit waits the sync delay.
func (c *Checker) cycle() time.Duration { return c.syncDelay + 2*c.hiddenSlack }

// mute turns invariants off (tests only: to show that one invariant catches a planted defect
// that an earlier one would otherwise report first).
func (c *Checker) mute(names ...string) {
	if c.muted == nil {
		c.muted = make([]bool, len(Invariants))
	}
	for _, n := range names {
		c.muted[invIndex[n]] = true
	}
}

// pass counts one check of name that held, without building its detail (the promptness checks
// run after every step).
func (c *Checker) pass(name string) { c.checks[c.inv(name)]++ }

// NodeStopping: node's graceful stop began (admission off): nothing new need start.
func (c *Checker) NodeStopping(node int) {
	n := c.node(node)
	n.stopping, n.dirty = true, true
}

// noteWait records waiting job v of node n after a commit at now; limit is the latest due the
// checker's model allows for it (0: none beyond its own).
func (n *nodeModel) noteWait(v JobView, now, limit time.Duration) {
	if n.waits == nil {
		n.waits = make(map[uint64]*waitModel)
	}
	w := n.waits[v.ID]
	if w != nil && w.due == v.Due && w.deferred == v.Deferred && w.attempts == v.Attempts {
		return
	}
	n.waits[v.ID] = &waitModel{due: v.Due, deferred: v.Deferred, attempts: v.Attempts, since: now, cap: limit}
	if n.chains != nil {
		due := v.Due
		if limit > 0 && limit < due {
			due = limit
		}
		n.chain(v.ID, max(0, due-now)+n.cycle)
	}
}

// deferLimit is the latest a job deferred at now may be due again: the model breaker's reopening
// when it is open, else (half-open with every probe out) one cooldown from now.
func (n *nodeModel) deferLimit(target string, now time.Duration) time.Duration {
	if b := n.breakers[target]; b != nil && b.open && now < b.until {
		return b.until
	}
	return now + n.p.Cooldown
}

// admitFrom is when the model breaker began admitting (ok false: it does not, every probe out).
func (b *breakerModel) admitFrom(probes int) (time.Duration, bool) {
	switch {
	case b == nil:
		return 0, true
	case b.open:
		return b.until, true
	case b.half && b.inFlight >= probes:
		return 0, false
	}
	return b.since, true
}

// kindFull reports whether kind's jobs are held back: by its concurrency limit, or because
// the node registers kinds and not this one (such jobs wait, never started).
func (n *nodeModel) kindFull(kind string) bool {
	l, registered := n.p.KindLimits[kind]
	if !registered && n.p.KindsOnly {
		return true
	}
	return l > 0 && n.kindRunning[kind] >= l
}

// runnerDue computes node n's earliest obligation: the instant by which some attempt must have
// started (or some waiting job moved on) because a unit is free and a job is due whose breaker
// admits it; never when there is none.
func (c *Checker) runnerDue(n *nodeModel) {
	n.dirty = false
	n.dueBy, n.dueInv, n.dueWhy = never, "", dueWhy{}
	if !n.up || n.stopping || n.running >= n.p.Capacity {
		return
	}
	// The last target's and kind's answers, kept: jobs share a few of each, and the lookups
	// below are pure.
	var (
		lastTarget, lastKind string
		tLooked, kLooked     bool
		from                 time.Duration
		admits, full         bool
		kindFree             time.Duration
	)
	for _, v := range n.live {
		if v.State != "waiting" {
			continue
		}
		w := n.waits[v.ID]
		if w == nil {
			continue
		}
		j := c.job(n, v.ID)
		if j == nil || j.cancelled || j.running {
			continue
		}
		if !tLooked || v.Target != lastTarget {
			from, admits = n.breakers[v.Target].admitFrom(n.p.Probes)
			lastTarget, tLooked = v.Target, true
		}
		if !admits {
			continue
		}
		if !kLooked || j.kind != lastKind {
			full, kindFree = n.kindFull(j.kind), n.kindFreeSince[j.kind]
			lastKind, kLooked = j.kind, true
		}
		held, flowFree := c.flowBlocked(n, v.ID, c.now)
		if full || held {
			continue
		}
		due, inv := v.Due, InvWorkConserving
		switch {
		case v.Deferred:
			inv = InvDeferredOnTime
		case v.Attempts > 0:
			inv = InvRetryOnTime
		}
		if w.cap > 0 && w.cap < due {
			due = w.cap
		}
		t := max(due, w.since, from, n.freeSince, kindFree, flowFree)
		if t < n.dueBy {
			n.dueBy, n.dueInv = t, inv
			n.dueWhy = dueWhy{v, due, w.since, from, n.freeSince}
		}
	}
}

// dueWhy is what a node's obligation comes from, rendered only when it is missed (runnerDue
// runs after every step that changed the node's model).
type dueWhy struct {
	v                      JobView
	due, since, from, free time.Duration
}

func (d dueWhy) String() string {
	v := d.v
	return fmt.Sprintf("job %d (%s, attempts %d, due %s, model due %s, waiting since %s, target %s admitting since %s, a unit free since %s)",
		v.ID, v.State, v.Attempts, Offset(v.Due), Offset(d.due), Offset(d.since), v.Target, Offset(d.from), Offset(d.free))
}

// CheckPrompt checks every runner node's obligation at now (after every step).
func (c *Checker) CheckPrompt() {
	for id := 1; id <= len(c.nodes); id++ {
		n := c.nodes[id]
		if n == nil {
			continue
		}
		if n.dirty {
			c.runnerDue(n)
		}
		if n.dueBy == never {
			continue
		}
		if c.now <= n.dueBy+c.cycle() {
			c.pass(n.dueInv)
			continue
		}
		c.check(n.dueInv, false, "node %d: nothing started by %s (one commit cycle %s after %s): %s",
			id, Offset(n.dueBy+c.cycle()), c.cycle(), Offset(n.dueBy), n.dueWhy.String())
	}
}

// CommitDispatched checks the state a commit's Begin left (views, at now: the flight takes
// no simulated time) after its starts were reported: while the node dispatches with a unit
// free, no job is left waiting that was due, not deferred, not cancelled, and whose kind's
// limit does not hold it. Begin's admission starts such a job, defers it (its breaker refuses:
// a later due), or ends it (spent, late); leaving it for a later commit is a scheduler that
// stops short.
func (c *Checker) CommitDispatched(node int, views []JobView) {
	n := c.node(node)
	if !n.up || n.stopping {
		return
	}
	// A start the batch journaled and a cancel taken during the flight withdrew holds its unit
	// until the commit lands: running in views, never reported started.
	held := n.running
	for _, v := range views {
		if j := c.job(n, v.ID); v.State == "running" && (j == nil || !j.running) {
			held++
		}
	}
	if held >= n.p.Capacity {
		return
	}
	for _, v := range views {
		if v.State != "waiting" || v.Deferred || v.Due > c.now {
			continue
		}
		j := c.job(n, v.ID)
		if j == nil || j.cancelled || j.cancelAsk || j.running || n.kindFull(j.kind) {
			continue
		}
		if held, _ := c.flowBlocked(n, v.ID, c.now); held {
			continue
		}
		c.check(InvStartWhenFree, false, "node %d: a commit at %s left job %d (due %s, kind %s) waiting with %d of %d units free",
			node, Offset(c.now), v.ID, Offset(v.Due), j.kind, n.p.Capacity-held, n.p.Capacity)
		return
	}
	c.pass(InvStartWhenFree)
}

// RunnerWake checks node's wake after a commit: with a unit free while dispatching, the
// machine's WakeAt (wake, 0: none) and the timer the driver holds (armed, 0: none) are never
// later than the earliest due of a waiting job in the committed state.
func (c *Checker) RunnerWake(node int, wake, armed time.Duration) {
	n := c.node(node)
	if !n.up || n.stopping || n.running >= n.p.Capacity {
		return
	}
	earliest := never
	id := uint64(0)
	for _, v := range n.live {
		if v.State == "waiting" && v.Due > c.now && v.Due < earliest {
			j := c.job(n, v.ID)
			if j != nil && n.kindFull(j.kind) {
				continue // its kind's limit holds it: an attempt's end, not a timer, frees it
			}
			if j != nil && (j.cancelAsk || j.cancelled) {
				continue // cancelled in the live state: the next commit makes it durable
			}
			if held, _ := c.flowBlocked(n, v.ID, v.Due); held {
				continue
			}
			earliest, id = v.Due, v.ID
		}
	}
	if earliest == never {
		return
	}
	switch {
	case wake <= 0 || wake > earliest:
		c.check(InvWakeAtNotLate, false, "node %d: the runner's WakeAt is %s, after job %d's due %s",
			node, offsetOrNone(wake), id, Offset(earliest))
	case armed <= c.now || armed > earliest:
		c.check(InvWakeAtNotLate, false, "node %d: the driver's wake timer is %s, after job %d's due %s (WakeAt %s)",
			node, offsetOrNone(armed), id, Offset(earliest), offsetOrNone(wake))
	default:
		c.pass(InvWakeAtNotLate)
	}
}

func offsetOrNone(d time.Duration) string {
	if d <= 0 {
		return "none"
	}
	return Offset(d)
}

// leaseModel is the checker's own account of one receipt's lease timing (docs/worker.md):
// when its next renewal is due, and when it must be dropped.
type leaseModel struct {
	window    time.Duration
	margin    time.Duration
	deadline  time.Duration // local deadline: t0 + W, then sentAt + requested
	attempt   int           // failed renewals in a row
	next      time.Duration // the next renewal (or the drop when it is past the margin)
	drop      bool          // next is a drop, not a renewal
	soft      bool          // the drop is the margin's: a rider sent before the margin still renews
	sentAt    time.Duration
	requested time.Duration
}

func (l *leaseModel) stop() time.Duration       { return l.deadline - l.margin }
func (l *leaseModel) retryUntil() time.Duration { return l.deadline - l.window/10 }

// schedule sets the next renewal after an event at now: a third of what is left of the
// window, never later than the stop point (where it is a drop).
func (l *leaseModel) schedule(now time.Duration) {
	l.next = min(now+max(0, l.deadline-now)/3, l.stop())
	l.drop = l.next >= l.retryUntil()
	l.soft = l.drop
}

// dropNow says the machine must drop the receipt at now.
func (l *leaseModel) dropNow(now time.Duration) { l.next, l.drop, l.soft = now, true, false }

// leasePacing is the lease machine's default pacing (the world configures none).
var leasePacing = lease.PacingDefault()

// newLease starts the model of a receipt received at now with stamp t0.
func (c *Checker) newLease(t0 time.Duration) *leaseModel {
	l := &leaseModel{window: c.lease.Window, margin: c.lease.Margin, deadline: t0 + c.lease.Window}
	if l.margin == 0 {
		l.margin = lease.StopMarginFor(l.window)
	}
	if c.now >= l.stop() {
		l.dropNow(c.now) // the reply came after the window lapsed: never held
	} else {
		l.schedule(c.now)
	}
	return l
}

// renewSent checks a renewal's send time against the model: not before its renewal time (less
// the coalescing window, for a first try riding along with a batch), not after it (plus the
// scheduling slack), and never when the model says drop.
func (c *Checker) renewSent(receipt string, m *receiptModel, requested time.Duration) {
	l := m.lease
	if l == nil || m.began {
		return
	}
	early := time.Duration(0)
	if l.attempt == 0 {
		early = min(lease.CoalesceDefault, l.window/10)
	}
	inv := InvRenewalOnTime
	if l.drop {
		inv = InvDropAtMargin
	}
	// A first try due at or past the margin rides along early with a batch: sent before the
	// margin, it renews (the machine decides at the send).
	renews := !l.drop || (l.soft && l.attempt == 0 && c.now < l.retryUntil())
	if c.now >= l.next-early && c.now <= l.next+c.hiddenSlack && renews {
		c.pass(inv)
	} else {
		c.check(inv, false, "renewal of receipt %s (worker %d) sent at %s; the model says %s at %s (early allowance %s, slack %s; attempt %d, local deadline %s)",
			receipt, m.worker, Offset(c.now), l.what(), Offset(l.next), early, c.hiddenSlack, l.attempt, Offset(l.deadline))
	}
	l.sentAt, l.requested = c.now, requested
	l.next, l.drop, l.soft = l.stop(), true, false // the reply comes by the stop point, or the receipt is dropped there
}

func (l *leaseModel) what() string {
	if l.drop {
		return "drop"
	}
	return "renew"
}

// renewReplied moves the model on a renewal's reply at now.
func (c *Checker) renewReplied(m *receiptModel, err error) {
	l := m.lease
	if l == nil || m.began {
		return
	}
	switch class := core.ClassOf(err); {
	case err == nil:
		if c.now >= l.stop() || c.now >= l.sentAt+l.requested-l.margin {
			l.dropNow(c.now) // succeeded too late to count
			return
		}
		l.deadline, l.attempt = l.sentAt+l.requested, 0
		l.schedule(c.now)
	case class == core.Gone || class == core.Fatal:
		l.dropNow(c.now)
	default:
		next := c.now + leasePacing[min(l.attempt, len(leasePacing)-1)]
		l.attempt++
		if next >= l.retryUntil() {
			l.dropNow(c.now)
			return
		}
		l.next, l.drop, l.soft = next, false, false
	}
}

// CheckWorker checks one worker process after a step: open lists the receipts whose lease has
// not ended (in receive order), handlers how many handlers hold a concurrency slot, limit the
// concurrency, active whether the process is up and not stopping; wake and armed are the worker
// machine's WakeAt and the driver's timer (0: none).
func (c *Checker) CheckWorker(worker int, active bool, open []string, handlers, limit int, wake, armed time.Duration) {
	waiting, earliest := 0, never
	first := ""
	for len(c.openSeen) <= worker {
		c.openSeen, c.openAt = append(c.openSeen, nil), append(c.openAt, 0)
	}
	seen := c.openSeen[worker]
	if c.openAt[worker] != c.received {
		seen = seen[:0]
	}
	for i, r := range open {
		var m *receiptModel
		if i < len(seen) && seen[i].r == r {
			m = seen[i].m // the same receipt, and no Received since: the same model
		} else {
			m = c.receipts[r]
			if i < len(seen) {
				seen[i] = workingRef{r, m}
			} else {
				seen = append(seen, workingRef{r, m})
			}
		}
		if m == nil || m.dropped || m.dead || m.dispositions > 0 {
			continue
		}
		if !m.started && !m.began {
			waiting++
		}
		if m.began {
			if m.renewing > 0 {
				c.checks[idxDispositionPrompt]++
			} else {
				c.check(InvDispositionPrompt, false, "receipt %s (worker %d): its handler's result came at %s, no renewal is in flight, and no disposition call went out",
					r, m.worker, Offset(m.beganAt))
			}
		}
		l := m.lease
		if l == nil || (m.began && m.renewing == 0) {
			continue
		}
		inv, idx := InvRenewalOnTime, idxRenewalOnTime
		if l.drop {
			inv, idx = InvDropAtMargin, idxDropAtMargin
		}
		if c.now <= l.next+c.hiddenSlack {
			c.checks[idx]++
		} else {
			c.check(inv, false, "receipt %s (worker %d): the model says %s at %s (slack %s), still held at %s (attempt %d, local deadline %s)",
				r, m.worker, l.what(), Offset(l.next), c.hiddenSlack, Offset(c.now), l.attempt, Offset(l.deadline))
		}
		if l.next > c.now && l.next < earliest {
			earliest, first = l.next, r
		}
	}
	c.openSeen[worker], c.openAt[worker] = seen[:min(len(seen), len(open))], c.received
	if active && waiting > 0 {
		if handlers >= limit {
			c.pass(InvHandlerPrompt)
		} else {
			c.check(InvHandlerPrompt, false, "worker %d holds %d received deliveries without a handler while %d of %d handlers run",
				worker, waiting, handlers, limit)
		}
	}
	if earliest != never {
		if wake > 0 && wake <= earliest && armed > 0 && armed <= earliest {
			c.pass(InvWakeAtNotLate)
		} else {
			c.check(InvWakeAtNotLate, false, "worker %d: WakeAt %s, driver's timer %s, after receipt %s's next lease action at %s",
				worker, offsetOrNone(wake), offsetOrNone(armed), first, Offset(earliest))
		}
	}
}
