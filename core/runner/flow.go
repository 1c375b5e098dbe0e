package runner

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core/flow"
)

// Flow control (docs/runner.md): what may keep a due job from starting besides the pool, its
// kind's limit and its target's breaker, decided here at admission.
//
//   - a paused kind starts nothing (journaled: Pause, Resume);
//   - a kind's Rate bounds its starts (a token bucket per kind);
//   - per flow key (Opts.Key): KeyLimit bounds the attempts running at once, KeyRate the
//     starts, and Fair serves the keys round-robin;
//   - per group (Opts.Group): one at a time, in id order; a dead job with Opts.Hold keeps the
//     rest waiting until it is retried or cancelled.
//
// A due job stopped by its key or its group is parked: taken out of its kind's heaps and kept
// by the key or the group, so that neither the scheduler nor WakeAt sees it again until what
// stopped it changes (an attempt of the key ends, the key's bucket refills, a round of the
// fair share ends, the group's head ends). Parking is not durable: replay queues every
// waiting job and the next schedule parks again what must wait.
//
// Buckets start empty when dispatching first begins (flow.Fresh): a restart grants no burst
// the runner may have spent before the crash.

// Rate is flow.Rate: at most Count starts per Per, Burst at once (0: Count).
type Rate = flow.Rate

// Defect is a planted flow-control bug (MachineConfig.Defect), each breaking one promise.
type Defect uint8

const (
	NoDefect              Defect = iota
	DefectPauseIgnored           // a paused kind still starts jobs
	DefectBurstAtOpen            // buckets start full when dispatching begins: a restart grants a burst
	DefectKeyLimitPlusOne        // a key may run KeyLimit+1 attempts
	DefectGroupUnordered         // any job of a group may start while an earlier one has not ended
	DefectHoldIgnored            // a dead job with Hold releases its group
	DefectFairOff                // no rounds: keys are served by priority and due only
	DefectTimeoutTriple          // Attempt.Timeout is three times the configured bound
	DefectKindRateIgnored        // the kind's Rate is not checked at admission
)

// BlockReason says why a waiting job is not starting (Machine.Blocked).
type BlockReason uint8

const (
	NotBlocked        BlockReason = iota
	BlockNotDue                   // its due time has not come (Until)
	BlockDeferred                 // its target's breaker is open (Until)
	BlockUnregistered             // its kind is not registered
	BlockPaused                   // its kind is paused
	BlockKindLimit                // its kind runs KindConfig.Limit attempts (Running)
	BlockKindRate                 // its kind's rate allows the next start at Until
	BlockKeyLimit                 // its key runs KeyLimit attempts (Key, Running)
	BlockKeyRate                  // its key's rate allows the next start at Until (Key)
	BlockFair                     // its key started this round; other keys go first (Key)
	BlockGroup                    // an earlier job of its group has not ended (By)
	BlockGroupDead                // an earlier job of its group is dead and holds it (By)
	BlockPool                     // every unit of the pool is taken
	NotWaiting                    // the job is not waiting (running, ended, or unknown)
)

// Block is why a waiting job is not starting, as an operator is told.
type Block struct {
	Reason  BlockReason
	Until   time.Time // BlockNotDue, BlockDeferred, BlockKindRate, BlockKeyRate
	By      uint64    // BlockGroup, BlockGroupDead: the job holding the group
	Key     string    // the flow key or the group
	Running int       // BlockKindLimit, BlockKeyLimit
}

func (b Block) String() string {
	switch b.Reason {
	case NotBlocked:
		return "ready to start"
	case BlockNotDue:
		return "due at " + b.Until.Format(time.RFC3339Nano)
	case BlockDeferred:
		return "its target's breaker is open until " + b.Until.Format(time.RFC3339Nano)
	case BlockUnregistered:
		return "its kind is not registered in this process"
	case BlockPaused:
		return "its kind is paused"
	case BlockKindLimit:
		return "its kind is at its concurrency limit (" + strconv.Itoa(b.Running) + " running)"
	case BlockKindRate:
		return "its kind is rate limited until " + b.Until.Format(time.RFC3339Nano)
	case BlockKeyLimit:
		return "key " + strconv.Quote(b.Key) + " is at its limit (" + strconv.Itoa(b.Running) + " running)"
	case BlockKeyRate:
		return "key " + strconv.Quote(b.Key) + " is rate limited until " + b.Until.Format(time.RFC3339Nano)
	case BlockFair:
		return "key " + strconv.Quote(b.Key) + " waits its turn (fair share among keys)"
	case BlockGroup:
		return "sequence " + strconv.Quote(b.Key) + " is held by job " + strconv.FormatUint(b.By, 10)
	case BlockGroupDead:
		return "sequence " + strconv.Quote(b.Key) + " is held by dead job " + strconv.FormatUint(b.By, 10) + " (retry or cancel it)"
	case BlockPool:
		return "every unit of the pool is busy"
	case NotWaiting:
		return "not waiting"
	}
	return fmt.Sprintf("block(%d)", uint8(b.Reason))
}

