package sim

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/sim/config"
	"github.com/sluicehq/sluice/sim/disk"
	"github.com/sluicehq/sluice/sim/faults"
	"github.com/sluicehq/sluice/sim/forge"
	"github.com/sluicehq/sluice/sim/internal/corepanic"
	"github.com/sluicehq/sluice/sim/internal/counts"
	"github.com/sluicehq/sluice/sim/internal/eventheap"
	"github.com/sluicehq/sluice/sim/internal/runview"
	"github.com/sluicehq/sluice/sim/internal/trace"
	"github.com/sluicehq/sluice/sim/queue"
)

// Options selects one run.
type Options struct {
	Seed    int64
	Profile string        // "" means "swarm"
	Safety  time.Duration // safety phase length; 0: SafetyDefault
	Steps   int           // events max; 0: StepsMaxDefault
	Trace   io.Writer     // when set, every trace line is written to it
	// Shrunk is a shrink token (sim/config): overrides of the seed's drawn configuration that
	// replay a shrunk run byte for byte.
	Shrunk string
	// Perturb allocates the world's heap, maps and buffers with other capacities, for the
	// determinism check: a run's bytes must not depend on them.
	Perturb bool

	mutation mutation // tests only: a deliberately broken world
}

// World is one simulated run: the event loop, the simulated processes, the fault streams and
// the checker. It is single-threaded; everything it does is a function of its Config.
type World struct {
	cfg  Config
	loop Loop
	tr   *trace.Trace
	chk  *Checker
	st   Stats
	runs [256]string // repeated's strings of one byte, by the byte
	over struct {    // oversized's buffer: all 'x' past front bytes
		buf   []byte
		front int
	}

	faultsOn              bool
	liveness              bool
	safetyEnd             time.Duration
	bound                 time.Duration // liveness deadline (absolute offset): the later side's bound
	runnerSide, queueSide liveSide
	stopped               string
	mutation              mutation // tests only: a deliberately broken world (Options.mutation)
	dups                  dupTracker

	rNet, rFaults, rWork, rExec *rand.Rand
	rSched                      *rand.Rand // the scheduling families' own stream
	rPoint                      *rand.Rand // the crash-point family's own stream
	rDamage                     *rand.Rand // the damage family's choice of nodes and of a lost sector
	rForge                      *rand.Rand // the damage family's choice of a forged frame (forge.go)
	rKind                       *rand.Rand // each job's kind and unique window (their own stream)
	rBreach                     *rand.Rand // the contract-breach family's draws (worker.go)
	damagedNodes                []bool     // by node id, drawn at the first damage

	jf *journalFam // the journal's families (journal_fam.go)
	rd []*readNode // by node id: the reads checked against the model (check_reads.go)

	queue      *queue.Queue
	dlq        *queue.Queue
	workers    []*workerProc
	pollers    []*longPoll // long polls waiting at the queue, woken by sends
	queueCalls int
	nodes      []*runnerNode
	msgs       msgProducer
	fleet      *fleet                // the fleet family (fleet.go)
	views      map[int]*runview.Bufs // each node's job-view buffers (views.go)
}

// mutation names a deliberate defect a test plants in the world to show the checker finds it.
type mutation uint8

const (
	mutNone          mutation = iota
	mutAckEarly                     // acknowledge enqueues before their commit
	mutKeepDropped                  // keep running a handler after its receipt was dropped
	mutIgnoreFatal                  // keep a worker process up after a fatal receive error ended its Run
	mutPanic                        // the simulator panics mid-run (a simulator fault)
	mutNoStopMargin                 // workers cancel handlers at the local deadline itself (no stop margin)
	mutLostWake                     // the runner driver loses every fourth wake-up the engine asks for
	mutLateTick                     // the worker driver arms its timer a second after the machine's WakeAt
	mutDoubleBackoff                // the runner engine's policy has twice the configured backoff
	mutHalfPool                     // the runner engine's pool has half the configured capacity
	mutLateHandler                  // the worker driver starts each handler a millisecond after the machine says
	mutLateDelete                   // the worker driver sends each delete a millisecond after the machine says
	mutSplitFiring                  // a period's job and its schedule's advance in two batches, a crash between
	mutNoDirSync                    // the runner's file system drops every directory fsync (journal_fam.go)
	mutFlow          mutation = 200 // mutFlow+d plants runner.Defect d in every node (check_flow_test.go)
)

