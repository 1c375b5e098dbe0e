package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim/disk"
	"github.com/sluicehq/sluice/sim/faults"
	"github.com/sluicehq/sluice/sim/forge"
	"github.com/sluicehq/sluice/sim/internal/lazyrand"
	"github.com/sluicehq/sluice/sim/internal/runview"
)

// The runner side of the world: runner nodes, each a process with its own simulated disk and
// journal, executing runner.Node (the host production executes too: the protocol is there,
// not here), an executor that draws handler durations and outcomes, and a producer per node.
// This file adds the world: the clock (a batch's sync lands at the instant it was written,
// after the events already due then), the timing of group commit (SyncDelay), and faults.
// Nodes crash at random steps (disk.Crash, the engine dropped without Close, reopened after a
// restart delay), inside commits and compactions (disk.CrashAfter), and when a handler takes
// the process down; or they stop gracefully (runner.Close, with a compaction at close drawn),
// which the Node carries through to Effects.Close.

const journalName = "jobs.journal"

// undecodable prefixes a payload the world's codec refuses (decodePayload).
const undecodable = "!"

// decodePayload is the world's codec behind the engine's decode-check port.
func decodePayload(p []byte) (any, error) {
	if len(p) > 0 && p[0] == undecodable[0] { // undecodable is one byte; no copy of p to test it
		return nil, errors.New("simulated undecodable payload")
	}
	return string(p), nil
}

// recordMax is the runner's record limit in the world: small, so that large payloads span
// several disk sectors and oversize ones are tried.
const recordMax = 4096

type cmdKind uint8

const (
	cmdEnqueue cmdKind = iota + 1
	cmdCancel
	cmdRetry
	cmdSchedule // set or remove one (the checker follows schedules by their state)
	cmdPause    // id: the kind's index in kindNames
	cmdResume
)

type pendingCmd struct {
	kind cmdKind
	id   uint64
	at   time.Duration // when it was submitted
}

type runnerNode struct {
	w    *World
	id   int
	name string
	disk *disk.Disk
	cfg  runner.Config
	node *runner.Node
	e    *runner.Engine // node's, for reads and checks

	up      bool
	gen     int
	refused bool // open refused a corrupted journal (bitflip profile): the node stays down
	flipped string

	commitPending bool
	wakeAt        time.Duration
	wakes         int // wakes the engine asked for (mutLostWake loses some)
	executing     int
	stopping      bool                        // a graceful stop is under way
	execs         map[runner.Token]*execution // attempts whose handler has not returned
	open          int                         // non-terminal jobs at the last commit
	pending       map[runner.Ref]pendingCmd
	ref           runner.Ref // the last command's
	acked         []uint64   // acknowledged ids, for cancels
	boundaries    []int64    // journal sizes after each acknowledged batch since the last compaction
	produced      int
	commits       int
	views         []JobView       // the state at the last commit that wrote records
	rOp           *rand.Rand      // the operator's listing choices (checkList)
	durable       journal.LSN     // the journal's durable LSN then
	scheds        []*simSched     // the periodic jobs the node's program wants (runner_schedule.go)
	rSched        *rand.Rand      // their changes
	rLimits       *rand.Rand      // per-job attempts and deadlines (drawLimits)
	rFlow, rOps   *rand.Rand      // per-job flow options, and the operator's pauses (check_flow.go)
	rErr          *rand.Rand      // long error texts (longError)
	heldKeys      map[string]bool // due schedules whose unique key was held before this commit (runner_schedule.go)

	// flight is the batch whose sync is in flight (Effects.Sync to SyncDone), with the state and
	// schedules it makes durable.
	flight    *flight
	afterLand []func() // outcomes that arrived during the flight, fed once it landed

	script *scripted // RunScript's node: scripted handlers, an observer
}

// replayDue says whether the world replays a copy of a node's disk after its k-th successful
// commit: at 8, 16, 32, 64, 128, then every 128th (a replay reads the whole journal, so a
// fixed period would cost quadratic time on a journal that never compacts).
func replayDue(k int) bool {
	if k >= 128 {
		return k%128 == 0
	}
	return k >= 8 && k&(k-1) == 0
}

// checkReplay copies the node's files (after a successful commit everything written is
// synced) onto a fresh disk, replays the journal there with runner.Replay, and compares the
// result with the live state: replay-equals-live at an arbitrary point, not only after crashes.
func (n *runnerNode) checkReplay(live []JobView) {
	w := n.w
	cp := disk.New(1)
	names, err := n.disk.List()
	if err != nil {
		w.chk.Fail(InvMachine, "%s: listing the disk: %v", n.name, err)
		return
	}
	for _, name := range names {
		data, err := n.disk.ReadAll(name)
		if err == nil {
			err = cp.WriteSynced(name, data)
		}
		if err != nil {
			w.chk.Fail(InvMachine, "%s: copying %s: %v", n.name, name, err)
			return
		}
	}
	cfg := n.cfg
	cfg.Rand = lazyrand.New(1) // never draw from the live engine's stream
	snap, err := runner.Replay(cp, journalName, cfg)
	if err != nil {
		w.chk.Fail(InvReplayEqualsLive, "%s: replaying a copy of the disk after a commit: %v", n.name, err)
		return
	}
	if d := runview.Diff(live, runview.Jobs(live, snap), false); d != "" || len(snap.Jobs) != len(live) {
		w.chk.Fail(InvReplayEqualsLive, "%s: a replay of the disk right after a commit differs from the live state: %s (%d jobs live, %d replayed)",
			n.name, d, len(live), len(snap.Jobs))
		return
	}
	if got, want := runview.Schedules(snap.Schedules), n.scheduleViews(); !runview.SameSchedules(want, got) {
		w.chk.Fail(InvReplayEqualsLive, "%s: a replay of the disk right after a commit has schedules %v, live %v", n.name, got, want)
		return
	}
	w.chk.Pass(InvReplayEqualsLive)
	n.checkForgedCopy(cp) // forge.go
}

// checkList pages through the node's jobs as an operator's listing does (List: a filter on one
// state or none, small pages and scan bounds, resumed from each page's cursor) and checks the
// pages against the live state: every matching job once, ascending by id. It checks IdleThrough
// at the same instant: idle exactly when no waiting job is due and no attempt holds a unit.
// Its draws are from the node's own "operator" stream.
func (n *runnerNode) checkList(live []JobView) {
	w := n.w
	if n.rOp == nil {
		n.rOp = Stream(w.cfg.Seed, "operator/"+n.name)
	}
	r := n.rOp
	var want runner.JobState // zero: any state
	if r.Intn(2) == 0 {
		want = runner.JobState(1 + r.Intn(int(runner.Cancelled)))
	}
	limit, scan := 1+r.Intn(8), 1+r.Intn(16)
	var got, exp []string
	for from, pages := uint64(1), uint64(0); pages <= n.e.Status().NextID; pages++ { // each page scans an id at least
		jobs, next, more := n.e.List(from, math.MaxUint64, func(j *runner.Job) bool { return want == 0 || j.State == want }, limit, scan)
		for _, j := range jobs {
			got = append(got, strconv.FormatUint(j.ID, 10)+"/"+j.State.String())
		}
		if !more {
			break
		}
		from = next + 1
	}
	busy, held := n.e.Status().InFlight > 0, false // held: a due job flow control may hold
	for _, v := range live {
		if want == 0 || v.State == want.String() {
			exp = append(exp, strconv.FormatUint(v.ID, 10)+"/"+v.State)
		}
		if v.State == runner.Waiting.String() && v.Due <= w.loop.Now() { // (parked or not: either)
			h, _ := w.chk.flowBlocked(w.chk.node(n.id), v.ID, w.loop.Now())
			busy, held = busy || !h, held || h
		}
	}
	for _, sc := range n.e.Schedules() { // a schedule's period due is work too
		busy = busy || !sc.Next.IsZero() && !sc.Next.After(w.now())
	}
	if g, e := strings.Join(got, " "), strings.Join(exp, " "); g != e {
		w.chk.Fail(InvMachine, "%s: List (state %v, pages of %d, scanning %d) gave [%s], the state holds [%s]", n.name, want, limit, scan, g, e)
		return
	}
	if idle := n.e.IdleThrough(w.now()); idle == busy && (busy || !held) {
		w.chk.Fail(InvMachine, "%s: IdleThrough(now) is %v, but a job or a period is due or an attempt holds a unit: %v", n.name, idle, busy)
		return
	}
	w.chk.Pass(InvMachine)
}

