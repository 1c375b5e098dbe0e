package sim

import (
	"errors"
	"fmt"
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
	"github.com/sluicehq/sluice/sim/internal/jobattrs"
	"github.com/sluicehq/sluice/sim/queue"
)

// The fleet profile: the queue-backed runner's job layer on every worker process. Each
// process (workerProc, the production worker machine) steps core/qjobs's host with the
// deliveries it starts and performs its effects: runs a drawn handler, sends re-sends and
// dead letters through the queue's sends (with network faults), and reports each delivery's
// Done to the worker machine. Producers enqueue through a job layer of their own. The host
// decides; this file adds only the clock, the draws and the faults. check_fleet.go holds the
// fleet's invariants.

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
	dup map[string]bool
	// hops is each job message's chain of sends toward its not-before time (fleet-resends).
	hops map[string]hopChain
	// parkedIDs are the messages sent for parked jobs, in send order.
	parkedIDs []string
	policy    retry.Policy
	qc        qjobs.Config   // every job layer's, without its Rand
	prod      *qjobs.Machine // the producers' job layer: it only enqueues
	// r draws the job options, dues, payload sizes, malformed messages, panics and server
	// waits (stream "fleet-more"), so the fleet's other draws stay where they were.
	r *rand.Rand
	// outageFrom, outageTo: the dead-letter queue refuses every send in this window (zero:
	// none); sendFails counts each message's failed sends in a row (fleet-send-backoff).
	outageFrom, outageTo time.Time
	sendFails            map[string]int
}

// outage reports whether the dead-letter queue is down at now.
func (f *fleet) outage(now time.Time) bool {
	return !now.Before(f.outageFrom) && now.Before(f.outageTo)
}

// hopChain is a message's place in the sends toward one not-before time: set is when the
// wait began (the enqueue, a retry's or a breaker's re-send), sends how many messages of
// the chain were sent up to this one.
type hopChain struct {
	set, notBefore time.Time
	sends          int
}

// fleetProc is one incarnation's job layer.
type fleetProc struct {
	m      *qjobs.Machine
	dels   map[string]*fleetDelivery // by receipt, from Deliver to Done
	want   qjobs.Stats               // the effects this incarnation received, counted here
	jitter bool                      // its job layer draws jitter (else every retry waits the full delay)
}

// fleetDelivery is one delivery the host holds.
type fleetDelivery struct {
	m   core.Message
	h   *msgHandler
	job *fleetJob // nil: not a job
	dup bool      // a delivery of an ended message, or of a duplicate lineage
	// The running attempt, if any.
	attempt int
	outcome qjobs.Outcome
	attrs   qjobs.Attrs
	// running: its attempt runs; afterRun: it ended, and the next Done is its outcome's.
	running, afterRun bool
	cancelled         bool // its attempt returned after its handler was cancelled
	stopped           bool // a graceful stop cancelled its attempt, the lease held
	sent              bool // the job layer asked for a send (a Hide without one: it could not fit)
}

// fleetJob is what the checker knows of one job.
type fleetJob struct {
	n         int
	runs      int // attempts started, every process and delivery
	explained int // deliveries explained by a crash, a lost lease, or a duplicate
	done      bool
	dead      *qjobs.Attrs
	holders   map[string]fleetHolder // by receipt, attempts running now
	due       time.Time              // its first due; parked: beyond the run
	parked    bool                   // due far beyond the run: it must still wait at the end
	// malformed: its message's attributes were damaged; Decode must refuse it with an error
	// naming this, and the message must go to the dead-letter queue as it is, never run.
	malformed string
	deadAsIs  bool // a delivery of the malformed message was dead-lettered unchanged
	refused   bool // too large for the queue: the producer's job layer refused it
	// stopAttempt is, by message id, the attempt a graceful stop cancelled: that message's
	// next run must carry the same number (fleet-stop). By message, not by job: another copy
	// of the job (a re-send whose answer was lost) carries its own count.
	stopAttempt map[string]int
	// foreign are the attributes of another producer its message was sent with; body its
	// payload. A dead letter of the job carries both unchanged (fleet-dead-letter).
	foreign map[string]core.Attribute
	body    []byte
	// errs are the errors its attempts reported, by attempt number (fleet-dead-letter).
	errs map[int][]string
	// ambiguous: its enqueue's answer was lost and the caller was told (ErrEnqueueUnknown);
	// succeeded: a delivery of its main lineage (not a duplicate) succeeded (fleet-one-job).
	ambiguous, succeeded bool
	// killer: every attempt kills its process (an out-of-memory handler); the job must end
	// dead-lettered deliveries-lost with no attempt spent (fleet-attempts).
	killer bool
}

