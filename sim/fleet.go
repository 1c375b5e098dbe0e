package sim

import (
	"errors"
	"math/rand"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/qjobs"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/core/worker"
	"github.com/sluicehq/sluice/sim/faults"
	"github.com/sluicehq/sluice/sim/queue"
)

// The fleet profile: the queue-backed runner's job layer on every worker process. Each
// process (workerProc, the production worker machine) runs core/qjobs's machine over the
// deliveries it receives, with its own per-target breakers (lost at a crash); producers send
// job messages (kind, target, first due, attempts); re-sends and dead letters go through the
// queue's sends. Everything else (network faults, stale receipts, crashes, lost leases) is the
// queue side of the world unchanged. check_fleet.go holds the fleet's invariants.

// fleet is the world's fleet state.
type fleet struct {
	dlq   *queue.Queue
	procs map[int]*fleetProc // by worker id
	jobs  []*fleetJob        // by job number - 1
	// ended marks messages whose job ended or moved on (acked, re-sent, dead-lettered): a later
	// delivery of one is a duplicate that the crash or lost lease before its delete explains.
	ended map[string]bool
	// dup marks messages sent by a delivery of an ended message: a duplicate lineage of the
	// job, alive beside the original one.
	dup    map[string]bool
	policy retry.Policy
	// r draws the job options, the malformed and oversized messages, panics and server waits
	// (stream "fleet-more"), so the fleet's earlier draws stay where they were.
	r *rand.Rand
}

// fleetProc is one incarnation's job layer.
type fleetProc struct {
	m      *qjobs.Machine
	runs   map[string]*fleetRun // running attempts by receipt
	want   qjobs.Stats          // the plans this incarnation received, counted here
	jitter bool                 // its job layer draws jitter (else every retry waits the full delay)
}

type fleetRun struct {
	job     *fleetJob
	attempt int
	probe   breaker.Probe
	d       qjobs.Delivery
	payload []byte
}

// fleetJob is what the checker knows of one job.
type fleetJob struct {
	n         int
	runs      int // attempts started, every process and delivery
	explained int // deliveries explained by a crash, a lost lease, or a duplicate
	done      bool
	dead      *qjobs.Attrs
	holders   map[string]fleetHolder // by receipt, attempts running now
	// malformed: its message's attributes were damaged; Decode must refuse it with an error
	// naming this, and the message must go to the dead-letter queue as it is, never run.
	malformed string
	deadAsIs  bool // a delivery of the malformed message was dead-lettered unchanged
	refused   bool // too large for the queue: the producer refused it, nothing was sent
}

// fleetHolder is a running attempt: its worker and its message.
type fleetHolder struct {
	worker int
	msg    string
}

var errFleetFailure = errors.New("simulated job failure")

// Deliberate defects of the fleet, planted by check_fleet_test.go to show each fleet
// invariant fires.
const (
	mutFleetOverrun       mutation = 100 + iota // the job layer allows two attempts more than the budget
	mutFleetIgnoreBreaker                       // a breaker's defer is run anyway
	mutFleetLoseDead                            // a dead letter is never sent (the original still deleted)
	mutFleetDoubleSend                          // an attempt's start sends a copy of its message
	mutFleetDropNotJob                          // a message that is not a job is acked without its dead letter
)

func newFleet(w *World) *fleet {
	c := w.cfg
	return &fleet{
		dlq:    queue.New(queue.Config{Name: "dead", Epoch: Epoch}, nil),
		procs:  map[int]*fleetProc{},
		ended:  map[string]bool{},
		dup:    map[string]bool{},
		policy: retry.Policy{Attempts: c.Attempts, Base: c.Base, Cap: c.Cap, Deadline: c.Deadline},
		r:      Stream(c.Seed, "fleet-more"),
	}
}