func (w *World) setupRunner() {
	c := w.cfg
	for i := 1; i <= c.Nodes; i++ {
		n := &runnerNode{w: w, id: i, name: "node/" + strconv.Itoa(i)}
		n.disk = disk.New(int64(streamSeed(c.Seed, "disk/"+strconv.Itoa(i))))
		df := c.Faults.Disk
		df.BitFlip = 0 // the bitflip profile flips bits itself, where a later batch proves them corrupt
		n.disk.SetFaults(df)
		base, bcap, capacity := c.Base, c.Cap, c.Capacity
		switch w.mutation {
		case mutDoubleBackoff: // the engine waits twice what the checker and the bound expect
			base, bcap = 2*base, 2*bcap
		case mutHalfPool: // the engine uses half the pool the checker and the bound expect
			capacity = max(1, capacity/2)
		}
		n.cfg = runner.Config{
			Policy:       retry.Policy{Attempts: c.Attempts, Base: base, Cap: bcap, Deadline: c.Deadline},
			Circuit:      breaker.Circuit{Threshold: c.Threshold, Window: c.Window, Cooldown: c.Cooldown, Probes: c.Probes},
			Capacity:     capacity,
			CompactBytes: c.CompactBytes,
			Retention:    c.Retention,
			RecordMax:    recordMax,
			Rand:         Stream(c.Seed, "jitter/"+strconv.Itoa(i)),
			// A grace about as long as the handlers, so graceful stops cut attempts (and some
			// handlers ignore the cut past the second grace).
			Grace:     drawGrace(Stream(c.Seed, "grace/"+strconv.Itoa(i)), c.HandlerMin/2, 2*c.HandlerMax),
			Decode:    decodePayload,
			KindsOnly: true,
			Defect:    runner.Defect(max(int(w.mutation)-int(mutFlow), 0)),
		}
		limits := map[string]int{}
		rDecode := Stream(c.Seed, "kind-decode/"+n.name)
		for k, name := range kindNames {
			kc := runner.KindConfig{Name: name, Limit: c.KindLimits[k]}
			c.Flow[k].Apply(&kc)
			if rDecode.Intn(2) == 0 {
				kc.Decode = decodePayload // the kind's own codec port, the same codec
			}
			n.cfg.Kinds = append(n.cfg.Kinds, kc)
			limits[name] = c.KindLimits[k]
		}
		zeroRunnerDefaults(&n.cfg, Stream(c.Seed, "defaults/"+n.name))
		n.drawJournalConfig() // journal_fam.go
		n.drawSchedules()
		w.chk.RunnerConfigured(i, RunnerParams{Capacity: c.Capacity, Attempts: c.Attempts, Deadline: c.Deadline, Base: c.Base, Cap: c.Cap,
			Threshold: c.Threshold, Window: c.Window, Cooldown: c.Cooldown, Probes: c.Probes, KindLimits: limits, KindsOnly: true})
		w.nodes = append(w.nodes, n)
		n.startOperator() // check_flow.go
		n.start()
		w.loop.At(drawBetween(w.rWork, 0, c.JobEvery), func() { n.produce() })
	}
}

// drawGrace draws a node's stop grace in [lo, hi], or one time in eight the documented default
// (which zeroRunnerDefaults may then write as zero).
func drawGrace(r *rand.Rand, lo, hi time.Duration) time.Duration {
	g := drawBetween(r, lo, hi)
	if r.Intn(8) == 0 {
		g = runner.GraceDefault
	}
	return g
}

// alive wraps fn so it runs only in the same incarnation, after the per-step crash draw.
func (n *runnerNode) alive(fn func()) func() {
	gen := n.gen
	return func() {
		if !n.up || n.gen != gen {
			return
		}
		w := n.w
		if w.faultsOn && faults.Hit(w.rFaults, w.cfg.Faults.Process.NodeCrash) {
			if w.rFaults.Intn(2) == 0 {
				if !n.stopping {
					w.fault("node-stop")
					n.stop()
				}
				fn()
				return
			}
			w.fault("node-crash")
			n.crash("at a random step")
			return
		}
		fn()
	}
}

func (n *runnerNode) start() {
	w := n.w
	if n.refused {
		return
	}
	w.chk.OpenAttempted(n.id)
	leftover := n.armLeftover() // journal_fam.go
	e, err := runner.Open(n.fsys(), journalName, n.cfg, w.now())
	n.checkLeftover(leftover, err)
	if err != nil && w.injected(err) && w.faultsOn {
		// An injected fault, before any verdict on the journal (a damaged one is judged at the
		// next open).
		w.trace(n.name, "open failed on an injected disk fault, restarting: "+err.Error())
		n.disk.Crash()
		n.traceTail()
		n.traceFiles()
		n.scheduleRestart()
		return
	}
	if n.flipped != "" {
		what := n.flipped
		n.flipped = ""
		if refusal(err, what) {
			w.chk.Pass(InvCorruptionRefused)
			n.checkAimed(err) // journal_fam.go
			w.trace(n.name, "open refused the corrupted journal, as it must: "+err.Error())
			n.traceJournal()
			n.checkScanRefuses(what)
			n.refused = true
			return
		}
		if err == nil {
			w.chk.Fail(InvCorruptionRefused, "%s: open accepted a journal with %s", n.name, what)
		} else {
			w.chk.Fail(InvCorruptionRefused, "%s: open after %s failed without naming corruption: %v", n.name, what, err)
		}
		return
	}
	if err != nil {
		w.chk.Fail(InvRecoveryOpens, "%s: open failed: %v", n.name, err)
		return
	}
	var ncfg runner.NodeConfig
	if n.script != nil {
		ncfg.Observe = n.script.observe
	}
	// The recovered state is judged as Open left it: the Node's first landing may compact a
	// journal that had grown past CompactBytes, and retention may then prune jobs recovery
	// made terminal (interrupted, attempts spent), which the checker is told apart.
	n.e = e
	st := e.State()
	n.gen++
	w.tracef(n.name, "open: %d jobs, next id %d, %d interrupted attempts requeued", len(st.Jobs), st.NextID, e.Orphans())
	if n.gen > 1 {
		n.traceRecovered(st)
	}
	views := runview.Jobs(n.views, st)
	w.chk.NodeRecovered(n.id, views)
	w.chk.flow.Recovered(n.id, w.loop.Now(), st.Paused, views)
	w.chk.SchedulesRecovered(n.id, n.scheduleViews(), views)
	n.checkEntryDurable("an open") // journal_fam.go
	n.node, n.up = runner.NewNode(e, ncfg), true
	if e.Status().Compactions > 0 && e.Poisoned() == nil {
		views = runview.Jobs(views, e.State())
		n.checkEntryDurable("a compaction at open")
		w.chk.Compacted(n.id, views)
		w.trace(n.name, "compacted at open")
	}
	n.step(runner.Admit{On: true})
	n.pending = make(map[runner.Ref]pendingCmd)
	n.execs = make(map[runner.Token]*execution)
	n.commitPending, n.wakeAt, n.executing, n.stopping = false, 0, 0, false
	n.flight, n.afterLand = nil, nil
	n.noteState(views)
	n.views, n.durable = views, e.Status().Durable
	n.boundaries = n.boundaries[:0]
	n.noteBoundary()
	n.checkMachine()
	n.checkDisk()
	if n.script == nil {
		n.registerSchedules()
	}
	n.scheduleCommit()
}

