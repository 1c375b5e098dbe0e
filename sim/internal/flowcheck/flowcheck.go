// Package flowcheck is the simulator's model of the runner's flow control: it follows, from
// what the world did and saw (the kinds' settings as configured, each job's options as
// enqueued, pauses as proposed, attempts as dispatched and as ended, the job states each
// commit made durable), what flow control promises, and checks each promise after every step
// that could break it. It never asks the machine why a job waits (Machine.Blocked).
package flowcheck

import (
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core/flow"
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim/config"
	"github.com/sluicehq/sluice/sim/internal/runview"
)

// The invariants, as the simulator's report names them.
const (
	InvPaused   = "paused-never-starts"
	InvRate     = "rate-respected"
	InvKeyLimit = "key-limit"
	InvSequence = "sequence-order"
	InvFair     = "fair-share"
	InvTimeout  = "attempt-timeout"
)

// Promises lists the invariants with what each promises, in report order.
var Promises = []struct{ Name, Promise string }{
	{InvPaused, "no attempt of a kind starts whose Started record follows the kind's Paused record and precedes its Resumed one (pause is durable: a recovered node is paused as its journal says)"},
	{InvRate, "for each kind with Rate and each (kind, key) with KeyRate, any window of length w holds at most Burst + floor(w·Count/Per) starts, across crashes and restarts"},
	{InvKeyLimit, "attempts of one (kind, key) running at once on a node (dispatched, outcome not yet fed) never exceed KeyLimit"},
	{InvSequence, "a job of a group starts only when every lower-id job of its group has ended (succeeded, cancelled, or dead without Hold), and one attempt of a group runs at a time"},
	{InvFair, "for a fair kind (no key limit or key rate, equal priorities): while key K has a due job that nothing but its turn holds, other keys of the kind start at most 2(N−1) attempts before K's next start, N the keys of the kind with a due job at some time during the wait"},
	{InvTimeout, "an attempt's Timeout is the job's timeout, else its kind's, and its outcome is fed no later than its start plus that timeout"},
}

// RateLookback bounds the earlier starts each start is paired with beyond the burst.
const RateLookback = 8

// Report is where the model's checks go (the simulator's checker).
type Report struct {
	Fail func(inv, format string, args ...any)
	Pass func(inv string)
}

// Model is the flow-control model of every runner node.
type Model struct {
	r      Report
	kinds  map[string]config.KindFlow
	nodes  map[int]*node
	Bound  func(n int) int // the fair-share bound for N keys (tests tighten it)
	Slack  time.Duration   // how late the world's timing faults may deliver an event
	notes  []string
	traced bool
}

type job struct {
	kind, key, group string
	hold             bool
	timeout          time.Duration // the job's own; 0: the kind's
	running          bool
	startAt          time.Duration
	attempt          int
	state            string        // the last durable state seen ("" before any)
	seen             int           // the attempts it was last seen with (started or in a state)
	firstDue         time.Duration // its first due as last seen (a manual retry renews it)
}

type fairWait struct {
	others int             // starts of other keys during the wait
	keys   map[string]bool // the keys with a due job at some time during the wait (its own too)
}

type node struct {
	jobs     map[uint64]*job
	paused   map[string]bool            // by the records appended, in order
	durable  map[string]bool            // by the records acknowledged
	frozen   map[string]bool            // paused as of the write of the batch in flight
	running  map[string]int             // kind\x00key → attempts running
	groupRun map[string]int             // kind\x00group → attempts running
	starts   map[string][]time.Duration // per kind and kind\x00key: the last starts, across restarts
	tat      map[string]time.Duration   // per series: its bucket (GCRA) since the node opened
	openAt   time.Duration
	fair     map[string]map[string]*fairWait // kind → key → its wait
	keyFree  map[string]time.Duration        // kind\x00key → when its last attempt ended
	grpFree  map[string]time.Duration        // kind\x00group → when its head last changed
	resumed  map[string]time.Duration        // kind → when it was last resumed
	// The liveness phase's accounting (Allowance): starts per rate series, and the handler
	// time of the phase's attempts per limited key.
	live       bool
	holding    int // jobs that may die holding their group, at the phase's start
	liveStarts map[string]int
	keyWork    map[string]time.Duration
}

