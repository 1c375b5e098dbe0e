package qjobs

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/core/flow"
)

// Flow control in one process (Register.Flow). A queue shares no state between the processes
// that receive from it, so every limit here holds per process: a fleet of N processes starts
// up to N times a kind's Rate. A fleet-wide limit needs a store shared by the fleet, which a
// queue does not offer.
//
//   - Rate bounds the starts of the kind's attempts, KeyRate the starts of each flow key's
//     (Attrs.Key; a message without one has the key ""), KeyLimit the attempts of one key
//     running at once. Buckets are empty when the process first receives (flow.Fresh): a
//     restart grants no burst the process may have spent before it.
//   - A delivery over a limit is not run and is no attempt: it waits in the queue, not in the
//     process (a held delivery takes a worker slot, and one busy key would starve the other
//     keys of the process), except for a short hold (below). On a standard queue it is re-sent with a delay until the
//     token is expected, or, for a key at its KeyLimit, until a slot is expected (the kind's
//     mean attempt time in this process over KeyLimit; KeyWaitBase before any attempt ended).
//     The successor is a new message: its receive count starts at 1, so a wait spends neither
//     LostMax nor a redrive policy's maxReceiveCount; it counts in Attrs.Waits instead, and a
//     job that has waited Config.WaitMax times is dead-lettered (ReasonWaits). On a FIFO queue a re-send would put the job behind the rest of its message
//     group, so the message is hidden instead: that wait is one more receive, counted as a
//     lost delivery against LostMax (and a redrive policy's maxReceiveCount).
//   - Waiting deliveries of one bucket (one key's slots) are told to come back one interval
//     (one expected slot) apart, never past DelayMax, so a backlog returns at the rate it can
//     start rather than all at once.
//   - A delivery whose rates allow a start at most HoldMax ahead (and whose key has a slot) is
//     not sent back: its Run carries Delay, and the driver starts the handler then. Its tokens
//     are taken for that instant and its slot at once.
//   - Timeout bounds an attempt (the job's Attrs.Timeout, else the kind's), and never past what
//     the visibility limit leaves the delivery: Run.Timeout. An attempt that ends after it
//     without success (AttemptDone.TimedOut) is counted; its outcome is the driver's.

// Flow is a kind's flow control in this process. The zero Flow limits nothing.
type Flow struct {
	Rate, KeyRate flow.Rate
	KeyLimit      int           // ≥ 0; 0: none
	Timeout       time.Duration // ≥ 0; 0: none
}

// Validate names the first field of f out of range.
func (f Flow) Validate() error {
	if err := f.Rate.Validate(); err != nil {
		return fmt.Errorf("Rate: %w", err)
	}
	if err := f.KeyRate.Validate(); err != nil {
		return fmt.Errorf("KeyRate: %w", err)
	}
	switch {
	case f.KeyLimit < 0:
		return fmt.Errorf("KeyLimit %d: must be ≥ 0 (0: none)", f.KeyLimit)
	case f.Timeout < 0:
		return fmt.Errorf("Timeout %v: must be ≥ 0 (0: none)", f.Timeout)
	}
	return nil
}

func (f Flow) keyed() bool { return f.KeyLimit > 0 || f.KeyRate.On() }

// KeyWaitBase is the time a slot of a key at its KeyLimit is expected in before any attempt
// of the kind ended in this process (after that: the mean attempt time over KeyLimit).
const KeyWaitBase = time.Second

// WaitMaxDefault is Config.WaitMax's default: the flow waits a job may make before it is
// dead-lettered (ReasonWaits).
const WaitMaxDefault = 1000

// keysMax bounds the flow keys the machine keeps state for. Idle keys (nothing running, a
// full bucket) are forgotten in a sweep each time the keys kept double (from keysSweepMin), and
// a forgotten key is remade exactly as it was; past the bound a delivery of a new key waits.
const (
	keysMax      = 1 << 16
	keysSweepMin = 1 << 10
)

