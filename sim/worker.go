package sim

import (
	"errors"
	"math/rand"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/lease"
	"github.com/sluicehq/sluice/sim/faults"
	"github.com/sluicehq/sluice/sim/queue"
)

// The queue side of the world: one simulated SQS queue (with a dead-letter queue when the
// configuration redrives), producers, and worker processes. Each worker process holds a
// lease.Machine (the same code as production) and runs handlers whose durations and outcomes
// the executor stream draws. Calls cross a simulated network: latency each way, and faults
// that fail a call before it takes effect or after (the caller cannot tell which).

const (
	ceiling = queue.VisibilityCeiling
	// receiveBackoff is how long a worker waits after a failed receive.
	receiveBackoff = time.Second
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
	w.chk.LeaseConfigured(LeaseParams{Window: c.Visibility, Ceiling: ceiling})
	for i := 1; i <= c.Workers; i++ {
		p := &workerProc{w: w, id: i, name: "worker/" + strconv.Itoa(i)}
		w.workers = append(w.workers, p)
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
		id := w.queue.Send(w.now(), []byte(body))
		w.trace("producer", "send "+id+" "+body)
	}
	for _, p := range w.workers {
		p.wake()
	}
	w.loop.After(drawBetween(w.rWork, time.Millisecond, 2*w.cfg.MsgEvery), func() { m.tick(w) })
}

func (m *msgProducer) settled(w *World) bool {
	if w.queue == nil {
		return true
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

// workerProc is one worker process. gen counts incarnations: replies and timers of an earlier
// incarnation (before a crash) find gen changed and do nothing.
type workerProc struct {
	w    *World
	id   int
	name string
	up   bool
	gen  int
	m    *lease.Machine

	receiving bool
	polling   bool // a long poll waits at the queue
	handlers  map[string]*msgHandler
	wakeAt    time.Duration // the pending Tick, 0: none
}

type msgHandler struct {
	receipt string
	msg     core.Message
	running bool
}

func (p *workerProc) start() {
	p.up = true
	p.gen++
	p.m = lease.New(lease.Config{})
	p.handlers = make(map[string]*msgHandler)
	p.receiving, p.polling, p.wakeAt = false, false, 0
	p.w.trace(p.name, "start")
	p.poll()
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
			if w.rFaults.Intn(3) == 0 {
				p.shutdown()
				return
			}
			p.crash()
			return
		}
		fn()
	}
}

func (p *workerProc) crash() {
	w := p.w
	p.up = false
	w.st.Crashes.Add("worker", 1)
	w.trace(p.name, "CRASH (held "+strconv.Itoa(len(p.handlers))+", calls in flight "+strconv.Itoa(p.m.Status().InFlightCalls)+")")
	w.chk.WorkerCrashed(p.id)
	delay := w.cfg.Faults.Process.Restart(w.rFaults)
	gen := p.gen
	w.loop.After(delay, func() {
		if p.gen == gen && !p.up {
			p.start()
		}
	})
}

// shutdown is a graceful stop (SPEC 3.2): the lease machine drops every receipt without a
// disposition (their handlers are cancelled and nothing more is sent for them), then the
// process exits and restarts after the restart delay.
func (p *workerProc) shutdown() {
	w := p.w
	w.trace(p.name, "SHUTDOWN")
	p.step(lease.Shutdown{Now: w.now()})
	w.st.Crashes.Add("worker-shutdown", 1)
	p.up = false
	w.chk.WorkerCrashed(p.id)
	delay := w.cfg.Faults.Process.Restart(w.rFaults)
	gen := p.gen
	w.loop.After(delay, func() {
		if p.gen == gen && !p.up {
			p.start()
		}
	})
}

func (p *workerProc) calm() {}

// wake is a new message's nudge: a worker whose long poll waits receives at once.
func (p *workerProc) wake() {}

// heldMax bounds the receipts a worker holds before it stops receiving.
func (p *workerProc) heldMax() int { return 2 * p.w.cfg.ReceiveMax }