// workerConfig turns a worker's config into a fleet process's: the job layer counts attempts
// and dead-letters; the worker keeps leases and carries the job layer's visibility.
func (f *fleet) workerConfig(cfg *worker.Config) {
	cfg.Budget, cfg.RedriveMaxReceives = 1<<30, 0
	cfg.Retry = retry.Policy{Attempts: 1, Base: time.Second, Cap: qjobs.VisibilityMaxDefault}
	// As the queue runner: no Decode; the handler decodes and dead-letters what is not a job.
	cfg.Decode = nil
}

// started gives a new incarnation of worker p a fresh job layer (breakers do not survive a
// crash or a restart).
func (f *fleet) started(w *World, p *workerProc) {
	c := w.cfg
	pol := f.policy
	if w.mutation == mutFleetOverrun {
		pol.Attempts += 2
	}
	qc := qjobs.Config{Policy: pol,
		Circuit: breaker.Circuit{Threshold: c.Threshold, Window: c.Window, Cooldown: c.Cooldown, Probes: c.Probes},
		Margin:  c.Visibility, // DelayMax: the default, SQS's (the queue panics on a longer delay)
		Rand:    Stream(c.Seed, "fleet-jitter/"+strconv.Itoa(p.id)+"/"+strconv.Itoa(p.gen))}
	if p.gen == 1 {
		f.badConfig(w, p, qc)
	}
	if f.r.Intn(8) == 0 {
		qc.Rand = nil // no jitter: every retry waits the policy's full delay
	}
	m, err := qjobs.New(qc)
	if err != nil {
		w.chk.Fail(InvMachine, "%s: qjobs.New: %v", p.name, err)
		return
	}
	f.procs[p.id] = &fleetProc{m: m, runs: map[string]*fleetRun{}, jitter: qc.Rand != nil}
}

// stopped ends worker p's incarnation: its running attempts are lost with it.
func (f *fleet) stopped(p *workerProc) {
	fp := f.procs[p.id]
	if fp == nil {
		return
	}
	for r, run := range fp.runs {
		delete(run.job.holders, r) // one entry each: order does not matter
		run.job.explained++
	}
	f.checkStats(p.w, p.name, fp)
	delete(f.procs, p.id)
}

// body is the n-th job's first message, and false when the producer refused to send it (too
// large for the queue, as Enqueue refuses it). One job in four carries its own attempts or
// deadline; one message in twelve has an attribute damaged (it is then not a job).
func (f *fleet) body(w *World, n int) (core.Outgoing, bool) {
	j := &fleetJob{n: n, holders: map[string]fleetHolder{}}
	f.jobs = append(f.jobs, j)
	a := qjobs.Attrs{Kind: "job", Target: "t" + strconv.Itoa(1+w.rWork.Intn(max(1, w.cfg.Targets))), FirstDue: w.now()}
	r := f.r
	if r.Intn(4) == 0 {
		a.AttemptsMax = 1 + r.Intn(f.policy.Attempts)
	}
	if r.Intn(4) == 0 {
		a.Deadline = drawBetween(r, time.Minute, time.Hour)
	}
	payload := []byte(strconv.Itoa(n))
	if r.Intn(64) == 0 {
		payload = append(payload, make([]byte, queue.MessageMax)...)
	}
	out := qjobs.Encode(a, payload)
	size := qjobs.Size(out)
	if size != queue.Size(out) {
		w.chk.Fail(InvMachine, "job-%d: qjobs.Size says %d bytes, the queue counts %d", n, size, queue.Size(out))
	}
	if size > queue.MessageMax {
		j.refused = true
		w.trace("producer", "refuse job-"+strconv.Itoa(n)+": "+strconv.Itoa(size)+" bytes, the queue takes "+strconv.Itoa(queue.MessageMax))
		return out, false
	}
	if r.Intn(12) == 0 {
		d := damages[r.Intn(len(damages))]
		attrs := make(map[string]string, len(out.Attributes)+1)
		for k, v := range out.Attributes { // a copy: the order does not matter
			attrs[k] = v
		}
		d.damage(attrs)
		out.Attributes = attrs
		j.malformed = d.names
		w.trace("producer", "job-"+strconv.Itoa(n)+" malformed: "+d.what)
	}
	return out, true
}