// flowKey is one flow key of a kind that counts keys (KeyLimit, KeyRate or Fair).
// Invariant: running is the attempts of this key in Machine.inflight.
type flowKey struct {
	kind    *kind
	name    string
	running int
	bucket  flow.Bucket
	served  uint64 // the kind's round in which the key last started a job
	parked  []*job // by byPrio, a binary heap
	waking  bool   // in Machine.rateWake
	fairing bool   // in kind.fairKeys
}

// group is one sequence: ids are its jobs not yet ended, ascending, and a dead job with Hold
// at their head. Invariant: ids[0] is the only job of the group that may start.
type group struct {
	kind   *kind
	name   string
	ids    []uint64
	parked []*job // ascending by id
	// running counts the group's jobs in state Running (a retried job may head the group
	// while a later one, started when it had ended, still runs). Invariant: ≤ 1.
	running int
	stuck   int // what restuck added to the kind's stuck count
	// inflight counts the group's attempts holding a unit: a cancelled job's handler may run
	// on after its Cancelled record, and the group's next job waits for it.
	inflight int
}

func (k *kind) keyed() bool {
	return k.cfg.KeyLimit > 0 || k.cfg.KeyRate.On() || k.cfg.Fair
}

// holds reports whether j is a dead job holding its group.
func holds(j *job) bool { return j.State == Dead && j.Opts.Hold && j.Opts.Group != "" }

func groupKey(o *Opts) string { return o.Kind + "\x00" + o.Group }

// keyOf returns j's flow key state, making it (with an empty bucket) when new.
func (m *Machine) keyOf(j *job) *flowKey {
	// Looked up with a name built on the stack (it does not escape): a lookup allocates nothing.
	if ks := m.keys[j.kind.name+"\x00"+j.Opts.Key]; ks != nil {
		return ks
	}
	m.sweepKeys()
	ks := &flowKey{kind: j.kind, name: j.Opts.Key}
	if r := j.kind.cfg.KeyRate; r.On() && m.cfg.Defect != DefectBurstAtOpen {
		ks.bucket = flow.Fresh(r, m.openAt)
	}
	m.keys[j.kind.name+"\x00"+j.Opts.Key] = ks
	return ks
}

// forgettable reports whether ks holds nothing a fresh key would not: no attempt, no parked
// job, a full bucket and no turn taken in the current round.
func (m *Machine) forgettable(ks *flowKey) bool {
	return ks.running == 0 && len(ks.parked) == 0 && !ks.waking && !ks.fairing &&
		ks.bucket.Full(m.now.UnixNano()) && ks.served != ks.kind.round
}

// sweepKeys forgets every forgettable key once the table has doubled since the last sweep:
// memory stays bounded by the keys in use, and a key is not made again for each of its jobs.
func (m *Machine) sweepKeys() {
	if len(m.keys) < m.keysSweepAt {
		return
	}
	for name, ks := range m.keys { // the order does not matter: each key is judged alone
		if m.forgettable(ks) {
			delete(m.keys, name)
		}
	}
	m.keysSweepAt = 2*len(m.keys) + 1024
}

// groupOf returns j's group, making it when new.
func (m *Machine) groupOf(j *job) *group {
	k := groupKey(j.Opts)
	g := m.groups[k]
	if g == nil {
		g = &group{kind: j.kind, name: j.Opts.Group}
		m.groups[k] = g
	}
	return g
}

// joinGroup files a job that became non-terminal (enqueued, or retried) in its group.
func (m *Machine) joinGroup(j *job) {
	if j.Opts.Group == "" {
		return
	}
	g := m.groupOf(j)
	if i, found := slices.BinarySearch(g.ids, j.ID); !found {
		g.ids = slices.Insert(g.ids, i, j.ID)
	}
	m.restuck(g)
}

