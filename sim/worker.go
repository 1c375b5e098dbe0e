package sim

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/lease"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/core/worker"
	"github.com/sluicehq/sluice/internal/netfault"
	"github.com/sluicehq/sluice/sim/faults"
	"github.com/sluicehq/sluice/sim/queue"
)

// The queue side of the world: one simulated SQS queue (with a dead-letter queue when the
// configuration redrives), producers, and worker processes. Each worker process executes a
// worker.Node (the same host as production: receive loop, lease, dispositions, every
// shutdown decision and the exit) and performs its effects; only the durations, outcomes and
// faults are drawn here. Calls cross a simulated network: latency each way, and faults that
// fail a call before it takes effect or after (the caller cannot tell which).

const (
	ceiling = queue.VisibilityCeiling
)

// Deliberate defects of the worker's executor, beyond the world's list (numbered apart from it
// so the two lists merge without clashing).
const (
	// mutFatalAsRetry: a fatal receive error reaches the Node as a retryable one, as if the
	// machine retried it instead of ending Run.
	mutFatalAsRetry mutation = 200 + iota
	// mutLateRenewal: each renewal leaves 50 ms after the Node hands it out, so one may leave
	// after its receipt's disposition began.
	mutLateRenewal
)

func (w *World) setupQueue() {
	c := w.cfg
	if c.Workers == 0 {
		return
	}
	qc := queue.Config{Name: "q", VisibilityDefault: c.Visibility, Epoch: Epoch}
	switch c.Lapsed {
	case "ignore":
		qc.Lapsed = queue.LapsedIgnore
	case "extend":
		qc.Lapsed = queue.LapsedExtend
	case "mixed":
		qc.Lapsed = queue.LapsedMixed
	}
	if c.MaxReceive > 0 {
		w.dlq = queue.New(queue.Config{Name: "dlq", Epoch: Epoch}, nil)
		qc.DeadLetter, qc.MaxReceiveCount = w.dlq, c.MaxReceive
	}
	w.queue = queue.New(qc, Stream(c.Seed, "queue"))
	lp := LeaseParams{Window: c.Visibility, Ceiling: ceiling}
	if w.mutation == mutNoStopMargin {
		lp.Margin = time.Nanosecond
	}
	w.chk.LeaseConfigured(lp)
	bursts := Stream(c.Seed, "worker-burst").Intn(2) == 0
	for i := 1; i <= c.Workers; i++ {
		p := &workerProc{w: w, id: i, name: "worker/" + strconv.Itoa(i), bursts: bursts}
		w.workers = append(w.workers, p)
	}
	w.revokeFamily()
	for _, p := range w.workers {
		p.start()
	}
	w.msgs.start(w)
}

// msgProducer sends the run's messages during the safety phase.
type msgProducer struct {
	sent int
}

func (m *msgProducer) start(w *World) {
	w.loop.At(drawBetween(w.rWork, 0, w.cfg.MsgEvery), func() { m.tick(w) })
}

func (m *msgProducer) tick(w *World) {
	if w.liveness || m.sent >= w.cfg.MsgsMax {
		return
	}
	n := 1
	if w.faultsOn && faults.Hit(w.rFaults, w.cfg.Faults.Timing.Burst) {
		n = w.cfg.Faults.Timing.BurstSize
		w.fault("burst")
	}
	for i := 0; i < n && m.sent < w.cfg.MsgsMax; i++ {
		m.sent++
		body := "job-" + strconv.Itoa(m.sent)
		if w.rWork.Float64() < w.cfg.PPoison {
			body = "poison-" + strconv.Itoa(m.sent)
		}
		if w.fleet != nil {
			w.fleet.enqueue(w, m.sent)
			continue
		}
		id := w.queue.SendOutgoing(w.now(), core.Outgoing{Body: []byte(body)})
		w.trace("producer", "send "+id+" "+body)
	}
	w.wakePollers()
	w.loop.After(drawBetween(w.rWork, time.Millisecond, 2*w.cfg.MsgEvery), func() { m.tick(w) })
}

func (m *msgProducer) settled(w *World) bool {
	if w.queue == nil {
		return true
	}
	if w.fleet != nil {
		return w.fleet.settled(w) // parked jobs wait on
	}
	live, _, _ := w.queue.Counts()
	return live == 0
}

func (m *msgProducer) unsettled(w *World) string {
	if m.settled(w) {
		return ""
	}
	st := w.queue.Status(w.now())
	var ids []string
	for _, ms := range st.Messages {
		if ms.State == queue.Visible || ms.State == queue.InFlight {
			ids = append(ids, ms.ID+"("+ms.State.String()+" count="+strconv.Itoa(ms.ReceiveCount)+")")
			if len(ids) == 5 {
				break
			}
		}
	}
	return strconv.Itoa(st.Visible+st.InFlight) + " messages live: " + strings.Join(ids, " ")
}