func (p *workerProc) poll() {
	w := p.w
	if !p.up || p.receiving || len(p.handlers) >= p.heldMax() {
		return
	}
	p.receiving = true
	t0 := w.loop.Now()
	max := min(w.cfg.ReceiveMax, p.heldMax()-len(p.handlers))
	lo, _ := w.cfg.Faults.Transport.Latency(w.rNet)
	call := faults.CallOK
	if w.faultsOn {
		call = w.cfg.Faults.Transport.Draw(w.rNet, false)
	}
	gen := p.gen
	w.loop.After(lo, func() { p.receiveAtQueue(gen, t0, max, call, w.loop.Now()+w.cfg.PollWait) })
}

// receiveAtQueue is the receive call arriving at the queue; a long poll waits there until a
// message is visible or the wait ends.
func (p *workerProc) receiveAtQueue(gen int, t0 time.Duration, max int, call faults.Call, until time.Duration) {
	w := p.w
	var msgs []core.Message
	var err error
	switch call {
	case faults.CallOK, faults.CallFailAfter:
		msgs = w.queue.Receive(w.now(), max, w.cfg.Visibility)
		if len(msgs) > 0 {
			w.checkQueue()
		}
		if len(msgs) == 0 && w.loop.Now() < until {
			next := until
			if at, ok := w.queue.NextVisibleAt(); ok {
				if d := at.Sub(Epoch); d < next {
					next = max2(d, w.loop.Now()+time.Millisecond)
				}
			}
			// Re-check at least every second so a new message is seen promptly.
			next = min(next, w.loop.Now()+time.Second)
			w.loop.At(next, func() { p.receiveAtQueue(gen, t0, max, call, until) })
			return
		}
		if call == faults.CallFailAfter {
			w.fault("receive-fail-after")
			err = transportErr(core.Retryable, "receive", "RequestTimeout")
		}
	default:
		err = callErr(w, call, "receive")
	}
	li, _ := w.cfg.Faults.Transport.Latency(w.rNet)
	w.loop.After(li, func() {
		if !p.up || p.gen != gen {
			return // the process died: received messages lapse at the queue
		}
		p.alive(func() { p.received(t0, msgs, err) })()
	})
}