// leaveGroup takes a job that ended out of its group, unless it is dead and holds it; the
// next job then heads the group, and is let out if it was parked.
func (m *Machine) leaveGroup(j *job) {
	if j.Opts.Group == "" || holds(j) {
		return
	}
	k := groupKey(j.Opts)
	g := m.groups[k]
	if g == nil {
		return
	}
	i, found := slices.BinarySearch(g.ids, j.ID)
	if !found {
		return
	}
	g.ids = slices.Delete(g.ids, i, i+1)
	m.maybeLetHead(g)
	m.restuck(g)
	m.maybeDropGroup(g)
}

// maybeDropGroup forgets g once it holds nothing: no job, none parked, none running.
func (m *Machine) maybeDropGroup(g *group) {
	if len(g.ids) == 0 && len(g.parked) == 0 && g.running == 0 && g.inflight == 0 {
		delete(m.groups, g.kind.name+"\x00"+g.name)
	}
}

// maybeLetHead lets g's head out when it is parked and no job of g runs.
func (m *Machine) maybeLetHead(g *group) {
	if g.running == 0 && g.inflight == 0 && len(g.ids) > 0 && len(g.parked) > 0 && g.parked[0].ID == g.ids[0] {
		h := g.parked[0]
		g.parked = slices.Delete(g.parked, 0, 1)
		m.unpark(h)
		m.restuck(g)
	}
}

// groupRunning counts a job of j's group entering (+1) or leaving (-1) state Running.
func (m *Machine) groupRunning(j *job, n int) {
	if j.Opts.Group == "" {
		return
	}
	if g := m.groups[groupKey(j.Opts)]; g != nil {
		g.running += n
		if n < 0 {
			m.maybeLetHead(g)
		}
	}
}

// groupBlock is why j's group keeps it from starting (NotBlocked: it may), and the group:
// only the group's head may start, and only while no job of the group runs.
func (m *Machine) groupBlock(j *job) (Block, *group) {
	if j.Opts.Group == "" {
		return Block{}, nil
	}
	g := m.groups[groupKey(j.Opts)]
	if g == nil || len(g.ids) == 0 {
		return Block{}, g
	}
	if g.ids[0] != j.ID {
		b := Block{Reason: BlockGroup, By: g.ids[0], Key: g.name}
		if h := m.job(g.ids[0]); h != nil && holds(h) {
			b.Reason = BlockGroupDead
		}
		return b, g
	}
	if g.running > 0 || g.inflight > 0 {
		b := Block{Reason: BlockGroup, Key: g.name}
		for _, id := range g.ids {
			if r := m.job(id); r != nil && r.State == Running {
				b.By = id
			}
		}
		for _, a := range m.inflight { // a cancelled job's attempt still running: any one names it
			if a.group == g && (b.By == 0 || a.token.ID < b.By) {
				b.By = a.token.ID
			}
		}
		return b, g
	}
	return Block{}, g
}

// gate is why the due job j may not start now (NotBlocked: it may): its group, then its key.
// A blocked job is parked (out of the heaps) by the caller, in the group or the key returned.
func (m *Machine) gate(j *job, now time.Time) (Block, *group, *flowKey) {
	if b, g := m.groupBlock(j); b.Reason != NotBlocked && m.cfg.Defect != DefectGroupUnordered {
		if b.Reason != BlockGroupDead || m.cfg.Defect != DefectHoldIgnored {
			return b, g, nil
		}
	}
	k := j.kind
	if !k.keyed() {
		return Block{}, nil, nil
	}
	ks := m.keyOf(j)
	if k.cfg.Fair && ks.served+1 < k.round {
		// A key that took no turn in the last round arrives: it joins the next round, so that
		// a stream of arriving keys cannot keep the current round from ending (the bound).
		ks.served = k.round
	}
	if b := m.keyBlock(ks, now); b.Reason != NotBlocked {
		return b, nil, ks
	}
	return Block{}, nil, ks
}