// workerProc is one worker process executing a worker.Node (the production host: receive
// loop, budget, poison, dispositions, shutdown, the exit; the lease machine inside it). gen
// counts incarnations: replies and timers of an earlier incarnation (before a crash) find gen
// changed and do nothing.
type workerProc struct {
	w    *World
	id   int
	name string
	up   bool
	gen  int
	e    *worker.Node

	stopping bool
	asked    bool // an operator's stop was stepped (stopping is set by a fatal error too)
	// bursts: replies and handler results arriving at one instant are stepped together before
	// Ready is read, like the events already waiting in production (drawn per seed from the
	// "worker-burst" stream); pending: a burst is open, its Ready not read yet.
	bursts, pending bool
	recv            *longPoll // the receive call in flight, if any
	handlers        map[string]*msgHandler
	open            []string // receipts received whose lease has not ended yet (for drop detection)
	wakeAt          time.Duration
	calls           map[uint64]*simCall // lease calls in flight, by CallID (this incarnation's)
	// revokeAt: from then on (once, in the safety phase) the queue answers this process's
	// next receive AccessDenied, as if its permission were revoked (0: never).
	revokeAt time.Duration
	// fatalErr is the fatal receive error delivered to this incarnation while it was not
	// stopping: its Run must end, returning it (InvFatalEndsRun).
	fatalErr error
}

type msgHandler struct {
	receipt   string
	running   bool
	cancelled bool
	end       time.Duration // when its work is done, cancelled or not
}

// stopMargin is the workers' stop margin: the default, or (mutNoStopMargin) the least the
// machine accepts, as if handlers were cancelled at the local deadline itself.
func (p *workerProc) stopMargin() time.Duration {
	if p.w.mutation == mutNoStopMargin {
		return time.Nanosecond
	}
	return 0
}

func (p *workerProc) config() worker.Config {
	c := p.w.cfg
	cfg := worker.Config{
		Window: c.Visibility, Ceiling: ceiling, Wait: c.PollWait, WaitNone: c.PollWait == 0,
		BatchMax: c.ReceiveMax, Concurrency: c.Concurrency, Prefetch: c.Prefetch, Budget: c.Budget,
		RedriveMaxReceives: c.MaxReceive,
		Retry:              retry.Policy{Attempts: 5, Base: c.MsgBase, Cap: c.MsgCap},
		StopMargin:         p.stopMargin(),
		Rand:               Stream(c.Seed, "worker-jitter/"+strconv.Itoa(p.id)+"/"+strconv.Itoa(p.gen)),
		Decode: func(m core.Message) error {
			if strings.HasPrefix(string(m.Body), "poison") {
				return errPoison
			}
			return nil
		},
		Grace: c.Grace,
	}
	if p.w.fleet != nil {
		p.w.fleet.workerConfig(&cfg)
	}
	return cfg
}

var errPoison = errors.New("simulated undecodable body")

func (p *workerProc) start() {
	w := p.w
	p.up, p.stopping, p.asked, p.pending = true, false, false, false
	p.gen++
	e, err := worker.NewNode(p.zeroWorkerDefaults(p.config()))
	if err != nil {
		w.chk.Fail(InvMachine, "%s: worker.NewNode: %v", p.name, err)
		return
	}
	p.fatalErr = nil
	p.e = e
	p.handlers = make(map[string]*msgHandler)
	p.recv = nil
	p.open = p.open[:0]
	p.wakeAt = 0
	w.trace(p.name, "START")
	if w.fleet != nil {
		w.fleet.started(w, p)
	}
	p.step(worker.Tick{Now: w.now()})
}

// alive wraps fn so it runs only if the process is still the same incarnation, after the
// per-step crash draw.
func (p *workerProc) alive(fn func()) func() {
	gen := p.gen
	return func() {
		if !p.up || p.gen != gen {
			return
		}
		w := p.w
		if w.faultsOn && faults.Hit(w.rFaults, w.cfg.Faults.Process.WorkerCrash) {
			if w.rFaults.Intn(3) == 0 && !p.asked {
				// An operator's stop arrives just before this event, which still happens (also
				// while a fatal receive error winds the worker down: the stop is then a no-op).
				p.shutdown()
				if !p.up || p.gen != gen {
					return
				}
			} else {
				p.crash()
				return
			}
		}
		fn()
	}
}

// account adds the ending incarnation's counters to the run's statistics.
func (p *workerProc) account() {
	if p.e == nil {
		return
	}
	st := p.e.Status()
	m := &p.w.st.Messages
	m.Add("handled-ok", st.Succeeded)
	m.Add("released", st.Released)
	m.Add("permanent-acked", st.Permanent)
	m.Add("terminal-backoff", st.Terminal)
	m.Add("retired", st.Retired)
	m.Add("poison-seen", st.Poison)
	m.Add("poison-acked", st.PoisonAcked)
	m.Add("released-at-shutdown", st.ReleasedAtEnd)
	for reason, n := range st.Lease.Drops { // sums: the order does not matter
		p.w.st.Drops.Add(reason.String(), n)
	}
	p.w.st.Renewals.Add("retries", st.Lease.Retries)
	p.e = nil
}