// stopAttemptOf returns the attempt a graceful stop cancelled on message id, if any; j may
// be nil (not a job).
func (j *fleetJob) stopAttemptOf(id string) (int, bool) {
	if j == nil {
		return 0, false
	}
	a, ok := j.stopAttempt[id]
	return a, ok
}

// fleetHolder is a running attempt: its worker and its message.
type fleetHolder struct {
	worker int
	msg    string
}

var (
	errFleetFailure   = errors.New("simulated job failure")
	errFleetCancelled = errors.New("simulated send cancelled with its handler")
	errFleetSend      = errors.New("simulated send failure")
	// errFleetSendUnknown: the send was stored, its answer lost.
	errFleetSendUnknown = fmt.Errorf("simulated lost answer: %w", core.ErrSendUnknown)
	errFleetOutage      = errors.New("simulated dead-letter queue outage")
)

// Deliberate defects of the fleet, planted by check_fleet_test.go to show each fleet
// invariant fires.
const (
	mutFleetOverrun        mutation = 100 + iota // the job layer allows two attempts more than the budget
	mutFleetIgnoreBreaker                        // a breaker's defer is run anyway
	mutFleetLoseDead                             // a dead letter is never sent, but reported sent
	mutFleetDoubleSend                           // an attempt's start sends a copy of its message
	mutFleetDropNotJob                           // a message that is not a job is reported dead-lettered, never sent
	mutFleetHopShort                             // a defer's re-send is delayed a tenth of what the host asked
	mutFleetCancelFlip                           // an attempt's end reports the opposite of whether it was cancelled
	mutFleetStopSpends                           // a graceful stop's cancelled attempt is reported as a failure
	mutFleetDeadDropsTyped                       // a dead letter is sent without the other producers' attributes
	mutFleetBlindResend                          // an enqueue whose answer was lost is sent again, the caller told nothing
	mutFleetFlatBackoff                          // a failed send's original is hidden 1 s each time
	mutFleetKillSpends                           // a delivery lost to a kill is reported as a failed attempt
)

func newFleet(w *World) *fleet {
	c := w.cfg
	f := &fleet{
		dlq:       queue.New(queue.Config{Name: "dead", Epoch: Epoch}, nil),
		procs:     map[int]*fleetProc{},
		ended:     map[string]bool{},
		dup:       map[string]bool{},
		hops:      map[string]hopChain{},
		policy:    retry.Policy{Attempts: c.Attempts, Base: c.Base, Cap: c.Cap, Deadline: c.Deadline},
		r:         Stream(c.Seed, "fleet-more"),
		sendFails: map[string]int{},
	}
	if o := Stream(c.Seed, "fleet-outage"); o.Intn(3) == 0 {
		f.outageFrom = Epoch.Add(drawBetween(o, 0, 5*time.Minute))
		f.outageTo = f.outageFrom.Add(drawBetween(o, 30*time.Second, 3*time.Minute))
	}
	f.qc = qjobs.Config{Policy: f.policy,
		Circuit:    breaker.Circuit{Threshold: c.Threshold, Window: c.Window, Cooldown: c.Cooldown, Probes: c.Probes},
		Margin:     c.Visibility,
		DelayMax:   queue.DelayMax,
		MessageMax: queue.MessageMax}
	pc := f.qc
	pc.IDs = Stream(c.Seed, "fleet-ids")
	var err error
	if f.prod, err = qjobs.New(pc); err != nil {
		w.chk.Fail(InvMachine, "producer: qjobs.New: %v", err)
	}
	return f
}

// workerConfig turns a worker's config into a fleet process's, with the job layer's values.
func (f *fleet) workerConfig(cfg *worker.Config) {
	cfg.Budget, cfg.RedriveMaxReceives = qjobs.WorkerBudget, 0
	cfg.Retry = retry.Policy{Attempts: qjobs.WorkerAttemptMax, Base: qjobs.WorkerRetryBase, Cap: qjobs.WorkerHideMax}
	cfg.Decode = nil // the job layer decides what is not a job
	cfg.StopHeld = true
}

