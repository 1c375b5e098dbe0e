package sluicetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim"
	"github.com/sluicehq/sluice/sim/faults"
)

// epoch is where every simulated clock starts: sim's.
var epoch = sim.Epoch

// watchdog is how long (wall clock) the world waits for a handler to reach a Service call or
// return before it reports the handler as blocked outside the simulation.
var watchdog = 10 * time.Second

// attempt is one running handler. Its fields are written by the world only while the handler
// is parked in a Service call (or before it starts), so the channels order every access.
type attempt struct {
	w      *sched
	tok    runner.Token
	gen    int
	cancel context.CancelCauseFunc
	resume chan reply
	parked *pendingCall
	// dead: the process died; the next Service call exits the goroutine.
	dead, exiting bool
	// userCancelled: the job's cancellation reached the handler's context; cancelled: any
	// cancellation did.
	userCancelled, cancelled bool
	calls                    int // service calls issued so far
	finished                 atomic.Bool
	out                      error
}

type reply struct {
	resp Response
	err  error
	die  bool
}

type yieldMsg struct {
	att  *attempt
	call *pendingCall
	done bool
	out  error
}

type attemptKey struct{}

// Now returns the simulated time inside a sluicetest attempt (or one built by RunJob), and
// time.Now() anywhere else: handlers that read the clock through it run unchanged in
// production and deterministically here.
func Now(ctx context.Context) time.Time {
	if a, ok := ctx.Value(attemptKey{}).(*attempt); ok && a.w != nil {
		return a.w.now
	}
	if n, ok := ctx.Value(fixedNowKey{}).(time.Time); ok {
		return n
	}
	return time.Now()
}

type fixedNowKey struct{}

// sched is the non-generic half of the world: sim's event loop, the seed's fault mix, the
// services and the handshake with handler goroutines (exactly one goroutine runs at a time).
type sched struct {
	loop     sim.Loop
	now      time.Time // sim.Epoch plus the loop's time, set before each event
	yield    chan yieldMsg
	dog      *time.Timer
	seed     int64
	k        Knobs
	fs       faults.Set // the seed's fault mix, drawn as simrun draws it
	rFault   *rand.Rand
	services []*Service // in creation order
	svcFault bool
	inflight int
	callsN   int // calls completed
	issuedN  int // calls issued
	log      []string
	// onCallDone runs after every completed call, onCallIssued after every issued one with
	// its latency (crash and stop points hook here);
	// onOutcome takes a returned handler's outcome, as an event of the instant it returned.
	onCallDone   func()
	onCallIssued func(lat time.Duration)
	onOutcome    func(*attempt)
	// aborted: a handler broke the simulation (blocked, or raced it); the run stops.
	aborted    error
	abortedWhy string
	violation  *Violation
	stormOver  bool
	final      bool
	steps      int

	mu       sync.Mutex
	outlived string // set by a goroutine that called a Service after its handler returned
}

// newSched is a world for seed with knobs k under the sim/faults preset profile.
func newSched(seed int64, k Knobs, profile string) *sched {
	t := time.NewTimer(time.Hour)
	t.Stop()
	fs, err := sim.FaultSet(seed, profile)
	if err != nil {
		panic(err) // the profiles are ours
	}
	w := &sched{now: epoch, yield: make(chan yieldMsg), dog: t, seed: seed, k: k, fs: fs,
		rFault: sim.Stream(seed, "faults"), svcFault: k.ServiceFaults}
	w.loop.OnTime = func(d time.Duration) { w.now = epoch.Add(d) }
	return w
}

// effectAfterCancel is the first call that took effect although its attempt's context had
// been cancelled, with its service's name.
func (w *sched) effectAfterCancel() (Call, string, bool) {
	for _, s := range w.services {
		for _, c := range s.calls {
			if c.Applied && c.AfterCancel {
				return c, s.name, true
			}
		}
	}
	return Call{}, "", false
}

