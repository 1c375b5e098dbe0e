package sluicetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/lease"
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/core/worker"
	"github.com/sluicehq/sluice/internal/netfault"
	"github.com/sluicehq/sluice/internal/workerkit"
	"github.com/sluicehq/sluice/sim"
	"github.com/sluicehq/sluice/sim/faults"
	"github.com/sluicehq/sluice/sim/queue"
)

// The simulated worker: an executor of core/worker's Node (the host production's Worker runs,
// with its lease machine) against sim/queue over a faulty network, with the user's
// WorkerHandler called through NewWorker's own code (internal/workerkit).

// pollStep bounds how long a simulated long poll waits before looking at the queue again (a
// message sent during the poll is delivered within it).
const pollStep = 500 * time.Millisecond

// WorkerScenario is a sweep over a queue worker's handler: the user's WorkerHandler and
// WorkerConfig (Window, Wait, Concurrency, Budget, Policy, Grace...), a workload of sends to
// the queue, and invariants. The knobs' DiskFaults means network faults here.
type WorkerScenario struct {
	Config     sluice.WorkerConfig
	Setup      func(env *Env) sluice.WorkerHandler
	Workload   func(r *rand.Rand, p *Sends)
	Invariants []WorkerInvariant
	// MessagesMax bounds the sends a seed's knobs allow (default 8); Horizon and StepsMax as
	// in Scenario.
	MessagesMax int
	Horizon     time.Duration
	StepsMax    int
}

// Sends collects a worker workload's messages.
type Sends struct {
	sends []sendOp
	max   int
}

type sendOp struct {
	at   time.Duration
	body []byte
}

// Send plans a message sent to the queue at at (dropped beyond the knobs' count).
func (p *Sends) Send(at time.Duration, body []byte) {
	if len(p.sends) < p.max {
		p.sends = append(p.sends, sendOp{at: at, body: append([]byte(nil), body...)})
	}
}

// WorkerInvariant is a named property of a worker run.
type WorkerInvariant struct {
	Name  string
	Check func(v WorkerView) error
}

// MessageView is a queue message as the invariants see it.
type MessageView struct {
	ID           string
	Body         []byte
	State        string // "visible", "in-flight", "deleted", "dead-lettered"
	ReceiveCount int
	// Acked: a handler returned Ack for one of its deliveries.
	Acked bool
}

// WorkerView is what a worker invariant reads.
type WorkerView struct{ w *wworld }

// Now is the simulated time.
func (v WorkerView) Now() time.Time { return v.w.now }

// Final reports the check at the end of the run.
func (v WorkerView) Final() bool { return v.w.final }

// Messages returns every message sent, in send order.
func (v WorkerView) Messages() []MessageView {
	st := v.w.q.Status(v.w.now)
	out := make([]MessageView, 0, len(st.Messages))
	for _, m := range st.Messages {
		out = append(out, MessageView{ID: m.ID, Body: []byte(m.Body), State: m.State.String(),
			ReceiveCount: m.ReceiveCount, Acked: v.w.acked[m.ID]})
	}
	return out
}

// Calls returns every completed call to service, in order.
func (v WorkerView) Calls(service string) []Call {
	for _, s := range v.w.services {
		if s.name == service {
			return s.Calls()
		}
	}
	return nil
}

// ExactlyOnceMessages is the invariant "each key took effect on service at most once, and
// exactly once for every message a handler acked", key mapping a message body to the
// Request.Key its handler uses.
func ExactlyOnceMessages(service string, key func(body []byte) string) WorkerInvariant {
	return WorkerInvariant{Name: "exactly-once " + service + " effect per key", Check: func(v WorkerView) error {
		n, c := onceEach(v.Calls(service))
		if c != nil {
			return fmt.Errorf("key %q took effect %d times on %s (the last by message %d delivery %d at %s)",
				c.Key, n[c.Key], service, c.Job, c.Attempt, c.Done.Sub(epoch).Round(time.Millisecond))
		}
		if !v.Final() {
			return nil
		}
		for _, m := range v.Messages() {
			if m.Acked && n[key(m.Body)] != 1 {
				return fmt.Errorf("message %s was acked but key %q took effect %d times on %s", m.ID, key(m.Body), n[key(m.Body)], service)
			}
		}
		return nil
	}}
}