func (n *runnerNode) checkMachine() {
	if err := n.node.CheckInvariants(); err != nil { // the Node's, the engine's among them
		n.w.chk.Fail(InvMachine, "%s: runner: %v", n.name, err)
	} else {
		n.w.chk.Pass(InvMachine)
	}
}

// checkDisk runs the simulated disk's own invariants; they cost O(bytes on the disk), so
// only after each open (every crash and restart), not after every commit.
func (n *runnerNode) checkDisk() {
	if err := n.disk.CheckInvariants(); err != nil {
		n.w.chk.Fail(InvMachine, "%s: disk: %v", n.name, err)
	} else {
		n.w.chk.Pass(InvMachine)
	}
}

func (n *runnerNode) crash(why string) {
	w := n.w
	if !n.up {
		return
	}
	if f := n.flight; f != nil {
		// The write's schedule firings were appended (and may survive on disk), never acknowledged.
		n.noteFirings(f.before, f.after, f.next, f.upTo, false)
	}
	n.flight, n.afterLand = nil, nil
	n.up = false
	n.gen++
	n.e, n.node = nil, nil
	w.st.Crashes.Add("node", 1)
	w.chk.NodeCrashed(n.id)
	n.disk.Crash()
	fates := strings.ReplaceAll(strings.TrimSpace(n.disk.LastCrash()), "\n", "; ")
	if fates == "" {
		fates = "nothing unsynced"
	}
	w.trace(n.name, "CRASH "+why+"; disk: "+fates)
	n.traceTail()
	n.traceFiles()
	if w.cfg.Faults.ExpectRefusal && len(n.boundaries) >= 2 {
		w.damage(n) // damage to synced data (world.go)
	}
	n.scheduleRestart()
}

// stop begins a graceful stop, as Run's context ending does: runner.Close, with a compaction
// at close drawn now. The commits that follow (at outcomes and wakes) carry the Node's cancels,
// its flush and, once quiet, Effects.Close (finishStop).
func (n *runnerNode) stop() {
	w := n.w
	n.stopping = true
	w.chk.NodeStopping(n.id)
	w.trace(n.name, "STOP (graceful): admission off")
	n.step(runner.Close{Compact: w.rFaults.Intn(2) == 0})
	n.scheduleCommit()
}

// finishStop performs Effects.Close (and Compact, sometimes with a crash armed inside it):
// Close, and a start after the restart delay. Attempts still running are abandoned with the
// process and come back as interrupted.
func (n *runnerNode) finishStop(rd runner.Effects) {
	w := n.w
	n.checkMachine() // closed: nothing pending, nothing in flight
	if rd.Compact {
		armed := false
		if w.faultsOn && faults.Hit(w.rFaults, w.cfg.Faults.Process.CommitCrash) {
			k := 1 + w.rFaults.Intn(6)
			n.disk.CrashAfter(k)
			armed = true
			w.fault("close-compaction-crash")
			w.trace(n.name, "crash armed after "+strconv.Itoa(k)+" disk ops of the compaction at close")
		}
		if err := n.node.Compact(); err != nil {
			w.fault("compaction-failed")
			w.trace(n.name, "compaction at close failed: "+err.Error())
		} else {
			w.chk.Compacted(n.id, runview.Jobs(n.views, n.e.State()))
			n.boundaries = n.boundaries[:0] // the snapshot replaced every batch damage may aim at
			n.checkEntryDurable("a compaction at close")
			w.trace(n.name, "compacted at close")
		}
		if armed {
			n.crash("inside the compaction at close")
			return
		}
	}
	closeErr, crashed := n.closeEngine() // journal_fam.go: maybe a crash inside Close
	if crashed {
		return
	}
	if closeErr != nil {
		w.trace(n.name, "close: "+closeErr.Error())
	}
	n.up = false
	n.gen++
	n.e, n.node = nil, nil
	w.st.Crashes.Add("node-stop", 1)
	w.chk.NodeCrashed(n.id)
	w.trace(n.name, "STOPPED (flushed, closed)")
	if closeErr == nil && w.cfg.Faults.ExpectRefusal && w.damaged(n.id) && w.rForge.Intn(2) == 0 {
		w.forgeMark(n) // the damage family's forger of the clean-close mark (forge.go)
	}
	n.damageClosed(closeErr) // journal_fam.go
	n.scheduleRestart()
}

func (n *runnerNode) scheduleRestart() {
	w := n.w
	d := w.cfg.Faults.Process.Restart(w.rFaults)
	gen := n.gen
	w.loop.After(d, func() {
		if n.gen == gen && !n.up {
			n.start()
		}
	})
}

func (n *runnerNode) calm() {
	n.disk.SetFaults(faults.Disk{})
}

func (n *runnerNode) settled() bool {
	if n.refused {
		return true
	}
	s := n.up && n.open == 0 && n.executing == 0 && !n.commitPending && n.flight == nil
	if s && !n.e.Idle() {
		// The world's count and the engine's own (what Drain waits for) must agree.
		n.w.chk.Fail(InvMachine, "%s: no job open or executing at the last commit, but the engine is not idle", n.name)
	}
	return s
}

func (n *runnerNode) unsettled() string {
	if n.settled() {
		return ""
	}
	if !n.up {
		return n.name + " is down"
	}
	var jobs []string
	for _, j := range n.e.State().Jobs {
		if !j.State.Terminal() && len(jobs) < 5 {
			jobs = append(jobs, "("+runner.DescribeJob(j, Epoch)+")")
		}
	}
	return fmt.Sprintf("%s has %d jobs not terminal %s, %d attempts executing", n.name, n.open, strings.Join(jobs, " "), n.executing)
}

// traceRecovered traces, after a restart, the recovered jobs a reader of the trace follows:
// those not terminal and the dead (one line each, in core's own rendering).
func (n *runnerNode) traceRecovered(st runner.Snapshot) {
	s := runner.Snapshot{Jobs: make([]runner.Job, 0, len(st.Jobs))}
	for _, j := range st.Jobs {
		if !j.State.Terminal() || j.State == runner.Dead {
			s.Jobs = append(s.Jobs, j)
		}
	}
	s.NextID, s.Windows = st.NextID, st.Windows // the keys a success still reserves
	// Line by line as strings.Split would give them, without its slice.
	for d, more := strings.TrimSuffix(runner.Describe(s, Epoch), "\n"), true; more; {
		var line string
		line, d, more = strings.Cut(d, "\n")
		n.w.trace(n.name, "recovered "+line)
	}
}

// oneLine joins core's multi-line renderings into one trace line.
func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "; ") }

func (n *runnerNode) summarize() {
	if n.e == nil {
		return
	}
	for _, j := range n.e.State().Jobs {
		n.w.st.Jobs.Add(j.State.String(), 1)
	}
}