// keyBlock is what of its key keeps a due job of ks from starting at now (NotBlocked: nothing).
func (m *Machine) keyBlock(ks *flowKey, now time.Time) Block {
	k := ks.kind
	switch {
	case k.cfg.KeyLimit > 0 && ks.running >= k.cfg.KeyLimit+m.plusOne():
		return Block{Reason: BlockKeyLimit, Key: ks.name, Running: ks.running}
	case k.cfg.KeyRate.On() && ks.bucket.ReadyAt(k.cfg.KeyRate) > now.UnixNano():
		return Block{Reason: BlockKeyRate, Key: ks.name, Until: time.Unix(0, ks.bucket.ReadyAt(k.cfg.KeyRate)).UTC()}
	case k.cfg.Fair && (ks.served == k.round || ks.served+1 < k.round) && m.cfg.Defect != DefectFairOff:
		return Block{Reason: BlockFair, Key: ks.name}
	}
	return Block{}
}

func (m *Machine) plusOne() int {
	if m.cfg.Defect == DefectKeyLimitPlusOne {
		return 1
	}
	return 0
}

// park takes the due job j out of its kind's heaps and keeps it in g or ks until what
// blocked it changes.
func (m *Machine) park(j *job, g *group, ks *flowKey) {
	j.kind.q.remove(j)
	j.kind.parked++
	if g != nil {
		i, _ := slices.BinarySearchFunc(g.parked, j.ID, func(p *job, id uint64) int { return cmpU64(p.ID, id) })
		g.parked = slices.Insert(g.parked, i, j)
		m.restuck(g)
		m.nudgeKey(j) // it may have been its key's let-out job: the key's turn goes to the next
		return
	}
	heapPush(&ks.parked, j, byPrio)
	m.letOut(ks) // it stays parked: this arms what will let it out
}

// unpark puts a parked job back in its kind's queue, due at once when the kind may start one
// (a schedule under way, as when a finish lets a group's next job out, must see it).
func (m *Machine) unpark(j *job) {
	j.kind.parked--
	j.kind.q.push(j)
	if m.runnable(j.kind) {
		j.kind.q.promote(m.now)
	}
}

// letOut lets the best parked job of ks out when nothing of its key holds it back at the
// machine's now, and otherwise makes sure that what holds it back calls again: an attempt of
// the key ending (its limit), the key's wake (its rate), the kind's next round (fair share).
// Every change to a key's limit, bucket or turn calls it, whatever parked its jobs.
func (m *Machine) letOut(ks *flowKey) {
	if len(ks.parked) == 0 {
		return
	}
	k := ks.kind
	switch b := m.keyBlock(ks, m.now); b.Reason {
	case BlockKeyLimit: // ended() calls when an attempt of the key ends
	case BlockKeyRate:
		if !ks.waking {
			m.wakeKey(ks)
		}
	case BlockFair:
		if ks.served+1 < k.round {
			ks.served = k.round // arriving: it joins the next round (gate)
		}
		if !ks.fairing {
			ks.fairing = true
			k.fairKeys = append(k.fairKeys, ks)
		}
	default:
		m.unpark(heapPop(&ks.parked, byPrio))
	}
}

// nudgeKey lets the next parked job of j's key out when j, a due job, left without starting
// (cancelled, dead at admission, or deferred by its target's breaker): j may have been the one
// let out for a free slot, a token or its key's turn in a fair round, which would otherwise
// stay unused.
func (m *Machine) nudgeKey(j *job) {
	if m.replaying || !j.kind.keyed() {
		return
	}
	if ks := m.keys[j.kind.name+"\x00"+j.Opts.Key]; ks != nil {
		m.letOut(ks)
	}
}

// parked reports whether the waiting job j is parked (in none of its kind's heaps).
func parked(j *job) bool {
	return j.State == Waiting && j.idx[slotTimers] == -1 && j.idx[slotPrio] == -1
}

// unparkRemove takes a parked job out of wherever it is parked (it is being cancelled).
func (m *Machine) unparkRemove(j *job) {
	j.kind.parked--
	if j.Opts.Group != "" {
		if g := m.groups[groupKey(j.Opts)]; g != nil {
			if i := slices.Index(g.parked, j); i >= 0 {
				g.parked = slices.Delete(g.parked, i, i+1)
				m.restuck(g)
				return
			}
		}
	}
	if ks := m.keys[j.kind.name+"\x00"+j.Opts.Key]; ks != nil {
		if i := slices.Index(ks.parked, j); i >= 0 {
			ks.parked = slices.Delete(ks.parked, i, i+1)
			heapify(ks.parked, byPrio)
			return
		}
	}
	panic(fmt.Sprintf("runner: job %d is parked nowhere", j.ID))
}