// CheckWorker is Check for a queue worker's handler.
func CheckWorker(t *testing.T, sc WorkerScenario, opts ...Option) {
	t.Helper()
	checkSweep(t, sc.sweep(), opts)
}

// FindWorker is Find for a queue worker's handler.
func FindWorker(sc WorkerScenario, opts ...Option) (*Failure, error) {
	return findSweep(sc.sweep(), opts)
}

func (sc *WorkerScenario) sweep() sweep {
	return sweep{
		knobs: func(seed int64) Knobs {
			n, h := sc.MessagesMax, sc.Horizon
			if n <= 0 {
				n = jobsMaxDefault
			}
			if h <= 0 {
				h = horizonDefault
			}
			return drawKnobs(seed, n, h)
		},
		run: func(seed int64, k Knobs) result { return runWorker(sc, seed, k) },
		validate: func() error {
			if sc.Setup == nil {
				return errors.New("sluicetest: WorkerScenario.Setup is nil: it must build the handler")
			}
			_, err := sc.kit(func(context.Context, sluice.Message) error { return nil }, nil)
			return err
		},
	}
}

// kit builds the worker's executor-independent parts with NewWorker's own code
// (internal/workerkit): the machine's configuration from WorkerConfig, the handler call with
// its middleware and panic capture, the causes of cancellation, the hooks. r replaces the
// jitter's seed; logs are discarded unless WorkerConfig.Logger is set.
func (sc *WorkerScenario) kit(h sluice.WorkerHandler, r *rand.Rand) (workerkit.Kit, error) {
	kit, err := sluice.NewWorkerKit(sc.Config, h)
	if err != nil {
		return kit, fmt.Errorf("sluicetest: invalid WorkerScenario.Config: %w", err)
	}
	kit.Config.Rand = r
	if sc.Config.Logger == nil {
		kit.Config.Logger, kit.Config.Lease.Logger = discard, discard
	}
	return kit, nil
}

var discard = slog.New(slog.DiscardHandler)

// wworld is one worker run.
type wworld struct {
	*sched
	sc      *WorkerScenario
	q       *queue.Queue
	net     faults.Transport
	rNet    *rand.Rand
	rJitter *rand.Rand
	rBreach *rand.Rand
	handler sluice.WorkerHandler
	kit     workerkit.Kit

	eng        *worker.Node // nil while the process is down
	gen        int
	stopping   bool
	recv       *recvCall // the receive call of this process in flight, nil when none
	restarting bool
	running    map[string]*attempt // receipt -> handler
	receiptOf  map[*attempt]string
	results    map[*attempt]*worker.Result // what each handler returned (written before it yields)
	calls      map[lease.CallID]*leaseCall // this process's lease calls in flight
	acked      map[string]bool
	wakeAt     time.Time

	sends     []sendOp
	sendsLeft int
	crashAt   []int
}

func runWorker(sc *WorkerScenario, seed int64, k Knobs) result {
	qcfg := queue.Config{Name: "q"}
	if n := sc.Config.RedriveMax; n > 0 {
		// The queue has the redrive policy the configuration says it has.
		qcfg.DeadLetter, qcfg.MaxReceiveCount = queue.New(queue.Config{Name: "dlq"}, nil), n
	}
	w := &wworld{sched: newSched(seed, k, "network"), sc: sc,
		q:    queue.New(qcfg, nil),
		rNet: sim.Stream(seed, "network"), rJitter: sim.Stream(seed, "jitter"), rBreach: sim.Stream(seed, "breach"),
		running: map[string]*attempt{}, receiptOf: map[*attempt]string{}, results: map[*attempt]*worker.Result{},
		acked: map[string]bool{}}
	w.net = w.calm()
	if k.DiskFaults {
		// simrun's network profile: calls failing before or after their effect, throttling,
		// server errors, stale receipts, fatal errors, and latency spikes that lose leases.
		w.net = w.fs.Transport
	}
	w.handler = sc.Setup(&Env{w: w.sched})
	p := &Sends{max: k.Jobs}
	if sc.Workload != nil {
		sc.Workload(sim.Stream(seed, "workload"), p)
	}
	w.sends = p.sends
	w.sendsLeft = len(p.sends)
	for i, s := range p.sends {
		w.at(epoch.Add(s.at), func() {
			w.sendsLeft--
			w.logf("send   %s", w.q.Send(w.now, w.sends[i].body))
		})
	}
	callsGuess := 3 * k.Jobs
	rc, rs := sim.Stream(seed, "crashes"), sim.Stream(seed, "stops")
	for range k.Crashes {
		kind, at, n := rc.Intn(2), randDur(rc, k.Horizon), 1+rc.Intn(callsGuess)
		if kind == 0 {
			w.at(epoch.Add(at), w.crash)
		} else {
			w.crashAt = append(w.crashAt, n)
		}
	}
	for range k.Stops {
		w.at(epoch.Add(randDur(rs, k.Horizon)), w.stop)
	}
	slices.Sort(w.crashAt)
	w.onCallDone, w.onOutcome = w.callHook, w.outcome
	w.loop.AtExact(k.Horizon, w.horizon)
	stepsMax := sc.StepsMax
	if stepsMax <= 0 {
		stepsMax = stepsMaxDefault
	}
	w.run(w, stepsMax, loopText{unsettled: "messages are not disposed", stepsField: "WorkerScenario.StepsMax", end: "every message disposed"})
	return finished(w.violation, w.log)
}