// onceEach counts the effects per key of calls (reads and calls without effect left out) and
// returns the first call whose key took effect a second time.
func onceEach(calls []Call) (map[string]int, *Call) {
	n := map[string]int{}
	for i, c := range calls {
		if !c.Applied || c.Read {
			continue
		}
		n[c.Key]++
		if n[c.Key] > 1 {
			return n, &calls[i]
		}
	}
	return n, nil
}

// at schedules fn at t (a time already passed means now).
func (w *sched) at(t time.Time, fn func()) { w.loop.At(t.Sub(epoch), fn) }

// after schedules fn d from now.
func (w *sched) after(d time.Duration, fn func()) { w.loop.After(d, fn) }

// host is what the run loop needs of a world.
type host interface {
	open()
	up() bool         // the process is running
	settledAll() bool // nothing is left to happen once the storm is over
	drive()           // performs the machine's effects after an instant's events
	checkAll()
	release() // ends the handler goroutines a violation left parked
}

// loopText is what a world's run loop says.
type loopText struct{ unsettled, stepsField, end string }

// run steps the world until it settles, a violation, an abort, or the steps bound: each
// instant's events, then the host's effects, then the invariants.
func (w *sched) run(h host, stepsMax int, say loopText) {
	defer func() {
		if w.aborted == nil {
			h.release()
		}
	}()
	w.logf("start  %s", w.k)
	h.open()
	for w.violation == nil {
		if w.aborted != nil {
			w.fail(w.abortedWhy, w.aborted)
			return
		}
		if h.settledAll() {
			break
		}
		at, ok := w.loop.Next()
		if !ok {
			w.fail("progress", fmt.Errorf("nothing left to happen but %s", say.unsettled))
			return
		}
		if w.steps >= stepsMax {
			w.fail("progress", fmt.Errorf("%s after %d steps (raise %s?)", say.unsettled, w.steps, say.stepsField))
			return
		}
		w.steps++
		for w.aborted == nil && w.violation == nil && w.loop.Step(at) {
		}
		if h.up() && w.aborted == nil && w.violation == nil {
			h.drive()
		}
		if msg := w.takeOutlived(); msg != "" {
			w.abort("determinism", errors.New(msg+": a goroutine outlived its handler; wait for it before returning"))
		}
		h.checkAll()
	}
	if w.violation == nil {
		w.final = true
		w.logf("end    %s", say.end)
		h.checkAll()
	}
}

func (w *sched) fail(inv string, err error) {
	if w.violation == nil {
		w.logf("BROKEN %s: %v", inv, err)
		w.violation = &Violation{Seed: w.seed, Knobs: w.k, Invariant: inv, Err: err, At: w.now.Sub(epoch).Round(time.Millisecond)}
	}
}

// restartIn is the delay before a crashed or stopped process starts again.
func (w *sched) restartIn() time.Duration { return w.fs.Process.Restart(w.rFault) }

func (w *sched) logf(format string, args ...any) {
	d := w.now.Sub(epoch)
	msg := strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " / ")
	w.log = append(w.log, fmt.Sprintf("%10.3fs  %s", d.Seconds(), msg))
}

func (w *sched) noteOutlived(a *attempt, svc string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.outlived == "" {
		w.outlived = fmt.Sprintf("a goroutine started by attempt %v called %s after the handler returned", a.tok, svc)
	}
}

func (w *sched) takeOutlived() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.outlived
}

func (w *sched) abort(why string, err error) {
	if w.aborted == nil {
		w.aborted, w.abortedWhy = err, why
		w.logf("ABORT %s: %v", why, err)
	}
}

// recv waits for the running goroutine's next message, at most the watchdog.
func (w *sched) recv() (yieldMsg, bool) {
	w.dog.Reset(watchdog)
	select {
	case m := <-w.yield:
		w.dog.Stop()
		return m, true
	case <-w.dog.C:
		return yieldMsg{}, false
	}
}