func (p *workerProc) crash() {
	w := p.w
	st := p.e.Status()
	p.up = false
	w.st.Crashes.Add("worker", 1)
	// What the machine would have done next, as core renders it ("wake +t"; none when idle).
	next := ""
	if wake := strings.TrimSuffix(worker.Describe(worker.Ready{}, p.e.WakeAt(), Epoch), "\n"); wake != "" {
		next = ", next " + wake
	}
	w.trace(p.name, "CRASH (running "+strconv.Itoa(st.Running)+", waiting "+strconv.Itoa(st.Waiting)+
		", calls in flight "+strconv.Itoa(st.Lease.InFlightCalls)+next+")")
	// The leases die with it too: each lapses at the queue (as core renders a lease).
	for _, r := range p.open {
		if l, ok := p.e.Lease(r); ok {
			w.trace(p.name, "lease lost: "+lease.DescribeLease(l, Epoch))
		}
	}
	// The handlers die with the process: they ran until now.
	running := make([]string, 0, len(p.handlers))
	for r, h := range p.handlers {
		if h.running {
			running = append(running, r)
		}
	}
	sort.Strings(running)
	for _, r := range running {
		w.chk.CheckHiddenUntilEnd(r, w.queue.HiddenAt(w.now().Add(-time.Nanosecond), r))
	}
	w.chk.WorkerCrashed(p.id)
	w.dups.crashed(p.id)
	if w.fleet != nil {
		w.fleet.stopped(p)
	}
	p.account()
	p.scheduleRestart()
}

func (p *workerProc) scheduleRestart() {
	w := p.w
	delay := w.cfg.Faults.Process.Restart(w.rFaults)
	gen := p.gen
	w.loop.After(delay, func() {
		if p.gen == gen && !p.up {
			p.start()
		}
	})
}

// shutdown begins a graceful stop (docs/worker.md): no more receives, waiting deliveries released,
// running handlers renewed for Grace then cancelled. The process exits when the machine says
// it is done, and restarts after the restart delay.
func (p *workerProc) shutdown() {
	w := p.w
	p.stopping, p.asked = true, true
	w.st.Crashes.Add("worker-shutdown", 1)
	w.trace(p.name, "SHUTDOWN")
	p.step(worker.Shutdown{Now: w.now()})
}

func (p *workerProc) calm() {}

// step feeds ev to the Node and, unless a burst is open, performs its Ready.
func (p *workerProc) step(ev worker.Event) {
	w := p.w
	if p.e.Exited() {
		return // mutIgnoreFatal keeps a process up after its Run ended: nothing steps it
	}
	reply := false
	switch ev.(type) {
	case worker.ReceiveDone, worker.CallDone, worker.HandlerDone:
		reply = p.bursts
	}
	if !reply && p.pending {
		// A timer or a stop: a burst already open is read before it.
		p.flush()
		if !p.up || p.e.Exited() {
			return
		}
	}
	if err := p.e.Step(ev); err != nil {
		w.chk.Fail(InvMachine, "%s: worker node refused %T: %v", p.name, ev, err)
		return
	}
	if reply {
		// Replies and handler results of this instant join one burst, whose Ready is read
		// once at its end, so their dispositions share batch calls.
		if !p.pending {
			p.pending = true
			gen := p.gen
			w.loop.AtExact(w.loop.Now(), func() {
				if p.up && p.gen == gen && p.pending {
					p.flush()
				}
			})
		}
		return
	}
	p.ready()
}

// flush ends a burst: Ready is read once for all the events stepped in it.
func (p *workerProc) flush() {
	p.pending = false
	p.ready()
}

// ready performs the Node's Ready (in its order: Ready.Perform calls the executor methods
// below), advances it, and checks what follows: the exit, or the timer.
func (p *workerProc) ready() {
	w := p.w
	rd := p.e.Ready()
	p.traceReady(rd)
	rd.Perform(p)
	next := p.e.Advance()
	if !p.up {
		return
	}
	p.noticeEnded()
	if err := p.e.CheckInvariants(); err != nil {
		w.chk.Fail(InvMachine, "%s: worker: %v", p.name, err)
	} else {
		w.chk.Pass(InvMachine)
	}
	if next.Exit {
		p.exit(next.Err)
		return
	}
	p.arm(next.Wake)
}

// exit ends the process when its Run returned: after a stop, or with the fatal receive error
// the world delivered (InvFatalEndsRun).
func (p *workerProc) exit(err error) {
	w := p.w
	p.checkExit(err)
	if err != nil && w.mutation == mutIgnoreFatal {
		return // a deliberately broken driver: the process stays up after Run returned
	}
	// The machine's counters as core renders them (handlers-abandoned: those that ignore
	// their cancellation).
	w.trace(p.name, "stopped: "+strings.TrimSuffix(worker.DescribeStatus(p.e.Status()), "\n"))
	p.up = false
	w.chk.WorkerCrashed(p.id)
	if w.fleet != nil {
		w.fleet.stopped(p)
	}
	p.account()
	p.scheduleRestart()
}

