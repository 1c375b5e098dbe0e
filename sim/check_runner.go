package sim

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/sluicehq/sluice/sim/internal/runview"
)

// RunnerParams is what the runner invariants need to know of a node's configuration.
type RunnerParams struct {
	Capacity int
	Attempts int
	Deadline time.Duration // 0: none
	Base     time.Duration // retry policy, docs/runner.md
	Cap      time.Duration
	// Circuit breaker, docs/runner.md.
	Threshold int
	Window    time.Duration
	Cooldown  time.Duration
	Probes    int
	// KindLimits: each kind's concurrency limit (0 or absent: none).
	KindLimits map[string]int
	// KindsOnly: the kinds of KindLimits are the registered ones; other kinds' jobs wait.
	KindsOnly bool
}

type jobKey struct {
	node int
	id   uint64
}

type jobModel struct {
	firstDue  time.Duration
	target    string
	kind      string // JobOptions
	payload   string
	acked     bool
	cancelled bool   // a cancel was acknowledged
	cancelAsk bool   // a cancel was taken and not yet acknowledged (lost at a crash)
	terminal  string // durable terminal state seen in the live runner, "" if none
	running   bool
	attempt   int    // attempt number of the running (or last) attempt
	probe     uint64 // the breaker phase it probes, 0: not a probe
	attempts  int    // highest attempt number started
	due       time.Duration
	endedAt   time.Duration // when the outcome of its last attempt was fed
	fail      *failFact     // a retryable failure fed and not yet seen committed
	retriedAt time.Duration // when a manual retry was last acknowledged; -1: never
	stopCut   bool          // the running attempt was cancelled by a graceful stop
	released  *releaseFact  // a stop-cut attempt ended without success, not yet seen committed
	// The job's own attempts and deadline (JobLimits); 0: the policy's.
	attemptsMax int
	deadline    time.Duration
	hist        histModel // what reads must show of its attempts (check_reads.go)
}

// releaseFact is an attempt a graceful stop gave back: the next commit must show the job
// waiting at its old due with the attempt uncounted.
type releaseFact struct {
	attempt int
	due     time.Duration
}

// failFact is a retryable failure whose requeue the next commit must show.
type failFact struct {
	at      time.Duration
	attempt int
	after   *time.Duration
}

// delay is docs/runner.md's delay(n) = min(Base·2^n, Cap), computed independently of core/retry.
func (p RunnerParams) delay(n int) time.Duration {
	d := p.Base
	for i := 0; i < n && d < p.Cap; i++ {
		d *= 2
	}
	return min(d, p.Cap)
}

// waitRange is the range a retry's wait may take after a failure of attempt (1-based).
func (p RunnerParams) waitRange(attempt int, after *time.Duration) (lo, hi time.Duration) {
	if after != nil {
		w := max(0, min(*after, p.Cap))
		return w, w
	}
	d := p.delay(attempt - 1)
	return d / 2, d
}

type nodeModel struct {
	p        RunnerParams
	running  int
	breakers map[string]*breakerModel
	openedAt time.Duration // the first open attempt since the last crash; -1: none yet
	live     []JobView     // state after the last acknowledged commit
	pending  []JobView     // state after a commit that was written but not acknowledged, if any

	// kindRunning counts the running attempts by kind. Invariant: kindRunning sums to running.
	kindRunning map[string]int
	// kindFreeSince is when each kind last went below its limit (promptness counts from it).
	kindFreeSince map[string]time.Duration
	// windows are the unique windows durable states showed, by key: a key stays reserved
	// for its succeeded job until then (durable: a crash cannot undo them).
	windows map[string]windowFact
	// byID indexes the checker's jobs of this node by id (c.job): ids are handed out in order
	// from 1. Invariant: byID[id] == c.jobs[jobKey{node, id}] for every id < len(byID).
	byID []*jobModel
	// overflow: a job was appended with an id past jobIndexMax, so byID does not hold them all.
	overflow bool

	// Promptness (check_prompt.go).
	id        int
	up        bool // opened and not crashed or stopped since
	stopping  bool // a graceful stop began
	freeSince time.Duration
	waits     map[uint64]*waitModel
	dirty     bool // dueBy must be recomputed
	dueBy     time.Duration
	dueInv    string
	dueWhy    dueWhy

	// The liveness phase's critical path (bound.go).
	work time.Duration // handler time of the phase's attempts
	// kindWork is work by kind (limited kinds add their own term).
	kindWork map[string]time.Duration
	chains   map[uint64]time.Duration // per job: its own handlers, waits and commit cycles
	longest  time.Duration            // the longest chain
	allow    time.Duration            // restarts and stops the phase waits for
	cycle    time.Duration            // one commit cycle
}