// Stats counts what a run did.
type Stats struct {
	Crashes  Counts
	Faults   Counts
	Jobs     Counts // final states
	Messages Counts
	Renewals Counts
	Drops    Counts
	// Duplicates counts successful handler runs of a message after its first, by the cause
	// that kept the earlier success from deleting it.
	Duplicates Counts
}

// Counts is a set of named counters rendered in name order (sim/internal/counts).
type Counts = counts.Counts

// Result is the outcome of a run.
type Result struct {
	Config    Config
	Violation *Violation
	Last      []string // trace lines before the violation
	Digest    string   // hex SHA-256 of every trace line
	Lines     int
	Steps     int
	End       time.Duration // simulated time at the end
	SafetyEnd time.Duration
	Bound     time.Duration
	Stopped   string // why the run ended early, if it did without a violation
	Stats     Stats
	Checks    []int
	Options   Options
	// Focus holds the last events of each entity the violation names (filled by Explain).
	Focus []Focus
	// Fault is a panic inside the simulator (value and stack), "" when none: not a verdict on
	// the code under test but on the simulator, reported with its own exit code.
	Fault string
	// Liveness is each side's settle time against its bound.
	Liveness Liveness
}

// Run runs one seed to completion. It returns an error only for a bad option (an unknown
// profile, a bad shrink token); a broken invariant is Result.Violation, a panic inside the
// simulator is Result.Fault (the run never takes its caller down).
func Run(o Options) (*Result, error) {
	if o.Profile == "" {
		o.Profile = "swarm"
	}
	cfg, err := NewConfig(o.Seed, o.Profile)
	if err != nil {
		return nil, err
	}
	if o.Shrunk != "" {
		if cfg, err = config.ApplyToken(cfg, o.Shrunk); err != nil {
			return nil, err
		}
	}
	if o.Safety > 0 {
		cfg.Safety = o.Safety
	}
	if o.Steps > 0 {
		cfg.StepsMax = o.Steps
	}
	w := newWorld(cfg, o.Trace)
	w.mutation = o.mutation
	if o.Perturb {
		w.perturb()
	}
	fault := w.runSafely()
	res := &Result{
		Config: cfg, Violation: w.chk.Violation(), Digest: w.tr.Digest(), Lines: w.tr.Lines,
		Steps: w.loop.Steps(), End: w.loop.Now(), SafetyEnd: w.safetyEnd, Bound: w.bound,
		Stopped: w.stopped, Stats: w.st, Checks: w.chk.Checks(), Options: o, Fault: fault,
		Liveness: w.livenessResult(),
	}
	if res.Violation != nil || fault != "" {
		res.Last = w.tr.Last()
	}
	return res, nil
}

// runSafely runs the world and turns a panic inside it into a report: raised by a machine
// under test, a machine-invariants violation; else a simulator fault (the value and the stack).
func (w *World) runSafely() (fault string) {
	defer func() {
		if r := recover(); r != nil {
			if fn := corepanic.Panicker(); fn != "" {
				w.chk.Fail(InvMachine, "%s panicked: %s", fn, cut(fmt.Sprint(r)))
				w.trace("world", "VIOLATION "+InvMachine+": "+fn+" panicked")
				return
			}
			fault = fmt.Sprintf("panic: %v\n%s", r, debug.Stack())
			w.trace("world", fmt.Sprintf("SIMULATOR FAULT panic: %v", r))
		}
	}()
	w.run()
	return ""
}

// perturb reallocates the world's containers with other capacities (the determinism check's
// second run): nothing a run prints may depend on them.
func (w *World) perturb() {
	w.loop.h = make(eventheap.Heap, 0, 4099)
	w.chk.nodes = make(map[int]*nodeModel, 61)
	w.chk.jobs = make(map[jobKey]*jobModel, 3001)
	w.chk.receipts = make(map[string]*receiptModel, 2003)
	w.tr.Perturb()
	w.pollers = make([]*longPoll, 0, 37)
}