// produce is the node's producer: enqueues (sometimes in bursts) and cancels.
func (n *runnerNode) produce() {
	w := n.w
	c := w.cfg
	if w.liveness || n.produced >= c.JobsMax {
		return
	}
	k := 1
	if w.faultsOn && faults.Hit(w.rFaults, c.Faults.Timing.Burst) {
		k = c.Faults.Timing.BurstSize
		w.fault("burst")
	}
	// A batch tick submits its jobs (all but an oversize one) as one EnqueueMany.
	var batch []runner.NewJob
	batched := w.rWork.Float64() < c.PBatch
	if batched && k == 1 {
		k = 2 + w.rWork.Intn(7)
	}
	for i := 0; i < k && n.produced < c.JobsMax; i++ {
		n.produced++
		due := w.loop.Now()
		if w.rWork.Intn(4) == 0 {
			due += drawBetween(w.rWork, 0, 30*time.Second)
		}
		target := "t" + strconv.Itoa(1+w.rWork.Intn(c.Targets))
		payload := "p" + strconv.Itoa(n.id) + "-" + strconv.Itoa(n.produced)
		oversize := false
		switch u := w.rWork.Float64(); {
		case u < 0.01:
			// Over the record limit: Enqueue must refuse it before anything is written. Its
			// bytes are built at the call (oversized), never as a string.
			oversize = true
		case u < 0.02:
			// A payload the handler's codec cannot decode: the engine fails the job
			// permanently before any handler sees it.
			payload = undecodable + payload
		case u < 0.1:
			// A large record: its frame spans sectors, so a crash can persist it in pieces.
			payload += w.repeated('y', 500+w.rWork.Intn(recordMax-1000))
		}
		payload = n.bigPayload(payload, oversize) // journal_fam.go
		var o runner.Opts
		if w.rWork.Float64() < c.PPriority {
			o.Priority = w.rWork.Intn(11) - 5
		}
		if w.rWork.Float64() < c.PUnique {
			// A small pool of keys, so duplicates (live and across crashes) are common.
			o.Unique = "u" + strconv.Itoa(w.rWork.Intn(5))
			if w.rKind.Intn(2) == 0 {
				o.UniqueFor = drawBetween(w.rKind, time.Millisecond, 10*time.Second)
			}
		}
		o.Kind = kindNames[w.rKind.Intn(len(kindNames))]
		n.drawLimits(&o)
		n.drawFlow(&o, &target) // check_flow.go
		if batched && !oversize {
			batch = append(batch, runner.NewJob{Due: Epoch.Add(due), Target: target, Payload: []byte(payload), Opts: o})
			continue
		}
		var raw []byte
		if oversize {
			raw = w.oversized(payload, n.cfg.RecordMax+1)
		}
		if !n.enqueueRaw(due, target, payload, raw, oversize, o) {
			return
		}
	}
	if len(batch) > 0 {
		n.enqueueMany(batch)
	}
	if n.up && len(n.acked) > 0 && w.rWork.Float64() < c.CancelP {
		id := n.acked[w.rWork.Intn(len(n.acked))]
		if _, err := n.propose(runner.Cancel{ID: id}, pendingCmd{kind: cmdCancel, id: id}); err == nil {
			w.trace(n.name, "cancel id="+strconv.FormatUint(id, 10))
			w.chk.CancelSubmitted(n.id, id)
		}
	}
	if n.up && len(n.acked) > 0 && w.rWork.Float64() < c.CancelP {
		// A manual retry of a job that may be dead (refused unless it is).
		id := n.acked[w.rWork.Intn(len(n.acked))]
		j, ok := n.e.Get(id)
		_, err := n.propose(runner.Retry{ID: id}, pendingCmd{kind: cmdRetry, id: id, at: w.loop.Now()})
		switch {
		case err == nil:
			w.chk.RetrySubmitted(n.id, id)
			w.trace(n.name, "retry id="+strconv.FormatUint(id, 10))
		case !ok && !errors.Is(err, runner.ErrNotFound), ok && j.State != runner.Dead && !errors.Is(err, runner.ErrNotDead):
			w.chk.Fail(InvMachine, "%s: a retry of job %d (found %v, %v) was refused with %v", n.name, id, ok, j.State, err)
		}
	}
	n.operate() // check_reads.go
	n.maybeChangeSchedule()
	if n.up {
		n.scheduleCommit()
	}
	w.loop.After(drawBetween(w.rWork, time.Millisecond, 2*c.JobEvery), n.produceStep())
}

// longError draws whether a failure's error text is longer than a record (one in 32),
// from the node's own "errtext" stream.
func (n *runnerNode) longError() bool {
	if n.rErr == nil {
		n.rErr = Stream(n.w.cfg.Seed, "errtext/"+n.name)
	}
	return n.rErr.Intn(32) == 0
}

// drawLimits gives one job in eight its own attempts (1 to the policy's) and one in eight its
// own deadline (at most the policy's when it has one), from the node's own "limits" stream:
// the per-job options that replace the policy's, which the checker's attempts and deadline
// rules then hold the job to.
func (n *runnerNode) drawLimits(o *runner.Opts) {
	c := n.w.cfg
	if n.rLimits == nil {
		n.rLimits = Stream(c.Seed, "limits/"+n.name)
	}
	r := n.rLimits
	if r.Intn(8) == 0 {
		o.AttemptsMax = 1 + r.Intn(c.Attempts)
	}
	if r.Intn(8) == 0 {
		hi := c.Deadline
		if hi == 0 {
			hi = time.Minute
		}
		o.Deadline = drawBetween(r, time.Second, max(time.Second, hi))
	}
}

// enqueue submits one job to the node's runner, as a client would; it reports false when a
// violation ends the run.
func (n *runnerNode) enqueue(due time.Duration, target, payload string, oversize bool) bool {
	return n.enqueueOpts(due, target, payload, oversize, runner.Opts{})
}

// enqueueOpts is enqueue with per-job options.
func (n *runnerNode) enqueueOpts(due time.Duration, target, payload string, oversize bool, o runner.Opts) bool {
	return n.enqueueRaw(due, target, payload, nil, oversize, o)
}

// enqueueRaw is enqueueOpts; raw, when not nil, is the payload's bytes (an oversize one, of
// which payload is only the front) and stands for payload.
func (n *runnerNode) enqueueRaw(due time.Duration, target, payload string, raw []byte, oversize bool, o runner.Opts) bool {
	w := n.w
	size := len(payload)
	if raw != nil {
		size = len(raw)
	} else {
		raw = []byte(payload)
	}
	if !n.up {
		w.trace(n.name, "enqueue refused: node down")
		w.st.Faults.Add("enqueue-refused-down", 1)
		return true
	}
	at := Epoch.Add(due)
	if due == w.loop.Now() && size%2 == 0 {
		at = time.Time{} // "due now" as a client writes it, for half the payloads
	}
	next := n.e.Status().NextID
	a, err := n.propose(runner.Enqueue{Due: at, Target: target, Payload: raw, Opts: o}, pendingCmd{kind: cmdEnqueue})
	id := a.ID
	if oversize {
		if errors.Is(err, runner.ErrTooLarge) {
			w.chk.Pass(InvRecordLimit)
			w.trace(n.name, "enqueue of "+strconv.Itoa(size)+" bytes refused, as it must: "+err.Error())
			return true
		}
		if err == nil {
			w.chk.Fail(InvRecordLimit, "%s: an enqueue of %d bytes (RecordMax %d) was accepted as job %d", n.name, size, n.cfg.RecordMax, id)
			return false
		}
	}
	if err != nil {
		w.trace(n.name, "enqueue refused: "+err.Error())
		return true
	}
	if id < next {
		// A duplicate of the job holding its unique key: nothing was journaled.
		w.trace(n.name, "enqueue duplicate of id="+strconv.FormatUint(id, 10)+" key="+o.Unique)
		return true
	}
	w.chk.JobAppended(n.id, id, due, target, payload)
	w.chk.JobOptions(n.id, id, o.Kind, o.Unique)
	w.chk.flow.Job(n.id, id, o)
	w.chk.JobLimits(n.id, id, o.AttemptsMax, o.Deadline)
	if w.mutation == mutAckEarly {
		w.chk.JobAcked(n.id, id) // a deliberately broken driver: acknowledged before durable
	}
	shown := payload
	if len(shown) > 24 {
		shown = shown[:24] + "...(" + strconv.Itoa(len(payload)) + " bytes)"
	}
	w.trace(n.name, "enqueue id="+strconv.FormatUint(id, 10)+" due="+Offset(due)+" "+target+" "+shown)
	return true
}