func (w *wworld) callHook() {
	for len(w.crashAt) > 0 && w.crashAt[0] <= w.callsN {
		w.crashAt = w.crashAt[1:]
		if !w.stormOver {
			w.after(randDur(w.rFault, 20*time.Millisecond), w.crash)
		}
	}
}

// release ends the handler goroutines a violation left parked.
func (w *wworld) release() {
	for _, a := range w.running { // order-free: each ends on its own, nothing is logged
		w.kill(a)
	}
}

func (w *wworld) up() bool { return w.eng != nil }

// settledAll: the storm is over, every send made, every message deleted or dead-lettered,
// and no handler or service call is left.
func (w *wworld) settledAll() bool {
	if !w.stormOver || w.sendsLeft > 0 || w.eng == nil || len(w.running) > 0 || w.inflight > 0 {
		return false
	}
	st := w.q.Status(w.now)
	return st.Visible == 0 && st.InFlight == 0
}

func (w *wworld) checkAll() {
	if w.violation != nil {
		return
	}
	invs := append([]WorkerInvariant{{Name: "every message disposed", Check: func(v WorkerView) error {
		if !v.Final() {
			return nil
		}
		for _, m := range v.Messages() {
			if m.State != "deleted" && m.State != "dead-lettered" {
				return fmt.Errorf("message %s is %s at the end", m.ID, m.State)
			}
		}
		return nil
	}}, {Name: "no effect after cancel", Check: func(WorkerView) error {
		if c, svc, ok := w.effectAfterCancel(); ok {
			return fmt.Errorf("message %d delivery %d's call %s.%s key %q took effect after its handler's context was cancelled (lease lost or shutdown): does the handler use context.WithoutCancel?",
				c.Job, c.Attempt, svc, c.Op, c.Key)
		}
		return nil
	}}}, w.sc.Invariants...)
	for _, inv := range invs {
		if err := inv.Check(WorkerView{w}); err != nil {
			w.fail(inv.Name, err)
			return
		}
	}
}

// calm is the network without faults, at LAN latency: the presets' latency (up to 200 ms a
// leg) alone makes deletes miss a long poll's lease, which is a network fault here.
func (w *wworld) calm() faults.Transport {
	return faults.Transport{LatencyMin: time.Millisecond, LatencyMax: 20 * time.Millisecond}
}

// crash kills the worker process, if it runs and the storm is not over.
func (w *wworld) crash() {
	if w.eng != nil && !w.stormOver {
		w.logf("CRASH  the worker process dies")
		if w.recv != nil {
			w.recv.dead = true // nobody is left to release what it returns
		}
		w.exit()
	}
}

// stop begins a graceful shutdown: the Node's sequence.
func (w *wworld) stop() {
	if w.eng != nil && !w.stopping && !w.stormOver {
		w.logf("stop   graceful shutdown begins")
		w.stopping = true
		w.step(worker.Shutdown{Now: w.now})
	}
}

// horizon ends the storm: no more faults; a process down is restarted.
func (w *wworld) horizon() {
	w.stormOver = true
	w.svcFault = false
	w.net = w.calm()
	w.logf("calm   no more faults")
	if w.eng == nil && !w.restarting {
		w.scheduleRestart()
	}
}