// windowFact is a succeeded job's hold on its unique key.
type windowFact struct {
	id    uint64
	until time.Duration
}

// breakerModel is an independent model of docs/runner.md, fed with attempt starts and outcomes.
type breakerModel struct {
	fails    []time.Duration // closed: recent failure times
	open     bool
	until    time.Duration
	half     bool
	phase    uint64 // counts half-open phases; a probe belongs to one
	inFlight int
	since    time.Duration // the last change of state or of probes in flight
}

// checkUnique: at most one non-terminal job per unique key in a durable state (jobs come in
// id order, so the first violation reported is always the same).
func (c *Checker) checkUnique(node int, jobs []JobView, when string) {
	if c.holder == nil {
		c.holder = map[string]uint64{}
	}
	holder := c.holder
	clear(holder)
	n := c.node(node)
	for _, v := range jobs {
		if v.WindowUntil > 0 && v.WindowUntil > n.windows[v.Unique].until {
			n.windows[v.Unique] = windowFact{v.ID, v.WindowUntil}
		}
		if v.Unique == "" || runview.Terminal(v.State) {
			continue
		}
		if id, ok := holder[v.Unique]; ok {
			c.check(InvUniqueRespected, false, "node %d %s state: jobs %d and %d (%s) both hold unique key %q", node, when, id, v.ID, v.State, v.Unique)
			return
		}
		holder[v.Unique] = v.ID
	}
	if len(holder) > 0 {
		c.check(InvUniqueRespected, true, "")
	}
}

// RunnerConfigured declares node with its parameters; a restart keeps them.
func (c *Checker) RunnerConfigured(node int, p RunnerParams) {
	c.nodes[node] = &nodeModel{p: p, breakers: make(map[string]*breakerModel), openedAt: -1, id: node, dueBy: never,
		kindRunning: map[string]int{}, kindFreeSince: map[string]time.Duration{}, windows: map[string]windowFact{}}
}

// JobOptions: the job id just appended on node has kind and unique key (none: ""). A new job
// must not take a key inside the window of a success a durable state showed.
func (c *Checker) JobOptions(node int, id uint64, kind, unique string) {
	j := c.jobs[jobKey{node, id}]
	if j == nil {
		return
	}
	j.kind = kind
	if unique == "" {
		return
	}
	key := kind + "/" + unique
	w, ok := c.node(node).windows[key]
	if !c.holds(InvUniqueRespected, !ok || w.id == id || c.now >= w.until) {
		c.check(InvUniqueRespected, false, "node %d appended job %d with unique key %q at %s, inside job %d's window until %s",
			node, id, key, Offset(c.now), w.id, Offset(w.until))
	}
}

// JobLimits: the job id just appended on node has its own attempts and deadline (0: the
// policy's), which replace the policy's in the attempts and deadline rules.
func (c *Checker) JobLimits(node int, id uint64, attemptsMax int, deadline time.Duration) {
	if j := c.jobs[jobKey{node, id}]; j != nil {
		j.attemptsMax, j.deadline = attemptsMax, deadline
	}
}

func (c *Checker) node(node int) *nodeModel {
	n := c.nodes[node]
	if n == nil {
		panic(fmt.Sprintf("sim: runner node %d not configured", node))
	}
	return n
}

// jobIndexMax bounds byID: a larger id (none is handed out in a run) stays in the map alone.
const jobIndexMax = 1 << 20

// indexJob records j (nil: none) as node n's job id in byID.
func (n *nodeModel) indexJob(id uint64, j *jobModel) {
	if id >= uint64(len(n.byID)) {
		if j == nil || id >= jobIndexMax {
			n.overflow = n.overflow || j != nil
			return // not indexed: c.job finds it in the map
		}
		n.byID = append(n.byID, make([]*jobModel, int(id)+1-len(n.byID))...)
	}
	n.byID[id] = j
}

