package sim

import (
	"fmt"
	"io"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/sim/queue"
)

// Options selects one run.
type Options struct {
	Seed    int64
	Profile string        // "" means "swarm"
	Safety  time.Duration // safety phase length; 0: SafetyDefault
	Steps   int           // events max; 0: StepsMaxDefault
	Trace   io.Writer     // when set, every trace line is written to it
}

// World is one simulated run: the event loop, the simulated processes, the fault streams and
// the checker. It is single-threaded; everything it does is a function of its Config.
type World struct {
	cfg  Config
	loop Loop
	tr   *Trace
	chk  *Checker
	st   Stats

	faultsOn  bool
	liveness  bool
	safetyEnd time.Duration
	bound     time.Duration // liveness deadline (absolute offset)
	stopped   string
	mutation  mutation // tests only: a deliberately broken world
	dups      dupTracker

	rNet, rFaults, rWork, rExec *rand.Rand

	queue      *queue.Queue
	dlq        *queue.Queue
	workers    []*workerProc
	pollers    []*longPoll // long polls waiting at the queue, woken by sends
	queueCalls int
	nodes      []*runnerNode
	msgs       msgProducer
}

// mutation names a deliberate defect a test plants in the world to show the checker finds it.
type mutation uint8

const (
	mutNone         mutation = iota
	mutAckEarly              // acknowledge enqueues before their commit
	mutKeepDropped           // keep running a handler after its receipt was dropped
	mutIgnoreFatal           // keep a worker process up after a fatal receive error ended its Run
	mutNoStopMargin          // workers cancel handlers at the local deadline itself (no stop margin)
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

// Counts is a set of named counters rendered in name order.
type Counts struct{ m map[string]int }

// Add adds n to the counter k.
func (c *Counts) Add(k string, n int) {
	if c.m == nil {
		c.m = make(map[string]int)
	}
	c.m[k] += n
}

// Get returns the counter k.
func (c Counts) Get(k string) int { return c.m[k] }

// Total is the sum of all counters.
func (c Counts) Total() int {
	n := 0
	for _, v := range c.m {
		n += v
	}
	return n
}

// String renders "a=1 b=2" in key order, or "none".
func (c Counts) String() string {
	if len(c.m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(c.m))
	for k := range c.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Itoa(c.m[k]))
	}
	return b.String()
}

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
}

// Run runs one seed to completion. It returns an error only for a bad option (an unknown
// profile); a broken invariant is Result.Violation.
func Run(o Options) (*Result, error) {
	if o.Profile == "" {
		o.Profile = "swarm"
	}
	cfg, err := NewConfig(o.Seed, o.Profile)
	if err != nil {
		return nil, err
	}
	if o.Safety > 0 {
		cfg.Safety = o.Safety
	}
	if o.Steps > 0 {
		cfg.StepsMax = o.Steps
	}
	w := newWorld(cfg, o.Trace)
	w.run()
	res := &Result{
		Config: cfg, Violation: w.chk.Violation(), Digest: w.tr.Digest(), Lines: w.tr.Lines,
		Steps: w.loop.Steps(), End: w.loop.Now(), SafetyEnd: w.safetyEnd, Bound: w.bound,
		Stopped: w.stopped, Stats: w.st, Checks: w.chk.Checks(), Options: o,
	}
	if res.Violation != nil {
		res.Last = w.tr.Last()
	}
	return res, nil
}

func newWorld(cfg Config, out io.Writer) *World {
	w := &World{
		cfg: cfg, tr: NewTrace(out), chk: NewChecker(), faultsOn: true,
		rNet: Stream(cfg.Seed, "network"), rFaults: Stream(cfg.Seed, "faults"),
		rWork: Stream(cfg.Seed, "workload"), rExec: Stream(cfg.Seed, "executor"),
	}
	w.safetyEnd = cfg.Safety
	w.loop.OnTime = w.chk.SetTime
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
	w.setupRunner()
	w.setupQueue()
	w.loop.At(w.safetyEnd, w.beginLiveness)
	w.runLoop()
}

// runLoop steps until a violation, the steps max, settled liveness, or the bound.
func (w *World) runLoop() {
	for w.chk.Violation() == nil {
		if w.loop.Steps() >= w.cfg.StepsMax {
			w.stopped = "steps max " + strconv.Itoa(w.cfg.StepsMax) + " reached"
			w.trace("world", "stop: "+w.stopped)
			break
		}
		if w.liveness && w.done() {
			w.trace("world", "liveness reached: every job and message is settled")
			break
		}
		limit := w.bound
		if !w.liveness {
			limit = w.safetyEnd
		}
		if !w.loop.Step(limit) {
			if w.liveness {
				w.loop.AdvanceTo(w.bound)
				w.chk.SetTime(w.loop.Now())
				w.chk.Liveness(false, "not settled by the bound "+Offset(w.bound)+": "+w.unsettled())
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
		w.chk.CheckHidden(func(msg, receipt string) bool { return w.queue.HiddenAt(now, receipt) })
	}
}

// beginLiveness ends the safety phase: faults off, producers stop, crashed processes restart,
// and the bound for everything to settle is computed from the configuration.
func (w *World) beginLiveness() {
	w.faultsOn = false
	w.liveness = true
	w.bound = w.loop.Now() + w.livenessBound()
	w.trace("world", "phase liveness: faults off, bound "+Offset(w.bound))
	for _, n := range w.nodes {
		n.calm()
	}
	for _, p := range w.workers {
		p.calm()
	}
}

// livenessBound is the time the liveness phase allows (docs/simulator.md gives the formula).
func (w *World) livenessBound() time.Duration {
	c := w.cfg
	b := c.Faults.Process.RestartMax + time.Minute
	// A handler started in the safety phase may still run: up to LongFactor windows, or past
	// the 12 h ceiling for a marathon (its lease then drops at the ceiling).
	b += time.Duration(c.Faults.Timing.LongFactor * float64(c.Visibility))
	if c.Faults.Timing.Marathon > 0 {
		b += ceiling + time.Hour
	}
	if c.Nodes > 0 {
		// Serialised worst case: every job, every attempt, one after another, each waiting the
		// longest backoff and a breaker cooldown.
		per := c.HandlerMax + c.Cap + c.Cooldown + time.Second
		b += time.Duration(c.JobsMax*c.Attempts) * per
	}
	if c.Workers > 0 {
		// Every message, every delivery up to the budget, one after another: the longest
		// hiding (terminal backoff or the window), a handler, and a poll.
		hide := max(300*time.Second, c.Visibility, c.MsgCap)
		per := hide + c.HandlerMax + c.PollWait + 2*c.Faults.Transport.LatencyMax + time.Second
		b += time.Duration(c.MsgsMax*(c.Budget+1)) * per
	}
	return b
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
	if v := w.chk.Violation(); v != nil {
		w.trace("world", "VIOLATION "+v.Invariant)
	}
	w.trace("world", "end events="+strconv.Itoa(w.loop.Steps()))
}

// fault counts one injected fault and traces it.
func (w *World) fault(kind string) { w.st.Faults.Add(kind, 1) }
