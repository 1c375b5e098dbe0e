package sim

import (
	"math"
	"math/rand"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/core/runner"
)

// Reads checked against the model: what a runner returns from Get and List (a job's state,
// attempt count, last error and attempt history) is compared with the checker's own record of
// the job, built from the facts the world fed it (starts dispatched, outcomes fed, retries and
// cancels taken), never from the runner's state. The world reads the jobs each commit started
// and one drawn acknowledged job after every commit, every job every 32nd commit, and the dead
// jobs the operator family lists to retry them.
//
// The operator family: one runner node in two keeps retrying one dead job (a "stubborn"
// operator) from a stream of its own, listing the dead jobs to pick one, until the job ends
// otherwise; a job whose payload never decodes dies at every retry, so its history outgrows
// the cap the runner keeps.

// InvReadsMatch is the invariant the reads are checked by.
const InvReadsMatch = "reads-match-model"

// historyCap is how many attempts a job's history keeps, newest last (docs/runner.md), stated
// here independently of the runner's constant.
const historyCap = 10

// histModel is the checker's record of a job's attempts as reads must show them.
type histModel struct {
	starts   int    // attempts started (each one a history entry); -1: unknown, taken from the next read
	last     int    // the newest start's attempt number
	outcome  string // the newest entry's outcome as fed since the node's last open; "": unknown
	attempts int    // the attempt count reads must show; -1: unknown
	lastErr  string // the last failure's text fed, a prefix of what reads show (long texts are cut)
	errKnown bool
}

// started notes attempt's start.
func (h *histModel) started(attempt int) {
	if h.starts >= 0 {
		h.starts++
	}
	h.last, h.outcome, h.attempts = attempt, "running", attempt
}

// forget drops what a crash or a restart may change: the newest entry's outcome and the last
// error (an interrupted attempt ends as a failure at the next open).
func (h *histModel) forget() { h.outcome, h.lastErr, h.errKnown = "", "", false }

// ReadView is a job as a read (Get, List) returned it, reduced to what the model knows.
type ReadView struct {
	ID       uint64
	State    string
	Attempts int
	LastErr  string
	History  []ReadAttempt
}

// ReadAttempt is one history entry of a ReadView.
type ReadAttempt struct {
	Attempt int
	Outcome string
}

func readView(j runner.Job) ReadView {
	v := ReadView{ID: j.ID, State: j.State.String(), Attempts: j.Attempts, LastErr: j.LastErr,
		History: make([]ReadAttempt, len(j.History))}
	for i, h := range j.History {
		v.History[i] = ReadAttempt{h.Attempt, h.Outcome.String()}
	}
	return v
}

// OutcomeFed: the outcome kind ("succeeded", "failed", "panicked") with error text err of
// attempt of id is being fed to node's runner. Call it before AttemptEnded.
func (c *Checker) OutcomeFed(node int, id uint64, attempt int, kind, err string) {
	j := c.jobs[jobKey{node, id}]
	if j == nil || !j.running || j.attempt != attempt {
		return // stale: the runner ignores it too
	}
	h := &j.hist
	switch {
	case j.cancelled || j.cancelAsk:
		h.outcome = "" // a cancel taken while it ran ends the job, and the outcome is stale
	case j.stopCut && kind != "succeeded":
		h.outcome, h.attempts = "released", attempt-1
	default:
		h.outcome = kind
		if kind != "succeeded" {
			h.lastErr, h.errKnown = err, true
		}
	}
}

// RetrySubmitted: node's runner took a manual retry of dead job id: it waits again with no
// attempt counted, its history and last error kept.
func (c *Checker) RetrySubmitted(node int, id uint64) {
	if j := c.jobs[jobKey{node, id}]; j != nil {
		j.hist.attempts = 0
	}
}

// JobRead checks one job a read of node's live runner returned against the model. how names
// the read for the report. A read must come when no commit is in flight (its starts are not
// reported yet).
func (c *Checker) JobRead(node int, v ReadView, how string) {
	j := c.jobs[jobKey{node, v.ID}]
	if j == nil {
		return // never appended: no-phantom's business
	}
	h := &j.hist
	fail := func(format string, args ...any) {
		c.check(InvReadsMatch, false, "node %d: %s of job %d: "+format, append([]any{node, how, v.ID}, args...)...)
	}
	n := len(v.History)
	if n > historyCap {
		fail("its history holds %d attempts, more than the %d kept", n, historyCap)
		return
	}
	if strings.HasPrefix(j.payload, undecodable) || j.cancelled || j.cancelAsk {
		// Its attempts start and end inside a commit, unseen by the world; or a cancel taken
		// during a flight withdrew a start the batch had journaled.
		c.pass(InvReadsMatch)
		return
	}
	if h.starts < 0 {
		h.starts, h.last = n, 0
		if n > 0 {
			h.last = v.History[n-1].Attempt
		}
	}
	if want := min(h.starts, historyCap); n != want {
		fail("its history holds %d attempts, the model %d (%d started)", n, want, h.starts)
		return
	}
	if n > 0 {
		e := v.History[n-1]
		if e.Attempt != h.last || h.outcome != "" && e.Outcome != h.outcome {
			fail("its newest attempt is #%d %s, the model's #%d %s", e.Attempt, e.Outcome, h.last, orUnknown(h.outcome))
			return
		}
	}
	if h.attempts >= 0 && v.Attempts != h.attempts {
		fail("%d attempts counted, the model %d", v.Attempts, h.attempts)
		return
	}
	if h.errKnown && !strings.HasPrefix(v.LastErr, h.lastErr) {
		fail("last error %q, the model's %q", cut(v.LastErr), cut(h.lastErr))
		return
	}
	if running := v.State == "running"; !j.cancelled && !j.cancelAsk && running != j.running {
		fail("state %s, the model's attempt running: %v", v.State, j.running)
		return
	}
	c.pass(InvReadsMatch)
}