// started gives a new incarnation of worker p a fresh job layer (breakers do not survive a
// crash or a restart).
func (f *fleet) started(w *World, p *workerProc) {
	qc := f.qc
	if w.mutation == mutFleetOverrun {
		qc.Policy.Attempts += 2
	}
	qc.Rand = Stream(w.cfg.Seed, "fleet-jitter/"+strconv.Itoa(p.id)+"/"+strconv.Itoa(p.gen))
	qc.IDs = Stream(w.cfg.Seed, "fleet-ids/"+strconv.Itoa(p.id)+"/"+strconv.Itoa(p.gen))
	if p.gen == 1 {
		f.badConfig(w, p, qc)
	}
	if f.r.Intn(8) == 0 {
		qc.Rand = nil // no jitter: every retry waits the policy's full delay
	}
	m, err := qjobs.New(qc)
	if err == nil {
		err = m.Step(qjobs.Register{Kind: "job"})
	}
	if err != nil {
		w.chk.Fail(InvMachine, "%s: qjobs: %v", p.name, err)
		return
	}
	f.procs[p.id] = &fleetProc{m: m, dels: map[string]*fleetDelivery{}, jitter: qc.Rand != nil}
}

// stopped ends worker p's incarnation: its running attempts are lost with it.
func (f *fleet) stopped(p *workerProc) {
	fp := f.procs[p.id]
	if fp == nil {
		return
	}
	for r, d := range fp.dels {
		if d.job != nil && d.attempt > 0 {
			// Running, or ran and sending its outcome on: lost with the process either way.
			delete(d.job.holders, r) // one entry each: order does not matter
			d.job.explained++
		}
	}
	f.checkStats(p.w, p.name, fp)
	delete(f.procs, p.id)
}

// enqueue sends the n-th job through the producers' job layer, unless it refuses it (too
// large). One job in four carries its own attempts or deadline; about one in eight is due
// later (up to three times the longest delay), one in sixteen in the past, one in sixty-four
// is parked (due far beyond the run, year 9999 included); one in twenty-four has a payload
// near the size limit, one in sixty-four far over it; one in twelve has an attribute damaged
// after the job layer encoded it (it is then not a job).
func (f *fleet) enqueue(w *World, n int) {
	j := &fleetJob{n: n, holders: map[string]fleetHolder{}}
	f.jobs = append(f.jobs, j)
	nj := qjobs.NewJob{Kind: "job", Target: "t" + strconv.Itoa(1+w.rWork.Intn(max(1, w.cfg.Targets)))}
	r, now := f.r, w.now()
	if r.Intn(4) == 0 {
		nj.AttemptsMax = 1 + r.Intn(f.policy.Attempts)
	}
	if r.Intn(4) == 0 {
		nj.Deadline = drawBetween(r, time.Minute, time.Hour)
	}
	switch r.Intn(64) {
	case 0, 1, 2, 3, 4, 5, 6, 7:
		nj.Due = now.Add(drawBetween(r, time.Second, 3*queue.DelayMax))
	case 8, 9, 10, 11:
		nj.Due = now.Add(-drawBetween(r, 0, time.Hour))
	case 12:
		j.parked = true
		nj.Due = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
		if d := jobattrs.FarDues[r.Intn(len(jobattrs.FarDues))]; d > 0 {
			nj.Due = now.Add(d)
		}
	}
	j.due = now
	if nj.Due.After(now) {
		j.due = nj.Due
	}
	j.killer = !j.parked && r.Intn(128) == 0
	nj.Payload = []byte(strconv.Itoa(n))
	switch {
	case j.parked: // small: settled looks its messages up
	case r.Intn(64) == 0:
		nj.Payload = append(nj.Payload, make([]byte, queue.MessageMax)...)
	case r.Intn(24) == 0: // around the limit: the attributes take some 100 to 200 bytes
		size := queue.MessageMax - 240 + r.Intn(200)
		nj.Payload = append(append(nj.Payload, '.'), strings.Repeat("x", size-len(nj.Payload)-1)...)
	}
	if err := f.prod.Step(qjobs.Enqueue{Now: now, Jobs: []qjobs.NewJob{nj}}); err != nil {
		w.chk.Fail(InvMachine, "producer: %v", err)
		return
	}
	rd := f.prod.Ready()
	if len(rd.Refused) > 0 {
		f.refused(w, j, rd.Refused[0])
		return
	}
	if len(rd.Sends) != 1 {
		w.chk.Fail(InvMachine, "producer: job-%d: enqueue gave %d sends and no refusal", n, len(rd.Sends))
		return
	}
	s := rd.Sends[0]
	out := s.Message
	if size := qjobs.Size(out); size != queue.Size(out) || size > queue.MessageMax {
		w.chk.Fail(InvMachine, "job-%d: qjobs.Size says %d bytes, the queue counts %d, the limit %d", n, size, queue.Size(out), queue.MessageMax)
	}
	if r.Intn(12) == 0 {
		d := jobattrs.Damages[r.Intn(len(jobattrs.Damages))]
		out.Attributes = d.Apply(out.Attributes)
		j.malformed, j.parked = d.Names, false // not a job: it goes to the dead-letter queue
		w.trace("producer", "job-"+strconv.Itoa(n)+" malformed: "+d.What)
	}
	f.foreignAttrs(w, j, &out)
	if err := w.queue.Refusal(out); err != nil {
		w.chk.Fail(InvMachine, "job-%d: the queue refuses the job layer's enqueue: %v", n, err)
		return
	}
	id := w.queue.SendOutgoing(now, out)
	f.maybeAmbiguous(w, j, out, id)
	if j.parked {
		f.parkedIDs = append(f.parkedIDs, id)
	}
	f.checkHop(w, j, hopChain{}, s, now, id)
	w.trace("producer", id+" job-"+strconv.Itoa(n)+" "+s.String())
}

