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
	"github.com/sluicehq/sluice/sim/internal/lazyrand"
)

// The runner side of the world: runner nodes, each a process with its own simulated disk and
// journal, driving runner.Engine exactly as the production driver does (submit commands, feed
// outcomes, one Commit per instant = group commit), an executor that draws handler durations
// and outcomes, and a producer per node. Nodes crash at random steps (disk.Crash, the engine
// dropped without Close, reopened after a restart delay), inside commits and compactions
// (disk.CrashAfter), and when a handler takes the process down; or they stop gracefully, with
// the production driver's calls: admission off, commits at each outcome and wake until the
// result says the stop is done, cancelling handlers when the engine says so, then a Flush, a
// compaction at close when drawn, and Close.

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
	e    *runner.Engine

	longSpec string // tooLongSpec's, for the RecordMax it was built for

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
	pending       map[runner.Ticket]pendingCmd
	acked         []uint64 // acknowledged ids, for cancels
	boundaries    []int64  // journal sizes after each acknowledged batch since the last compaction
	produced      int
	commits       int
	views         []JobView       // the state at the last commit that wrote records
	rOp           *rand.Rand      // the operator's listing choices (checkList)
	durable       journal.LSN     // the journal's durable LSN then
	scheds        []*simSched     // the periodic jobs the node's program wants (runner_schedule.go)
	rSched        *rand.Rand      // their changes
	rSchedProbe   *rand.Rand      // the misuse probes of schedules, kinds and options (probe_schedule.go)
	rProbe        *rand.Rand      // the runner probe family's draws (probe_runner.go)
	rLimits       *rand.Rand      // per-job attempts and deadlines (drawLimits)
	rErr          *rand.Rand      // long error texts (longError)
	heldKeys      map[string]bool // due schedules whose unique key was held before this commit (runner_schedule.go)

	// flight is the batch whose sync is in flight (Engine.Begin to Finish), with the state and
	// schedules it makes durable; commitAfter: a commit was asked for meanwhile.
	flight      *flight
	commitAfter bool
	afterLand   []func() // outcomes that arrived during the flight, fed once it landed
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
		data, err := readAll(n.disk, name)
		if err == nil {
			err = writeSynced(cp, name, data)
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
	if d := diffStatesMode(live, jobViewsAfter(live, snap), false); d != "" || len(snap.Jobs) != len(live) {
		w.chk.Fail(InvReplayEqualsLive, "%s: a replay of the disk right after a commit differs from the live state: %s (%d jobs live, %d replayed)",
			n.name, d, len(live), len(snap.Jobs))
		return
	}
	if got, want := scheduleViewsOf(snap.Schedules), n.scheduleViews(); !sameSchedules(want, got) {
		w.chk.Fail(InvReplayEqualsLive, "%s: a replay of the disk right after a commit has schedules %v, live %v", n.name, got, want)
		return
	}
	w.chk.Pass(InvReplayEqualsLive)
	n.checkForgedCopy(cp) // forge_schedule.go
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
	busy := n.e.Status().InFlight > 0
	for _, v := range live {
		if want == 0 || v.State == want.String() {
			exp = append(exp, strconv.FormatUint(v.ID, 10)+"/"+v.State)
		}
		busy = busy || v.State == runner.Waiting.String() && v.Due <= w.loop.Now()
	}
	for _, sc := range n.e.Schedules() { // a schedule's period due is work too
		busy = busy || !sc.Next.IsZero() && !sc.Next.After(w.now())
	}
	if g, e := strings.Join(got, " "), strings.Join(exp, " "); g != e {
		w.chk.Fail(InvMachine, "%s: List (state %v, pages of %d, scanning %d) gave [%s], the state holds [%s]", n.name, want, limit, scan, g, e)
		return
	}
	if idle := n.e.IdleThrough(w.now()); idle == busy {
		w.chk.Fail(InvMachine, "%s: IdleThrough(now) is %v, but a job or a period is due or an attempt holds a unit: %v", n.name, idle, busy)
		return
	}
	w.chk.Pass(InvMachine)
}