// damages are the ways a job message's attributes can arrive broken (a producer of another
// version or program, an attribute dropped on the way); names is what Decode's error must name.
var damages = []struct {
	what, names string
	damage      func(map[string]string)
}{
	{"no kind", qjobs.AttrKind, func(a map[string]string) { delete(a, qjobs.AttrKind) }},
	{"empty kind", "kind", func(a map[string]string) { a[qjobs.AttrKind] = "" }},
	{"kind with NUL", "kind", func(a map[string]string) { a[qjobs.AttrKind] = "jo\x00b" }},
	{"no target", "target", func(a map[string]string) { delete(a, qjobs.AttrTarget) }},
	{"garbled first due", qjobs.AttrFirstDue, func(a map[string]string) { a[qjobs.AttrFirstDue] = "yesterday" }},
	{"no first due", qjobs.AttrFirstDue, func(a map[string]string) { delete(a, qjobs.AttrFirstDue) }},
	{"garbled attempt", qjobs.AttrAttempt, func(a map[string]string) { a[qjobs.AttrAttempt] = "2nd" }},
	{"negative attempt", "negative", func(a map[string]string) { a[qjobs.AttrAttempt] = "-1" }},
	{"garbled options", qjobs.AttrOpts, func(a map[string]string) { a[qjobs.AttrOpts] = `{"m":` }},
	{"negative attempts max", "negative", func(a map[string]string) { a[qjobs.AttrOpts] = `{"m":-2}` }},
}

// badConfig is the job layer's misconfiguration probe: qjobs.New with one field out of
// range must refuse, naming the field.
func (f *fleet) badConfig(w *World, p *workerProc, qc qjobs.Config) {
	field := ""
	switch f.r.Intn(6) {
	case 0:
		qc.Policy.Attempts, field = -1, "Attempts"
	case 1:
		qc.Circuit.Threshold, field = -1, "Threshold"
	case 2:
		qc.VisibilityMax, field = 500*time.Millisecond, "VisibilityMax"
	case 3:
		qc.Margin, field = -time.Second, "Margin"
	case 4:
		qc.Margin, field = qjobs.VisibilityMaxDefault, "Margin"
	case 5:
		qc.DelayMax, field = -time.Second, "DelayMax"
	}
	if _, err := qjobs.New(qc); err == nil || !strings.Contains(err.Error(), field+" = ") {
		w.chk.Fail(InvConfigRefused, "%s: qjobs.New with a bad %s: %v, want a refusal naming it", p.name, field, err)
		return
	}
	w.chk.Pass(InvConfigRefused)
}

// job returns the job a payload names.
func (f *fleet) job(payload []byte) *fleetJob {
	n, err := strconv.Atoi(string(payload))
	if err != nil || n < 1 || n > len(f.jobs) {
		return nil
	}
	return f.jobs[n-1]
}