// foreignAttrs adds another producer's attributes to some jobs (jobattrs.Foreign).
func (f *fleet) foreignAttrs(w *World, j *fleetJob, out *core.Outgoing) {
	j.body = append([]byte(nil), out.Body...)
	switch jobattrs.Foreign(f.r, j.n, j.malformed == "", out) {
	case jobattrs.BinaryKind:
		j.foreign, j.malformed, j.parked = out.Typed, qjobs.AttrKind, false
		w.trace("producer", "job-"+strconv.Itoa(j.n)+" malformed: binary kind")
	case jobattrs.Other:
		j.foreign = out.Typed
	}
}

// maybeAmbiguous loses the answer to one enqueue in thirty-two after the queue stored it: the
// caller is told (ErrEnqueueUnknown names the id) and does not retry here. A planted defect
// sends it again blindly, telling nothing.
func (f *fleet) maybeAmbiguous(w *World, j *fleetJob, out core.Outgoing, id string) {
	if f.r.Intn(32) != 0 {
		return
	}
	if w.mutation == mutFleetBlindResend {
		copyID := w.queue.SendOutgoing(w.now(), out)
		w.trace("producer", id+" job-"+strconv.Itoa(j.n)+" answer lost; sent again as "+copyID)
		return
	}
	j.ambiguous = true
	w.st.Jobs.Add("fleet-enqueue-unknown", 1)
	w.trace("producer", id+" job-"+strconv.Itoa(j.n)+" answer lost: the caller gets ErrEnqueueUnknown")
}