// kindFlow is a registered kind's limits and state.
type kindFlow struct {
	cfg      Flow
	bucket   *flow.Bucket  // Rate; made on first use, as it was when the process first received
	promised int64         // UnixNano: the latest come-back time told to a delivery waiting for bucket
	runMean  time.Duration // the mean time of the kind's attempts in this process (EWMA); 0: none yet
}

// keyFlow is one flow key's state. Invariant: running is the Runs of the key not yet answered.
type keyFlow struct {
	running  int
	bucket   *flow.Bucket // KeyRate
	promised int64        // the latest come-back time told to a delivery waiting for bucket
	slotAt   int64        // the latest come-back time told to a delivery waiting for a slot
}

type keyID struct{ kind, key string }

// flowBegin marks the first delivery: every bucket is as if made empty then.
func (m *Machine) flowBegin(now time.Time) {
	if !m.flowStarted {
		m.flowStarted, m.flowStart = true, now.UnixNano()
	}
}

func (m *Machine) bucketOf(b **flow.Bucket, r flow.Rate) *flow.Bucket {
	if *b == nil {
		fresh := flow.Fresh(r, m.flowStart)
		if m.cfg.Defect == DefectBurstAtStart {
			fresh = flow.Bucket{}
		}
		*b = &fresh
	}
	return *b
}

// key returns k's state, made if new; nil when keysMax keys are busy.
func (m *Machine) key(id keyID) *keyFlow {
	if k, ok := m.keys[id]; ok {
		return k
	}
	if len(m.keys) >= max(m.keysSweepAt, keysSweepMin) {
		m.forgetIdleKeys()
		m.keysSweepAt = min(2*len(m.keys), keysMax)
		if len(m.keys) >= keysMax {
			return nil
		}
	}
	k := &keyFlow{}
	m.keys[id] = k
	return k
}

// idle reports whether k equals a key never seen: nothing running and its bucket full.
func (k *keyFlow) idle(now int64) bool {
	return k.running == 0 && (k.bucket == nil || k.bucket.Full(now)) && k.promised <= now && k.slotAt <= now
}

func (m *Machine) forgetIdleKeys() {
	now := m.now.UnixNano()
	for id, k := range m.keys { // deletes only: order does not matter
		if k.idle(now) {
			delete(m.keys, id)
		}
	}
}