// await runs a until it parks in a Service call or returns.
func (w *sched) await(a *attempt) {
	m, ok := w.recv()
	if !ok {
		w.abort("handler blocked", fmt.Errorf("attempt %v ran %v of wall time without calling a Service or returning: a real sleep, network call, lock or channel wait in the handler cannot be simulated; reach the outside world through sluicetest Services and read time with sluicetest.Now", a.tok, watchdog))
		return
	}
	if m.att != a {
		w.abort("determinism", fmt.Errorf("attempt %v called a Service while attempt %v was running: a goroutine started by a handler outlived it or runs beside it; make the handler's calls on its own goroutine", m.att.tok, a.tok))
		return
	}
	if m.done {
		a.finished.Store(true)
		a.out = m.out
		if !a.dead {
			w.after(0, func() { w.onOutcome(a) })
		}
		return
	}
	if a.dead {
		panic("sluicetest: a dead attempt yielded a call")
	}
	w.issue(m.call)
}

// issue draws the call's fate and latency and parks its caller until completion.
func (w *sched) issue(c *pendingCall) {
	s := c.svc
	f := s.faults
	c.issued = w.now
	d := w.draws(c)
	lat := f.LatencyMin
	if f.LatencyMax > f.LatencyMin {
		lat += time.Duration(d.next() * float64(f.LatencyMax-f.LatencyMin))
	}
	if w.svcFault {
		u := d.next()
		switch {
		case u < f.Fail:
			c.fate = fateFail
		case u < f.Fail+f.ApplyThenFail:
			c.fate = fateApplyThenFail
		case u < f.Fail+f.ApplyThenFail+f.Timeout:
			c.fate = fateTimeout
			c.applies = d.next() < 0.5
			lat = f.TimeoutAfter
		}
	}
	c.att.parked = c
	w.inflight++
	w.after(lat, func() { w.completeCall(c) })
	w.logf("call   %v %s.%s key=%q idem=%q", c.att.tok, s.name, c.req.Op, c.req.Key, c.req.IdempotencyKey)
	w.issuedN++
	if w.onCallIssued != nil {
		w.onCallIssued(lat)
	}
}

// callDraws are the random numbers of one call, a stream of the seed named by the call's
// identity (service, op, key, attempt number, its index among the attempt's calls) alone:
// removing other jobs while shrinking leaves each remaining call's latency and fate as they were.
type callDraws struct{ r *rand.Rand }

func (w *sched) draws(c *pendingCall) *callDraws {
	id := fmt.Sprintf("%s\x00%s\x00%s\x00%d\x00%d", c.svc.name, c.req.Op, c.req.Key, c.att.tok.Attempt, c.att.calls)
	c.att.calls++
	return &callDraws{r: sim.Stream(w.seed, id)}
}

// next returns a number in [0, 1).
func (d *callDraws) next() float64 { return d.r.Float64() }

var fateNames = [...]string{"ok", "failed", "applied then failed", "timed out"}

// completeCall applies a call on its service and resumes its caller, if still there.
func (w *sched) completeCall(c *pendingCall) {
	w.inflight--
	resp, err := c.svc.complete(c, w.now)
	rec := c.svc.calls[len(c.svc.calls)-1]
	note := fateNames[c.fate]
	if rec.Applied {
		note += ", took effect"
	} else if rec.Replayed {
		note += ", replayed"
	}
	if c.abandoned {
		note += ", caller gone"
	}
	w.logf("done   %v %s.%s key=%q: %s", c.att.tok, c.svc.name, c.req.Op, c.req.Key, note)
	w.callsN++
	if !c.abandoned {
		c.att.parked = nil
		c.att.resume <- reply{resp: resp, err: err}
		w.await(c.att)
	}
	if w.onCallDone != nil {
		w.onCallDone()
	}
}

// interrupt resumes a parked attempt at once with err (its context was cancelled); the call
// still completes on the service.
func (w *sched) interrupt(a *attempt, err error) {
	c := a.parked
	if c == nil {
		return
	}
	c.abandoned = true
	a.parked = nil
	a.resume <- reply{err: err}
	w.await(a)
}

// kill ends a's goroutine (the process died); its in-flight call still completes.
func (w *sched) kill(a *attempt) {
	a.dead = true
	if a.finished.Load() {
		return
	}
	c := a.parked
	if c == nil {
		return
	}
	c.abandoned = true
	a.parked = nil
	a.resume <- reply{die: true}
	w.await(a)
}