// refused checks the producers' job layer refused only what the queue could not take.
func (f *fleet) refused(w *World, j *fleetJob, r qjobs.Refusal) {
	j.refused = true
	if !errors.Is(r.Err, qjobs.ErrTooLarge) || r.Size <= queue.MessageMax-qjobs.SuccessorRoom {
		w.chk.Fail(InvMachine, "producer: job-%d refused (%d bytes, the queue takes %d): %v", j.n, r.Size, queue.MessageMax, r.Err)
		return
	}
	w.trace("producer", "refuse job-"+strconv.Itoa(j.n)+": "+strconv.Itoa(r.Size)+" bytes, the queue takes "+strconv.Itoa(queue.MessageMax))
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

// job returns the job a payload names (its leading digits).
func (f *fleet) job(payload []byte) *fleetJob {
	i := 0
	for i < len(payload) && payload[i] >= '0' && payload[i] <= '9' {
		i++
	}
	n, err := strconv.Atoi(string(payload[:i]))
	if err != nil || n < 1 || n > len(f.jobs) {
		return nil
	}
	return f.jobs[n-1]
}

// handle is startHandler for a fleet process: the delivery goes to the job layer, whose
// effects perform carries out.
func (f *fleet) handle(p *workerProc, m core.Message) {
	w := p.w
	fp := f.procs[p.id]
	h := &msgHandler{receipt: m.Receipt, running: true}
	p.handlers[m.Receipt] = h
	w.chk.HandlerStarted(m.Receipt)
	if fp == nil {
		w.chk.Fail(InvMachine, "%s: a delivery without a job layer", p.name)
		return
	}
	// A delivery of an ended message, or of one its duplicate sent, is a duplicate: the
	// delete lost to a crash or a lost lease explains it.
	d := &fleetDelivery{m: m, h: h, job: f.job(m.Body), dup: f.ended[m.ID] || f.dup[m.ID]}
	fp.dels[m.Receipt] = d
	f.step(p, fp, qjobs.Deliver{Now: w.now(), Receipt: m.Receipt, Message: m})
}

// step steps p's job layer and performs the effects of that event.
func (f *fleet) step(p *workerProc, fp *fleetProc, ev qjobs.Event) {
	w := p.w
	if err := fp.m.Step(ev); err != nil {
		w.chk.Fail(InvMachine, "%s: qjobs: %v", p.name, err)
		return
	}
	rd := fp.m.Ready()
	for _, n := range rd.Notes {
		w.trace(p.name, "note "+n.Text+" "+strings.Join(n.Args, " "))
	}
	for _, r := range rd.Runs {
		f.run(p, fp, fp.dels[r.Receipt], r)
	}
	for _, s := range rd.Sends {
		f.send(p, fp, fp.dels[s.Receipt], s)
	}
	for _, dn := range rd.Done {
		if _, ok := ev.(qjobs.Deliver); ok {
			// Decided as it started (a successor that cannot fit): the worker hears of it
			// after the start it is performing.
			d := fp.dels[dn.Receipt]
			w.loop.After(0, p.alive(func() { f.done(p, fp, d, dn) }))
			continue
		}
		f.done(p, fp, fp.dels[dn.Receipt], dn)
	}
}

// run starts an attempt the job layer admitted: a drawn duration and outcome.
func (f *fleet) run(p *workerProc, fp *fleetProc, d *fleetDelivery, r qjobs.Run) {
	w := p.w
	fp.want.Runs++
	j := d.job
	if j == nil {
		w.chk.Fail(InvMachine, "%s: the job layer runs %s, which names no job", p.name, d.m.ID)
		return
	}
	if d.dup {
		j.explained++
	}
	if w.mutation == mutFleetDoubleSend {
		w.queue.SendOutgoing(w.now(), core.Outgoing{Body: d.m.Body, Attributes: d.m.Attributes})
	}
	f.checkRun(p, fp, j, r.Attrs, r.Attempt, d.m, d.dup)
	d.attempt, d.attrs = r.Attempt, r.Attrs
	j.holders[r.Receipt] = fleetHolder{worker: p.id, msg: d.m.ID}
	dur := drawBetween(w.rExec, w.cfg.HandlerMin, w.cfg.HandlerMax)
	if w.faultsOn && faults.Hit(w.rFaults, w.cfg.Faults.Timing.LongHandler) {
		dur = time.Duration(float64(w.cfg.Visibility) * (1 + w.rFaults.Float64()*(w.cfg.Faults.Timing.LongFactor-1)))
		w.fault("long-handler")
	}
	d.h.end = w.loop.Now() + dur
	d.outcome = f.drawOutcome(w, j, r.Attempt)
	if j.killer && j.malformed == "" {
		f.kill(p, fp, d, r.Receipt)
		return
	}
	w.trace(p.name, "job "+r.Receipt+" run job-"+strconv.Itoa(j.n)+" attempt "+strconv.Itoa(r.Attempt)+" for "+dur.String())
	d.running = true
	w.loop.After(dur, p.alive(func() { f.endAttempt(p, fp, d, r.Receipt) }))
}

// kill runs a killer job's attempt: 10 ms in, its process dies (a planted defect reports
// the loss as a failed attempt instead, as attempts counted kills before).
func (f *fleet) kill(p *workerProc, fp *fleetProc, d *fleetDelivery, receipt string) {
	w := p.w
	d.running = true
	w.loop.After(10*time.Millisecond, p.alive(func() {
		if !d.running {
			return // a stop's cancel ended it first
		}
		if w.mutation == mutFleetKillSpends {
			d.outcome = qjobs.Outcome{Result: qjobs.Retryable, Err: "attempt ended without an outcome"}
			f.endAttempt(p, fp, d, receipt)
			return
		}
		w.trace(p.name, "job-"+strconv.Itoa(d.job.n)+" kills its process")
		p.crash()
	}))
}

// endAttempt ends a running attempt: at its drawn end, or soon after a stop cancelled it.
func (f *fleet) endAttempt(p *workerProc, fp *fleetProc, d *fleetDelivery, receipt string) {
	w := p.w
	if !d.running {
		return // ended already (a stop's cancel came first)
	}
	j := d.job
	delete(j.holders, receipt)
	d.running, d.afterRun, d.cancelled = false, true, !d.h.running || d.stopped
	if d.cancelled {
		j.explained++ // the lease was lost or a stop cancelled it: it runs again
	}
	cancelled := d.cancelled != (w.mutation == mutFleetCancelFlip)
	if d.stopped {
		d.outcome = qjobs.Outcome{Result: qjobs.Retryable, Err: "context canceled (shutdown)"}
		if j.stopAttempt == nil {
			j.stopAttempt = map[string]int{}
		}
		j.stopAttempt[d.m.ID] = d.attempt
		cancelled = w.mutation != mutFleetStopSpends
	}
	if !cancelled && d.outcome.Result != qjobs.Success {
		if j.errs == nil {
			j.errs = map[int][]string{}
		}
		j.errs[d.attempt] = append(j.errs[d.attempt], d.outcome.Err)
	}
	f.step(p, fp, qjobs.AttemptDone{Receipt: receipt, Now: w.now(), Outcome: d.outcome, Cancelled: cancelled})
}

// stopCancel is a graceful stop's cancel of a delivery whose lease the worker keeps: a
// running attempt returns soon (its handler sees the cancelled context); a delivery past
// its run ends as it would.
func (f *fleet) stopCancel(p *workerProc, receipt string) {
	w := p.w
	fp := f.procs[p.id]
	if fp == nil {
		return
	}
	d := fp.dels[receipt]
	if d == nil || !d.running {
		return
	}
	d.stopped = true
	back := drawBetween(w.rExec, 0, 50*time.Millisecond)
	w.trace(p.name, "stop cancels "+receipt+", its lease held until it returns")
	w.loop.After(back, p.alive(func() { f.endAttempt(p, fp, d, receipt) }))
}

// drawOutcome draws an attempt's outcome: a success, a retryable failure (one in four with a
// server's wait, at once one time in three), a permanent failure or a panic.
func (f *fleet) drawOutcome(w *World, j *fleetJob, attempt int) qjobs.Outcome {
	u := w.rExec.Float64()
	switch {
	case u < w.cfg.PRetryable:
		o := qjobs.Outcome{Result: qjobs.Retryable, Err: errFleetFailure.Error() + " (job " + strconv.Itoa(j.n) + " attempt " + strconv.Itoa(attempt) + ")"}
		if f.r.Intn(4) == 0 {
			after := drawBetween(f.r, 0, f.policy.Cap)
			if f.r.Intn(3) == 0 {
				after = 0
			}
			o.After = &after
		}
		return o
	case u < w.cfg.PRetryable+w.cfg.PPermanent:
		if f.r.Intn(3) == 0 {
			return qjobs.Outcome{Result: qjobs.Panicked, Err: "panic: " + errFleetFailure.Error()}
		}
		return qjobs.Outcome{Result: qjobs.Permanent, Err: "permanent " + errFleetFailure.Error()}
	}
	return qjobs.Outcome{Result: qjobs.Success}
}

// send performs a delivery's send a millisecond on, across the network: it may fail before
// taking effect, or take effect and report failure.
func (f *fleet) send(p *workerProc, fp *fleetProc, d *fleetDelivery, s qjobs.Send) {
	w := p.w
	fp.countSend(s)
	d.afterRun, d.sent = false, true
	if s.Why == qjobs.WhyRetry && d.job != nil {
		var wait time.Duration
		if !s.Attrs.NotBefore.IsZero() {
			wait = (s.Attrs.NotBefore.Sub(w.now()) + time.Second - 1) / time.Second * time.Second
		}
		f.checkRetryWait(w, fp, d.job, d.attempt, d.outcome, wait)
	}
	if s.Why == qjobs.WhyNotJob && !f.checkNotJob(p, d) {
		return
	}
	if w.mutation == mutFleetIgnoreBreaker && s.Why == qjobs.WhyDefer && d.job != nil {
		// The planted defect starts the attempt the breaker deferred (its not-before passed).
		if a, _, err := qjobs.Decode(d.m); err == nil && !w.now().Before(a.NotBefore) {
			f.checkRun(p, fp, d.job, a, a.Attempts+d.m.ReceiveCount, d.m, d.dup)
		}
	}
	w.trace(p.name, "job "+s.Receipt+" "+s.String())
	decided := w.now()
	w.loop.After(time.Millisecond, p.alive(func() {
		var err error
		sent := true
		switch {
		case !d.h.running:
			err, sent = errFleetCancelled, false
		case w.faultsOn && faults.Hit(w.rNet, w.cfg.Faults.Transport.FailBefore):
			w.fault("transport-send-failed")
			err, sent = errFleetSend, false
		case w.faultsOn && faults.Hit(w.rNet, w.cfg.Faults.Transport.FailAfter):
			w.fault("transport-send-failed-after")
			err = errFleetSendUnknown
		case s.To == qjobs.ToDeadLetter && f.outage(w.now()):
			w.fault("dead-letter-outage")
			err, sent = errFleetOutage, false
		}
		q := w.queue
		if s.To == qjobs.ToDeadLetter {
			q = f.dlq
		}
		if rerr := q.Refusal(s.Message); sent && rerr != nil {
			err, sent = rerr, false
		}
		if sent {
			f.deliver(p, d, s, decided)
		}
		if err != nil {
			fp.want.SendsFailed++
			if d.job != nil && d.attempt > 0 {
				d.job.explained++ // the outcome the send carried is lost: its attempt runs again
			}
			w.trace(p.name, "job "+s.Receipt+" send failed: "+err.Error())
		}
		f.step(p, fp, qjobs.SendDone{Receipt: s.Receipt, Now: w.now(), Err: err})
	}))
}

// deliver puts a send's message on its queue (unless a planted defect loses it) and notes
// what it means for the job; decided is when the job layer made it.
func (f *fleet) deliver(p *workerProc, d *fleetDelivery, s qjobs.Send, decided time.Time) {
	w := p.w
	switch {
	case s.Why == qjobs.WhyDead && w.mutation == mutFleetLoseDead, s.Why == qjobs.WhyNotJob && w.mutation == mutFleetDropNotJob:
		return
	case s.Why == qjobs.WhyNotJob:
		f.checkKept(p, d.job, s.Message)
		f.dlq.SendOutgoing(w.now(), s.Message)
		d.job.deadAsIs = true
		f.ended[d.m.ID] = true
		return
	}
	out := s.Message
	if s.Why == qjobs.WhyDead && w.mutation == mutFleetDeadDropsTyped {
		out.Typed = nil
	}
	if s.Why == qjobs.WhyDefer && w.mutation == mutFleetHopShort {
		out.Delay = out.Delay / 10 / time.Second * time.Second
	}
	to := w.queue
	if s.To == qjobs.ToDeadLetter {
		to = f.dlq
	}
	id := to.SendOutgoing(w.now(), out)
	f.ended[d.m.ID] = true
	if d.dup {
		f.dup[id] = true
	}
	if s.Why == qjobs.WhyDead && d.job != nil {
		a := s.Attrs
		d.job.dead = &a
		f.checkDeadLetter(p, d.job, s, out)
	}
	if s.To == qjobs.ToQueue && d.job != nil && d.job.parked {
		f.parkedIDs = append(f.parkedIDs, id)
	}
	if a, ok := d.job.stopAttemptOf(d.m.ID); ok && s.To == qjobs.ToQueue {
		// A successor of a stopped message (a defer, or a defect's retry) carries its check.
		delete(d.job.stopAttempt, d.m.ID)
		d.job.stopAttempt[id] = a
	}
	if s.To == qjobs.ToQueue && d.job != nil {
		f.checkHop(w, d.job, f.hops[d.m.ID], qjobs.Send{Why: s.Why, Attrs: s.Attrs, Message: out}, decided, id)
	}
	w.trace(p.name, "job "+s.Receipt+" sent "+id)
	w.wakePollers()
}

// done reports a delivery's Done to the worker machine as the handler's result, unless the
// handler was cancelled meanwhile (the cancel path reported HandlerDone).
func (f *fleet) done(p *workerProc, fp *fleetProc, d *fleetDelivery, dn qjobs.Done) {
	w := p.w
	delete(fp.dels, dn.Receipt)
	fromRun := d.afterRun
	if fromRun {
		f.checkAbandon(p, d, dn)
	}
	switch {
	case dn.Disposition == qjobs.Release:
		fp.want.Abandoned++
	case fromRun && dn.Disposition == qjobs.Delete:
		fp.want.Acked++
	case dn.Disposition == qjobs.Hide && !d.sent:
		fp.want.Unsendable++ // its successor could not fit the queue
	}
	h := d.h
	if !h.running {
		return
	}
	res := worker.Result{Outcome: worker.Success}
	switch dn.Disposition {
	case qjobs.Delete:
		if fromRun && d.job != nil {
			f.ended[d.m.ID] = true
			d.job.done = true
			d.job.succeeded = d.job.succeeded || !d.dup
		}
	case qjobs.Hide:
		v := dn.Visibility
		if d.sent {
			v = f.checkSendBackoff(w, d, v)
		}
		res = worker.Result{Outcome: worker.Retryable, Err: errors.New(dn.Err), After: &v}
	default:
		if !d.stopped {
			w.chk.Fail(InvMachine, "%s: %s released though its handler runs", p.name, dn.Receipt)
			return
		}
		var now time.Duration // a stop's release: visible again at once
		res = worker.Result{Outcome: worker.Retryable, Err: errors.New(dn.Err), After: &now}
	}
	h.running = false
	delete(p.handlers, h.receipt)
	w.chk.CheckHiddenUntilEnd(h.receipt, w.queue.HiddenAt(w.now().Add(-time.Nanosecond), h.receipt))
	w.chk.HandlerEnded(h.receipt)
	w.chk.DispositionBegan(h.receipt)
	if fromRun && dn.Disposition == qjobs.Delete {
		w.dups.succeeded(&w.st.Duplicates, p.id, d.m.ID, h.receipt)
	}
	w.trace(p.name, "done "+h.receipt+" "+res.Outcome.String()+" ("+dn.String()+")")
	p.step(worker.HandlerDone{Receipt: h.receipt, Now: w.now(), Result: res})
}

// checkRetryWait checks the wait of a retry the job layer re-sends (its not-before time, rounded
// up to whole seconds): the server's wait (capped at Cap), else the policy's delay for the
// attempt: the full delay without jitter, with it between half and all of it.
func (f *fleet) checkRetryWait(w *World, fp *fleetProc, j *fleetJob, attempt int, o qjobs.Outcome, v time.Duration) {
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
		w.chk.Fail(InvBackoff, "job-%d attempt %d re-sent to wait %v after a retryable failure, want %v..%v (delay %v, server wait %v, jitter %v)",
			j.n, attempt, v, lo, hi, full, o.After, fp.jitter)
		return
	}
	w.chk.Pass(InvBackoff)
}