// arm sets the process's timer for the Node's Wake (zero: none). An earlier timer still
// pending stays: its Tick finds nothing due and costs nothing.
func (p *workerProc) arm(wake time.Time) {
	w := p.w
	if wake.IsZero() {
		return
	}
	at := wake.Sub(Epoch)
	if w.mutation == mutLateTick {
		at += time.Second // a deliberately broken driver: its timer fires a second late
	}
	if p.wakeAt != 0 && at >= p.wakeAt && p.wakeAt >= w.loop.Now() {
		return
	}
	p.wakeAt = at
	w.loop.At(at, p.alive(func() {
		if p.wakeAt == at {
			p.wakeAt = 0
		}
		w.trace(p.name, "tick")
		p.step(worker.Tick{Now: w.now()})
	}))
}

// noticeEnded reports to the checker every lease that ended without a disposition call (a
// drop, or an abandoned poison message): nothing may name those receipts again.
func (p *workerProc) noticeEnded() {
	keep := p.open[:0]
	for _, r := range p.open {
		if p.e.Leased(r) {
			keep = append(keep, r)
			continue
		}
		p.w.chk.Dropped(r)
	}
	p.open = keep
}

func (p *workerProc) closeOpen(receipt string) {
	for i, r := range p.open {
		if r == receipt {
			p.open = append(p.open[:i], p.open[i+1:]...)
			return
		}
	}
}

// traceReady writes rd's effects as core renders them, one trace line each (handler starts
// are traced as "handle" lines, with their drawn duration and outcome, by StartHandler).
func (p *workerProc) traceReady(rd worker.Ready) {
	if rd.Empty() {
		return
	}
	// Line by line as strings.Split would give them, without its slice (every step).
	for s, more := strings.TrimSuffix(worker.Describe(rd, time.Time{}, Epoch), "\n"), true; more; {
		var line string
		line, s, more = strings.Cut(s, "\n")
		if !strings.HasPrefix(line, "start ") {
			p.w.trace(p.name, line)
		}
	}
}

// The worker.Executor methods: each performs one effect in the world.

// CancelHandler cancels a running handler: it returns promptly, or (a fault) only when its
// work is done; its result is ignored either way.
func (p *workerProc) CancelHandler(c worker.CancelHandler) {
	w := p.w
	if c.Held && w.fleet != nil {
		w.fleet.stopCancel(p, c.Receipt) // a stop keeps the lease: the fleet reports the result
		return
	}
	w.chk.Dropped(c.Receipt)
	p.closeOpen(c.Receipt)
	h := p.handlers[c.Receipt]
	if h == nil || !h.running || w.mutation == mutKeepDropped {
		return
	}
	if c.Reason != lease.DropGone {
		// The queue said nothing yet: it must still hide the message for the margin, less
		// what the scheduling families may have made this cancel late by. A timer late by
		// more than the whole margin cannot keep it (hidden-while-working still bounds the
		// overlap by that slack).
		if keep := lease.StopMarginFor(w.cfg.Visibility) - w.chk.hiddenSlack; keep > 0 {
			w.chk.StopMarginKept(c.Receipt, c.Reason.String(), w.queue.HiddenAt(w.now().Add(keep-time.Nanosecond), c.Receipt))
		}
	}
	h.running, h.cancelled = false, true
	w.chk.CheckHiddenUntilEnd(c.Receipt, w.queue.HiddenAt(w.now().Add(-time.Nanosecond), c.Receipt))
	w.chk.HandlerEnded(c.Receipt)
	back := drawBetween(w.rExec, 0, 50*time.Millisecond)
	if w.faultsOn && faults.Hit(w.rFaults, w.cfg.Faults.Timing.LongHandler) {
		back = max(back, h.end-w.loop.Now())
		w.fault("handler-ignores-cancel")
		w.trace(p.name, "handler "+c.Receipt+" ignores its cancellation until "+Offset(w.loop.Now()+back))
	}
	w.loop.After(back, p.alive(func() {
		delete(p.handlers, h.receipt)
		p.step(worker.HandlerDone{Receipt: h.receipt, Now: w.now(), Result: worker.Result{Outcome: worker.Success}})
	}))
}

// ChangeVisibility sends a renewal or release call (mutLateRenewal: renewals 50 ms late).
func (p *workerProc) ChangeVisibility(c lease.ChangeVisibility) {
	w := p.w
	if w.mutation == mutLateRenewal && c.Purpose == lease.Renewal {
		w.loop.After(50*time.Millisecond, p.alive(func() { p.sendChange(c) })) // a deliberately broken driver
		return
	}
	p.sendChange(c)
}

// sendChange tells the checker what c names as it leaves, and sends it.
func (p *workerProc) sendChange(c lease.ChangeVisibility) {
	w := p.w
	for _, e := range c.Entries {
		if c.Purpose == lease.Renewal {
			w.chk.RenewSent(e.Receipt, e.Timeout)
			w.st.Renewals.Add("sent", 1)
		} else {
			w.chk.DispositionSent(e.Receipt, "release")
			p.closeOpen(e.Receipt)
		}
	}
	p.changeCall(c)
}