func (w *wworld) open() {
	kit, err := w.sc.kit(w.handler, rand.New(rand.NewSource(w.rJitter.Int63())))
	if err != nil {
		w.fail("config", err)
		return
	}
	eng, err := worker.NewNode(kit.Config)
	if err != nil {
		w.fail("config", fmt.Errorf("sluicetest: worker config: %w", err))
		return
	}
	w.kit, w.eng = kit, eng
	w.gen++
	w.stopping, w.recv, w.wakeAt = false, nil, time.Time{}
	w.calls = map[lease.CallID]*leaseCall{}
	w.logf("open   worker process starts")
	w.step(worker.Tick{Now: w.now})
}

// exit ends the process: handlers die at their current call; calls in flight still reach the
// queue, their replies are dropped.
func (w *wworld) exit() {
	for _, rc := range sortedReceipts(w.running) {
		a := w.running[rc]
		a.cancel(sluice.ErrShutdown)
		w.kill(a)
	}
	w.running = map[string]*attempt{}
	w.receiptOf = map[*attempt]string{}
	w.results = map[*attempt]*worker.Result{}
	w.eng = nil
	w.gen++
	w.scheduleRestart()
}

func sortedReceipts(m map[string]*attempt) []string {
	out := make([]string, 0, len(m))
	for r := range m {
		out = append(out, r)
	}
	// Receipts are "q/<seq>/<count>": order numerically so the order never depends on the map.
	less := func(a, b string) bool {
		pa, pb := strings.Split(a, "/"), strings.Split(b, "/")
		for i := 1; i < 3 && i < len(pa) && i < len(pb); i++ {
			x, _ := strconv.Atoi(pa[i])
			y, _ := strconv.Atoi(pb[i])
			if x != y {
				return x < y
			}
		}
		return a < b
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && less(out[j], out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func (w *wworld) scheduleRestart() {
	w.restarting = true
	w.after(w.restartIn(), func() {
		w.restarting = false
		w.open()
	})
}

func (w *wworld) step(ev worker.Event) {
	if err := w.eng.Step(ev); err != nil {
		w.fail("sluice worker engine", err)
	}
}

// drive reads the Node's Ready, performs it (Ready.Perform calls the executor methods
// below), and does what Advance says: the process exits, or its one timer is re-armed.
func (w *wworld) drive() {
	rd := w.eng.Ready()
	w.kit.Observe(rd)
	rd.Perform(w)
	next := w.eng.Advance()
	if w.eng == nil || w.aborted != nil {
		return
	}
	if next.Exit {
		switch {
		case next.Err != nil:
			w.logf("stop   a fatal receive error ended Run (%v); the process exits", next.Err)
		case w.eng.Status().HandlersAbandoned > 0:
			w.logf("stop   handlers ignored their cancelled context; the process exits")
		default:
			w.logf("stop   worker done; the process exits")
		}
		w.exit()
		return
	}
	if wake := next.Wake; !wake.IsZero() && !wake.Equal(w.wakeAt) {
		w.wakeAt = wake
		gen := w.gen
		w.at(later(wake, w.now.Add(time.Millisecond)), func() {
			if w.eng != nil && gen == w.gen {
				w.step(worker.Tick{Now: w.now})
			}
		})
	}
}

func later(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

// The worker.Executor methods: each effect in the simulated world. A step they cause comes
// later, as an event.

// CancelHandler cancels the handler's context with the cause production gives it.
func (w *wworld) CancelHandler(c worker.CancelHandler) {
	a := w.running[c.Receipt]
	if a == nil || a.finished.Load() || w.aborted != nil {
		return
	}
	w.logf("cancel %v (%s)", a.tok, c.Reason)
	a.userCancelled = true
	a.cancel(w.kit.Cause(c.Reason))
	w.interrupt(a, context.Canceled)
}

func (w *wworld) ChangeVisibility(c lease.ChangeVisibility) {
	entries := c.Entries
	w.leaseCall(c.Call, c.Deadline, "change-visibility", describeChanges(entries), len(entries), func(now time.Time) []error {
		return w.q.ChangeVisibilityBatch(now, entries)
	})
}

func (w *wworld) Delete(d lease.Delete) {
	receipts := d.Receipts
	w.leaseCall(d.Call, d.Deadline, "delete", strings.Join(receipts, " "), len(receipts), func(now time.Time) []error {
		return w.q.DeleteBatch(now, receipts)
	})
}

// AbandonCall ends the call's context at once, unless its reply already came back.
func (w *wworld) AbandonCall(id lease.CallID) {
	if c := w.calls[id]; c != nil {
		w.logf("queue  abandon call %d", id)
		c.end(context.Canceled)
	}
}

// leaseCall is a lease call in flight, under a context that ends at its deadline.
type leaseCall struct {
	settled bool
	end     func(err error) // its context ended: the reply is that error
}

// leaseCall sends a batch call over the network under a context ending at deadline: it takes
// effect at the queue after one leg's latency (unless the network fails it first, or its
// context ended before it got there) and its reply arrives after another, to this process
// only; a reply not back by the deadline is the context's error, then.
func (w *wworld) leaseCall(id lease.CallID, deadline time.Time, op, what string, n int, apply func(now time.Time) []error) {
	gen := w.gen
	fate := w.net.Draw(w.rNet, true)
	out, _ := w.net.Latency(w.rNet)
	back, _ := w.net.Latency(w.rNet)
	breach := w.breach(false)
	c := &leaseCall{}
	w.calls[id] = c
	reply := func(errs []error, err error) {
		if c.settled {
			return
		}
		c.settled = true
		if w.eng == nil || w.gen != gen {
			return
		}
		delete(w.calls, id)
		w.step(worker.CallDone{Call: id, Now: w.now, Entries: errs, Err: err})
	}
	c.end = func(err error) {
		w.after(0, func() {
			reply(nil, &core.TransportError{Class: core.Retryable, Op: op, Err: err})
		})
	}
	w.at(later(deadline, w.now), func() {
		if !c.settled {
			c.end(context.DeadlineExceeded)
		}
	})
	w.after(out, func() {
		if c.settled {
			return // its context ended before it reached the queue
		}
		var (
			errs []error
			err  error
		)
		switch {
		case breach == faults.BreachUnclassed:
			w.logf("queue  %s %s: breach, no effect, an unclassified error", op, what)
			err = netfault.ErrUnclassed
		default:
			w.logf("queue  %s %s: %s", op, what, fate)
			errs, err = w.callFate(fate, op, n, apply)
			if breach == faults.BreachCount && fate == faults.CallOK {
				w.logf("queue  %s: breach, a reply with the wrong number of entries", op)
				errs = netfault.Miscount(errs, len(errs) > 1 && w.rBreach.Intn(2) == 0)
			}
		}
		w.after(back, func() { reply(errs, err) })
	})
}

// callFate applies a batch call of n entries at the queue as its drawn fate says, with the
// errors sim's worlds give each fate.
func (w *wworld) callFate(fate faults.Call, op string, n int, apply func(now time.Time) []error) ([]error, error) {
	switch fate {
	case faults.CallOK:
		return apply(w.now), nil
	case faults.CallFailAfter:
		apply(w.now)
		return nil, netfault.Lost(op)
	case faults.CallStale:
		errs := make([]error, n)
		for i := range errs {
			errs[i] = netfault.Stale(op)
		}
		return errs, nil
	}
	return nil, netfault.Call(fate, op)
}

func describeChanges(es []core.VisibilityChange) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = fmt.Sprintf("%s=%s", e.Receipt, e.Timeout)
	}
	return strings.Join(parts, " ")
}

// breach draws the contract-breach family for one call, from its own stream and only while
// the network model has it on (faults.Transport.DrawBreach).
func (w *wworld) breach(receive bool) int {
	if w.net.Breach == 0 {
		return faults.BreachNone
	}
	return w.net.DrawBreach(w.rBreach, receive)
}

// recvCall is a receive call in flight.
type recvCall struct {
	call      worker.CallID
	abandoned bool // the shutdown cancelled it (Ready.AbandonReceive) before the queue answered
	answered  bool // the queue answered; the reply may still be on its way back
	dead      bool // its process crashed
}

// Receive is a long poll: at the queue it looks for visible messages until Wait has passed.
func (w *wworld) Receive(r worker.Receive) {
	gen := w.gen
	rc := &recvCall{call: r.Call}
	w.recv = rc
	fate := w.net.Draw(w.rNet, false)
	out, _ := w.net.Latency(w.rNet)
	back, _ := w.net.Latency(w.rNet)
	breach := w.breach(true)
	deadline := w.now.Add(out + r.Wait)
	var poll func()
	poll = func() {
		if rc.abandoned {
			return // cancelled while it waited at the queue: it took nothing
		}
		var (
			msgs []core.Message
			err  error
		)
		switch {
		case breach == faults.BreachUnclassed:
			err = netfault.ErrUnclassed
		case fate == faults.CallOK, fate == faults.CallFailAfter:
			msgs = w.q.Receive(w.now, r.Max, r.Visibility)
			if breach == faults.BreachExtra && len(msgs) > 0 {
				// The contract broken: more deliveries than asked for, each leased at the queue.
				msgs = append(msgs, w.q.Receive(w.now, 1+w.rBreach.Intn(3), r.Visibility)...)
			}
			if len(msgs) == 0 && w.now.Before(deadline) {
				next := w.now.Add(pollStep)
				if v, ok := w.q.NextVisibleAt(); ok && v.After(w.now) && v.Before(next) {
					next = v
				}
				if deadline.Before(next) {
					next = deadline
				}
				w.at(next, poll)
				return
			}
			if fate == faults.CallFailAfter {
				// Received at the queue, reply lost: hidden until their windows lapse.
				msgs, err = nil, netfault.Lost("receive")
			}
		default:
			err = netfault.Call(fate, "receive")
		}
		rc.answered = true
		w.after(back, func() {
			if w.eng == nil || w.gen != gen {
				return // the process died: the messages lapse back
			}
			w.recv = nil
			if len(msgs) > 0 || err != nil {
				w.logf("recv   %d messages, err %v", len(msgs), err)
			}
			w.kit.Received(msgs)
			w.step(worker.ReceiveDone{Call: r.Call, Now: w.now, Messages: msgs, Err: err})
		})
	}
	w.after(out, poll)
}

// AbandonReceive cancels the call's context: a poll still waiting at the queue ends at once
// with the context's error (it took nothing); a reply already on its way back arrives as
// usual, and the machine releases what it carries.
func (w *wworld) AbandonReceive(call worker.CallID) {
	rc := w.recv
	if rc == nil || rc.call != call {
		w.fail("sluice worker engine", fmt.Errorf("abandon of receive %d, which is not in flight", call))
		return
	}
	w.logf("recv   abandon call %d", call)
	if rc.answered {
		return
	}
	rc.abandoned = true
	gen := w.gen
	w.after(0, func() {
		if w.eng == nil || w.gen != gen {
			return
		}
		w.recv = nil
		w.step(worker.ReceiveDone{Call: call, Now: w.now, Err: context.Canceled})
	})
}

// StartHandler runs the handler for s on its own goroutine until it parks or returns.
func (w *wworld) StartHandler(s worker.StartHandler) {
	if w.aborted != nil {
		return
	}
	seq, _ := strconv.ParseUint(s.Message.ID[strings.LastIndexByte(s.Message.ID, '-')+1:], 10, 64)
	a := &attempt{w: w.sched, tok: runner.Token{ID: seq, Attempt: s.Message.ReceiveCount}, gen: w.gen, resume: make(chan reply)}
	ctx, cancel := context.WithCancelCause(context.WithValue(context.Background(), attemptKey{}, a))
	a.cancel = cancel
	w.running[s.Receipt] = a
	w.receiptOf[a] = s.Receipt
	res := new(worker.Result)
	w.results[a] = res
	w.logf("start  %s delivery %d", s.Message.ID, s.Message.ReceiveCount)
	handle, msg := w.kit.Handle, s.Message
	go func() {
		// The result is written before the yield that hands it over.
		defer func() { w.yield <- yieldMsg{att: a, done: true} }()
		*res = handle(ctx, msg)
	}()
	w.await(a)
}

func (w *wworld) outcome(a *attempt) {
	rc, ok := w.receiptOf[a]
	if a.dead || a.gen != w.gen || !ok || w.eng == nil {
		return
	}
	res := *w.results[a]
	delete(w.running, rc)
	delete(w.receiptOf, a)
	delete(w.results, a)
	a.cancel(nil)
	w.logf("end    message %d delivery %d: %s", a.tok.ID, a.tok.Attempt, res.Outcome)
	if res.Outcome == worker.Success && !a.userCancelled {
		w.acked[fmt.Sprintf("q-%d", a.tok.ID)] = true
	}
	w.step(worker.HandlerDone{Receipt: rc, Now: w.now, Result: res})
}