// countSend adds a send of this incarnation's job layer to what its Status must count.
func (fp *fleetProc) countSend(s qjobs.Send) {
	switch s.Why {
	case qjobs.WhyDefer:
		fp.want.Deferred++
	case qjobs.WhyRetry:
		fp.want.Resent++
	case qjobs.WhyDead:
		fp.want.DeadLettered++
	case qjobs.WhyNotJob:
		fp.want.NotJobs++
	}
}

// checkStats checks an incarnation's job layer counted the effects it gave.
func (f *fleet) checkStats(w *World, name string, fp *fleetProc) {
	if got := fp.m.Status().Stats; got != fp.want {
		w.chk.Fail(InvMachine, "%s: the job layer's Status %+v, its effects %+v", name, got, fp.want)
	}
}

// checkNotJob checks a message the job layer sends to the dead-letter queue as not a job:
// only a message the world damaged may be refused, with an error naming what it damaged
// (the note the job layer wrote).
func (f *fleet) checkNotJob(p *workerProc, d *fleetDelivery) bool {
	w := p.w
	j := d.job
	if j == nil || j.malformed == "" {
		w.chk.Fail(InvFleetNotJob, "%s: a job message sent well-formed (%s) was refused", p.name, d.m.ID)
		return false
	}
	if _, _, err := qjobs.Decode(d.m); !errors.Is(err, qjobs.ErrEnvelope) || !strings.Contains(err.Error(), j.malformed) {
		w.chk.Fail(InvFleetNotJob, "%s: job-%d's malformed message refused with %v, want %v naming %s", p.name, j.n, err, qjobs.ErrEnvelope, j.malformed)
		return false
	}
	w.chk.Pass(InvFleetNotJob)
	return true
}