// enqueueMany submits jobs as one batch (one Ack for all), as a client calling EnqueueMany would.
func (n *runnerNode) enqueueMany(jobs []runner.NewJob) {
	w := n.w
	if !n.up {
		w.trace(n.name, "enqueue many refused: node down")
		w.st.Faults.Add("enqueue-refused-down", 1)
		return
	}
	next := n.e.Status().NextID
	a, err := n.propose(runner.EnqueueMany{Jobs: jobs}, pendingCmd{kind: cmdEnqueue})
	ids := a.IDs
	if err != nil {
		w.trace(n.name, "enqueue many refused: "+err.Error())
		return
	}
	for i, id := range ids {
		j := jobs[i]
		if id < next || (i > 0 && slices.Contains(ids[:i], id)) {
			continue // a duplicate: its holder was appended before, or earlier in this batch
		}
		w.chk.JobAppended(n.id, id, j.Due.Sub(Epoch), j.Target, string(j.Payload))
		w.chk.JobOptions(n.id, id, j.Opts.Kind, j.Opts.Unique)
		w.chk.flow.Job(n.id, id, j.Opts)
		w.chk.JobLimits(n.id, id, j.Opts.AttemptsMax, j.Opts.Deadline)
		if w.mutation == mutAckEarly {
			w.chk.JobAcked(n.id, id)
		}
	}
	w.trace(n.name, fmt.Sprintf("enqueue many ids=%d..%d", ids[0], ids[len(ids)-1]))
}

// produceStep wraps produce in the crash draw when the node is up (a producer is a client: it
// keeps producing while the node is down, and sees its enqueues refused).
func (n *runnerNode) produceStep() func() {
	return func() {
		if n.up && n.flight != nil && n.node.Room() == 0 {
			// The node takes nothing now (its flight must land quiet): the client waits for the
			// landing, at this instant.
			n.w.loop.AtExact(n.w.loop.Now(), n.produceStep())
			return
		}
		if n.up {
			n.alive(n.produce)()
			if !n.up {
				n.w.loop.After(drawBetween(n.w.rWork, time.Millisecond, 2*n.w.cfg.JobEvery), n.produceStep())
			}
			return
		}
		n.produce()
	}
}

// step tells the node the world's time, then steps in.
func (n *runnerNode) step(in runner.Input) {
	n.node.Step(runner.Clock{Now: n.w.now()})
	n.node.Step(in)
}

// propose steps a client's command into the node; p is what the world remembers of it until
// its Ack. It returns what the command did at once: the ids it took, or its refusal.
func (n *runnerNode) propose(cmd runner.Event, p pendingCmd) (runner.Ack, error) {
	n.ref++
	p.at = n.w.loop.Now()
	n.step(runner.Propose{Ref: n.ref, Cmd: cmd})
	a, err := n.node.LastProposal()
	if err == nil {
		n.pending[n.ref] = p
	}
	return a, err
}

// flight is a batch the Node wrote (Effects.Sync) whose sync is in flight, with what the world
// noted before it was written: commands and outcomes arriving meanwhile are stepped for the
// next batch, which the Node writes only after this one landed.
type flight struct {
	b            runner.Batch
	cut          bool
	before       []runner.Schedule // schedules before the write, and after it (firings are its)
	after        []runner.Schedule
	next, upTo   uint64    // ids the write's firings took: [next, upTo)
	ops          int       // the disk's operation count before the write (checkCompactRefused)
	views        []JobView // the live state at the write, what this batch makes durable
	schedsViewed []ScheduleView
}

// scheduleCommit asks for one commit SyncDelay from now (at this instant, after every event
// already scheduled for it, when the delay is 0): everything stepped meanwhile goes into the
// same batch (group commit).
func (n *runnerNode) scheduleCommit() {
	if n.commitPending {
		return
	}
	n.commitPending = true
	n.w.loop.After(n.w.cfg.SyncDelay, n.alive(n.commit))
}

// commit tells the Node the time and performs what it has ready (pump). While a batch flies
// it does nothing: the landing pumps.
func (n *runnerNode) commit() {
	n.commitPending = false
	if n.flight != nil {
		return
	}
	n.node.Step(runner.Clock{Now: n.w.now()})
	n.pump()
}

// pump performs the Node's Readys while it has one and no batch flies (readyMax bounds them);
// once it has none, it arms the timer for the Node's WakeAt.
func (n *runnerNode) pump() {
	for i := 0; n.up && n.flight == nil && n.node.HasReady(); i++ {
		if i == readyMax {
			panic(fmt.Sprintf("sim: %s: the Node had a Ready %d times in a row at one instant", n.name, readyMax))
		}
		n.perform()
	}
	if n.up && n.flight == nil {
		n.scheduleWake(n.node.WakeAt())
	}
}

// readyMax bounds the Readys one pump performs (a Node that always has one is a bug).
const readyMax = 1 << 10

// perform performs the Node's next Ready: a write (its sync lands at this instant, after the
// events already scheduled for it), with a crash sometimes armed inside it, or what a quiet
// Node has to do.
func (n *runnerNode) perform() {
	w := n.w
	f := &flight{}
	w.chk.flow.Written(n.id) // the batch's starts follow every record appended so far
	if n.node.Status().Dirty {
		f.cut = n.armCommitCrash()
		// The schedules beforeCommit reads are the ones the write starts from.
		f.before, f.next, f.ops = n.beforeCommit(), n.e.Status().NextID, n.disk.Ops() // runner_schedule.go
	} else {
		f.next = n.e.Status().NextID
	}
	nd := n.node
	rd := nd.Ready()
	f.after, f.upTo = n.e.Schedules(), n.e.Status().NextID
	if rd.Sync.Empty() {
		n.finishCommit(f, rd) // nothing written, or an empty batch landed at once
		nd.Advance()
		return
	}
	f.b = rd.Sync
	// What this batch makes durable, before anything else is stepped: a crash or a failed sync
	// during the flight may leave it on disk unacknowledged.
	f.views, f.schedsViewed = w.liveViews(n.id, n.views, n.e), runview.Schedules(f.after)
	w.chk.CommitUnacked(n.id, f.views)
	w.chk.SchedulesUnacked(n.id, f.schedsViewed)
	n.flight = f
	n.answer(rd.Acks) // refusals stepped before the write
	nd.Advance()
	// The flight takes no simulated time, so the checker's timing bounds stand. An outcome
	// arriving meanwhile waits for it (whenLanded): the checker judges breakers and free units
	// in world time, as if admission and start were one instant.
	w.loop.AtExact(w.loop.Now(), n.alive(func() { n.land(f) }))
}

// armCommitCrash draws whether a crash cuts the coming write (or the compaction after it) at
// its k-th disk operation, and arms it.
func (n *runnerNode) armCommitCrash() bool {
	w := n.w
	if w.faultsOn && faults.Hit(w.rFaults, w.cfg.Faults.Process.CommitCrash) {
		k := 1 + w.rFaults.Intn(12)
		if st := n.e.Status(); st.Grown+512 >= n.cfg.CompactBytes {
			// This commit is likely to compact: aim past the batch's write and sync, into the
			// snapshot's create, write, sync, rename and directory sync.
			k = 3 + w.rFaults.Intn(7)
		}
		n.disk.CrashAfter(k)
		w.fault("commit-crash")
		w.trace(n.name, "crash armed after "+strconv.Itoa(k)+" disk ops")
		return true
	}
	return w.armCrashPoint(n.name, n.disk) // the systematic crash-point family (world.go)
}