func newWorld(cfg Config, out io.Writer) *World {
	w := &World{
		cfg: cfg, tr: trace.New(out), chk: NewChecker(), faultsOn: true,
		rNet: Stream(cfg.Seed, "network"), rFaults: Stream(cfg.Seed, "faults"),
		rWork: Stream(cfg.Seed, "workload"), rExec: Stream(cfg.Seed, "executor"),
		rSched: Stream(cfg.Seed, "schedule"), rPoint: Stream(cfg.Seed, "crash-point"),
		rDamage: Stream(cfg.Seed, "damage"),
		rForge:  Stream(cfg.Seed, "forge"),
		rKind:   Stream(cfg.Seed, "kinds"),
		rBreach: Stream(cfg.Seed, "breach"),
	}
	w.safetyEnd = cfg.Safety
	w.loop.OnTime = w.chk.SetTime
	w.chk.SetSyncDelay(cfg.SyncDelay)
	if t := cfg.Faults.Timing; t.Scheduled() {
		w.loop.Shift = w.shift
		w.chk.SetHiddenSlack(t.Slack())
	}
	return w
}

// now is the current simulated instant.
func (w *World) now() time.Time { return Epoch.Add(w.loop.Now()) }

// trace records one event line.
func (w *World) trace(who, what string) { w.tr.Add(w.loop.Now(), who, what) }

// tracef records one event line built with fmt (for rarer events).
func (w *World) tracef(who, format string, args ...any) { w.trace(who, fmt.Sprintf(format, args...)) }

func (w *World) run() {
	w.trace("world", "start seed="+strconv.FormatInt(w.cfg.Seed, 10)+" profile="+w.cfg.Profile)
	if w.cfg.Fleet {
		w.fleet = newFleet(w)
	}
	w.setupRunner()
	w.setupQueue()
	w.loop.AtExact(w.safetyEnd, w.beginLiveness)
	if w.mutation == mutPanic {
		w.loop.AtExact(w.safetyEnd/2, func() { panic("planted simulator fault") })
	}
	w.runLoop()
}

// runLoop steps until a violation, the steps max, settled liveness, or a side's bound.
func (w *World) runLoop() {
	for w.chk.Violation() == nil {
		if w.loop.Steps() >= w.cfg.StepsMax {
			w.stopped = "steps max " + strconv.Itoa(w.cfg.StepsMax) + " reached"
			w.trace("world", "stop: "+w.stopped)
			break
		}
		limit := w.safetyEnd
		if w.liveness {
			limit = w.updateBounds()
			if w.done() {
				w.trace("world", "liveness reached: every job and message is settled")
				break
			}
		}
		if !w.loop.Step(limit) {
			if w.liveness {
				w.loop.AdvanceTo(limit)
				w.chk.SetTime(w.loop.Now())
				w.chk.CheckPrompt() // a lost wake-up shows here as what it is
				w.chk.Liveness(false, "not settled by the bound "+Offset(limit)+" ("+w.livenessResult().String()+"): "+w.unsettled())
			}
			break
		}
		w.afterStep()
	}
	w.finish()
}

// afterStep checks the invariants that are about the state at an instant rather than a fact.
func (w *World) afterStep() {
	if w.queue != nil && len(w.chk.working) > 0 {
		now := w.now()
		w.chk.CheckHidden(func(m *receiptModel, receipt string) bool {
			if !m.refOK { // resolved once: this runs after every step for every handler
				if m.ref, m.refOK = w.queue.Resolve(receipt); !m.refOK {
					return w.queue.HiddenAt(now, receipt)
				}
			}
			return w.queue.HiddenAtRef(now, m.ref)
		})
	}
	w.chk.CheckPrompt()
	for _, p := range w.workers {
		if p.up && p.e != nil && !p.pending { // a burst's effects are checked once it is read
			wake := time.Duration(0)
			if t := p.e.WakeAt(); !t.IsZero() {
				wake = t.Sub(Epoch)
			}
			w.chk.CheckWorker(p.id, !p.stopping, p.open, len(p.handlers), w.cfg.Concurrency, wake, p.wakeAt)
		}
	}
}

// beginLiveness ends the safety phase: faults off, producers stop, crashed processes restart,
// and the critical-path accounting of the bound for everything to settle begins (bound.go).
func (w *World) beginLiveness() {
	w.faultsOn = false
	w.liveness = true
	w.beginBounds()
	w.trace("world", "phase liveness: faults off")
	for _, n := range w.nodes {
		n.calm()
	}
	for _, p := range w.workers {
		p.calm()
	}
}