// flowWait decides whether a delivery of a may start under its kind's limits. When it must
// wait in the queue it returns the plan that makes it wait and true. Otherwise start (UnixNano,
// ≥ now) is when it may start: now, or when a rate allows the next start if that is at most
// HoldMax ahead (the delivery is then held in the process until then: bouncing it through the
// queue would cost a whole second at least).
func (m *Machine) flowWait(now time.Time, d delivery, a Attrs) (pl plan, start int64, waits bool) {
	nowN := now.UnixNano()
	kf := m.flows[a.Kind]
	if kf == nil {
		return plan{}, nowN, false
	}
	var kindB, keyB *flow.Bucket
	start = nowN
	if r := kf.cfg.Rate; r.On() && m.cfg.Defect != DefectKindRateIgnored {
		kindB = m.bucketOf(&kf.bucket, r)
		start = max(start, kindB.ReadyAt(r))
	}
	var k *keyFlow
	full := false
	if kf.cfg.keyed() {
		if k = m.key(keyID{a.Kind, a.Key}); k != nil {
			full = kf.cfg.KeyLimit > 0 && k.running >= kf.cfg.KeyLimit+m.keyLimitSlack()
			if r := kf.cfg.KeyRate; r.On() {
				keyB = m.bucketOf(&k.bucket, r)
				start = max(start, keyB.ReadyAt(r))
			}
		}
	}
	if !full && !(kf.cfg.keyed() && k == nil) && start-nowN <= int64(HoldMax) {
		if start > nowN {
			m.stats.FlowHeld++
		}
		return plan{}, start, false
	}
	var at int64 // when to come back
	var why string
	wait := func(w int64, text string) {
		if w > at {
			at, why = w, text
		}
	}
	switch {
	case kf.cfg.keyed() && k == nil:
		wait(nowN+int64(m.cfg.DelayMax), "too many flow keys in this process")
	case full:
		wait(m.slotAt(kf, k, nowN), "key "+strconv.Quote(a.Key)+" is at its limit ("+strconv.Itoa(k.running)+" running)")
	}
	if r := kf.cfg.Rate; kindB != nil && kindB.ReadyAt(r) > nowN {
		wait(spread(&kf.promised, kindB.ReadyAt(r), r, nowN, m.cfg.DelayMax), "its kind is rate limited")
	}
	if r := kf.cfg.KeyRate; keyB != nil && keyB.ReadyAt(r) > nowN {
		wait(spread(&k.promised, keyB.ReadyAt(r), r, nowN, m.cfg.DelayMax), "key "+strconv.Quote(a.Key)+" is rate limited")
	}
	w := time.Duration(at - nowN)
	if m.cfg.FIFO {
		// A re-send would go behind the rest of its group: hide, counted as a lost delivery.
		if v := m.hideFor(now, d, w); v > 0 {
			m.stats.FlowWaits++
			return plan{Action: actHide, Visibility: v, Wait: why}, 0, true
		}
	}
	if a.Waits >= m.waitMax() {
		return m.dead(a, a.Attempts, ReasonWaits, fmt.Sprintf("%d flow waits in the queue (last: %s)", a.Waits, why)), 0, true
	}
	m.stats.FlowWaits++
	a.Waits++
	return plan{Action: actResend, Send: outgoing{Attrs: a, Delay: max(time.Second, m.delay(w))}, Wait: why}, 0, true
}

// HoldMax is the longest a delivery is held in the process for a rate's next token (Run.Delay)
// rather than sent back to wait in the queue, whose delays are whole seconds.
const HoldMax = time.Second

// spread is when a delivery waiting for a bucket ready at readyAt comes back: one interval
// after the one told before it, so a backlog comes back at the rate it can start; never past
// the longest delay.
func spread(promised *int64, readyAt int64, r flow.Rate, now int64, delayMax time.Duration) int64 {
	at := max(readyAt, min(*promised+r.Interval(), now+int64(delayMax)))
	*promised = at
	return at
}

// slotAt is when a delivery of key k, at its limit, comes back: one expected slot (the
// kind's mean attempt time over KeyLimit) after now or after the one told before it, never
// past the longest delay.
func (m *Machine) slotAt(kf *kindFlow, k *keyFlow, now int64) int64 {
	slot := int64(KeyWaitBase)
	if kf.runMean > 0 {
		slot = max(1, int64(kf.runMean)/int64(kf.cfg.KeyLimit))
	}
	at := max(now+slot, min(k.slotAt+slot, now+int64(m.cfg.DelayMax)))
	k.slotAt = at
	return at
}

func (m *Machine) waitMax() int {
	if m.cfg.WaitMax > 0 {
		return m.cfg.WaitMax
	}
	return WaitMaxDefault
}

// flowTake spends what a start of a at start (UnixNano, flowWait's) takes: a token of each
// bucket and a slot of its key (from now: a held delivery keeps its slot).
func (m *Machine) flowTake(start int64, a Attrs) {
	kf := m.flows[a.Kind]
	if kf == nil {
		return
	}
	nowN := start
	if r := kf.cfg.Rate; r.On() {
		m.bucketOf(&kf.bucket, r).Take(r, nowN)
	}
	if kf.cfg.keyed() {
		k := m.key(keyID{a.Kind, a.Key})
		if k == nil {
			panic("qjobs: flowTake of a key flowWait refused") // flowWait made it in the same step
		}
		k.running++
		if r := kf.cfg.KeyRate; r.On() {
			m.bucketOf(&k.bucket, r).Take(r, nowN)
		}
	}
}