// New returns the model of a world whose kinds have the given flow settings.
func New(r Report, names []string, kinds []config.KindFlow) *Model {
	m := &Model{r: r, kinds: map[string]config.KindFlow{}, nodes: map[int]*node{}, Bound: func(n int) int { return 2 * (n - 1) }}
	for i, k := range names {
		m.kinds[k] = kinds[i]
	}
	return m
}

func (m *Model) node(id int) *node {
	n := m.nodes[id]
	if n == nil {
		n = &node{jobs: map[uint64]*job{}, paused: map[string]bool{}, durable: map[string]bool{},
			running: map[string]int{}, tat: map[string]time.Duration{}, groupRun: map[string]int{}, starts: map[string][]time.Duration{},
			fair: map[string]map[string]*fairWait{}, keyFree: map[string]time.Duration{}, grpFree: map[string]time.Duration{},
			resumed: map[string]time.Duration{}}
		m.nodes[id] = n
	}
	return n
}

// Job: node appended job id with options o.
func (m *Model) Job(node int, id uint64, o runner.Opts) {
	if m == nil {
		return
	}
	m.node(node).jobs[id] = &job{kind: o.Kind, key: o.Key, group: o.Group, hold: o.Hold, timeout: o.Timeout}
}

// Pause: node appended a Paused (on) or Resumed record for kind at now (a command that
// changed nothing appends none: the caller reports only accepted ones, and the model skips
// the ones that change nothing as the machine does).
func (m *Model) Pause(node int, kind string, on bool, now time.Duration) {
	if m == nil {
		return
	}
	n := m.node(node)
	if n.paused[kind] != on && !on {
		n.resumed[kind] = now
	}
	n.paused[kind] = on
}

// PauseAcked: node acknowledged a Pause (on) or Resume of kind: its record is durable.
func (m *Model) PauseAcked(node int, kind string, on bool) {
	if m != nil {
		m.node(node).durable[kind] = on
	}
}

// Paused reports whether kind is paused on node by the model.
func (m *Model) Paused(node int, kind string) bool { return m != nil && m.node(node).paused[kind] }

// Written: node wrote a batch; the starts it carries follow every record appended so far.
func (m *Model) Written(node int) {
	if m == nil {
		return
	}
	n := m.node(node)
	n.frozen = make(map[string]bool, len(n.paused))
	for k, v := range n.paused {
		n.frozen[k] = v
	}
}

// Crashed: node's process died or stopped; its attempts and its undurable records with it.
func (m *Model) Crashed(node int) {
	if m == nil {
		return
	}
	n := m.node(node)
	clear(n.running)
	clear(n.groupRun)
	clear(n.fair)
	for _, j := range n.jobs {
		j.running = false
	}
}

// Recovered: node reopened at now, with paused kinds and the jobs' states as recovered. A
// kind's pause must be as its last acknowledged record says, or as a later appended one.
func (m *Model) Recovered(node int, now time.Duration, paused []string, jobs []runview.Job) {
	if m == nil {
		return
	}
	n := m.node(node)
	n.openAt = now
	clear(n.tat)
	got := map[string]bool{}
	for _, k := range paused {
		got[k] = true
	}
	for _, k := range m.kindNames() {
		if n.durable[k] == n.paused[k] && got[k] != n.durable[k] {
			m.r.Fail(InvPaused, "node %d recovered kind %s paused=%t, but its last acknowledged pause record says %t", node, k, got[k], n.durable[k])
			return
		}
		n.paused[k], n.durable[k] = got[k], got[k]
		if !got[k] {
			n.resumed[k] = now
		}
	}
	m.r.Pass(InvPaused)
	idx := runview.IndexOf(jobs)
	for id, j := range n.jobs { // each alike: order does not matter
		if _, in := idx.Get(id); !in && j.state == "" {
			delete(n.jobs, id) // its enqueue was lost with the crash: the id may be taken again
		}
	}
	m.states(n, jobs)
	for _, v := range jobs {
		if j := n.jobs[v.ID]; j != nil {
			j.seen = v.Attempts // starts journaled before the crash: the fresh buckets owe them nothing
		}
	}
}