// done reports whether everything has settled (liveness).
func (w *World) done() bool {
	for _, n := range w.nodes {
		if !n.settled() {
			return false
		}
	}
	return w.msgs.settled(w)
}

func (w *World) unsettled() string {
	var parts []string
	for _, n := range w.nodes {
		if s := n.unsettled(); s != "" {
			parts = append(parts, s)
		}
	}
	if s := w.msgs.unsettled(w); s != "" {
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func (w *World) finish() {
	for _, n := range w.nodes {
		n.summarize()
	}
	for _, p := range w.workers {
		if p.up {
			p.account()
		}
	}
	if w.queue != nil {
		w.queueCalls = 7 // the last state is always checked
		w.checkQueue()
		live, deleted, dead := w.queue.Counts()
		w.st.Messages.Add("sent", w.msgs.sent)
		w.st.Messages.Add("deleted", deleted)
		w.st.Messages.Add("live", live)
		w.st.Messages.Add("dead-lettered", dead)
	}
	if w.fleet != nil {
		w.fleet.finish(w)
	}
	if v := w.chk.Violation(); v != nil {
		w.trace("world", "VIOLATION "+v.Invariant)
	}
	w.trace("world", "end events="+strconv.Itoa(w.loop.Steps()))
}

// shift applies the scheduling families to one event scheduled at at, during the safety phase:
// a late delay, rounding up to the bunching grain, and a reordering among the events of its
// instant. Every draw is from the world's "schedule" stream, a fixed number per event.
func (w *World) shift(at time.Duration) (time.Duration, uint64) {
	if !w.faultsOn {
		return at, 0
	}
	t := w.cfg.Faults.Timing
	var extra uint64
	if t.Late > 0 {
		u, v := w.rSched.Float64(), w.rSched.Float64()
		if u < t.Late {
			at += time.Duration(v * float64(t.LateMax))
			w.st.Faults.Add("late-event", 1)
		}
	}
	if t.Bunch > 0 {
		at = (at + t.Bunch - 1) / t.Bunch * t.Bunch
	}
	if t.Reorder > 0 {
		u, k := w.rSched.Float64(), w.rSched.Intn(faults.ReorderSpan)
		if u < t.Reorder {
			extra = uint64(1 + k)
		}
	}
	return at, extra
}

// armCrashPoint draws the crash-point family for one commit of node: with probability
// CrashPoint the commit's k-th mutating disk operation crashes, k uniform over every operation
// a compacting commit makes. It reports whether it armed a crash.
func (w *World) armCrashPoint(node string, d *disk.Disk) bool {
	p := w.cfg.Faults.Process
	if !w.faultsOn || p.CrashPoint == 0 || !faults.Hit(w.rPoint, p.CrashPoint) {
		return false
	}
	k := p.Point(w.rPoint)
	d.CrashAfter(k)
	w.fault("crash-point")
	w.trace(node, "crash point armed at disk op "+strconv.Itoa(k)+" of this commit")
	return true
}

// sectorSize is the unit a lost-sector damage zeroes.
const sectorSize = 512

// damage corrupts node n's synced journal data after a crash, strictly before its last complete
// batch (so a later batch proves the damage and open must refuse): one bit flips, or with
// probability LostSector a whole sector reads back as zeros. The bit flip draws from the faults
// stream as the bitflip profile always has; the choice of a lost sector from its own stream.
func (w *World) damage(n *runnerNode) {
	if !w.damaged(n.id) {
		return
	}
	end := n.boundaries[len(n.boundaries)-2]
	last := n.boundaries[len(n.boundaries)-1]
	if why := w.journalIntact(n, end, last); why != "" { // journal_fam.go
		w.fault("damage-skipped")
		w.trace(n.name, "damage skipped: "+why)
		return
	}
	off := w.rFaults.Int63n(end - journal.MarkLen)
	if off >= journal.MarkOffset { // the clean-close mark is not synced state: skip it
		off += journal.MarkLen
	}
	bit := uint(w.rFaults.Intn(8))
	if w.aimRule(n, end, last) { // journal_fam.go
		return
	}
	if p := w.cfg.Faults.LostSector; p > 0 && faults.Hit(w.rDamage, p) && end >= sectorSize {
		sec := w.rDamage.Int63n(end / sectorSize)
		if zeroed := w.loseSector(n, sec*sectorSize); zeroed > 0 {
			n.flipped = fmt.Sprintf("sector %d (bytes %d..%d) lost, reads back as zeros (%d bits cleared; synced; %d later bytes of complete batches)",
				sec, sec*sectorSize, (sec+1)*sectorSize, zeroed, last-(sec+1)*sectorSize)
			w.fault("lost-sector")
			w.trace(n.name, "FLIP "+n.flipped)
			return
		}
	}
	if w.forgeScheduleFrame(n, end, last) { // forge.go
		return
	}
	if w.rForge.Intn(3) == 0 && w.forgeFrame(n, end, last) {
		return
	}
	n.disk.FlipBit(journalName, off, bit)
	n.flipped = fmt.Sprintf("bit %d of byte %d flipped (synced; %d later bytes of complete batches)", bit, off, last-off)
	w.fault("bit-flip")
	w.trace(n.name, "FLIP "+n.flipped)
}

// forgeFrame rewrites one synced frame before end so that its CRC still matches (forge.Synced),
// bit by bit through the disk's FlipBit. It reports whether it did.
func (w *World) forgeFrame(n *runnerNode, end, last int64) bool {
	return w.forgeOnDisk(n, end, last, "forged-frame", func(b []byte, end int) string { return forge.Synced(w.rForge, b, end) })
}

// damaged reports whether node id's synced data is damaged at its crashes: every node under the
// bitflip profile; under swarm's damage family each node by its own draw, at least one, so an
// undamaged node goes on testing the runner beside a refused one.
func (w *World) damaged(id int) bool {
	if w.damagedNodes == nil {
		w.damagedNodes = make([]bool, w.cfg.Nodes+1)
		some := false
		for i := 1; i <= w.cfg.Nodes; i++ {
			w.damagedNodes[i] = w.cfg.Profile == "bitflip" || w.rDamage.Intn(2) == 0
			some = some || w.damagedNodes[i]
		}
		if !some {
			w.damagedNodes[1+w.rDamage.Intn(w.cfg.Nodes)] = true
		}
	}
	return w.damagedNodes[id]
}

// loseSector clears every set bit of the sector at off of node n's journal; it returns how
// many bits it cleared (0 when the sector was zeros already, or unreadable).
func (w *World) loseSector(n *runnerNode, off int64) (cleared int) {
	n.disk.WithoutReadFaults(func() { cleared = w.clearSector(n, off) })
	return cleared
}

func (w *World) clearSector(n *runnerNode, off int64) int {
	f, err := n.disk.Open(journalName)
	if err != nil {
		return 0
	}
	buf := make([]byte, sectorSize)
	_, err = f.ReadAt(buf, off)
	f.Close()
	if err != nil {
		return 0
	}
	cleared := 0
	for i, b := range buf {
		for bit := uint(0); bit < 8; bit++ {
			if b&(1<<bit) != 0 {
				n.disk.FlipBit(journalName, off+int64(i), bit)
				cleared++
			}
		}
	}
	return cleared
}

// fault counts one injected fault and traces it.
func (w *World) fault(kind string) { w.st.Faults.Add(kind, 1) }

// repeated is strings.Repeat(string(c), n) cut from a string of c's kept for the run: the
// workload's long payloads and errors (up to MiBs, every few steps) cost no new copy each.
// oversized returns front followed by 'x' up to n bytes past front, as front+repeated('x', n)
// would, in a buffer reused by the next call: for payloads the engine must refuse whole
// (ErrTooLarge, before anything is written), so none of it is kept past the call.
func (w *World) oversized(front string, n int) []byte {
	b := w.over.buf
	for i := range w.over.front { // 'x' again where the last front was
		b[i] = 'x'
	}
	if need := len(front) + n; len(b) < need {
		b = bytes.Repeat([]byte{'x'}, need+64) // room for longer fronts to come
		w.over.buf = b
	}
	w.over.front = copy(b, front)
	return b[:len(front)+n]
}

func (w *World) repeated(c byte, n int) string {
	if len(w.runs[c]) < n {
		w.runs[c] = strings.Repeat(string(c), n) // lengths repeat: no room kept for growth
	}
	return w.runs[c][:n]
}