// flowEnd gives back the slot of an attempt of a that ended (an outcome or an abandon) after
// running took.
func (m *Machine) flowEnd(a Attrs, took time.Duration) {
	kf := m.flows[a.Kind]
	if kf == nil || !kf.cfg.keyed() {
		return
	}
	took = max(0, took)
	if kf.runMean == 0 {
		kf.runMean = max(1, took)
	} else {
		kf.runMean = max(1, kf.runMean+(took-kf.runMean)/8)
	}
	k := m.keys[keyID{a.Kind, a.Key}]
	if k == nil || k.running == 0 {
		panic(fmt.Sprintf("qjobs: attempt of key %q ended, none running", a.Key))
	}
	k.running--
}

// timeout is the bound of an attempt of a delivered at d.ReceivedAt, starting at now: the
// job's, else its kind's, never past what the visibility limit leaves; 0: none.
func (m *Machine) timeout(now time.Time, d delivery) time.Duration {
	t := d.Attrs.Timeout
	if kf := m.flows[d.Attrs.Kind]; t == 0 && kf != nil {
		t = kf.cfg.Timeout
	}
	if t == 0 {
		return 0
	}
	if m.cfg.Defect == DefectTimeoutUncapped {
		return t
	}
	left := m.cfg.VisibilityMax - m.cfg.Margin - now.Sub(d.ReceivedAt)
	return max(time.Nanosecond, min(t, left))
}

// Defect is a planted flow-control bug (Config.Defect), each breaking one promise, so that a
// test or the simulator can show its check fires. Production leaves it NoDefect.
type Defect uint8

const (
	NoDefect              Defect = iota
	DefectKeyLimitPlusOne        // a key may run KeyLimit+1 attempts
	DefectKindRateIgnored        // the kind's Rate is never checked
	DefectBurstAtStart           // buckets start full: a restart grants a burst
	DefectTimeoutUncapped        // the timeout is not cut to the visibility limit
)

func (m *Machine) keyLimitSlack() int {
	if m.cfg.Defect == DefectKeyLimitPlusOne {
		return 1
	}
	return 0
}

// checkFlow states the flow invariants: running per key equals the Runs outstanding of the
// key, no key runs more than its KeyLimit, and the keys kept stay within keysMax.
func (m *Machine) checkFlow() error {
	if len(m.keys) > keysMax {
		return fmt.Errorf("qjobs: %d flow keys kept, more than %d", len(m.keys), keysMax)
	}
	running := map[keyID]int{}
	for _, p := range m.pending { // counts: order does not matter
		if p.stage == stageRun {
			if kf := m.flows[p.d.Attrs.Kind]; kf != nil && kf.cfg.keyed() {
				running[keyID{p.d.Attrs.Kind, p.d.Attrs.Key}]++
			}
		}
	}
	ids := make([]keyID, 0, len(m.keys))
	for id := range m.keys {
		ids = append(ids, id)
	}
	sortKeys(ids)
	for _, id := range ids {
		k := m.keys[id]
		if k.running != running[id] {
			return fmt.Errorf("qjobs: key %q of kind %q counts %d running, %d runs outstanding", id.key, id.kind, k.running, running[id])
		}
		if lim := m.flows[id.kind].cfg.KeyLimit; lim > 0 && k.running > lim {
			return fmt.Errorf("qjobs: key %q of kind %q runs %d attempts, its limit is %d", id.key, id.kind, k.running, lim)
		}
	}
	var lost []keyID
	for id := range running {
		if _, ok := m.keys[id]; !ok {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		sortKeys(lost) // the same report every run
		return fmt.Errorf("qjobs: key %q of kind %q runs %d attempts and has no state", lost[0].key, lost[0].kind, running[lost[0]])
	}
	return nil
}

func sortKeys(ids []keyID) {
	sort.Slice(ids, func(i, j int) bool {
		return ids[i].kind < ids[j].kind || ids[i].kind == ids[j].kind && ids[i].key < ids[j].key
	})
}