// job is c.jobs[jobKey{n.id, id}], found through n.byID when it covers id.
func (c *Checker) job(n *nodeModel, id uint64) *jobModel {
	var j *jobModel
	if id < uint64(len(n.byID)) {
		j = n.byID[id]
	} else {
		j = c.jobs[jobKey{n.id, id}]
	}
	return j
}

// jobKeys is the keys of n's jobs, ascending by id: from byID when it holds them all, else
// from the map.
func (c *Checker) jobKeys(n *nodeModel) []jobKey {
	if n.overflow {
		return c.jobKeysOf(n.id)
	}
	return n.indexedKeys()
}

// indexedKeys is the keys byID holds, ascending by id.
func (n *nodeModel) indexedKeys() []jobKey {
	keys := make([]jobKey, 0, len(n.byID))
	for id, j := range n.byID {
		if j != nil {
			keys = append(keys, jobKey{n.id, uint64(id)})
		}
	}
	return keys
}

// jobKeysOf is the keys of node's jobs, ascending by id, from the map.
func (c *Checker) jobKeysOf(node int) []jobKey {
	var keys []jobKey
	for k := range c.jobs {
		if k.node == node {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b jobKey) int { return cmp.Compare(a.id, b.id) })
	return keys
}

// JobAppended: an Enqueue of id was handed to node's runner (it may never become durable).
// An id whose enqueue was never acknowledged nor recovered may be handed out again.
func (c *Checker) JobAppended(node int, id uint64, due time.Duration, target, payload string) {
	k := jobKey{node, id}
	if j, ok := c.jobs[k]; ok && j.acked {
		c.check(InvNoPhantom, false, "node %d handed out id %d again (acknowledged for payload %q, now %q)", node, id, j.payload, payload)
		return
	}
	j := &jobModel{firstDue: due, due: due, target: target, payload: payload, endedAt: -1, retriedAt: -1}
	c.jobs[k] = j
	n := c.node(node)
	n.indexJob(id, j)
	if n.chains != nil {
		// Appended in the liveness phase (a schedule's period before its removal): its chain
		// starts at its due.
		n.chain(id, max(0, due-c.liveFrom))
	}
}

// JobAcked: node's runner acknowledged the enqueue of id (it is durable).
func (c *Checker) JobAcked(node int, id uint64) {
	j := c.jobs[jobKey{node, id}]
	if !c.holds(InvNoPhantom, j != nil) && !c.check(InvNoPhantom, false, "node %d acknowledged job %d that was never appended",
		node, id) {
		return
	}
	j.acked = true
}

// CancelSubmitted: node's runner took a cancel of id. Stepped while a commit is in flight, it
// leaves the job waiting in that commit's durable state but cancelled in the live one, whose
// WakeAt then owes it nothing.
func (c *Checker) CancelSubmitted(node int, id uint64) {
	if j := c.jobs[jobKey{node, id}]; j != nil {
		j.cancelAsk = true
	}
}

// CancelAcked: node's runner acknowledged a cancel of id.
func (c *Checker) CancelAcked(node int, id uint64) {
	if j := c.jobs[jobKey{node, id}]; j != nil {
		j.cancelled, j.cancelAsk = true, false
	}
}

// RetryAcked: node's runner acknowledged a manual retry of dead job id submitted at at (the
// engine's now for it, before the sync delay): it runs again with a fresh budget, first due at.
func (c *Checker) RetryAcked(node int, id uint64, at time.Duration) {
	if j := c.jobs[jobKey{node, id}]; j != nil {
		j.terminal, j.firstDue, j.attempts, j.due, j.retriedAt = "", at, 0, at, c.now
		j.hist.attempts = 0
	}
}