// land syncs f, the batch in flight, and performs the landing; then the outcomes that waited
// for it, and whatever the Node has ready next.
func (n *runnerNode) land(f *flight) {
	if n.flight != f {
		return // landed already (world_test lands it at once)
	}
	n.flight = nil
	nd := n.node
	nd.Step(runner.SyncDone{Err: f.b.Sync()})
	rd := nd.Ready()
	n.finishCommit(f, rd)
	nd.Advance()
	later := n.afterLand
	n.afterLand = nil
	for _, fn := range later {
		if n.up {
			fn()
		}
	}
	n.pump()
}

// finishCommit checks and performs a Ready that ends commit f (its landing, or what a commit
// that wrote nothing returned).
func (n *runnerNode) finishCommit(f *flight, rd runner.Effects) {
	w := n.w
	cut := f.cut
	l := rd.Landed
	// A compaction lost after its rename fails the Node after a durable batch.
	lost := rd.Failed != nil && l != nil && l.CompactErr != nil && l.Records > 0
	if rd.Landed != nil {
		n.noteFirings(f.before, f.after, f.next, f.upTo, rd.Failed == nil || lost)
	}
	if !n.up {
		return // a planted defect crashed it (mut_split.go)
	}
	if rd.Failed != nil && !lost {
		if f.b.Empty() { // the write failed: what it wrote, if anything, is all there is
			w.chk.CommitUnacked(n.id, runview.Jobs(n.views, n.e.State()))
			w.chk.SchedulesUnacked(n.id, n.scheduleViews())
		}
		w.trace(n.name, "commit failed: "+rd.Failed.Error())
		if cut {
			w.fault("crash-inside-batch")
			n.crash("inside a commit")
		} else {
			n.crash("after its journal was poisoned")
		}
		return
	}
	if cut {
		// The armed crash did not land inside this commit: it lands at the node's next disk
		// operation, which is the same thing as a crash right now.
		defer func() {
			if n.up {
				n.crash("at the disk op the armed crash reached")
			}
		}()
	}
	views := n.absorb(rd, f)
	n.checkCommitted(f, rd.Starts) // check_reads.go
	n.noteCommit(f, rd, views, cut)
	if lost {
		n.crash("after a compaction poisoned it: " + rd.Failed.Error())
		return
	}
	if l != nil {
		n.noteBoundary()
		n.checkMachine()
		if replayDue(n.commits) && l.CompactErr == nil && n.node.Status().Quiet {
			// (A failed compaction may have renamed its snapshot in already: the disk then holds
			// a pruned state the live engine did not prune. Recovery checks that case.)
			n.checkReplay(views)
			n.checkList(views)
		}
	}
	if rd.Close {
		if cut {
			return // the armed crash lands first
		}
		n.finishStop(rd)
		return
	}
	if n.script != nil {
		n.script.landed(n)
	}
}

// noteCommit reports a landed batch's compaction to the checker and traces the commit.
func (n *runnerNode) noteCommit(f *flight, rd runner.Effects, views []JobView, cut bool) {
	w := n.w
	l := rd.Landed
	st := n.e.Status()
	n.open = st.Waiting + st.Running
	if l == nil {
		return
	}
	n.commits++
	if cut && l.CompactErr != nil {
		w.fault("crash-inside-compaction")
	}
	if l.CompactErr != nil {
		w.fault("compaction-failed")
		n.checkCompactRefused(runner.Result{CompactErr: l.CompactErr}, f.ops) // journal_fam.go
	}
	if l.Compacted {
		n.boundaries = n.boundaries[:0]
		n.checkEntryDurable("a compaction") // journal_fam.go
		w.chk.Compacted(n.id, views)
	}
	if len(rd.Acks)+len(rd.Starts)+len(rd.Cancels) > 0 || l.Compacted || l.CompactErr != nil {
		w.trace(n.name, "commit: "+oneLine(describeEffects(rd)))
	}
}

// describeEffects renders a landing as runner.DescribeResult renders a commit's result.
func describeEffects(rd runner.Effects) string {
	res := runner.Result{Starts: rd.Starts, Cancels: rd.Cancels}
	for _, a := range rd.Acks {
		if a.Err == nil {
			res.Acks = append(res.Acks, a.Ack)
		}
	}
	if l := rd.Landed; l != nil {
		res.Compacted, res.CompactErr = l.Compacted, l.CompactErr
	}
	return runner.DescribeResult(res, Epoch)
}

// scheduleWake sets the node's timer for the Node's WakeAt.
func (n *runnerNode) scheduleWake(at0 time.Time) {
	w := n.w
	wake := time.Duration(0)
	if !at0.IsZero() {
		at := at0.Sub(Epoch)
		wake = at
		n.wakes++
		if w.mutation == mutLostWake && n.wakes%4 == 0 {
			// A deliberately broken driver: every fourth wake-up is lost.
		} else if n.wakeAt <= w.loop.Now() || at < n.wakeAt {
			n.wakeAt = at
			w.loop.At(at, n.alive(func() {
				if n.wakeAt == at {
					n.wakeAt = 0
				}
				w.trace(n.name, "wake")
				n.scheduleCommit()
			}))
		}
	}
	w.chk.RunnerWake(n.id, wake, n.wakeAt)
}

// answer reports the commands the Node acknowledged to the checker.
func (n *runnerNode) answer(acks []runner.Answer) {
	w := n.w
	for _, a := range acks {
		p, ok := n.pending[a.Ref]
		if !ok {
			continue // refused at once (propose)
		}
		delete(n.pending, a.Ref)
		if a.Err != nil {
			w.chk.Fail(InvMachine, "%s: a command the node accepted was answered %v", n.name, a.Err)
			continue
		}
		w.chk.CommandAnswered(n.id, p.at)
		switch p.kind {
		case cmdEnqueue:
			ids := a.IDs // EnqueueMany's; nil for one job
			if ids == nil {
				ids = []uint64{a.ID}
			}
			for i, id := range ids {
				// A duplicate names its holder, acknowledged by its own enqueue: a job that
				// succeeded inside its unique window may be pruned since.
				if !a.Duplicate && (a.Duplicates == nil || !a.Duplicates[i]) {
					w.chk.JobAcked(n.id, id)
				}
				n.acked = append(n.acked, id)
			}
		case cmdCancel:
			w.chk.CancelAcked(n.id, p.id)
		case cmdRetry:
			w.chk.RetryAcked(n.id, p.id, p.at)
		case cmdPause, cmdResume:
			w.chk.flow.PauseAcked(n.id, kindNames[p.id], p.kind == cmdPause)
		}
	}
}

// absorb performs a Ready that lands or ends a commit: answer the acknowledged commands,
// dispatch the starts, cancel the handlers the Node names, and report the state to the checker
// when records were written. It returns the live state then.
//
// f is the commit the Ready ends: unless a compaction pruned it since, the durable state is
// the one its write made durable, not the live one, which holds what was stepped during the
// flight.
func (n *runnerNode) absorb(rd runner.Effects, f *flight) []JobView {
	w := n.w
	n.answer(rd.Acks)
	for _, s := range rd.Starts {
		w.chk.AttemptStarted(n.id, s.Token.ID, s.Token.Attempt)
		n.execute(s)
	}
	for _, c := range rd.Cancels {
		n.cancelHandler(c)
	}
	// The state only changes when records were written: skip the O(jobs) copy otherwise.
	st := n.e.Status()
	views := n.views
	compacted := rd.Landed != nil && rd.Landed.Compacted
	if st.Durable != n.durable || compacted || len(rd.Acks)+len(rd.Starts) > 0 || views == nil {
		var scheds []ScheduleView
		if !f.b.Empty() && !compacted {
			views, scheds = f.views, f.schedsViewed // built at the write: what this batch made durable
		} else {
			views, scheds = w.liveViews(n.id, n.views, n.e), n.scheduleViews()
		}
		w.chk.Committed(n.id, views)
		w.chk.flow.Landed(n.id, w.loop.Now(), rd.Starts, views)
		w.chk.SchedulesCommitted(n.id, scheds)
		n.views, n.durable = views, st.Durable
	}
	for _, st := range rd.Settled {
		w.chk.JobSettled(n.id, st.ID, st.State.String())
	}
	return views
}