// readAll reads a whole file as the world's inspections do: past the read-side faults.
func readAll(fsys *disk.Disk, name string) (b []byte, err error) {
	fsys.WithoutReadFaults(func() { b, err = readFile(fsys, name) })
	return b, err
}

func readFile(fsys *disk.Disk, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && size > 0 {
		return nil, err
	}
	return buf, nil
}

// writeSynced makes name hold data, durable; fsys may keep data, which the caller must not
// touch again.
func writeSynced(fsys *disk.Disk, name string, data []byte) error {
	if fsys.AdoptSynced(name, data) {
		return nil // the same calls' effect, on a disk where none of them can fail or draw
	}
	f, err := fsys.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fsys.SyncDir()
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
		}
		limits := map[string]int{}
		rDecode := Stream(c.Seed, "kind-decode/"+n.name)
		for k, name := range kindNames {
			kc := runner.KindConfig{Name: name, Limit: c.KindLimits[k]}
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
	if n.gen == 0 {
		if r := Stream(w.cfg.Seed, "misconfig/"+n.name); misconfigDrawn(r) {
			n.tryBadRunnerConfig(r)
		}
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
	n.probeKinds(e)
	if err := e.Dispatch(w.now(), true); err != nil {
		w.chk.Fail(InvRecoveryOpens, "%s: dispatch after open: %v", n.name, err)
		return
	}
	n.e, n.up = e, true
	n.gen++
	n.pending = make(map[runner.Ticket]pendingCmd)
	n.execs = make(map[runner.Token]*execution)
	n.commitPending, n.wakeAt, n.executing, n.stopping = false, 0, 0, false
	n.flight, n.commitAfter, n.afterLand = nil, false, nil
	st := e.State()
	w.tracef(n.name, "open: %d jobs, next id %d, %d interrupted attempts requeued", len(st.Jobs), st.NextID, e.Orphans())
	if n.gen > 1 {
		n.traceRecovered(st)
	}
	views := jobViewsAfter(n.views, st)
	w.chk.NodeRecovered(n.id, views)
	w.chk.SchedulesRecovered(n.id, n.scheduleViews(), views)
	n.noteState(views)
	n.views, n.durable = views, e.Status().Durable
	n.boundaries = n.boundaries[:0]
	n.noteBoundary()
	n.checkMachine()
	n.checkDisk()
	n.checkEntryDurable("an open") // journal_fam.go
	n.registerSchedules()
	n.scheduleCommit()
}

func (n *runnerNode) checkMachine() {
	if err := n.e.CheckInvariants(); err != nil {
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
		// Begin's schedule firings were appended (and may survive on disk), never acknowledged.
		n.noteFirings(f.before, f.after, f.next, f.upTo, false)
	}
	n.flight, n.commitAfter, n.afterLand = nil, false, nil
	n.up = false
	n.gen++
	n.e = nil
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

// stop begins a graceful stop, as the production driver's does when Run's context ends:
// admission off; the commits that follow (at outcomes and wakes) carry the engine's cancels
// and, once it is done, Result.Stopped, at which finishStop flushes, compacts and closes.
func (n *runnerNode) stop() {
	w := n.w
	n.stopping = true
	w.chk.NodeStopping(n.id)
	w.trace(n.name, "STOP (graceful): admission off")
	if err := n.e.Dispatch(w.now(), false); err != nil {
		n.crash("stopping a poisoned engine: " + err.Error())
		return
	}
	n.scheduleCommit()
}

// finishStop ends a graceful stop: Flush, a compaction at close when drawn (sometimes with a
// crash armed inside it), Close, and a start after the restart delay. Attempts still running
// are abandoned with the process and come back as interrupted.
func (n *runnerNode) finishStop() {
	w := n.w
	res, err := n.e.Flush(w.now())
	if err != nil {
		w.chk.CommitUnacked(n.id, jobViewsAfter(n.views, n.e.State()))
		w.chk.SchedulesUnacked(n.id, n.scheduleViews())
		n.crash("flushing at stop: " + err.Error())
		return
	}
	n.absorb(res, nil)
	if w.rFaults.Intn(2) == 0 {
		armed := false
		if w.faultsOn && faults.Hit(w.rFaults, w.cfg.Faults.Process.CommitCrash) {
			k := 1 + w.rFaults.Intn(6)
			n.disk.CrashAfter(k)
			armed = true
			w.fault("close-compaction-crash")
			w.trace(n.name, "crash armed after "+strconv.Itoa(k)+" disk ops of the compaction at close")
		}
		if err := n.e.Compact(); err != nil {
			w.fault("compaction-failed")
			w.trace(n.name, "compaction at close failed: "+err.Error())
		} else {
			w.chk.Compacted(n.id, jobViewsAfter(n.views, n.e.State()))
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
	n.probeClosed()
	n.up = false
	n.gen++
	n.e = nil
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
	s := n.up && n.open == 0 && n.executing == 0 && !n.commitPending && n.flight == nil && !n.commitAfter
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
		t, err := n.e.Cancel(id)
		if err == nil {
			n.pending[t] = pendingCmd{kind: cmdCancel, id: id}
			w.trace(n.name, "cancel id="+strconv.FormatUint(id, 10))
			w.chk.CancelSubmitted(n.id, id)
		}
	}
	if n.up && len(n.acked) > 0 && w.rWork.Float64() < c.CancelP {
		// A manual retry of a job that may be dead (refused unless it is).
		id := n.acked[w.rWork.Intn(len(n.acked))]
		j, ok := n.e.Get(id)
		t, err := n.e.Retry(w.now(), id)
		switch {
		case err == nil:
			n.pending[t] = pendingCmd{kind: cmdRetry, id: id, at: w.loop.Now()}
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
	var t runner.Ticket
	var id uint64
	var err error
	if o == (runner.Opts{}) {
		t, id, err = n.e.Enqueue(w.now(), at, target, raw) // a client without options
	} else {
		t, id, err = n.e.EnqueueJob(w.now(), runner.NewJob{Due: at, Target: target, Payload: raw, Opts: o})
	}
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
		n.pending[t] = pendingCmd{kind: cmdEnqueue, id: id}
		w.trace(n.name, "enqueue duplicate of id="+strconv.FormatUint(id, 10)+" key="+o.Unique)
		return true
	}
	w.chk.JobAppended(n.id, id, due, target, payload)
	w.chk.JobOptions(n.id, id, o.Kind, o.Unique)
	w.chk.JobLimits(n.id, id, o.AttemptsMax, o.Deadline)
	if w.mutation == mutAckEarly {
		w.chk.JobAcked(n.id, id) // a deliberately broken driver: acknowledged before durable
	}
	n.pending[t] = pendingCmd{kind: cmdEnqueue, id: id}
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
	t, ids, err := n.e.EnqueueMany(w.now(), jobs)
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
		w.chk.JobLimits(n.id, id, j.Opts.AttemptsMax, j.Opts.Deadline)
		if w.mutation == mutAckEarly {
			w.chk.JobAcked(n.id, id)
		}
	}
	n.pending[t] = pendingCmd{kind: cmdEnqueue, id: ids[0]}
	w.trace(n.name, fmt.Sprintf("enqueue many ids=%d..%d", ids[0], ids[len(ids)-1]))
}

// produceStep wraps produce in the crash draw when the node is up (a producer is a client: it
// keeps producing while the node is down, and sees its enqueues refused).
func (n *runnerNode) produceStep() func() {
	return func() {
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

// flight is a batch written by Engine.Begin whose sync is in flight, as the production owner
// pipelines it: commands and outcomes arriving meanwhile are stepped and staged for the next
// batch, written only once Finish has taken this one's sync.
type flight struct {
	b            runner.Batch
	cut          bool
	before       []runner.Schedule // schedules before Begin, and after it (firings are Begin's)
	after        []runner.Schedule
	next, upTo   uint64    // ids Begin's firings took: [next, upTo)
	ops          int       // the disk's operation count before Begin (checkCompactRefused)
	views        []JobView // the live state at Begin, what this batch makes durable
	schedsViewed []ScheduleView
}

// scheduleCommit asks for one Commit SyncDelay from now (at this instant, after every event
// already scheduled for it, when the delay is 0): everything submitted meanwhile goes into the
// same batch (group commit). The commit is pipelined as the production owner's: Begin writes
// the batch, and its sync returns (land) at the same instant, after the events already
// scheduled for it; commands among those are stepped and staged for the next batch.
func (n *runnerNode) scheduleCommit() {
	if n.flight != nil {
		_ = n.e.Stage() // a refusal poisons the engine: Finish reports it
	}
	if n.commitPending {
		return
	}
	n.commitPending = true
	n.w.loop.After(n.w.cfg.SyncDelay, n.alive(n.commit))
}

func (n *runnerNode) commit() {
	w := n.w
	n.commitPending = false
	if n.flight != nil {
		n.commitAfter = true // batch N+1 waits for sync N
		return
	}
	cut := false
	if w.faultsOn && faults.Hit(w.rFaults, w.cfg.Faults.Process.CommitCrash) {
		k := 1 + w.rFaults.Intn(12)
		if st := n.e.Status(); st.Grown+512 >= n.cfg.CompactBytes {
			// This commit is likely to compact: aim past the batch's write and sync, into the
			// snapshot's create, write, sync, rename and directory sync.
			k = 3 + w.rFaults.Intn(7)
		}
		n.disk.CrashAfter(k)
		cut = true
		w.fault("commit-crash")
		w.trace(n.name, "crash armed after "+strconv.Itoa(k)+" disk ops")
	}
	if !cut {
		cut = w.armCrashPoint(n.name, n.disk) // the systematic crash-point family (world.go)
	}
	// The schedules beforeCommit read are the ones Begin starts from: nothing in between
	// changes the engine.
	f := &flight{cut: cut, before: n.beforeCommit(), next: n.e.Status().NextID, ops: n.disk.Ops()} // runner_schedule.go
	b, err := n.e.Begin(w.now())
	f.b, f.after, f.upTo = b, n.e.Schedules(), n.e.Status().NextID
	if err == nil && !b.Empty() {
		// What this batch makes durable, before anything else is stepped: a crash or a failed
		// sync during the flight may leave it on disk unacknowledged.
		f.views, f.schedsViewed = w.liveViews(n.id, n.views, n.e), scheduleViewsOf(f.after) // Begin's, as it left them
		w.chk.CommitUnacked(n.id, f.views)
		w.chk.SchedulesUnacked(n.id, f.schedsViewed)
		n.flight = f
		// The flight takes no simulated time, so the checker's timing bounds stand. An
		// outcome arriving meanwhile waits for it (whenLanded): the checker judges breakers
		// and free units in world time, as if admission and start were one instant.
		w.loop.AtExact(w.loop.Now(), n.alive(func() { n.land(f) }))
		return
	}
	var res runner.Result
	if err == nil {
		res, err = n.e.Finish(b, nil)
	}
	n.finishCommit(f, res, err)
}

// land takes the sync of f, the batch in flight: Finish, then the next batch at once if one
// was asked for meanwhile or a job fell due during the flight (the Wake is past).
func (n *runnerNode) land(f *flight) {
	if n.flight != f {
		return // landed already (world_test lands it at once)
	}
	n.flight = nil
	res, err := n.e.Finish(f.b, f.b.Sync())
	n.finishCommit(f, res, err)
	later := n.afterLand
	n.afterLand = nil
	for _, fn := range later {
		if n.up {
			fn()
		}
	}
	if n.up && (n.commitAfter || err == nil && !res.Wake.IsZero() && res.Wake.Sub(Epoch) <= n.w.loop.Now()) {
		n.commitAfter = false
		n.commit()
	}
}

// finishCommit acts on a commit's result as the production driver does.
func (n *runnerNode) finishCommit(f *flight, res runner.Result, err error) {
	w := n.w
	cut := f.cut
	n.noteFirings(f.before, f.after, f.next, f.upTo, err == nil)
	if !n.up {
		return // a planted defect crashed it (mut_split.go)
	}
	if err != nil {
		if f.b.Empty() { // Begin failed: what it wrote, if anything, is all there is
			w.chk.CommitUnacked(n.id, jobViewsAfter(n.views, n.e.State()))
			w.chk.SchedulesUnacked(n.id, n.scheduleViews())
		}
		w.trace(n.name, "commit failed: "+err.Error())
		n.checkPoisoned()
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
	views := n.absorb(res, f)
	n.checkCommitted(f, res) // check_reads.go
	st := n.e.Status()
	n.open = st.Waiting + st.Running
	n.commits++
	if cut && res.CompactErr != nil {
		w.fault("crash-inside-compaction")
	}
	if res.CompactErr != nil {
		w.fault("compaction-failed")
		n.checkCompactRefused(res, f.ops) // journal_fam.go
	}
	if res.Compacted {
		n.boundaries = n.boundaries[:0]
		n.checkEntryDurable("a compaction") // journal_fam.go
		w.chk.Compacted(n.id, views)
	}
	if len(res.Acks)+len(res.Starts)+len(res.Cancels) > 0 || res.Compacted || res.CompactErr != nil {
		w.trace(n.name, "commit: "+oneLine(runner.DescribeResult(res, Epoch)))
	}
	if perr := n.e.Poisoned(); perr != nil {
		n.crash("after a compaction poisoned it: " + perr.Error())
		return
	}
	n.noteBoundary()
	n.checkMachine()
	if replayDue(n.commits) && res.CompactErr == nil && n.e.Quiet() {
		// (A failed compaction may have renamed its snapshot in already: the disk then holds
		// a pruned state the live engine did not prune. Recovery checks that case.)
		n.checkReplay(views)
		n.checkList(views)
		n.probeRunner()
	}
	if res.Stopped {
		if cut {
			return // the armed crash lands first
		}
		n.finishStop()
		return
	}
	wake := time.Duration(0)
	if !f.b.Empty() && !res.Wake.IsZero() && res.Wake.Sub(Epoch) <= w.loop.Now() {
		return // a job fell due during the flight: land begins the next batch at once
	}
	if !res.Wake.IsZero() {
		at := res.Wake.Sub(Epoch)
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

// checkPoisoned checks, after a failed commit, that the engine refuses every later call with
// ErrPoisoned, as a driver still holding it (a handler returning, a client enqueueing, the stop
// path flushing and compacting) would make them. Nothing it refuses may change its state.
func (n *runnerNode) checkPoisoned() {
	w := n.w
	now := w.now()
	tok := runner.Token{ID: 1, Attempt: 1} // any: the refusal comes before the token is read
	_, _, e1 := n.e.Enqueue(now, time.Time{}, "t1", []byte("after-poison"))
	e2 := n.e.AttemptDone(now, tok, runner.Success())
	e3 := n.e.Dispatch(now, false)
	_, e4 := n.e.Commit(now)
	e5 := n.e.Compact()
	for i, err := range []error{e1, e2, e3, e4, e5} {
		if !errors.Is(err, runner.ErrPoisoned) {
			w.chk.Fail(InvMachine, "%s: call %d on a poisoned engine returned %v, not ErrPoisoned", n.name, i+1, err)
			return
		}
	}
	w.chk.Pass(InvMachine)
}

// absorb acts on a commit's or flush's result as the production driver does: answer the
// acknowledged commands, dispatch the starts, cancel the handlers the engine names, and report
// the state to the checker when records were written. It returns the live state then.
//
// f is the batch the result ends (nil for a Flush): unless a compaction pruned it since, the
// durable state is the one Begin wrote, not the live one, which holds what was stepped during
// the flight.
func (n *runnerNode) absorb(res runner.Result, f *flight) []JobView {
	w := n.w
	for _, a := range res.Acks {
		p, ok := n.pending[a.Ticket]
		if !ok {
			continue
		}
		delete(n.pending, a.Ticket)
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
		}
	}
	for _, s := range res.Starts {
		w.chk.AttemptStarted(n.id, s.Token.ID, s.Token.Attempt)
		n.execute(s)
	}
	for _, c := range res.Cancels {
		n.cancelHandler(c)
	}
	// The state only changes when records were written: skip the O(jobs) copy otherwise.
	st := n.e.Status()
	views := n.views
	if st.Durable != n.durable || res.Compacted || len(res.Acks)+len(res.Starts) > 0 || views == nil {
		var scheds []ScheduleView
		if f != nil && !f.b.Empty() && !res.Compacted {
			views, scheds = f.views, f.schedsViewed // built at Begin: what this batch made durable
		} else {
			views, scheds = w.liveViews(n.id, n.views, n.e), n.scheduleViews()
		}
		w.chk.Committed(n.id, views)
		w.chk.SchedulesCommitted(n.id, scheds)
		n.views, n.durable = views, st.Durable
	}
	for _, st := range res.Settled {
		w.chk.JobSettled(n.id, st.ID, st.State.String())
	}
	return views
}

func (n *runnerNode) noteState(views []JobView) {
	n.open = 0
	for _, v := range views {
		if !Terminal(v.State) {
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
	version int // bumped when a cancellation changes how and when it returns
}

// cancelCheckMax bounds how long a handler that heeds cancellation takes to return.
const cancelCheckMax = 50 * time.Millisecond

// execute runs one attempt: the executor stream draws its duration and outcome.
func (n *runnerNode) execute(a runner.Attempt) {
	w := n.w
	c := w.cfg
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
	n.returnAfter(ex, drawBetween(w.rExec, 0, cancelCheckMax))
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

// returned feeds a handler's outcome to the engine, as the production owner does (the block
// keeps the body as it was inside returnAfter's closure).
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
		if out.Kind == runner.OutcomeFailed && out.Retryable {
			w.chk.AttemptFailed(n.id, tok.ID, tok.Attempt, out.After)
		}
		w.chk.AttemptEnded(n.id, tok.ID, tok.Attempt, failure, out.Kind == runner.OutcomeSucceeded)
		w.trace(n.name, "done "+tok.String()+" "+ex.what)
		long := out.Kind == runner.OutcomeFailed && n.longError()
		if long {
			out.Err += ": " + w.repeated('x', n.cfg.RecordMax) // a handler's error longer than a record
		}
		if err := n.e.AttemptDone(w.now(), tok, out); err != nil {
			w.trace(n.name, "outcome refused: "+err.Error())
		} else if long {
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

func jobViews(s runner.Snapshot) []JobView { return jobViewsAfter(nil, s) }

// jobViewsAfter is jobViews reusing the payload strings of prev (views of an earlier state of
// the same node, ascending by id) for jobs whose payload is unchanged: the views are rebuilt
// after every commit, and converting every payload again was most of their cost.
func jobViewsAfter(prev []JobView, s runner.Snapshot) []JobView {
	out := make([]JobView, len(s.Jobs))
	k := 0
	for i, j := range s.Jobs {
		for k < len(prev) && prev[k].ID < j.ID {
			k++
		}
		var payload string
		if k < len(prev) && prev[k].ID == j.ID && prev[k].Payload == string(j.Payload) {
			payload = prev[k].Payload
		} else {
			payload = string(j.Payload)
		}
		v := JobView{ID: j.ID, State: j.State.String(), Deferred: j.Deferred, Attempts: j.Attempts,
			FirstDue: since(j.FirstDue), Due: since(j.Due), Target: j.Target, Payload: payload}
		if j.Opts.Unique != "" {
			v.Unique = j.Opts.Kind + "/" + j.Opts.Unique
		}
		if h := j.History; j.State == runner.Succeeded && j.Opts.UniqueFor > 0 && len(h) > 0 {
			// The success's own time, as its Finished record carries it, plus the window.
			v.WindowUntil = since(h[len(h)-1].End) + j.Opts.UniqueFor
		}
		if j.State == runner.Dead {
			v.Reason = j.Reason.String()
		}
		out[i] = v
	}
	return out
}

// traceJournal traces the refused journal file as core renders it, frame by frame: its header
// and the frames around the damage (the first bad frame is the last line before the size).
func (n *runnerNode) traceJournal() {
	b, err := readAll(n.disk, journalName)
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
	if strings.Contains(what, olderFormat) {
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
	b, err := readAll(n.disk, journalName)
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
