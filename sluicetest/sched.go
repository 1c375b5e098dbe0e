package sluicetest

import (
	"container/heap"
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/runner"
)

// epoch is where every simulated clock starts.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// watchdog is how long (wall clock) the world waits for a handler to reach a Service call or
// return before it reports the handler as blocked outside the simulation.
var watchdog = 10 * time.Second

type evKind uint8

const (
	evPlan evKind = iota + 1
	evCallDone
	evOutcome
	evWake
	evCrash
	evArmCommitCrash
	evStop
	evRestart
	evHorizon
	evFunc // fn runs: the worker world's network legs
)

type event struct {
	at   time.Time
	seq  uint64
	kind evKind
	op   int
	call *pendingCall
	att  *attempt
	fn   func()
}

type evHeap []*event

func (h evHeap) Len() int { return len(h) }
func (h evHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h evHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *evHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *evHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

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
	// userCancelled: the job's cancellation reached the handler's context.
	userCancelled bool
	calls         int // service calls issued so far
	finished      atomic.Bool
	out           error
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

// sched is the non-generic half of the world: the clock, the event heap, the services and the
// handshake with handler goroutines (exactly one goroutine runs at a time).
type sched struct {
	now      time.Time
	seq      uint64
	events   evHeap
	yield    chan yieldMsg
	dog      *time.Timer
	seed     int64      // service draws hash it with the call's identity (see draws)
	services []*Service // in creation order
	svcFault bool
	inflight int
	callsN   int
	log      []string
	// onCallDone runs after every completed call (crash and stop points hook here).
	onCallDone func()
	// aborted: a handler broke the simulation (blocked, or raced it); the run stops.
	aborted    error
	abortedWhy string

	mu       sync.Mutex
	outlived string // set by a goroutine that called a Service after its handler returned
}

func newSched(seed int64) *sched {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &sched{now: epoch, yield: make(chan yieldMsg), dog: t, seed: seed}
}

func (w *sched) push(e *event) {
	w.seq++
	e.seq = w.seq
	heap.Push(&w.events, e)
}

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
			w.push(&event{at: w.now, kind: evOutcome, att: a})
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
	w.push(&event{at: w.now.Add(lat), kind: evCallDone, call: c})
	w.logf("call   %v %s.%s key=%q idem=%q", c.att.tok, s.name, c.req.Op, c.req.Key, c.req.IdempotencyKey)
}

// callDraws are the random numbers of one call, a function of the seed and the call's identity
// (service, op, key, attempt number, its index among the attempt's calls) alone: removing other
// jobs while shrinking leaves each remaining call's latency and fate as they were.
type callDraws struct{ x uint64 }

func (w *sched) draws(c *pendingCall) *callDraws {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d\x00%d", c.svc.name, c.req.Op, c.req.Key, c.att.tok.Attempt, c.att.calls)
	c.att.calls++
	return &callDraws{x: splitmix64(uint64(w.seed) ^ splitmix64(h.Sum64()))}
}

// next returns a number in [0, 1).
func (d *callDraws) next() float64 {
	d.x = splitmix64(d.x)
	return float64(d.x>>11) / (1 << 53)
}

// splitmix64 is Steele, Lea and Flood's finaliser: a bijective mix of all 64 bits.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

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
