package worker

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/sim/queue"
)

// A small deterministic world for the machine: the simulated SQS queue of sim/queue (stale
// receipts are refused, visibility applies when a call arrives), a network with latency and
// faults that fail a call before or after it takes effect, and handlers with drawn durations
// (some longer than the window) and outcomes. Two machines share the queue. (The full
// simulator, sim/, drives the same machine with its worker process; this world is small
// enough to run in the package's own tests.)

type wEvent struct {
	at  time.Time
	seq int
	fn  func()
}

type world struct {
	t        *testing.T
	rng      *rand.Rand
	now      time.Time
	events   []wEvent
	seq      int
	q        *queue.Queue
	machines []*Machine
	// handlers: receipt → machine index and message id, for the running, uncancelled ones
	running map[string]runningOn
	faults  bool
	down    time.Time // a partition: every call fails before taking effect until then
	steps   int
}

type runningOn struct {
	machine int
	msg     string
}

func (w *world) at(t time.Time, fn func()) {
	w.seq++
	w.events = append(w.events, wEvent{t, w.seq, fn})
}

func (w *world) latency() time.Duration {
	if w.faults && w.rng.Intn(50) == 0 {
		return time.Duration(500+w.rng.Intn(1500)) * time.Millisecond // a spike, under the 3 s margin
	}
	return time.Duration(5+w.rng.Intn(60)) * time.Millisecond
}

// call runs apply at the queue after one latency and delivers its reply after another;
// with faults it fails before taking effect, or takes effect and reports failure.
func (w *world) call(apply func(now time.Time) ([]error, error), reply func(at time.Time, entries []error, err error)) {
	fault := -1
	if w.faults {
		fault = w.rng.Intn(20) // 0: fail before, 1: fail after
		if w.now.Before(w.down) {
			fault = 0
		}
	}
	w.at(w.now.Add(w.latency()), func() {
		var entries []error
		var err error
		if fault == 0 {
			err = &core.TransportError{Class: core.Retryable, Op: "call", Err: errors.New("connection reset")}
		} else {
			entries, err = apply(w.now)
			if fault == 1 {
				entries, err = nil, &core.TransportError{Class: core.Retryable, Op: "call", Err: errors.New("timeout")}
			}
		}
		w.at(w.now.Add(w.latency()), func() { reply(w.now, entries, err) })
	})
}

func (w *world) step(i int, ev Event) {
	e := w.machines[i]
	if err := e.Step(ev); err != nil {
		w.t.Fatalf("machine %d step %T: %v", i, ev, err)
	}
	rd := e.Ready()
	for _, c := range rd.Cancel {
		delete(w.running, c.Receipt)
		w.at(w.now.Add(time.Duration(w.rng.Intn(200))*time.Millisecond), func() {
			w.step(i, HandlerDone{Receipt: c.Receipt, Now: w.now, Result: Result{Outcome: Success}})
		})
	}
	for _, s := range rd.Start {
		if j, ok := w.running[s.Receipt]; ok {
			w.t.Fatalf("%s started on machine %d while running on %d", s.Receipt, i, j.machine)
		}
		for r, j := range w.running {
			if j.msg == s.Message.ID && w.q.HiddenAt(w.now, r) {
				w.t.Fatalf("message %s started on machine %d while machine %d runs it (%s)", s.Message.ID, i, j.machine, r)
			}
		}
		w.running[s.Receipt] = runningOn{i, s.Message.ID}
		d := time.Duration(w.rng.Intn(3000)) * time.Millisecond
		if w.rng.Intn(8) == 0 {
			d = time.Duration(30+w.rng.Intn(90)) * time.Second // longer than the window
		}
		out := Success
		if w.faults && w.rng.Intn(5) == 0 {
			out = Retryable
		}
		w.at(w.now.Add(d), func() {
			if _, ok := w.running[s.Receipt]; !ok {
				return // cancelled; its HandlerDone was sent then
			}
			delete(w.running, s.Receipt)
			w.step(i, HandlerDone{Receipt: s.Receipt, Now: w.now, Result: Result{Outcome: out}})
		})
	}
	for _, c := range rd.Changes {
		w.call(func(now time.Time) ([]error, error) {
			return w.q.ChangeVisibilityBatch(now, c.Entries), nil
		}, func(at time.Time, entries []error, err error) {
			w.step(i, CallDone{Call: c.Call, Now: at, Entries: entries, Err: err})
		})
	}
	for _, d := range rd.Deletes {
		w.call(func(now time.Time) ([]error, error) {
			return w.q.DeleteBatch(now, d.Receipts), nil
		}, func(at time.Time, entries []error, err error) {
			w.step(i, CallDone{Call: d.Call, Now: at, Entries: entries, Err: err})
		})
	}
	if rc := rd.Receive; rc != nil {
		var got []core.Message
		w.call(func(now time.Time) ([]error, error) {
			got = w.q.Receive(now, rc.Max, rc.Visibility)
			return nil, nil
		}, func(at time.Time, _ []error, err error) {
			if err != nil {
				got = nil // lost in a reply that failed: the messages lapse and come back
			}
			if len(got) == 0 && err == nil {
				// An empty long poll returns after a while.
				w.at(at.Add(time.Second), func() { w.step(i, ReceiveDone{Call: rc.Call, Now: w.now}) })
				return
			}
			w.step(i, ReceiveDone{Call: rc.Call, Now: at, Messages: got, Err: err})
		})
	}
	if wake := e.WakeAt(); !wake.IsZero() {
		w.at(wake, func() { w.step(i, Tick{Now: w.now}) })
	}
	w.check()
}