func (n *runnerNode) noteState(views []JobView) {
	n.open = 0
	for _, v := range views {
		if !runview.Terminal(v.State) {
			n.open++
		}
	}
}

// noteBoundary records the journal's length after a batch, the engine's own (the file may be
// longer by its preallocated zeros, which are no batch to aim damage at).
func (n *runnerNode) noteBoundary() {
	size := n.e.Status().Bytes
	if l := len(n.boundaries); l == 0 || size > n.boundaries[l-1] {
		n.boundaries = append(n.boundaries, size)
	}
}

// execution is one attempt's simulated handler until it returns.
type execution struct {
	a       runner.Attempt
	out     runner.Outcome
	crash   bool // the handler takes the process down
	what    string
	version int           // bumped when a cancellation changes how and when it returns
	until   time.Duration // its start plus its Timeout (never without one)
}

// cancelCheckMax bounds how long a handler that heeds cancellation takes to return.
const cancelCheckMax = 50 * time.Millisecond

// execute runs one attempt: the executor stream draws its duration and outcome.
func (n *runnerNode) execute(a runner.Attempt) {
	w := n.w
	c := w.cfg
	if n.script != nil {
		n.executions(&execution{a: a, out: n.script.outcome(a)}, n.script.s.Hold)
		return
	}
	d := drawBetween(w.rExec, c.HandlerMin, c.HandlerMax)
	u := w.rExec.Float64()
	ex := &execution{a: a}
	switch {
	case w.faultsOn && u < c.PCrashHandle:
		ex.crash = true
	case u < c.PCrashHandle+c.PRetryable:
		ex.out = runner.Failure("simulated retryable failure", true)
		if w.rExec.Float64() < c.PRetryAfter {
			after := drawBetween(w.rExec, 0, 2*c.Cap)
			ex.out.After = &after
		}
	case u < c.PCrashHandle+c.PRetryable+c.PPermanent:
		ex.out = runner.Failure("simulated permanent failure", false)
	case u < c.PCrashHandle+c.PRetryable+c.PPermanent+c.PPanic:
		ex.out = runner.Panicked("simulated panic")
	default:
		ex.out = runner.Success()
	}
	if ex.until = never; a.Timeout > 0 { // the driver ends the attempt at its timeout
		if ex.until = w.loop.Now() + a.Timeout; d > a.Timeout {
			d, ex.crash, ex.out = a.Timeout, false, runner.Failure("attempt timed out", true)
		}
	}
	n.executions(ex, d)
}

// executions starts the simulated handler ex, returning after d.
func (n *runnerNode) executions(ex *execution, d time.Duration) {
	w, a := n.w, ex.a
	w.chk.AttemptDrawn(n.id, a.Token.ID, d)
	n.executing++
	n.execs[a.Token] = ex
	ex.what = ex.out.Kind.String()
	if ex.crash {
		ex.what = "crash the process"
	}
	w.trace(n.name, "start "+a.Token.String()+" "+a.Target+" for "+d.String()+" -> "+ex.what)
	n.returnAfter(ex, d)
}

// cancelHandler cancels a running handler's context, as the engine said. Most handlers heed it
// and return the context's error within cancelCheckMax; one in four ignores it and returns
// when it would have (possibly after the stop abandoned it, when the outcome goes nowhere).
func (n *runnerNode) cancelHandler(c runner.CancelAttempt) {
	w := n.w
	ex := n.execs[c.Token]
	if ex == nil {
		return
	}
	if c.Why == runner.ByStop {
		w.chk.AttemptStopCut(n.id, c.Token.ID, c.Token.Attempt)
	}
	if w.rExec.Intn(4) == 0 {
		w.trace(n.name, "cancel "+c.Token.String()+" ("+c.Why.String()+"): the handler ignores it")
		return
	}
	ex.out, ex.crash, ex.what = runner.Failure("context canceled", true), false, "context canceled"
	ex.version++
	w.trace(n.name, "cancel "+c.Token.String()+" ("+c.Why.String()+")")
	n.returnAfter(ex, max(0, min(drawBetween(w.rExec, 0, cancelCheckMax), ex.until-w.loop.Now())))
}

// returnAfter delivers ex's outcome d from now, unless a cancellation changed it meanwhile.
func (n *runnerNode) returnAfter(ex *execution, d time.Duration) {
	w := n.w
	v := ex.version
	tok := ex.a.Token
	w.loop.After(d, n.alive(func() { n.whenLanded(func() { n.returned(ex, v, tok) }) }))
}

// whenLanded runs fn now, or once the batch in flight has landed.
func (n *runnerNode) whenLanded(fn func()) {
	if n.flight != nil {
		n.afterLand = append(n.afterLand, fn)
		return
	}
	fn()
}

// returned steps a handler's outcome into the node (the block keeps the body as it was inside
// returnAfter's closure).
func (n *runnerNode) returned(ex *execution, v int, tok runner.Token) {
	w := n.w
	{
		if ex.version != v || n.execs[tok] != ex {
			return
		}
		delete(n.execs, tok)
		n.executing--
		if ex.crash {
			w.fault("handler-crash")
			n.crash("in handler " + tok.String())
			return
		}
		out := ex.out
		failure := out.Kind == runner.OutcomePanicked || (out.Kind == runner.OutcomeFailed && out.Retryable)
		w.chk.OutcomeFed(n.id, tok.ID, tok.Attempt, out.Kind.String(), out.Err)
		w.chk.flow.Ended(n.id, tok.ID, tok.Attempt, w.loop.Now())
		if out.Kind == runner.OutcomeFailed && out.Retryable {
			w.chk.AttemptFailed(n.id, tok.ID, tok.Attempt, out.After)
		}
		w.chk.AttemptEnded(n.id, tok.ID, tok.Attempt, failure, out.Kind == runner.OutcomeSucceeded)
		w.trace(n.name, "done "+tok.String()+" "+ex.what)
		long := out.Kind == runner.OutcomeFailed && n.longError()
		if long {
			out.Err += ": " + w.repeated('x', n.cfg.RecordMax) // a handler's error longer than a record
		}
		n.step(runner.Ended{Token: tok, Outcome: out})
		if long {
			// The journaled text is cut so the Finished record fits.
			if j, ok := n.e.Get(tok.ID); ok && len(j.LastErr) >= n.cfg.RecordMax {
				w.chk.Fail(InvRecordLimit, "%s: job %d keeps an error of %d bytes (RecordMax %d)", n.name, tok.ID, len(j.LastErr), n.cfg.RecordMax)
				return
			}
			w.chk.Pass(InvRecordLimit)
		}
		n.scheduleCommit()
	}
}

// kindNames are the runner nodes' kinds, all registered (limits: Config.KindLimits).
var kindNames = [...]string{"mail", "sms", "bulk"}