// handle is startHandler for a fleet process: the job layer admits the delivery; an attempt
// runs for a drawn duration and its outcome is decided by the job layer; every plan that ends
// the delivery sends what it must and reports to the worker machine.
func (f *fleet) handle(p *workerProc, m core.Message) {
	w := p.w
	fp := f.procs[p.id]
	h := &msgHandler{receipt: m.Receipt, running: true}
	p.handlers[m.Receipt] = h
	w.chk.HandlerStarted(m.Receipt)
	a, payload, err := qjobs.Decode(m)
	if err != nil && fp != nil {
		f.notJob(p, h, m, err)
		return
	}
	j := f.job(payload)
	if err != nil || j == nil || fp == nil {
		w.chk.Fail(InvMachine, "%s: a job message the worker decoded is not one: %v", p.name, err)
		return
	}
	// A delivery of an ended message, or of one its duplicate sent, is a duplicate: the
	// delete lost to a crash or a lost lease explains it.
	dup := f.ended[m.ID] || f.dup[m.ID]
	d := qjobs.Delivery{Attrs: a, ReceiveCount: m.ReceiveCount, ReceivedAt: w.now()}
	plan := fp.m.Admit(w.now(), d)
	fp.count(plan)
	if w.mutation == mutFleetIgnoreBreaker && plan.Deferred && !w.now().Before(a.NotBefore) {
		plan = qjobs.Plan{Action: qjobs.Run, Attempt: d.Attempt()}
	}
	if plan.Action != qjobs.Run {
		w.trace(p.name, "job "+m.Receipt+" "+planString(plan))
		w.loop.After(time.Millisecond, p.alive(func() { f.end(p, h, m, plan, payload, dup) }))
		return
	}
	if dup {
		j.explained++
	}
	if w.mutation == mutFleetDoubleSend {
		w.queue.SendOutgoing(w.now(), core.Outgoing{Body: m.Body, Attributes: m.Attributes})
	}
	f.checkRun(p, fp, j, a, plan, m, dup)
	run := &fleetRun{job: j, attempt: plan.Attempt, probe: plan.Probe, d: d, payload: payload}
	fp.runs[m.Receipt] = run
	j.holders[m.Receipt] = fleetHolder{worker: p.id, msg: m.ID}
	dur := drawBetween(w.rExec, w.cfg.HandlerMin, w.cfg.HandlerMax)
	if w.faultsOn && faults.Hit(w.rFaults, w.cfg.Faults.Timing.LongHandler) {
		dur = time.Duration(float64(w.cfg.Visibility) * (1 + w.rFaults.Float64()*(w.cfg.Faults.Timing.LongFactor-1)))
		w.fault("long-handler")
	}
	h.end = w.loop.Now() + dur
	u := w.rExec.Float64()
	o := qjobs.Outcome{Result: qjobs.Success}
	switch {
	case u < w.cfg.PRetryable:
		o = qjobs.Outcome{Result: qjobs.Retryable, Err: errFleetFailure.Error() + " (job " + strconv.Itoa(j.n) + " attempt " + strconv.Itoa(plan.Attempt) + ")"}
		if f.r.Intn(4) == 0 {
			// The target asked for a wait (a Retry-After), at once one time in three.
			after := drawBetween(f.r, 0, f.policy.Cap)
			if f.r.Intn(3) == 0 {
				after = 0
			}
			o.After = &after
		}
	case u < w.cfg.PRetryable+w.cfg.PPermanent:
		o = qjobs.Outcome{Result: qjobs.Permanent, Err: "permanent " + errFleetFailure.Error()}
		if f.r.Intn(3) == 0 {
			o = qjobs.Outcome{Result: qjobs.Panicked, Err: "panic: " + errFleetFailure.Error()}
		}
	}
	w.trace(p.name, "job "+m.Receipt+" "+plan.Action.String()+" job-"+strconv.Itoa(j.n)+" attempt "+strconv.Itoa(plan.Attempt)+" for "+dur.String())
	w.loop.After(dur, p.alive(func() {
		delete(fp.runs, m.Receipt)
		delete(j.holders, m.Receipt)
		if !h.running {
			// Cancelled: the lease was lost; the queue redelivers and the attempt counts.
			fp.m.Abandon(a.Target, run.probe)
			fp.want.Abandoned++
			j.explained++
			return
		}
		plan := fp.m.Finish(w.now(), d, run.attempt, run.probe, o)
		fp.count(plan)
		if plan.Action == qjobs.Hide {
			f.checkHide(w, fp, j, run.attempt, o, plan.Visibility)
		}
		f.end(p, h, m, plan, payload, dup)
	}))
}