// restuck recounts g's parked jobs into its kind's stuck count: all of them while its head is
// a dead job holding it, else none. Called wherever g's jobs, head or parked list change.
func (m *Machine) restuck(g *group) {
	n := 0
	if len(g.ids) > 0 {
		if h := m.job(g.ids[0]); h != nil && holds(h) {
			n = len(g.parked)
		}
	}
	g.kind.stuck += n - g.stuck
	g.stuck = n
}

// restuckOf is restuck on j's group, if any.
func (m *Machine) restuckOf(j *job) {
	if j.Opts.Group != "" {
		if g := m.groups[groupKey(j.Opts)]; g != nil {
			m.restuck(g)
		}
	}
}

// started counts a start of j (its Started record) against its kind's and key's rates, its
// key's running attempts (when dispatched: running) and the fair share's round.
func (m *Machine) started(j *job, now time.Time, running bool) *flowKey {
	k := j.kind
	if r := k.cfg.Rate; r.On() {
		k.bucket.Take(r, now.UnixNano())
	}
	if !k.keyed() {
		return nil
	}
	ks := m.keyOf(j)
	if r := k.cfg.KeyRate; r.On() {
		ks.bucket.Take(r, now.UnixNano())
	}
	if running {
		// A start whose payload does not decode never runs: it takes no turn of the fair share.
		ks.served = k.round
		ks.running++
	}
	// The next parked job may start in this same pass (a burst, a free slot), or waits for
	// what this start took.
	m.letOut(ks)
	return ks
}

// wakeKey arms the let-out of ks's next parked job when its bucket allows a start.
func (m *Machine) wakeKey(ks *flowKey) {
	ks.waking = true
	m.wakeSeq++
	heapPush(&m.rateWake, keyWake{at: ks.bucket.ReadyAt(ks.kind.cfg.KeyRate), seq: m.wakeSeq, ks: ks}, keyWakeLess)
}

// ended counts the end of an attempt of key ks (nil: none counted).
func (m *Machine) ended(ks *flowKey) {
	if ks == nil {
		return
	}
	ks.running--
	m.letOut(ks)
}

// kindReady reports whether k's rate allows a start at now.
func (m *Machine) kindReady(k *kind, now time.Time) bool {
	return !k.cfg.Rate.On() || k.bucket.ReadyAt(k.cfg.Rate) <= now.UnixNano() || m.cfg.Defect == DefectKindRateIgnored
}

// refilled lets out the keys whose buckets have refilled by now (before the queues promote
// what is due, so that a job let out now starts now).
func (m *Machine) refilled(now time.Time) {
	for len(m.rateWake) > 0 && m.rateWake[0].at <= now.UnixNano() {
		ks := heapPop(&m.rateWake, keyWakeLess).ks
		ks.waking = false
		m.letOut(ks)
	}
}

// maybeEndRound starts k's next fair-share round when no due job of k is left to start in
// this one: each key that waited its turn lets one job out.
func (m *Machine) maybeEndRound(k *kind, now time.Time) {
	if len(k.fairKeys) == 0 || k.q.prio.len() > 0 || !m.runnable(k) {
		return
	}
	k.round++
	keys := k.fairKeys
	k.fairKeys = nil
	for _, ks := range keys {
		ks.fairing = false
		m.letOut(ks) // its turn: one job out, or back in the list for what holds it now
	}
	k.q.promote(now)
}

// flowWake is the earliest time flow control lets a job out by itself (zero: none): a key's
// bucket refilling, or now when a fair kind's round can end.
func (m *Machine) flowWake() time.Time {
	var w time.Time
	if len(m.rateWake) > 0 {
		w = time.Unix(0, m.rateWake[0].at).UTC()
	}
	for _, k := range m.kindList {
		if len(k.fairKeys) > 0 && k.q.prio.len() == 0 && m.runnable(k) {
			return m.now
		}
	}
	return w
}