func max2(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

func (p *workerProc) received(t0 time.Duration, msgs []core.Message, err error) {
	w := p.w
	p.receiving = false
	if err != nil {
		w.trace(p.name, "receive failed: "+err.Error())
		w.loop.After(receiveBackoff, p.alive(p.poll))
		return
	}
	if len(msgs) == 0 {
		idle := time.Duration(0)
		if w.cfg.PollWait == 0 {
			idle = time.Second // a short poll found nothing: do not spin
		}
		w.loop.After(idle, p.alive(p.poll))
		return
	}
	var b strings.Builder
	b.WriteString("received")
	for _, m := range msgs {
		b.WriteString(" " + m.Receipt)
		w.chk.Received(p.id, m.ID, m.Receipt, t0)
	}
	w.trace(p.name, b.String())
	p.step(lease.Received{Now: w.now(), Stamp: Epoch.Add(t0), Window: w.cfg.Visibility, Ceiling: ceiling, Messages: msgs})
	budget := max(2, w.cfg.Budget)
	for _, m := range msgs {
		if !p.m.Held(m.Receipt) {
			continue
		}
		switch {
		case m.ReceiveCount >= budget:
			w.trace(p.name, "retire "+m.Receipt+" count="+strconv.Itoa(m.ReceiveCount))
			w.st.Messages.Add("retired", 1)
			p.dispose(m.Receipt, lease.Disposition{Kind: lease.Ack})
		case strings.HasPrefix(string(m.Body), "poison"):
			w.trace(p.name, "poison "+m.Receipt)
			w.st.Messages.Add("poison-seen", 1)
			p.dispose(m.Receipt, lease.Disposition{Kind: lease.Abandon})
		default:
			p.startHandler(m)
		}
	}
	p.poll()
}

func (p *workerProc) startHandler(m core.Message) {
	w := p.w
	h := &msgHandler{receipt: m.Receipt, msg: m, running: true}
	p.handlers[m.Receipt] = h
	w.chk.HandlerStarted(m.Receipt)
	d := drawBetween(w.rExec, w.cfg.HandlerMin, w.cfg.HandlerMax)
	if w.faultsOn && faults.Hit(w.rFaults, w.cfg.Faults.Timing.LongHandler) {
		f := w.cfg.Faults.Timing.LongFactor
		d = time.Duration(float64(w.cfg.Visibility) * (1 + w.rFaults.Float64()*(f-1)))
		w.fault("long-handler")
	}
	u := w.rExec.Float64()
	var disp lease.Disposition
	var what string
	switch {
	case u < w.cfg.PMsgRetry:
		disp = lease.Disposition{Kind: lease.Release, After: drawBetween(w.rExec, 0, 10*time.Second)}
		what = "retry"
	case u < w.cfg.PMsgRetry+w.cfg.PMsgPerm:
		disp = lease.Disposition{Kind: lease.Ack}
		if w.cfg.MaxReceive > 0 {
			disp = lease.Disposition{Kind: lease.TerminalBackoff}
		}
		what = "permanent"
	default:
		disp = lease.Disposition{Kind: lease.Ack}
		what = "ok"
	}
	w.trace(p.name, "handle "+m.Receipt+" for "+d.String()+" -> "+what)
	w.loop.After(d, p.alive(func() { p.handlerDone(h, disp) }))
}

func (p *workerProc) handlerDone(h *msgHandler, disp lease.Disposition) {
	w := p.w
	if !h.running {
		return // cancelled when its receipt was dropped
	}
	h.running = false
	delete(p.handlers, h.receipt)
	w.chk.HandlerEnded(h.receipt)
	if !p.m.Held(h.receipt) {
		w.trace(p.name, "handler of "+h.receipt+" done after its receipt ended")
		return
	}
	p.dispose(h.receipt, disp)
	p.poll()
}

func (p *workerProc) dispose(receipt string, disp lease.Disposition) {
	w := p.w
	w.chk.DispositionBegan(receipt)
	w.trace(p.name, "dispose "+receipt+" "+disp.Kind.String())
	p.step(lease.Dispose{Now: w.now(), Receipt: receipt, Disposition: disp})
}

// step feeds ev to the machine and performs its effects.
func (p *workerProc) step(ev lease.Event) {
	w := p.w
	if err := p.m.Step(ev); err != nil {
		w.chk.Fail(InvMachine, "%s: lease machine refused %T: %v", p.name, ev, err)
		return
	}
	p.perform(p.m.Ready())
}

func (p *workerProc) perform(rd lease.Ready) {
	w := p.w
	for _, c := range rd.Cancel {
		w.chk.Dropped(c.Receipt)
		w.st.Drops.Add(c.Reason.String(), 1)
		w.trace(p.name, "drop "+c.Receipt+" "+c.Reason.String())
		if h := p.handlers[c.Receipt]; h != nil && w.mutation != mutKeepDropped {
			h.running = false
			delete(p.handlers, c.Receipt)
			w.chk.HandlerEnded(c.Receipt)
		}
	}
	for _, c := range rd.Changes {
		op := "renew"
		if c.Purpose == lease.Disposal {
			op = "release"
		}
		var b strings.Builder
		b.WriteString(op)
		for _, e := range c.Entries {
			if c.Purpose == lease.Renewal {
				w.chk.RenewSent(e.Receipt, e.Timeout)
				w.st.Renewals.Add("sent", 1)
			} else {
				w.chk.DispositionSent(e.Receipt, op)
			}
			b.WriteString(" " + e.Receipt + "=" + strconv.Itoa(int(e.Timeout/time.Second)) + "s")
		}
		w.trace(p.name, b.String())
		p.changeCall(c)
	}
	for _, d := range rd.Deletes {
		for _, r := range d.Receipts {
			w.chk.DispositionSent(r, "delete")
		}
		w.trace(p.name, "delete "+strings.Join(d.Receipts, " "))
		p.deleteCall(d)
	}
	for _, e := range rd.Ended {
		w.st.Messages.Add("disposed-"+e.Kind.String(), 1)
	}
	if !rd.WakeAt.IsZero() {
		at := rd.WakeAt.Sub(Epoch)
		if p.wakeAt == 0 || at < p.wakeAt || p.wakeAt < w.loop.Now() {
			p.wakeAt = at
			w.loop.At(at, p.alive(func() {
				if p.wakeAt == at {
					p.wakeAt = 0
				}
				p.step(lease.Tick{Now: w.now()})
			}))
		}
	}
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
	w := p.w
	call, out, back := p.network(true)
	gen := p.gen
	w.loop.After(out, func() {
		var entries []error
		var whole error
		switch call {
		case faults.CallOK, faults.CallFailAfter:
			entries = w.queue.ChangeVisibilityBatch(w.now(), c.Entries)
			w.checkQueue()
			if call == faults.CallFailAfter {
				entries, whole = nil, transportErr(core.Retryable, "change-visibility", "RequestTimeout")
			}
		case faults.CallStale:
			entries = make([]error, len(c.Entries))
			for i := range entries {
				entries[i] = transportErr(core.Gone, "change-visibility", queue.CodeReceiptHandleIsInvalid)
			}
		default:
			whole = callErr(w, call, "change-visibility")
		}
		w.loop.After(back, func() {
			if !p.up || p.gen != gen {
				return
			}
			p.alive(func() {
				at := w.now()
				if c.Purpose == lease.Renewal {
					for _, e := range c.Entries {
						w.chk.RenewReplied(e.Receipt)
					}
					w.trace(p.name, "renew reply call="+strconv.FormatUint(uint64(c.Call), 10)+" "+replyString(entries, whole))
					p.step(lease.RenewResult{Call: c.Call, At: at, Entries: entries, Err: whole})
				} else {
					w.trace(p.name, "release reply call="+strconv.FormatUint(uint64(c.Call), 10)+" "+replyString(entries, whole))
					p.step(lease.DisposeResult{Call: c.Call, At: at, Entries: entries, Err: whole})
				}
			})()
		})
	})
}

func (p *workerProc) deleteCall(d lease.Delete) {
	w := p.w
	call, out, back := p.network(true)
	gen := p.gen
	w.loop.After(out, func() {
		var entries []error
		var whole error
		switch call {
		case faults.CallOK, faults.CallFailAfter:
			entries = w.queue.DeleteBatch(w.now(), d.Receipts)
			w.checkQueue()
			if call == faults.CallFailAfter {
				entries, whole = nil, transportErr(core.Retryable, "delete", "RequestTimeout")
			}
		case faults.CallStale:
			entries = make([]error, len(d.Receipts))
			for i := range entries {
				entries[i] = transportErr(core.Gone, "delete", queue.CodeReceiptHandleIsInvalid)
			}
		default:
			whole = callErr(w, call, "delete")
		}
		w.loop.After(back, func() {
			if !p.up || p.gen != gen {
				return
			}
			p.alive(func() {
				w.trace(p.name, "delete reply call="+strconv.FormatUint(uint64(d.Call), 10)+" "+replyString(entries, whole))
				p.step(lease.DisposeResult{Call: d.Call, At: w.now(), Entries: entries, Err: whole})
			})()
		})
	})
}

func replyString(entries []error, whole error) string {
	if whole != nil {
		return "error " + core.ClassOf(whole).String()
	}
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		if e == nil {
			b.WriteString("ok")
		} else {
			var te *core.TransportError
			if errors.As(e, &te) && te.Code != "" {
				b.WriteString(te.Code)
			} else {
				b.WriteString(core.ClassOf(e).String())
			}
		}
	}
	return b.String()
}

// checkQueue runs the simulated queue's own invariants after a call changed it.
func (w *World) checkQueue() {
	if err := w.queue.CheckInvariants(); err != nil {
		w.chk.Fail(InvMachine, "queue: %v", err)
	} else {
		w.chk.Pass(InvMachine)
	}
}

func transportErr(class core.Class, op, code string) error {
	return &core.TransportError{Class: class, Op: op, Code: code, Err: errors.New("simulated " + code)}
}

func callErr(w *World, call faults.Call, op string) error {
	switch call {
	case faults.CallThrottle:
		return transportErr(core.Retryable, op, "ThrottlingException")
	case faults.CallServerError:
		return transportErr(core.Retryable, op, "InternalError")
	case faults.CallFatal:
		return transportErr(core.Fatal, op, "AccessDenied")
	default:
		return transportErr(core.Retryable, op, "RequestTimeout")
	}
}

var _ = rand.Int
