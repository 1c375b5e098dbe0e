package sim

import (
	"errors"
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
}

// fleetProc is one incarnation's job layer.
type fleetProc struct {
	m    *qjobs.Machine
	runs map[string]*fleetRun // running attempts by receipt
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
)

func newFleet(w *World) *fleet {
	c := w.cfg
	return &fleet{
		dlq:    queue.New(queue.Config{Name: "dead", Epoch: Epoch}, nil),
		procs:  map[int]*fleetProc{},
		ended:  map[string]bool{},
		dup:    map[string]bool{},
		policy: retry.Policy{Attempts: c.Attempts, Base: c.Base, Cap: c.Cap, Deadline: c.Deadline},
	}
}

// workerConfig turns a worker's config into a fleet process's: the job layer counts attempts
// and dead-letters; the worker keeps leases and carries the job layer's visibility.
func (f *fleet) workerConfig(cfg *worker.Config) {
	cfg.Budget, cfg.RedriveMaxReceives = 1<<30, 0
	cfg.Retry = retry.Policy{Attempts: 1, Base: time.Second, Cap: qjobs.VisibilityMaxDefault}
	cfg.Decode = func(m core.Message) error { _, _, err := qjobs.Decode(m); return err }
}

// started gives a new incarnation of worker p a fresh job layer (breakers do not survive a
// crash or a restart).
func (f *fleet) started(w *World, p *workerProc) {
	c := w.cfg
	pol := f.policy
	if w.mutation == mutFleetOverrun {
		pol.Attempts += 2
	}
	m, err := qjobs.New(qjobs.Config{Policy: pol,
		Circuit: breaker.Circuit{Threshold: c.Threshold, Window: c.Window, Cooldown: c.Cooldown, Probes: c.Probes},
		Margin:  c.Visibility, DelayMax: queue.DelayMax,
		Rand: Stream(c.Seed, "fleet-jitter/"+strconv.Itoa(p.id)+"/"+strconv.Itoa(p.gen))})
	if err != nil {
		w.chk.Fail(InvMachine, "%s: qjobs.New: %v", p.name, err)
		return
	}
	f.procs[p.id] = &fleetProc{m: m, runs: map[string]*fleetRun{}}
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
	delete(f.procs, p.id)
}

// body is the n-th job's first message.
func (f *fleet) body(w *World, n int) core.Outgoing {
	j := &fleetJob{n: n, holders: map[string]fleetHolder{}}
	f.jobs = append(f.jobs, j)
	a := qjobs.Attrs{Kind: "job", Target: "t" + strconv.Itoa(1+w.rWork.Intn(max(1, w.cfg.Targets))), FirstDue: w.now()}
	return qjobs.Encode(a, []byte(strconv.Itoa(n)))
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
	case u < w.cfg.PRetryable+w.cfg.PPermanent:
		o = qjobs.Outcome{Result: qjobs.Permanent, Err: "permanent " + errFleetFailure.Error()}
	}
	w.trace(p.name, "job "+m.Receipt+" run job-"+strconv.Itoa(j.n)+" attempt "+strconv.Itoa(plan.Attempt)+" for "+dur.String())
	w.loop.After(dur, p.alive(func() {
		delete(fp.runs, m.Receipt)
		delete(j.holders, m.Receipt)
		if !h.running {
			// Cancelled: the lease was lost; the queue redelivers and the attempt counts.
			fp.m.Abandon(a.Target, run.probe)
			j.explained++
			return
		}
		f.end(p, h, m, fp.m.Finish(w.now(), d, run.attempt, run.probe, o), payload, dup)
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
	w.trace(p.name, "done "+h.receipt+" "+res.Outcome.String())
	p.step(worker.HandlerDone{Receipt: h.receipt, Now: w.now(), Result: res})
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