// Blocked is why waiting job id is not starting at the machine's now (NotBlocked: nothing but
// its turn; NotWaiting for a job that is not waiting). The driver's and the simulator's views read it.
func (m *Machine) Blocked(id uint64) Block {
	j := m.job(id)
	if j == nil || j.State != Waiting {
		return Block{Reason: NotWaiting}
	}
	k := j.kind
	switch {
	case !m.startable(k):
		return Block{Reason: BlockUnregistered}
	case k.paused:
		return Block{Reason: BlockPaused}
	}
	if b, _ := m.groupBlock(j); b.Reason != NotBlocked {
		return b
	}
	if m.now.UnixNano() < j.dueKey {
		r := BlockNotDue
		if j.Deferred {
			r = BlockDeferred
		}
		return Block{Reason: r, Until: j.due()}
	}
	if k.cfg.Limit > 0 && k.inflight >= k.cfg.Limit {
		return Block{Reason: BlockKindLimit, Running: k.inflight}
	}
	if !m.kindReady(k, m.now) {
		return Block{Reason: BlockKindRate, Until: time.Unix(0, k.bucket.ReadyAt(k.cfg.Rate)).UTC()}
	}
	if k.keyed() {
		if ks := m.keys[k.name+"\x00"+j.Opts.Key]; ks != nil {
			if b := m.keyBlock(ks, m.now); b.Reason != NotBlocked {
				return b
			}
			if k.cfg.Fair && parked(j) { // behind its key's job let out for this round
				return Block{Reason: BlockFair, Key: ks.name}
			}
		}
	}
	if m.pool.Status().Free == 0 {
		return Block{Reason: BlockPool}
	}
	return Block{}
}

// Paused lists the paused kinds by name.
func (m *Machine) Paused() []string {
	var out []string
	for _, k := range m.kindList {
		if k.paused {
			out = append(out, k.name)
		}
	}
	return out
}

// pause journals a kind's pause or resume; one that changes nothing is answered at once.
func (m *Machine) pause(t Ticket, name string, on bool) error {
	k := m.kinds[name]
	if k == nil {
		return fmt.Errorf("%w: %s", ErrUnknownKind, QuoteCut(name))
	}
	if k.paused == on {
		m.ack(Ack{Ticket: t})
		return nil
	}
	tag := TagResumed
	if on {
		tag = TagPaused
	}
	m.record(Record{Tag: tag, Target: name})
	m.acking = append(m.acking, pending{m.seq, Ack{Ticket: t}})
	return nil
}

// applyPause applies a Paused or Resumed record.
func (m *Machine) applyPause(r *Record) error {
	k := m.kindOf(r.Target)
	on := r.Tag == TagPaused
	if k.paused == on {
		return fmt.Errorf("tag %d for kind %q, which is already so", r.Tag, r.Target)
	}
	k.paused = on
	return nil
}

func pauseTag(tag uint8) bool { return tag == TagPaused || tag == TagResumed }

// ErrUnknownKind: Pause or Resume named a kind that is neither registered nor named by a job.
var ErrUnknownKind = fmt.Errorf("runner: no such kind")

// keyWake is a key parked by its rate, due to be let out at at (seq orders equal times).
type keyWake struct {
	at  int64
	seq uint64
	ks  *flowKey
}

func keyWakeLess(a, b keyWake) bool { return a.at < b.at || a.at == b.at && a.seq < b.seq }

// heapPush, heapPop and heapify keep a binary min-heap in a slice by less: the keys parked by
// their rate (keyWakeLess) and each key's parked jobs (byPrio).
func heapPush[T any](h *[]T, x T, less func(a, b T) bool) {
	s := append(*h, x)
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !less(s[i], s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
	*h = s
}

func heapPop[T any](h *[]T, less func(a, b T) bool) T {
	s := *h
	top := s[0]
	n := len(s) - 1
	var zero T
	s[0], s[n] = s[n], zero
	s = s[:n]
	heapDown(s, 0, less)
	*h = s
	return top
}

func heapDown[T any](s []T, i int, less func(a, b T) bool) {
	for {
		c := 2*i + 1
		if c >= len(s) {
			return
		}
		if c+1 < len(s) && less(s[c+1], s[c]) {
			c++
		}
		if !less(s[c], s[i]) {
			return
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
}

func heapify[T any](s []T, less func(a, b T) bool) {
	for i := len(s)/2 - 1; i >= 0; i-- {
		heapDown(s, i, less)
	}
}

// describeBlock is b in a scenario file's words.
func describeBlock(b Block) string { return strings.ReplaceAll(b.String(), "\"", "'") }