// Delete sends a delete call (mutLateDelete: a millisecond late).
func (p *workerProc) Delete(d lease.Delete) {
	w := p.w
	send := func() {
		for _, r := range d.Receipts {
			w.dups.fate(r, fateSent)
			w.chk.DispositionSent(r, "delete")
			p.closeOpen(r)
		}
		p.deleteCall(d)
	}
	if w.mutation == mutLateDelete {
		w.loop.After(time.Millisecond, p.alive(send)) // a deliberately broken driver
		return
	}
	send()
}

// StartHandler starts a handler (mutLateHandler: a millisecond late).
func (p *workerProc) StartHandler(s worker.StartHandler) {
	w := p.w
	if w.mutation == mutLateHandler {
		m := s.Message
		w.loop.After(time.Millisecond, p.alive(func() { p.startHandler(m) })) // a deliberately broken driver
		return
	}
	p.startHandler(s.Message)
}

// Receive sends the Node's receive call across the network to the queue.
func (p *workerProc) Receive(r worker.Receive) {
	w := p.w
	lo, _ := w.cfg.Faults.Transport.Latency(w.rNet)
	call := faults.CallOK
	if w.faultsOn {
		call = w.cfg.Faults.Transport.Draw(w.rNet, false)
	}
	if p.revoked() {
		call = faults.CallFatal
	}
	lp := &longPoll{p: p, gen: p.gen, t0: r.Stamp.Sub(Epoch), r: r, call: call, breach: p.breach(true)}
	p.recv = lp
	w.loop.After(lo, func() {
		lp.until = w.loop.Now() + r.Wait
		lp.check()
	})
}

// longPoll is a receive call at the queue. It waits there until a message is visible or its
// wait ends: it re-checks when the next hidden message becomes visible, and when a producer
// sends (the world's wake list), never by polling.
type longPoll struct {
	p      *workerProc
	gen    int
	t0     time.Duration
	r      worker.Receive
	call   faults.Call
	breach int // faults.Breach*
	until  time.Duration
	seq    int  // re-checks scheduled before the latest are stale
	done   bool // answered at the queue (its reply may still be on its way back)
	// listed: in World.pollers (addPoller's membership test, which was a scan of the list).
	listed bool
}

// AbandonReceive cancels the receive call's context: a poll still waiting at the queue ends
// at once with the context's error (it took no message); a reply already on its way back
// wins the race and arrives as usual, and the machine releases what it carries.
func (p *workerProc) AbandonReceive(call worker.CallID) {
	w := p.w
	lp := p.recv
	if lp == nil || lp.r.Call != call {
		w.chk.Fail(InvMachine, "%s: abandon of receive %d, which is not in flight", p.name, call)
		return
	}
	if lp.done {
		return
	}
	lp.done = true
	w.loop.After(0, p.alive(func() {
		p.recv = nil
		w.trace(p.name, "receive call="+strconv.FormatUint(uint64(call), 10)+" cancelled")
		p.step(worker.ReceiveDone{Call: call, Now: w.now(), Err: context.Canceled})
	}))
}

func (lp *longPoll) schedule(at time.Duration) {
	lp.seq++
	seq := lp.seq
	lp.p.w.loop.At(at, func() {
		if !lp.done && lp.seq == seq {
			lp.check()
		}
	})
}

func (lp *longPoll) check() {
	p, w := lp.p, lp.p.w
	if lp.done {
		return // cancelled before it reached the queue
	}
	var msgs []core.Message
	var err error
	switch {
	case lp.breach == faults.BreachUnclassed:
		err = errUnclassed
	case lp.call == faults.CallOK || lp.call == faults.CallFailAfter:
		msgs = w.queue.Receive(w.now(), lp.r.Max, lp.r.Visibility)
		if lp.breach == faults.BreachExtra && len(msgs) > 0 {
			// The contract broken: more deliveries than asked for (each one leased at the queue).
			msgs = append(msgs, w.queue.Receive(w.now(), 1+w.rBreach.Intn(3), lp.r.Visibility)...)
		}
		if len(msgs) > 0 {
			w.checkQueue()
		}
		if len(msgs) == 0 && w.loop.Now() < lp.until {
			next := lp.until
			if at, ok := w.queue.NextVisibleAt(); ok {
				if d := at.Sub(Epoch); d < next {
					next = max(d, w.loop.Now()+time.Millisecond)
				}
			}
			w.trace("queue", "long poll of "+p.name+" waits until "+Offset(next))
			w.addPoller(lp)
			lp.schedule(next)
			return
		}
		if lp.call == faults.CallFailAfter {
			w.fault("receive-fail-after")
			err = transportErr(core.Retryable, "receive", "RequestTimeout")
		}
	default:
		err = callErr(w, lp.call, "receive")
	}
	lp.done = true
	li, _ := w.cfg.Faults.Transport.Latency(w.rNet)
	gen := lp.gen
	w.loop.After(li, func() {
		if !p.up || p.gen != gen {
			return // the process died: received messages lapse at the queue
		}
		p.alive(func() {
			p.recv = nil
			p.received(lp.t0, lp.r, msgs, err)
		})()
	})
}