// end performs a plan that ends a delivery and reports the handler's result to the worker.
func (f *fleet) end(p *workerProc, h *msgHandler, m core.Message, plan qjobs.Plan, payload []byte, dup bool) {
	w := p.w
	if !h.running {
		return // cancelled meanwhile: the cancel path reported HandlerDone
	}
	res := worker.Result{Outcome: worker.Success}
	switch plan.Action {
	case qjobs.Hide:
		v := plan.Visibility
		res = worker.Result{Outcome: worker.Retryable, Err: errFleetFailure, After: &v}
	case qjobs.Resend, qjobs.DeadLetter:
		to := w.queue
		if plan.Action == qjobs.DeadLetter {
			to = f.dlq
		}
		// A send crosses the network like any call: it may fail before taking effect.
		if w.faultsOn && faults.Hit(w.rNet, w.cfg.Faults.Transport.FailBefore) {
			w.fault("transport-send-failed")
			w.trace(p.name, "job "+m.Receipt+" send failed")
			after := time.Second
			res = worker.Result{Outcome: worker.Retryable, Err: errFleetFailure, After: &after}
			break
		}
		if plan.Action == qjobs.DeadLetter && w.mutation == mutFleetLoseDead {
			break
		}
		out := qjobs.Encode(plan.Send.Attrs, payload)
		out.Delay = plan.Send.Delay
		id := to.SendOutgoing(w.now(), out)
		f.ended[m.ID] = true
		if dup {
			f.dup[id] = true
		}
		if plan.Action == qjobs.DeadLetter {
			if j := f.job(payload); j != nil {
				a := plan.Send.Attrs
				j.dead = &a
			}
		}
		w.trace(p.name, "job "+m.Receipt+" sent "+id+" "+planString(plan))
		w.wakePollers()
	case qjobs.Ack:
		f.ended[m.ID] = true
		if j := f.job(payload); j != nil {
			j.done = true
		}
	}
	h.running = false
	delete(p.handlers, h.receipt)
	w.chk.CheckHiddenUntilEnd(h.receipt, w.queue.HiddenAt(w.now().Add(-time.Nanosecond), h.receipt))
	w.chk.HandlerEnded(h.receipt)
	w.chk.DispositionBegan(h.receipt)
	if res.Outcome == worker.Success && plan.Action == qjobs.Ack {
		w.dups.succeeded(&w.st.Duplicates, p.id, m.ID, h.receipt)
	}
	if plan.Action == qjobs.Ack || plan.Action == qjobs.Hide {
		w.trace(p.name, "done "+h.receipt+" "+res.Outcome.String()+" ("+planString(plan)+")")
	} else {
		w.trace(p.name, "done "+h.receipt+" "+res.Outcome.String())
	}
	p.step(worker.HandlerDone{Receipt: h.receipt, Now: w.now(), Result: res})
}

// checkHide checks the visibility of a retry the job layer hides: the server's wait (capped at
// Cap), else the policy's delay for the attempt, in whole seconds: the full delay without
// jitter, with it between half and all of it.
func (f *fleet) checkHide(w *World, fp *fleetProc, j *fleetJob, attempt int, o qjobs.Outcome, v time.Duration) {
	full := f.policy.Delay(attempt - 1)
	lo, hi := (full/2+time.Second-1)/time.Second*time.Second, (full+time.Second-1)/time.Second*time.Second
	switch {
	case o.After != nil:
		lo = (max(0, min(*o.After, f.policy.Cap)) + time.Second - 1) / time.Second * time.Second
		hi = lo
	case !fp.jitter:
		lo = hi
	}
	if v < lo || v > hi {
		w.chk.Fail(InvBackoff, "job-%d attempt %d hidden %v after a retryable failure, want %v..%v (delay %v, server wait %v, jitter %v)",
			j.n, attempt, v, lo, hi, full, o.After, fp.jitter)
		return
	}
	w.chk.Pass(InvBackoff)
}