// AttemptStarted: node's runner dispatched attempt number attempt of id.
func (c *Checker) AttemptStarted(node int, id uint64, attempt int) {
	n := c.node(node)
	j := c.jobs[jobKey{node, id}]
	if !c.holds(InvNoPhantom, j != nil) && !c.check(InvNoPhantom, false, "node %d started job %d that was never appended",
		node, id) {
		return
	}
	allowed, deadline := n.p.Attempts, n.p.Deadline
	if j.attemptsMax > 0 {
		allowed = j.attemptsMax
	}
	if j.deadline > 0 {
		deadline = j.deadline
	}
	if !c.holds(InvSingleRun, !j.running) {
		c.check(InvSingleRun, false, "node %d started job %d attempt %d while attempt %d runs", node, id, attempt, j.attempt)
	}
	if !c.holds(InvNoRestartTerminal, j.terminal == "" && !j.cancelled) {
		c.check(InvNoRestartTerminal, false, "node %d started job %d attempt %d after it was %s",
			node, id, attempt, terminalOrCancelled(j))
	}
	if !c.holds(InvAttemptsMax, attempt >= 1 && attempt <= allowed) {
		c.check(InvAttemptsMax, false, "node %d started job %d attempt %d, its policy allows %d",
			node, id, attempt, allowed)
	}
	late := deadline > 0 && c.now >= j.firstDue+deadline
	if !c.holds(InvNoStartAfterLate, !late) {
		c.check(InvNoStartAfterLate, false, "node %d started job %d attempt %d at %s, deadline %s (first due %s + %s)",
			node, id, attempt, Offset(c.now), Offset(j.firstDue+deadline), Offset(j.firstDue), deadline)
	}
	if !c.holds(InvNoStartBeforeDue, c.now >= j.due) {
		c.check(InvNoStartBeforeDue, false, "node %d started job %d attempt %d at %s, before its due %s",
			node, id, attempt, Offset(c.now), Offset(j.due))
	}
	if !c.holds(InvCapacity, n.running+1 <= n.p.Capacity) {
		c.check(InvCapacity, false, "node %d runs %d attempts at once, capacity %d", node, n.running+1, n.p.Capacity)
	}
	if l := n.p.KindLimits[j.kind]; l > 0 {
		if !c.holds(InvKindLimit, n.kindRunning[j.kind]+1 <= l) {
			c.check(InvKindLimit, false, "node %d runs %d attempts of kind %q at once, limit %d (job %d attempt %d)",
				node, n.kindRunning[j.kind]+1, j.kind, l, id, attempt)
		}
	}

	b := n.breaker(j.target)
	probe := uint64(0)
	ok := true
	why := ""
	switch {
	case b.open && c.now < b.until:
		ok, why = false, fmt.Sprintf("open until %s", Offset(b.until))
	case b.open || b.half:
		if b.open {
			b.open, b.half = false, true
			b.phase++
			b.inFlight = 0
			b.since = c.now
		}
		if b.inFlight >= n.p.Probes {
			ok, why = false, fmt.Sprintf("half-open with %d probes in flight, %d allowed", b.inFlight, n.p.Probes)
		} else {
			b.inFlight++
			probe = b.phase
		}
	}
	c.check(InvBreakerRespected, ok, "node %d started job %d attempt %d on target %s while its breaker is %s", node, id, attempt, j.target, why)

	j.running, j.attempt, j.probe, j.stopCut = true, attempt, probe, false
	j.hist.started(attempt)
	if attempt > j.attempts {
		j.attempts = attempt
	}
	n.running++
	n.dirty = true
	n.kindRunning[j.kind]++
}

func terminalOrCancelled(j *jobModel) string {
	if j.terminal != "" {
		return j.terminal
	}
	return "cancelled"
}

// AttemptFailed: the outcome fed for attempt of id was a retryable failure, with after the
// server-requested wait if any. The commit that journals it must requeue it within the policy.
func (c *Checker) AttemptFailed(node int, id uint64, attempt int, after *time.Duration) {
	if j := c.jobs[jobKey{node, id}]; j != nil && !j.cancelled && j.attempt == attempt {
		j.fail = &failFact{at: c.now, attempt: attempt, after: after}
	}
}

// AttemptStopCut: node's graceful stop cancelled attempt of id (its grace had passed).
func (c *Checker) AttemptStopCut(node int, id uint64, attempt int) {
	if j := c.jobs[jobKey{node, id}]; j != nil && j.running && j.attempt == attempt {
		j.stopCut = true
	}
}