// addPoller registers a waiting long poll to be woken by the next send.
func (w *World) addPoller(lp *longPoll) {
	if lp.listed {
		return
	}
	lp.listed = true
	w.pollers = append(w.pollers, lp)
}

// wakePollers re-checks every waiting long poll after a send, in the order they began waiting.
func (w *World) wakePollers() {
	polls := w.pollers
	w.pollers = nil
	for _, lp := range polls {
		lp.listed = false // before any re-check below may list it again
	}
	for _, lp := range polls {
		if !lp.done {
			lp.schedule(w.loop.Now())
		}
	}
}

func (p *workerProc) received(t0 time.Duration, r worker.Receive, msgs []core.Message, err error) {
	w := p.w
	if err != nil {
		w.trace(p.name, "receive failed: "+err.Error())
		p.step(worker.ReceiveDone{Call: r.Call, Now: w.now(), Err: p.fatalReceived(err)})
		return
	}
	if len(msgs) == 0 {
		w.trace(p.name, "received nothing")
	}
	if len(msgs) > 0 {
		var b strings.Builder
		b.WriteString("received")
		for _, m := range msgs {
			b.WriteString(" " + m.Receipt)
			w.chk.Received(p.id, m.ID, m.Receipt, t0)
			p.open = append(p.open, m.Receipt)
		}
		w.trace(p.name, b.String())
	}
	p.step(worker.ReceiveDone{Call: r.Call, Now: w.now(), Messages: msgs})
}

func (p *workerProc) startHandler(m core.Message) {
	w := p.w
	if w.fleet != nil {
		w.fleet.handle(p, m)
		return
	}
	h := &msgHandler{receipt: m.Receipt, running: true}
	p.handlers[m.Receipt] = h
	w.chk.HandlerStarted(m.Receipt)
	d := drawBetween(w.rExec, w.cfg.HandlerMin, w.cfg.HandlerMax)
	if w.faultsOn && faults.Hit(w.rFaults, w.cfg.Faults.Timing.LongHandler) {
		f := w.cfg.Faults.Timing.LongFactor
		d = time.Duration(float64(w.cfg.Visibility) * (1 + w.rFaults.Float64()*(f-1)))
		w.fault("long-handler")
	}
	if w.faultsOn && faults.Hit(w.rFaults, w.cfg.Faults.Timing.Marathon) {
		d = drawBetween(w.rFaults, ceiling, ceiling+time.Hour)
		w.fault("marathon-handler")
	}
	h.end = w.loop.Now() + d
	u := w.rExec.Float64()
	var res worker.Result
	switch {
	case u < w.cfg.PMsgRetry:
		res = worker.Result{Outcome: worker.Retryable, Err: errors.New("simulated retryable failure")}
		if w.rExec.Intn(4) == 0 {
			after := drawBetween(w.rExec, 0, 2*w.cfg.MsgCap)
			res.After = &after
		}
	case u < w.cfg.PMsgRetry+w.cfg.PMsgPerm:
		res = worker.Result{Outcome: worker.Permanent, Err: errors.New("simulated permanent failure")}
	case u < w.cfg.PMsgRetry+w.cfg.PMsgPerm+w.cfg.PMsgTerminal:
		res = worker.Result{Outcome: worker.Terminal, Err: errors.New("simulated terminal failure")}
	default:
		res = worker.Result{Outcome: worker.Success}
	}
	w.trace(p.name, "handle "+m.Receipt+" for "+d.String()+" -> "+res.Outcome.String())
	w.loop.After(d, p.alive(func() {
		if !h.running {
			return // cancelled: the cancel path reported its HandlerDone
		}
		h.running = false
		delete(p.handlers, h.receipt)
		w.chk.CheckHiddenUntilEnd(h.receipt, w.queue.HiddenAt(w.now().Add(-time.Nanosecond), h.receipt))
		w.chk.HandlerEnded(h.receipt)
		w.chk.DispositionBegan(h.receipt)
		if res.Outcome == worker.Success {
			w.dups.succeeded(&w.st.Duplicates, p.id, m.ID, h.receipt)
		}
		w.trace(p.name, "done "+h.receipt+" "+res.Outcome.String())
		p.step(worker.HandlerDone{Receipt: h.receipt, Now: w.now(), Result: res})
	}))
}

// network draws a call's fate and latencies.
func (p *workerProc) network(namesReceipt bool) (call faults.Call, out, back time.Duration) {
	w := p.w
	t := w.cfg.Faults.Transport
	out, s1 := t.Latency(w.rNet)
	back, s2 := t.Latency(w.rNet)
	call = faults.CallOK
	if w.faultsOn {
		call = t.Draw(w.rNet, namesReceipt)
		if s1 || s2 {
			w.fault("latency-spike")
		}
	} else {
		out, back = min(out, t.LatencyMax), min(back, t.LatencyMax)
	}
	if call != faults.CallOK {
		w.fault("transport-" + call.String())
	}
	return call, out, back
}