// count adds a plan of this incarnation's job layer to what its Stats must say.
func (fp *fleetProc) count(plan qjobs.Plan) {
	switch plan.Action {
	case qjobs.Run:
		fp.want.Runs++
	case qjobs.Ack:
		fp.want.Acked++
	case qjobs.Hide:
		fp.want.Hidden++
	case qjobs.Resend:
		if plan.Deferred {
			fp.want.Deferred++
		} else {
			fp.want.Resent++
		}
	case qjobs.DeadLetter:
		fp.want.DeadLettered++
	}
}

// checkStats checks an incarnation's job layer counted the plans it gave.
func (f *fleet) checkStats(w *World, name string, fp *fleetProc) {
	if got := fp.m.Stats(); got != fp.want {
		w.chk.Fail(InvMachine, "%s: the job layer's Stats %+v, its plans %+v", name, got, fp.want)
	}
}

// notJob is the queue runner's handling of a message that is not a job: moved to the
// dead-letter queue as it is (a send that may fail: retried after a second), then acked.
// Only a message the world damaged may be refused, with an error naming what it damaged.
func (f *fleet) notJob(p *workerProc, h *msgHandler, m core.Message, err error) {
	w := p.w
	j := f.job(m.Body)
	switch {
	case j == nil || j.malformed == "":
		w.chk.Fail(InvFleetNotJob, "%s: a job message sent well-formed (%s) was refused: %v", p.name, m.ID, err)
		return
	case !errors.Is(err, qjobs.ErrEnvelope) || !strings.Contains(err.Error(), j.malformed):
		w.chk.Fail(InvFleetNotJob, "%s: job-%d's malformed message refused with %v, want %v naming %s", p.name, j.n, err, qjobs.ErrEnvelope, j.malformed)
		return
	}
	w.chk.Pass(InvFleetNotJob)
	w.trace(p.name, "job "+m.Receipt+" not a job: "+err.Error())
	w.loop.After(time.Millisecond, p.alive(func() {
		if !h.running {
			return // cancelled meanwhile: the cancel path reported HandlerDone
		}
		res := worker.Result{Outcome: worker.Success}
		if w.faultsOn && faults.Hit(w.rNet, w.cfg.Faults.Transport.FailBefore) {
			w.fault("transport-send-failed")
			after := time.Second
			res = worker.Result{Outcome: worker.Retryable, Err: errFleetFailure, After: &after}
		} else if w.mutation != mutFleetDropNotJob {
			f.dlq.SendOutgoing(w.now(), core.Outgoing{Body: m.Body, Attributes: m.Attributes})
			j.deadAsIs = true
			f.ended[m.ID] = true
		}
		h.running = false
		delete(p.handlers, h.receipt)
		w.chk.CheckHiddenUntilEnd(h.receipt, w.queue.HiddenAt(w.now().Add(-time.Nanosecond), h.receipt))
		w.chk.HandlerEnded(h.receipt)
		w.chk.DispositionBegan(h.receipt)
		w.trace(p.name, "done "+h.receipt+" "+res.Outcome.String()+" (dead-letter as is)")
		p.step(worker.HandlerDone{Receipt: h.receipt, Now: w.now(), Result: res})
	}))
}

func planString(p qjobs.Plan) string {
	var b strings.Builder
	b.WriteString(p.Action.String())
	switch p.Action {
	case qjobs.Hide:
		b.WriteString(" " + p.Visibility.String())
	case qjobs.Resend, qjobs.DeadLetter:
		a := p.Send.Attrs
		b.WriteString(" attempts=" + strconv.Itoa(a.Attempts) + " delay=" + p.Send.Delay.String())
		if p.Deferred {
			b.WriteString(" deferred")
		}
		if a.Reason != "" {
			b.WriteString(" reason=" + string(a.Reason))
		}
	}
	return b.String()
}