func (m *Model) kindNames() []string {
	ks := make([]string, 0, len(m.kinds))
	for k := range m.kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (m *Model) states(n *node, jobs []runview.Job) {
	for _, v := range jobs {
		if j := n.jobs[v.ID]; j != nil {
			j.state, j.firstDue = v.State, v.FirstDue
			if v.Attempts < j.seen {
				j.seen = v.Attempts // retried: counted afresh
			}
		}
	}
}

// ended reports whether j no longer holds its group: succeeded, cancelled, dead without
// Hold, or pruned (only terminal jobs are).
func ended(j *job, in bool) bool {
	switch {
	case !in:
		return true // pruned (terminal), or its enqueue was lost with a crash
	case j.state == "succeeded" || j.state == "cancelled":
		return true
	case j.state == "dead":
		return !j.hold
	}
	return false
}

// Landed: node dispatched starts at now, from a batch whose durable state is views.
func (m *Model) Landed(node int, now time.Duration, starts []runner.Attempt, views []runview.Job) {
	if m == nil {
		return
	}
	n := m.node(node)
	idx := runview.IndexOf(views)
	m.undispatched(n, node, now, starts, views)
	for _, a := range starts {
		j := n.jobs[a.Token.ID]
		if j == nil { // a schedule's firing: its kind's settings, no options
			j = &job{kind: a.Kind}
			n.jobs[a.Token.ID] = j
		}
		kf := m.kinds[j.kind]
		m.checkTimeoutSet(node, a, j, kf)
		if n.frozen[j.kind] {
			m.r.Fail(InvPaused, "node %d started %s (kind %s) in a batch written while the kind was paused", node, a.Token, j.kind)
		} else {
			m.r.Pass(InvPaused)
		}
		if kf.Rate.On() {
			m.rate(n, node, j.kind, kf.Rate, now, "kind "+j.kind)
		}
		kk := j.kind + "\x00" + j.key
		if kf.KeyRate.On() {
			m.rate(n, node, kk, kf.KeyRate, now, fmt.Sprintf("kind %s key %q", j.kind, j.key))
		}
		if kf.KeyLimit > 0 || kf.KeyRate.On() || kf.Fair {
			n.running[kk]++
			if kf.KeyLimit > 0 && n.running[kk] > kf.KeyLimit {
				m.r.Fail(InvKeyLimit, "node %d started %s: kind %s key %q now runs %d attempts, limit %d", node, a.Token, j.kind, j.key, n.running[kk], kf.KeyLimit)
			} else if kf.KeyLimit > 0 {
				m.r.Pass(InvKeyLimit)
			}
		}
		if j.group != "" {
			m.sequence(n, node, a, j, idx)
		}
		j.running, j.startAt, j.attempt, j.seen = true, now, a.Token.Attempt, a.Token.Attempt
	}
	m.fairShare(n, node, now, starts, views)
	m.Committed(node, now, views)
}

// undispatched counts against the rates the starts this batch journaled and did not
// dispatch (a payload its kind cannot decode fails at once): a job whose attempts grew
// without a start.
func (m *Model) undispatched(n *node, node int, now time.Duration, starts []runner.Attempt, views []runview.Job) {
	for _, v := range views {
		j := n.jobs[v.ID]
		if j == nil {
			continue
		}
		base := j.seen
		if v.FirstDue != j.firstDue && j.state != "" {
			base = 0 // retried by hand in this batch: its attempts count from none
		}
		if v.Attempts <= base {
			continue
		}
		if slices.ContainsFunc(starts, func(a runner.Attempt) bool { return a.Token.ID == v.ID }) {
			continue
		}
		j.seen = v.Attempts
		kf := m.kinds[j.kind]
		if kf.Rate.On() {
			m.rate(n, node, j.kind, kf.Rate, now, "kind "+j.kind)
		}
		if kf.KeyRate.On() {
			m.rate(n, node, j.kind+"\x00"+j.key, kf.KeyRate, now, fmt.Sprintf("kind %s key %q", j.kind, j.key))
		}
	}
}

func (m *Model) sequence(n *node, node int, a runner.Attempt, j *job, idx runview.Index) {
	gk := j.kind + "\x00" + j.group
	n.groupRun[gk]++
	if n.groupRun[gk] > 1 {
		m.r.Fail(InvSequence, "node %d started %s while another attempt of group %q (kind %s) runs", node, a.Token, j.group, j.kind)
		return
	}
	var ids []uint64
	for id, o := range n.jobs {
		if id < a.Token.ID && o.group == j.group && o.kind == j.kind {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		o := n.jobs[id]
		v, in := idx.Get(id)
		if in {
			o.state = v.State
		}
		if !ended(o, in) {
			m.r.Fail(InvSequence, "node %d started %s of group %q (kind %s) while earlier job %d is %s (hold %t)", node, a.Token, j.group, j.kind, id, o.state, o.hold)
			return
		}
	}
	m.r.Pass(InvSequence)
}

// rate checks a start at now against the earlier starts of series s (bounded lookback).
func (m *Model) rate(n *node, node int, s string, r flow.Rate, now time.Duration, what string) {
	ts := append(n.starts[s], now)
	keep := r.BurstSize() + RateLookback + 1
	if len(ts) > keep {
		ts = append(ts[:0], ts[len(ts)-keep:]...)
	}
	n.starts[s] = ts
	if n.live {
		n.liveStarts[s]++
	}
	iv := time.Duration(r.Interval())
	if t, ok := n.tat[s]; ok {
		n.tat[s] = max(t, now) + iv
	} else {
		n.tat[s] = max(n.openAt+time.Duration(r.BurstSize())*iv, now) + iv
	}
	last := len(ts) - 1
	for i := last - 1; i >= 0; i-- {
		w := now - ts[i]
		if got := int64(last - i + 1); got > r.Allowed(w) {
			m.r.Fail(InvRate, "node %d: %s started %d attempts within %s (from %s), rate %d/%s burst %d allows %d",
				node, what, got, w, ts[i], r.Count, r.Per, r.BurstSize(), r.Allowed(w))
			return
		}
	}
	m.r.Pass(InvRate)
}

func (m *Model) checkTimeoutSet(node int, a runner.Attempt, j *job, kf config.KindFlow) {
	want := j.timeout
	if want == 0 {
		want = kf.Timeout
	}
	if a.Timeout != want {
		m.r.Fail(InvTimeout, "node %d dispatched %s (kind %s) with Timeout %s, configured %s (job %s, kind %s)", node, a.Token, a.Kind, a.Timeout, want, j.timeout, kf.Timeout)
		return
	}
	m.r.Pass(InvTimeout)
}

// Holds reports whether job id of node holds its group when dead (Opts.Hold).
func (m *Model) Holds(node int, id uint64) bool {
	j := m.node(node).jobs[id]
	return j != nil && j.hold && j.group != ""
}

// Timeout is job id's configured attempt timeout on node (0: none).
func (m *Model) Timeout(node int, id uint64) time.Duration {
	if m == nil {
		return 0
	}
	j := m.node(node).jobs[id]
	if j == nil {
		return 0
	}
	if j.timeout > 0 {
		return j.timeout
	}
	return m.kinds[j.kind].Timeout
}

// Ended: node fed the outcome of attempt attempt of job id at now.
func (m *Model) Ended(node int, id uint64, attempt int, now time.Duration) {
	if m == nil {
		return
	}
	n := m.node(node)
	j := n.jobs[id]
	if j == nil || !j.running || j.attempt != attempt {
		return
	}
	j.running = false
	if t := m.Timeout(node, id); t > 0 {
		if now-j.startAt > t+m.Slack {
			m.r.Fail(InvTimeout, "node %d fed the outcome of job %d attempt %d at %s, %s after its start at %s: timeout %s", node, id, attempt, now, now-j.startAt, j.startAt, t)
		} else {
			m.r.Pass(InvTimeout)
		}
	}
	kk := j.kind + "\x00" + j.key
	if n.running[kk] > 0 {
		n.running[kk]--
		n.keyFree[kk] = now
	}
	if j.group != "" {
		gk := j.kind + "\x00" + j.group
		if n.groupRun[gk] > 0 {
			n.groupRun[gk]--
		}
		n.grpFree[gk] = now
	}
}

// Committed: node's commit at now made views durable (the states the sequence rule reads).
func (m *Model) Committed(node int, now time.Duration, views []runview.Job) {
	n := m.node(node)
	for _, v := range views {
		if j := n.jobs[v.ID]; j != nil && j.group != "" && j.state != v.State {
			n.grpFree[j.kind+"\x00"+j.group] = now
		}
	}
	m.states(n, views)
}

// fairShare counts, per fair kind, the starts other keys take while a key waits with a due
// job, and checks them against the bound. A key's wait begins when it has a due job (in the
// state after a commit) and ends at its next start, or when it has no due job left.
func (m *Model) fairShare(n *node, node int, now time.Duration, starts []runner.Attempt, views []runview.Job) {
	due := map[string]map[string]bool{} // kind → keys with a due waiting job after the commit
	add := func(kind, key string) {
		if due[kind] == nil {
			due[kind] = map[string]bool{}
		}
		due[kind][key] = true
	}
	for _, v := range views {
		kind, key := v.Kind, v.Key // a schedule's firing too, which the model learns at its start
		// A job a breaker deferred is due again at its new due, like any other.
		if !m.fairKind(kind) || v.State != "waiting" || v.Due > now || n.paused[kind] {
			continue
		}
		add(kind, key)
	}
	// The keys due during the starts: those due after them and those starting.
	during := map[string]map[string]bool{}
	for kind, keys := range due {
		during[kind] = maps.Clone(keys)
	}
	for _, a := range starts {
		if j := n.jobs[a.Token.ID]; j != nil && m.fairKind(j.kind) {
			if during[j.kind] == nil {
				during[j.kind] = map[string]bool{}
			}
			during[j.kind][j.key] = true
		}
	}
	for kind, waits := range n.fair {
		for key, fw := range waits { // each alike: order does not matter
			if !during[kind][key] {
				delete(waits, key) // no due job left: the wait is over
				continue
			}
			for k := range during[kind] { // a union: order does not matter
				fw.keys[k] = true
			}
		}
	}
	for _, a := range starts {
		j := n.jobs[a.Token.ID]
		if j == nil || !m.fairKind(j.kind) {
			continue
		}
		waits := n.fair[j.kind]
		for _, key := range slices.Sorted(maps.Keys(waits)) {
			if key == j.key {
				continue
			}
			fw := waits[key]
			fw.others++
			if b := m.Bound(len(fw.keys)); fw.others > b {
				m.r.Fail(InvFair, "node %d: key %q of kind %s has waited with a due job through %d starts of other keys (%s the latest), bound %d for %d keys due during the wait",
					node, key, j.kind, fw.others, a.Token, b, len(fw.keys))
				return
			}
			m.r.Pass(InvFair)
		}
		delete(waits, j.key) // its wait ends; a next one begins below if it has a due job left
	}
	for kind, keys := range due {
		if n.fair[kind] == nil {
			n.fair[kind] = map[string]*fairWait{}
		}
		waits := n.fair[kind]
		for key := range keys { // each alike: order does not matter
			if waits[key] == nil {
				waits[key] = &fairWait{keys: maps.Clone(keys)}
			}
		}
	}
}

func (m *Model) fairKind(kind string) bool {
	kf := m.kinds[kind]
	return kf.Fair && kf.KeyLimit == 0 && !kf.KeyRate.On()
}

// Blocked reports whether flow control holds job id of node at now by the model's own
// accounting, and from when it stopped (or stops) holding it: a paused kind; a group whose
// earlier job has not ended; a key at its limit; a kind's or key's bucket with no start left
// (then until, computed from the starts the model saw since the node opened, as an empty
// bucket at open refills); a fair kind (the model does not follow its rounds: it owes
// nothing).
func (m *Model) Blocked(node int, id uint64, kind string, now time.Duration, live []runview.Job) (blocked bool, since time.Duration) {
	if m == nil {
		return false, 0
	}
	n := m.node(node)
	j := n.jobs[id]
	if j == nil {
		j = &job{kind: kind} // a schedule's firing: its kind's settings, no options
	}
	kf := m.kinds[j.kind]
	if n.paused[j.kind] || kf.Fair {
		return true, 0
	}
	since = n.resumed[j.kind]
	if j.group != "" {
		idx := runview.IndexOf(live)
		for oid, o := range n.jobs {
			if oid == id || o.group != j.group || o.kind != j.kind {
				continue
			}
			// One at a time: any other job of the group running (a later one a retried head
			// waits for, or a cancelled one whose handler runs on) holds it, as does an
			// earlier one not ended.
			if _, in := idx.Get(oid); o.running || oid < id && !ended(o, in) {
				return true, 0
			}
		}
		since = max(since, n.grpFree[j.kind+"\x00"+j.group])
	}
	kk := j.kind + "\x00" + j.key
	if kf.KeyLimit > 0 {
		if n.running[kk] >= kf.KeyLimit {
			return true, 0
		}
		since = max(since, n.keyFree[kk])
	}
	for _, s := range []struct {
		series string
		r      flow.Rate
	}{{j.kind, kf.Rate}, {kk, kf.KeyRate}} {
		if !s.r.On() {
			continue
		}
		at := n.readyAt(s.series, s.r)
		if at > now {
			return true, 0
		}
		since = max(since, at)
	}
	return false, since
}

// readyAt is when series s's bucket allows its next start: GCRA over the starts seen since
// the node opened, from an empty bucket at the open (docs/runner.md: a restart grants no burst).
func (n *node) readyAt(s string, r flow.Rate) time.Duration {
	iv := time.Duration(r.Interval())
	b := time.Duration(r.BurstSize())
	tat, ok := n.tat[s]
	if !ok {
		tat = n.openAt + b*iv
	}
	return tat - (b-1)*iv
}

// Describe renders node's flow state for a trace line: the paused kinds and the keys and
// groups with attempts running.
func (m *Model) Describe(node int) string {
	if m == nil {
		return ""
	}
	n := m.node(node)
	var parts []string
	for _, k := range m.kindNames() {
		if n.paused[k] {
			parts = append(parts, k+" paused")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(n.running)) {
		if n.running[k] > 0 {
			parts = append(parts, fmt.Sprintf("key %s running %d", strings.ReplaceAll(k, "\x00", "/"), n.running[k]))
		}
	}
	return strings.Join(parts, ", ")
}

// BeginLiveness starts the liveness phase's accounting at now.
func (m *Model) BeginLiveness() {
	if m == nil {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(m.nodes)) {
		n := m.nodes[id]
		n.live, n.liveStarts, n.holding = true, map[string]int{}, 0
		for _, j := range n.jobs { // a count: order does not matter
			if j.hold && j.group != "" && j.state != "succeeded" && j.state != "cancelled" {
				n.holding++
			}
		}
		n.keyWork = map[string]time.Duration{}
	}
}

// Drawn: node's attempt of job id holds its key for d (its handler and a commit cycle), in
// the liveness phase.
func (m *Model) Drawn(node int, id uint64, d time.Duration) {
	if m == nil {
		return
	}
	n := m.node(node)
	j := n.jobs[id]
	if !n.live || j == nil {
		return
	}
	if m.kinds[j.kind].KeyLimit > 0 {
		n.keyWork[j.kind+"\x00"+j.key] += d
	}
}

// Allowance is what flow control may add to node's liveness bound: the operator's period
// (a resume, a held group released), each rate series' starts in the phase (and one more) at
// its interval, each limited key's work over its limit, and each group's jobs' chains (its
// jobs run one at a time, each through its waits). A sum, not a maximum: each may hold a
// different job last.
func (m *Model) Allowance(node int, operator time.Duration, chain func(id uint64) time.Duration) time.Duration {
	if m == nil {
		return 0
	}
	n := m.node(node)
	// Each job that may die holding its group waits for an operator's tick to cancel it (a
	// group's later jobs may expire in turn once let out).
	a := time.Duration(2+n.holding) * operator
	for _, k := range m.kindNames() { // a bucket empty at an open: one interval to the first start
		for _, r := range []flow.Rate{m.kinds[k].Rate, m.kinds[k].KeyRate} {
			if r.On() {
				a += time.Duration(r.Interval())
			}
		}
	}
	for _, s := range slices.Sorted(maps.Keys(n.liveStarts)) {
		kind, _, keyed := strings.Cut(s, "\x00")
		r := m.kinds[kind].Rate
		if keyed {
			r = m.kinds[kind].KeyRate
		}
		a += time.Duration(n.liveStarts[s]) * time.Duration(r.Interval())
	}
	for _, k := range slices.Sorted(maps.Keys(n.keyWork)) {
		kind, _, _ := strings.Cut(k, "\x00")
		a += n.keyWork[k] / time.Duration(m.kinds[kind].KeyLimit)
	}
	for id, j := range n.jobs { // a sum: order does not matter
		switch kl := m.kinds[j.kind].KeyLimit; {
		case j.group != "":
			a += chain(id) // a group's jobs run one after another, each through its retries
		case kl > 0:
			// A key at its limit runs its jobs KeyLimit at a time, each through its retries.
			a += chain(id) / time.Duration(kl)
		}
	}
	return a
}

// Op is one command of the world's operator: a pause or resume of a kind (Kind, by its
// index), or a cancel or retry of a dead job that holds its group (ID).
type Op struct {
	Kind         int
	Pause, Retry bool
	ID           uint64 // 0: a pause or resume
}

// Operate draws the operator's commands for node from r: each kind paused or resumed with
// probability pPause; each dead job holding its group retried or cancelled one time in four.
// In the liveness phase it resumes every paused kind and cancels every holding dead job.
func (m *Model) Operate(node int, r *rand.Rand, liveness bool, pPause float64, kinds []string, views []runview.Job) []Op {
	var ops []Op
	for i, k := range kinds {
		if on := m.Paused(node, k); liveness && on || !liveness && r.Float64() < pPause {
			ops = append(ops, Op{Kind: i, Pause: !on})
		}
	}
	for _, v := range views {
		if v.State == "dead" && m.Holds(node, v.ID) && (liveness || r.Intn(4) == 0) {
			ops = append(ops, Op{ID: v.ID, Retry: !liveness && r.Intn(2) == 0})
		}
	}
	return ops
}