func (p *workerProc) changeCall(c lease.ChangeVisibility) {
	rs := make([]string, len(c.Entries))
	for i, e := range c.Entries {
		rs[i] = e.Receipt
	}
	p.batchCall(uint64(c.Call), c.Deadline, "change-visibility", rs,
		func() []error { return p.w.queue.ChangeVisibilityBatch(p.w.now(), c.Entries) },
		func(entries []error, whole error) {
			w := p.w
			at := w.now()
			if c.Purpose == lease.Renewal {
				seen := asCaller(rs, entries, whole) // a reply of the wrong length fails every entry
				for i, e := range c.Entries {
					err := seen
					if err == nil && i < len(entries) {
						err = entries[i]
					}
					w.chk.RenewReplied(e.Receipt, err)
				}
				w.trace(p.name, "renew reply call="+strconv.FormatUint(uint64(c.Call), 10)+" "+replyString(entries, whole))
			} else {
				w.trace(p.name, "release reply call="+strconv.FormatUint(uint64(c.Call), 10)+" "+replyString(entries, whole))
				p.dispositionReplied(rs, entries, whole)
			}
			p.step(worker.CallDone{Call: c.Call, Now: at, Entries: entries, Err: whole})
		})
}

func (p *workerProc) deleteCall(d lease.Delete) {
	p.batchCall(uint64(d.Call), d.Deadline, "delete", d.Receipts,
		func() []error { return p.w.queue.DeleteBatch(p.w.now(), d.Receipts) },
		func(entries []error, whole error) {
			p.dispositionReplied(d.Receipts, entries, whole)
			for i, r := range d.Receipts {
				if asCaller(d.Receipts, entries, whole) == nil && entries[i] == nil {
					p.w.dups.fate(r, fateDeleted)
				} else {
					p.w.dups.fate(r, fateFailed)
				}
			}
			p.w.trace(p.name, "delete reply call="+strconv.FormatUint(uint64(d.Call), 10)+" "+replyString(entries, whole))
			p.step(worker.CallDone{Call: d.Call, Now: p.w.now(), Entries: entries, Err: whole})
		})
}

// batchCall sends one batch call of n entries across the simulated network: perform runs at
// the queue when the request arrives (unless the drawn fate stops it first), and reply runs
// back at the process, if it is still the same incarnation, with what it was told.
//
// The call runs under a context ending at deadline: a request that has not reached the queue
// by then is never performed, and a reply not back by then is replaced by the context's
// error at the deadline. Abandoning it (AbandonCall) ends its context at once.
func (p *workerProc) batchCall(id uint64, deadline time.Time, op string, receipts []string, perform func() []error, reply func(entries []error, whole error)) {
	w := p.w
	n := len(receipts)
	stops := make([]time.Duration, n)
	for i, r := range receipts {
		l, _ := p.e.Lease(r)
		stops[i] = l.Deadline.Sub(Epoch) - lease.StopMarginFor(w.cfg.Visibility)
	}
	call, out, back := p.network(true)
	breach := p.breach(false)
	gen := p.gen
	dl := deadline.Sub(Epoch)
	st := &simCall{}
	if p.calls == nil {
		p.calls = map[uint64]*simCall{}
	}
	p.calls[id] = st
	st.end = func(err error) {
		if st.settled {
			return
		}
		st.settled = true
		if p.calls[id] == st {
			delete(p.calls, id)
		}
		if !p.up || p.gen != gen {
			return
		}
		p.alive(func() { reply(nil, &core.TransportError{Class: core.Retryable, Op: op, Err: err}) })()
	}
	w.loop.At(max(dl, w.loop.Now()), func() { st.end(context.DeadlineExceeded) })
	w.loop.After(out, func() {
		if st.settled {
			return // its context ended before the request reached the queue
		}
		var entries []error
		var whole error
		switch {
		case breach == faults.BreachUnclassed:
			whole = errUnclassed
		case call == faults.CallOK || call == faults.CallFailAfter:
			for i, r := range receipts {
				w.chk.CallAtQueue(r, stops[i])
			}
			entries = perform()
			w.checkQueue()
			if call == faults.CallFailAfter {
				entries, whole = nil, transportErr(core.Retryable, op, "RequestTimeout")
			} else if breach == faults.BreachCount {
				// The contract broken: one result too few or too many (taken effect all the same).
				entries = netfault.Miscount(entries, len(entries) > 1 && w.rBreach.Intn(2) == 0)
			}
		case call == faults.CallStale:
			entries = make([]error, n)
			for i := range entries {
				entries[i] = transportErr(core.Gone, op, queue.CodeReceiptHandleIsInvalid)
			}
		default:
			whole = callErr(w, call, op)
		}
		w.loop.After(back, func() {
			if st.settled {
				return
			}
			st.settled = true
			if p.calls[id] == st {
				delete(p.calls, id)
			}
			if !p.up || p.gen != gen {
				return
			}
			p.alive(func() { reply(entries, whole) })()
		})
	})
}