// check holds the promises across the world after every step.
func (w *world) check() {
	w.steps++
	for r, on := range w.running {
		if !w.q.HiddenAt(w.now, r) {
			w.t.Fatalf("handler for %s on machine %d runs while the queue shows it visible or deleted", r, on.machine)
		}
	}
	for i, e := range w.machines {
		if err := e.checkInvariants(); err != nil {
			w.t.Fatalf("machine %d: %v", i, err)
		}
	}
}

func (w *world) run(until time.Time) {
	for len(w.events) > 0 {
		k := 0
		for j, ev := range w.events {
			if c := ev.at.Compare(w.events[k].at); c < 0 || (c == 0 && ev.seq < w.events[k].seq) {
				k = j
			}
		}
		ev := w.events[k]
		if ev.at.After(until) {
			return
		}
		w.events = slices.Delete(w.events, k, k+1)
		if ev.at.After(w.now) {
			w.now = ev.at
		}
		ev.fn()
	}
}

// TestWorkerWorldHidesWhileWorking runs two machines against one strict queue with latency,
// call faults (before and after taking effect) and handlers longer than the window: no
// handler ever runs while the queue shows its message visible, no message runs on two
// machines at once, and once faults stop every message is deleted.
func TestWorkerWorldHidesWhileWorking(t *testing.T) {
	drops, cancels := 0, 0
	defer func() {
		if !t.Failed() && (drops == 0 || cancels == 0) {
			t.Errorf("no seed dropped a lease (%d) or cancelled a handler (%d): the faults test nothing", drops, cancels)
		}
	}()
	for seed := int64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			w := &world{t: t, rng: rand.New(rand.NewSource(seed)), now: start,
				q: queue.New(queue.Config{Name: "q", Epoch: start}, rand.New(rand.NewSource(-seed))), running: map[string]runningOn{}, faults: true}
			for k := range 30 {
				w.q.Send(start, fmt.Appendf(nil, "m%02d", k))
			}
			for i := range 2 {
				e, err := New(Config{Concurrency: 3, Prefetch: 2, Budget: 20, Rand: rand.New(rand.NewSource(seed*10 + int64(i)))})
				if err != nil {
					t.Fatal(err)
				}
				w.machines = append(w.machines, e)
				w.at(start, func() { w.step(i, Tick{Now: w.now}) })
			}
			for range 4 {
				w.at(start.Add(time.Duration(w.rng.Intn(600))*time.Second), func() {
					w.down = w.now.Add(time.Duration(5+w.rng.Intn(40)) * time.Second)
				})
			}
			if seed%2 == 0 {
				// Machine 1 shuts down mid-run; machine 0 must finish the work.
				w.at(start.Add(time.Duration(60+w.rng.Intn(400))*time.Second), func() { w.step(1, Shutdown{Now: w.now}) })
			}
			w.run(start.Add(10 * time.Minute))
			w.faults = false
			w.run(start.Add(2 * time.Hour))
			if live, _, _ := w.q.Counts(); live > 0 {
				t.Fatalf("after %d steps, %d messages never deleted:\n%s", w.steps, live, w.q.Describe(w.now))
			}
			var st [2]Status
			for i, e := range w.machines {
				st[i] = e.Status()
			}
			t.Logf("steps=%d machine0: %s lease: renewals=%d retries=%d drops=%v; machine1: %s", w.steps, DescribeStatus(st[0]), st[0].Lease.RenewalsSent, st[0].Lease.Retries, st[0].Lease.Drops, DescribeStatus(st[1]))
			if st[0].Lease.RenewalsSent+st[1].Lease.RenewalsSent == 0 {
				t.Fatalf("no renewal was ever sent; the handlers were too short to test anything")
			}
			if seed%2 == 0 && !st[1].Done {
				t.Fatalf("machine 1 shut down but never reported done: %s", DescribeStatus(st[1]))
			}
			drops += st[0].Dropped + st[1].Dropped
			cancels += st[0].Cancelled + st[1].Cancelled
		})
	}
}