// AttemptEnded: the outcome of attempt of id reached node's runner. failure says whether it
// counts as a breaker failure (retryable failure or panic); success whether it succeeded.
func (c *Checker) AttemptEnded(node int, id uint64, attempt int, failure, success bool) {
	n := c.node(node)
	j := c.jobs[jobKey{node, id}]
	if j == nil || !j.running || j.attempt != attempt {
		return // an outcome of an attempt from before a crash: ignored by the runner too
	}
	j.running = false
	j.endedAt = c.now
	if n.running == n.p.Capacity {
		n.freeSince = c.now
	}
	n.running--
	if l := n.p.KindLimits[j.kind]; l > 0 && n.kindRunning[j.kind] == l {
		n.kindFreeSince[j.kind] = c.now
	}
	n.kindRunning[j.kind]--
	n.dirty = true
	if b := n.breakers[j.target]; b != nil {
		defer func(open, half bool, in int) {
			if b.open != open || b.half != half || b.inFlight != in {
				b.since = c.now
			}
		}(b.open, b.half, b.inFlight)
	}
	if j.stopCut && !success {
		// Given back: the breaker records no outcome (a probe of this phase is returned).
		j.fail = nil
		if !j.cancelled && j.terminal == "" {
			j.released = &releaseFact{attempt: attempt, due: j.due}
		}
		if b := n.breaker(j.target); b.half && j.probe != 0 && j.probe == b.phase {
			b.inFlight--
		}
		return
	}
	// Every dispatched attempt's outcome reaches the breaker, also a cancelled job's (the
	// runner's choice; docs/runner.md counts outcomes, not jobs).
	b := n.breaker(j.target)
	switch {
	case b.half:
		if j.probe == 0 || j.probe != b.phase {
			return // only a probe of this phase decides a half-open breaker
		}
		b.inFlight--
		if failure {
			b.half, b.open, b.until = false, true, c.now+n.p.Cooldown
		} else {
			b.half, b.fails = false, b.fails[:0]
		}
	case b.open:
		// an open breaker ignores stragglers
	case failure:
		keep := b.fails[:0]
		for _, t := range b.fails {
			if t >= c.now-n.p.Window { // times strictly older than now-Window drop
				keep = append(keep, t)
			}
		}
		b.fails = append(keep, c.now)
		if len(b.fails) >= n.p.Threshold {
			b.fails, b.open, b.until = b.fails[:0], true, c.now+n.p.Cooldown
		}
	default:
		b.fails = b.fails[:0]
	}
}

func (n *nodeModel) breaker(target string) *breakerModel {
	b := n.breakers[target]
	if b == nil {
		b = &breakerModel{}
		n.breakers[target] = b
	}
	return b
}

// Committed: node's runner acknowledged a commit; jobs is its whole live state after it.
// Terminal states seen here are durable.
func (c *Checker) Committed(node int, jobs []JobView) {
	c.checkUnique(node, jobs, "committed")
	n := c.node(node)
	n.live, n.pending = jobs, nil
	for _, v := range jobs {
		j := c.job(n, v.ID)
		if j == nil {
			continue
		}
		if runview.Terminal(v.State) && j.terminal == "" {
			j.terminal = v.State
		}
		if r := j.released; r != nil {
			j.released = nil
			// A user's Cancel that reached the commit first wins: the job is cancelled, and
			// nothing is spent on it either way.
			if !c.holds(InvStopSpendsNothing, v.State == "cancelled" || v.State == "waiting" && v.Attempts == r.attempt-1 && v.Due == r.due) {
				c.check(InvStopSpendsNothing, false, "node %d: attempt %d of job %d was cut by a graceful stop, but the job is %v (want waiting, attempts=%d, due=%s)",
					node, r.attempt, v.ID, v, r.attempt-1, Offset(r.due))
			}
		}
		if v.State == "waiting" || v.State == "running" {
			// A running job shows the due it started at: the one a stop gives it back, even when
			// its previous attempt's failure and this start shared the commit (swarm seed 1874).
			j.due = v.Due
		}
		limit := time.Duration(0)
		if v.Deferred {
			limit = n.deferLimit(v.Target, c.now)
		}
		if f := j.fail; f != nil {
			j.fail = nil
			if v.State == "waiting" && v.Attempts == f.attempt {
				lo, hi := n.p.waitRange(f.attempt, f.after)
				if !v.Deferred {
					limit = f.at + hi
				}
				if v.Deferred {
					// Due again before the commit ran (a sync delay), the retry met an open
					// breaker in the same commit and was deferred: later, never earlier.
					hi = max(hi, v.Due-f.at)
				}
				if !c.holds(InvBackoff, v.Due >= f.at+lo && v.Due <= f.at+hi) {
					c.check(InvBackoff, false, "node %d requeued job %d after attempt %d failed at %s to %s: wait %s, want [%s, %s]",
						node, v.ID, f.attempt, Offset(f.at), Offset(v.Due), v.Due-f.at, lo, hi)
				}
			}
		}
		if v.State == "waiting" {
			n.noteWait(v, c.now, limit)
		}
	}
	n.dirty = true
}