// breach draws the contract-breach family for one call (from its own stream, only while it is
// on) and counts what it drew.
func (p *workerProc) breach(receive bool) int {
	w := p.w
	t := w.cfg.Faults.Transport
	if !w.faultsOn || t.Breach == 0 {
		return faults.BreachNone
	}
	b := t.DrawBreach(w.rBreach, receive)
	if b != faults.BreachNone {
		w.fault("breach-" + [...]string{"", "extra-messages", "entry-count", "unclassified-error"}[b])
	}
	return b
}

// asCaller is a batch reply's whole-call error as the worker sees it: a reply with the wrong
// number of entries (a contract breach) fails every entry retryably.
func asCaller(receipts []string, entries []error, whole error) error {
	if whole == nil && len(entries) != len(receipts) {
		return transportErr(core.Retryable, "batch", "")
	}
	return whole
}

var errUnclassed = netfault.ErrUnclassed

// dispositionReplied tells the checker which disposition calls failed retryably (the
// worker may send them again).
func (p *workerProc) dispositionReplied(receipts []string, entries []error, whole error) {
	whole = asCaller(receipts, entries, whole)
	for i, r := range receipts {
		e := whole
		if e == nil && i < len(entries) {
			e = entries[i]
		}
		if e != nil && core.ClassOf(e) != core.Gone && core.ClassOf(e) != core.Fatal {
			p.w.chk.DispositionFailed(r)
		}
	}
}

// simCall is a lease call in flight: settled once its reply or its context's end went back.
type simCall struct {
	settled bool
	end     func(error)
}

// AbandonCall cancels the call's context, so it ends at once unless its reply already went
// back.
func (p *workerProc) AbandonCall(id lease.CallID) {
	if c := p.calls[uint64(id)]; c != nil {
		p.w.trace(p.name, "abandon call="+strconv.FormatUint(uint64(id), 10))
		p.w.loop.After(0, func() { c.end(context.Canceled) })
	}
}

func replyString(entries []error, whole error) string {
	if whole != nil {
		s := "error " + core.ClassOf(whole).String()
		if errors.Is(whole, context.DeadlineExceeded) || errors.Is(whole, context.Canceled) {
			s += " (its context ended)"
		}
		return s
	}
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		if e == nil {
			b.WriteString("ok")
		} else {
			b.WriteString(core.ClassOf(e).String())
			var te *core.TransportError
			if errors.As(e, &te) && te.Code != "" {
				b.WriteString(":" + te.Code)
			}
		}
	}
	return b.String()
}

// checkQueue runs the simulated queue's own invariants after every 8th call that changed it
// (they cost O(messages)).
func (w *World) checkQueue() {
	w.queueCalls++
	if w.queueCalls%8 != 0 {
		return
	}
	if err := w.queue.CheckInvariants(); err != nil {
		w.chk.Fail(InvMachine, "queue: %v", err)
	} else {
		w.chk.Pass(InvMachine)
	}
}

// transportErr and callErr are the simulated client's errors, shared with sluicetest.
var transportErr = netfault.Err

func callErr(_ *World, call faults.Call, op string) error { return netfault.Call(call, op) }

// dupTracker attributes each duplicate successful run of a message (a success after an
// earlier success) to what kept the earlier one from deleting it.
type dupTracker struct {
	last  map[string]string   // message id → receipt of its latest successful run
	fates map[string]*dupFate // receipt of a successful run → what became of its delete
}

type dupFate struct {
	worker int
	fate   string
}

// Fates of a successful run's delete, which name the cause of a later duplicate.
const (
	fateNone    = "lease-lost-before-delete" // dropped (waiting behind a renewal, or past the stop point) before a delete went out
	fateSent    = "delete-unanswered"        // a delete went out; no answer came back (abandoned, or its deadline passed)
	fateFailed  = "delete-failed"            // the delete failed for good, retries spent
	fateDeleted = "after-delete"             // the delete succeeded, yet the message came back
	fateCrash   = "worker-crash"             // the worker died before its delete was answered
)

func (d *dupTracker) succeeded(c *Counts, worker int, msg, receipt string) {
	if d.last == nil {
		d.last, d.fates = map[string]string{}, map[string]*dupFate{}
	}
	if prev, ok := d.last[msg]; ok {
		c.Add(d.fates[prev].fate, 1)
	}
	d.last[msg] = receipt
	d.fates[receipt] = &dupFate{worker: worker, fate: fateNone}
}

func (d *dupTracker) fate(receipt, fate string) {
	if f := d.fates[receipt]; f != nil && f.fate != fateDeleted && f.fate != fateCrash {
		f.fate = fate
	}
}

func (d *dupTracker) crashed(worker int) {
	for _, f := range d.fates { // each is marked alike: the order does not matter
		if f.worker == worker && f.fate != fateDeleted {
			f.fate = fateCrash
		}
	}
}