// traceJournal traces the refused journal file as core renders it, frame by frame: its header
// and the frames around the damage (the first bad frame is the last line before the size).
func (n *runnerNode) traceJournal() {
	b, err := n.disk.ReadAll(journalName)
	if err != nil {
		n.w.trace(n.name, "journal unreadable: "+err.Error())
		return
	}
	lines := strings.Split(strings.TrimSuffix(journal.Describe(b), "\n"), "\n")
	if len(lines) > 6 {
		lines = append(lines[:1:1], append([]string{"..."}, lines[len(lines)-4:]...)...)
	}
	for _, line := range lines {
		n.w.trace(n.name, "journal "+line)
	}
}

// refusal says whether err refuses a journal damaged with what: as corruption or a bad
// header, or, for a first record forged into an older format, as a journal of an earlier
// sluice (runner.ErrFormat, which must not also claim corruption).
func refusal(err error, what string) bool {
	if strings.Contains(what, forge.OlderFormat) {
		return errors.Is(err, runner.ErrFormat) && !errors.Is(err, journal.ErrCorrupt)
	}
	return errors.Is(err, journal.ErrCorrupt) || errors.Is(err, journal.ErrBadHeader)
}

// traceTail traces what recovery will find in the crashed node's journal, as the read-only
// journal.Read reports it (nothing is cut or cleared): the tail's kind, the complete batches
// and, for a torn tail, where and why.
func (n *runnerNode) traceTail() {
	var t journal.Tail
	var err error
	n.disk.WithoutReadFaults(func() {
		// As `sluice verify` reads it: with the default limits (reading does not depend on them).
		t, err = journal.Read(n.disk, journalName, journal.Config{}, func(journal.Record) error { return nil })
	})
	switch {
	case err != nil:
		n.w.trace(n.name, "journal on disk refused: "+err.Error())
	case t.Kind == journal.TailTorn:
		n.w.tracef(n.name, "journal on disk: %v at byte %d of %d (%s), %d records to LSN %d", t.Kind, t.Cut, t.Size, t.Reason, t.Records, t.Last)
	case t.Spare > 0:
		n.w.tracef(n.name, "journal on disk: %v, %d bytes and %d spare, %d records to LSN %d", t.Kind, t.Cut, t.Spare, t.Records, t.Last)
		n.w.fault("spare-kept")
	default:
		n.w.tracef(n.name, "journal on disk: %v, %d bytes, %d records to LSN %d", t.Kind, t.Size, t.Records, t.Last)
	}
}

// checkScanRefuses checks that the read-only inspection the refusal points to (journal.Scan,
// its records decoded by the runner's codec) refuses the damaged file too when the damage is
// in the frames or the codec, and that runner.Replay refuses it in every case: a user who
// follows the error's advice must not be shown a journal that replays.
func (n *runnerNode) checkScanRefuses(what string) {
	b, err := n.disk.ReadAll(journalName)
	if err != nil {
		return // traced by traceJournal
	}
	_, err = journal.Scan(b, func(r journal.Record) error {
		if r.Snapshot {
			_, err := runner.DecodeSnapshot(r.Data)
			return err
		}
		_, err := runner.DecodeRecord(r.Tag, r.Data)
		return err
	})
	// Scan sees frames and the codec, not replay: a forged record that decodes but does not
	// replay (an id no job has) passes it, and only the replay below must refuse it.
	// (Scan knows no formats: an older first record reaches it as a record that does not
	// decode, which it calls corruption, naming the format error inside.)
	if err != nil && !refusal(err, what) && !errors.Is(err, runner.ErrFormat) {
		n.w.chk.Fail(InvCorruptionRefused, "%s: open refused the journal with %s, but journal.Scan of the same bytes returned %v", n.name, what, err)
		return
	}
	// runner.Replay (read-only: journal.Read) must refuse it as well.
	cfg := n.cfg
	cfg.Rand = lazyrand.New(1) // never draw from the node's stream
	var err2 error
	n.disk.WithoutReadFaults(func() { _, err2 = runner.Replay(n.disk, journalName, cfg) })
	if err := err2; !refusal(err, what) {
		n.w.chk.Fail(InvCorruptionRefused, "%s: open refused the journal with %s, but runner.Replay returned %v", n.name, what, err)
		return
	}
	n.w.chk.Pass(InvCorruptionRefused)
}

// Script is a scenario for RunScript: the same scenario run through another executor of
// runner.Node (the production owner) must make the Node take the same inputs and return the
// same effects. Admission is on from the start; job i is enqueued at i ms (each lands before
// the next); every attempt runs for Hold and ends with its job's next scripted outcome (then
// success); once no job waits or runs, the node stops gracefully without a compaction.
type Script struct {
	Config runner.Config // Capacity 1 keeps the attempts in the script's order
	Kind   string
	Jobs   []ScriptJob
	Hold   time.Duration
}

// ScriptJob is one job of a Script: its payload and its attempts' outcomes in turn.
type ScriptJob struct {
	Payload  string
	Outcomes []runner.Outcome
}

// scripted is RunScript's state on its node.
type scripted struct {
	s        Script
	observe  func(runner.Input, *runner.Effects)
	enqueued int
	stopped  bool
}

func (sc *scripted) outcome(a runner.Attempt) runner.Outcome {
	for _, j := range sc.s.Jobs {
		if j.Payload == string(a.Payload) && a.Token.Attempt <= len(j.Outcomes) {
			return j.Outcomes[a.Token.Attempt-1]
		}
	}
	return runner.Success()
}

// landed stops the node once every job was enqueued and none waits or runs.
func (sc *scripted) landed(n *runnerNode) {
	if st := n.e.Status(); !sc.stopped && sc.enqueued == len(sc.s.Jobs) && st.Waiting+st.Running == 0 && n.executing == 0 {
		sc.stopped = true
		n.w.loop.After(0, func() {
			n.stopping = true
			n.w.chk.NodeStopping(n.id)
			n.step(runner.Close{})
			n.scheduleCommit()
		})
	}
}

// RunScript runs s through one runner node of a calm world (no producer, no faults; the
// checker's invariants on), reporting every input its Node takes and every Ready
// it returns to observe, until the node has stopped. It returns the first violation, if any.
func RunScript(s Script, observe func(runner.Input, *runner.Effects)) error {
	cfg, err := NewConfig(1, "calm")
	if err != nil {
		return err
	}
	cfg.Nodes, cfg.Workers, cfg.JobsMax, cfg.SyncDelay = 1, 0, 0, 0
	w := newWorld(cfg, nil)
	w.faultsOn = false
	rc, err := s.Config.WithDefaults()
	if err != nil {
		return err
	}
	n := &runnerNode{w: w, id: 1, name: "node/1", disk: disk.New(1), cfg: s.Config, script: &scripted{s: s, observe: observe}}
	p, c := rc.Policy, rc.Circuit
	w.chk.RunnerConfigured(1, RunnerParams{Capacity: rc.Capacity, Attempts: p.Attempts, Deadline: p.Deadline, Base: p.Base, Cap: p.Cap,
		Threshold: c.Threshold, Window: c.Window, Cooldown: c.Cooldown, Probes: c.Probes, KindsOnly: rc.KindsOnly})
	w.nodes = append(w.nodes, n)
	n.start()
	for i, j := range s.Jobs {
		w.loop.At(time.Duration(i)*time.Millisecond, func() {
			n.script.enqueued++
			n.enqueueOpts(w.loop.Now(), "t1", j.Payload, false, runner.Opts{Kind: s.Kind})
			n.scheduleCommit()
		})
	}
	for w.chk.Violation() == nil && (n.up || !n.script.stopped) && w.loop.Step(time.Hour) {
	}
	if v := w.chk.Violation(); v != nil {
		return fmt.Errorf("sim: %s: %s", v.Invariant, v.Detail)
	}
	if n.up || !n.script.stopped {
		return errors.New("sim: the scripted node did not stop within an hour")
	}
	return nil
}