// JobSettled: a commit's result reported job id's terminal state as durable (what the production
// driver hands to OnSettled). The state committed with it must agree (unless a compaction in
// the same commit pruned the job, or a manual retry in it revived a dead one).
func (c *Checker) JobSettled(node int, id uint64, state string) {
	for _, v := range c.node(node).live {
		if v.ID == id {
			// A dead job retried by hand in the same commit has moved on already, as has one
			// that held its sequence and was cancelled (a dead job's cancel is taken then).
			j := c.jobs[jobKey{node, id}]
			again := state == "dead" && j != nil && (j.retriedAt == c.now || v.State == "cancelled" && (j.cancelled || j.cancelAsk))
			if !c.holds(InvMachine, v.State == state || again) {
				c.check(InvMachine, false, "node %d settled job %d as %s, but it is %v", node, id, state, v)
			}
			return
		}
	}
	// Not in the state: a compaction in the same commit pruned it (retention).
}

// Compacted: node's runner compacted after the commit whose state was just reported, pruning
// terminal jobs beyond its retention. An acknowledged job may vanish from the live state only
// if it could have become terminal: it was terminal, cancelled, its outcome was fed at this
// instant, or it was due (it may have expired: late or spent). Anything else is a lost ack.
func (c *Checker) Compacted(node int, jobs []JobView) {
	in := make(map[uint64]bool, len(jobs))
	for _, v := range jobs {
		in[v.ID] = true
	}
	var gone []uint64
	for k, j := range c.jobs {
		if k.node == node && j.acked && j.terminal == "" && !in[k.id] {
			gone = append(gone, k.id)
		}
	}
	sort.Slice(gone, func(a, b int) bool { return gone[a] < gone[b] })
	for _, id := range gone {
		j := c.jobs[jobKey{node, id}]
		ok := j.cancelled || j.endedAt == c.now || j.due <= c.now
		if c.check(InvNoLostAck, ok, "node %d pruned acknowledged job %d (target %s) at compaction, though it cannot have ended", node, id, j.target) {
			j.terminal = "pruned"
		}
	}
}

// CommitUnacked: node's runner wrote a commit whose sync did not return success (or the crash
// came first); jobs is the state it would have had. Recovery may legitimately show it.
func (c *Checker) CommitUnacked(node int, jobs []JobView) { c.node(node).pending = jobs }

// OpenAttempted: node's runner is being opened at now. An open that fails after requeueing
// interrupted attempts may leave those requeues on disk for the next open to find.
func (c *Checker) OpenAttempted(node int) {
	if n := c.node(node); n.openedAt < 0 {
		n.openedAt = c.now
	}
}

// NodeCrashed: node's process died; its attempts died with it and its breakers are forgotten.
func (c *Checker) NodeCrashed(node int) {
	c.flow.Crashed(node)
	n := c.node(node)
	n.running = 0
	n.kindRunning = map[string]int{}
	n.openedAt = -1
	n.up, n.stopping, n.dirty = false, false, true
	if n.chains != nil {
		n.allow += c.restartMax // a handler drawn to crash it in the safety phase may still run
	}
	n.breakers = make(map[string]*breakerModel)
	for k, j := range c.jobs { // order does not matter: each job is reset alike
		if k.node == node {
			j.running, j.probe, j.fail, j.stopCut, j.released = false, 0, nil, false, nil
			j.cancelAsk = false
			j.hist.forget()
		}
	}
}

// noPhantoms checks that every recovered job was appended as it is; false after a job that
// never was (the rest of the recovery check is then moot).
func (c *Checker) noPhantoms(node int, n *nodeModel, jobs []JobView) bool {
	for _, v := range jobs {
		j := c.job(n, v.ID)
		if !c.holds(InvNoPhantom, j != nil) && !c.check(InvNoPhantom, false, "node %d recovered job %d that was never appended: %v",
			node, v.ID, v) {
			return false
		}
		if !c.holds(InvNoPhantom, v.Target == j.target && v.Payload == j.payload) {
			c.check(InvNoPhantom, false, "node %d recovered job %d as target %s payload %q, appended as target %s payload %q",
				node, v.ID, v.Target, v.Payload, j.target, j.payload)
		}
	}
	return true
}