func orUnknown(s string) string {
	if s == "" {
		return "(outcome unknown)"
	}
	return s
}

// cut shortens s for a report.
func cut(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// readNode is the world's reading state of one runner node.
type readNode struct {
	r        *rand.Rand // which acknowledged job to read after a commit
	op       *rand.Rand // the operator family's draws; nil: the node has no stubborn operator
	stubborn uint64     // the dead job the operator keeps retrying; 0: none picked
	commits  int
}

func (n *runnerNode) reads() *readNode {
	w := n.w
	if w.rd == nil {
		w.rd = make([]*readNode, w.cfg.Nodes+1)
	}
	rn := w.rd[n.id]
	if rn == nil {
		rn = &readNode{r: Stream(w.cfg.Seed, "reads/"+n.name)}
		if op := Stream(w.cfg.Seed, "stubborn-operator/"+n.name); op.Intn(2) == 0 {
			rn.op = op
		}
		w.rd[n.id] = rn
	}
	return rn
}

// checkCommitted runs the checks that follow a commit's landing: its dispatch against the
// state Begin left (start-when-free; an empty batch changed nothing), then the reads.
func (n *runnerNode) checkCommitted(f *flight, starts []runner.Attempt) {
	views := n.views
	if f != nil && f.views != nil {
		views = f.views
	}
	n.w.chk.CommitDispatched(n.id, views)
	n.checkReads(starts)
}

// checkReads reads back, after a commit landed, the jobs it started, one drawn acknowledged
// job, and every 32nd commit all jobs, and checks each against the model.
func (n *runnerNode) checkReads(starts []runner.Attempt) {
	rn := n.reads()
	for _, s := range starts {
		n.readJob(s.Token.ID, "Get after its start")
	}
	if len(n.acked) > 0 {
		n.readJob(n.acked[rn.r.Intn(len(n.acked))], "Get")
	}
	if rn.commits++; rn.commits%32 == 0 {
		jobs, _, _ := n.e.List(1, math.MaxUint64, func(*runner.Job) bool { return true }, math.MaxInt, math.MaxInt)
		for _, j := range jobs {
			n.w.chk.JobRead(n.id, readView(j), "List")
		}
	}
}

func (n *runnerNode) readJob(id uint64, how string) {
	if j, ok := n.e.Get(id); ok {
		n.w.chk.JobRead(n.id, readView(j), how)
	}
}

// operate is the operator family's turn at a producer tick (one in three): retry the stubborn
// job while it is dead, or list the dead jobs to pick one.
func (n *runnerNode) operate() {
	rn := n.reads()
	if rn.op == nil || !n.up || rn.op.Intn(3) != 0 {
		return
	}
	w := n.w
	if rn.stubborn != 0 {
		j, ok := n.e.Get(rn.stubborn)
		switch {
		case ok && j.State == runner.Dead:
		case ok && !j.State.Terminal():
			return // running or waiting again: it may die yet
		default:
			rn.stubborn = 0
		}
	}
	if rn.stubborn == 0 {
		from := 1 + uint64(rn.op.Int63n(int64(n.e.Status().NextID)))
		jobs, _, _ := n.e.List(from, math.MaxUint64, func(j *runner.Job) bool { return j.State == runner.Dead }, 1, 64)
		if len(jobs) == 0 {
			return
		}
		if n.flight == nil {
			w.chk.JobRead(n.id, readView(jobs[0]), "List of dead jobs")
		}
		rn.stubborn = jobs[0].ID
	}
	id := rn.stubborn
	if _, err := n.propose(runner.Retry{ID: id}, pendingCmd{kind: cmdRetry, id: id, at: w.loop.Now()}); err != nil {
		rn.stubborn = 0 // its unique key is held again, or it was pruned
		return
	}
	w.chk.RetrySubmitted(n.id, id)
	w.trace(n.name, "operator retry id="+strconv.FormatUint(id, 10))
}