// NodeRecovered: node's runner reopened; jobs is its state after recovery (attempts that were
// running at the crash requeued as interrupted failures, or dead by the policy).
func (c *Checker) NodeRecovered(node int, jobs []JobView) {
	c.checkUnique(node, jobs, "recovered")
	n := c.node(node)
	got := runview.IndexOf(jobs)
	if !c.noPhantoms(node, n, jobs) {
		return
	}
	keys := c.jobKeys(n)
	for _, k := range keys {
		j := c.jobs[k]
		if j.acked && j.terminal == "" {
			_, ok := got.Get(k.id)
			c.check(InvNoLostAck, ok, "node %d lost acknowledged job %d (target %s) in recovery", node, k.id, j.target)
		}
	}
	if diff := runview.Diff(n.live, jobs, true); diff != "" {
		if n.pending == nil || runview.Diff(n.pending, jobs, true) != "" {
			c.check(InvReplayEqualsLive, false, "node %d recovered a state unlike the live one at its last commit: %s", node, diff)
		} else {
			c.check(InvReplayEqualsLive, true, "")
		}
	} else {
		c.check(InvReplayEqualsLive, true, "")
	}
	// Attempts running at the crash come back as interrupted failures at now, through the policy
	// (unless the recovered job is the one a written-but-unacknowledged commit left).
	liveByID, pendByID := runview.IndexOf(n.live), runview.IndexOf(n.pending)
	for _, v := range jobs {
		// A start the world never saw (written by a commit not acknowledged) shows as a
		// count unlike the last acknowledged one, or after a retry (a new first due): its
		// history is taken from the next read.
		if j := c.job(n, v.ID); j != nil {
			if lv, ok := liveByID.Get(v.ID); !ok || lv.Attempts != v.Attempts || lv.FirstDue != v.FirstDue {
				j.hist.starts = -1
			}
			j.hist.attempts = v.Attempts
		}
	}
	for _, v := range jobs {
		lv, ok := liveByID.Get(v.ID)
		if !ok || lv.State != "running" || v.State != "waiting" || v.Attempts != lv.Attempts {
			continue
		}
		if pv, ok := pendByID.Get(v.ID); ok && pv == v {
			continue
		}
		lo, hi := n.p.waitRange(v.Attempts, nil)
		first := c.now
		if n.openedAt >= 0 {
			first = n.openedAt // an earlier, failed open may have journaled the requeue
		}
		if !c.holds(InvBackoff, v.Due >= first+lo && v.Due <= c.now+hi) {
			c.check(InvBackoff, false, "node %d requeued interrupted job %d (attempt %d) at open %s to %s: wait %s, want [%s, %s] from an open since %s",
				node, v.ID, v.Attempts, Offset(c.now), Offset(v.Due), v.Due-c.now, lo, hi, Offset(first))
		}
	}
	n.live, n.pending = jobs, nil
	n.openedAt = -1
	n.up, n.stopping, n.dirty, n.freeSince = true, false, true, c.now
	n.waits = nil
	for _, v := range jobs {
		if v.State == "waiting" {
			n.noteWait(v, c.now, 0)
		}
	}
	// What was recovered is durable now; what was not recovered and never acknowledged is gone
	// (its id may be handed out again), as are terminal jobs compaction pruned.
	for _, k := range keys {
		j := c.jobs[k]
		v, ok := got.Get(k.id)
		switch {
		case ok:
			j.acked = true
			if lv, inLive := liveByID.Get(k.id); !inLive || lv != v {
				// The recovered job comes from a written but unacknowledged commit (a retry, a
				// cancel, an outcome): that is its durable truth now.
				j.firstDue = v.FirstDue
				if !runview.Terminal(v.State) {
					j.terminal = ""
				}
			}
			if runview.Terminal(v.State) && j.terminal == "" {
				j.terminal = v.State
			}
			if v.State == "waiting" {
				j.due = v.Due
			}
		case !j.acked || j.terminal != "":
			delete(c.jobs, k)
			n.indexJob(k.id, nil)
		}
	}
}
