package worker

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// A small deterministic world for the engine: a strict in-memory queue (stale receipts are
// refused, visibility applies when a call arrives), a network with latency and faults that
// fail a call before or after it takes effect, and handlers with drawn durations (some longer
// than the window) and outcomes. Two engines share the queue.

type fqMsg struct {
	id        string
	visibleAt time.Time
	receipt   string
	count     int
	deleted   bool
}

type fakeQueue struct {
	msgs []*fqMsg
	n    int
}

func (q *fakeQueue) receive(now time.Time, max int, vis time.Duration) []core.Message {
	var out []core.Message
	for _, m := range q.msgs {
		if len(out) == max {
			break
		}
		if m.deleted || m.visibleAt.After(now) {
			continue
		}
		q.n++
		m.receipt = fmt.Sprintf("%s#%d", m.id, q.n)
		m.count++
		m.visibleAt = now.Add(vis)
		out = append(out, core.Message{ID: m.id, Receipt: m.receipt, ReceiveCount: m.count, Body: []byte(m.id)})
	}
	return out
}

func (q *fakeQueue) inFlight(now time.Time, receipt string) *fqMsg {
	for _, m := range q.msgs {
		if m.receipt == receipt && !m.deleted && m.visibleAt.After(now) {
			return m
		}
	}
	return nil
}

var errGone = &core.TransportError{Class: core.Gone, Op: "call", Code: "MessageNotInflight", Err: errors.New("not in flight")}

func (q *fakeQueue) change(now time.Time, receipt string, t time.Duration) error {
	m := q.inFlight(now, receipt)
	if m == nil {
		return errGone
	}
	m.visibleAt = now.Add(t)
	return nil
}

func (q *fakeQueue) delete(now time.Time, receipt string) error {
	m := q.inFlight(now, receipt)
	if m == nil {
		return errGone
	}
	m.deleted = true
	return nil
}

type wEvent struct {
	at  time.Time
	seq int
	fn  func()
}

type world struct {
	t       *testing.T
	rng     *rand.Rand
	now     time.Time
	events  []wEvent
	seq     int
	q       *fakeQueue
	engines []*Engine
	// handlers: receipt → engine index, for the running, uncancelled ones
	running map[string]int
	faults  bool
	down    time.Time // a partition: every call fails before taking effect until then
	steps   int
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
	e := w.engines[i]
	if err := e.Step(ev); err != nil {
		w.t.Fatalf("engine %d step %T: %v", i, ev, err)
	}
	rd := e.Ready()
	for _, c := range rd.Cancel {
		delete(w.running, c.Receipt)
		w.at(w.now.Add(time.Duration(w.rng.Intn(200))*time.Millisecond), func() {
			w.step(i, HandlerDone{Receipt: c.Receipt, At: w.now, Result: Result{Outcome: Success}})
		})
	}
	for _, s := range rd.Start {
		if j, ok := w.running[s.Receipt]; ok {
			w.t.Fatalf("%s started on engine %d while running on %d", s.Receipt, i, j)
		}
		for r, j := range w.running {
			if m := w.q.inFlight(w.now, r); m != nil && m.id == s.Message.ID {
				w.t.Fatalf("message %s started on engine %d while engine %d runs it (%s)", s.Message.ID, i, j, r)
			}
		}
		w.running[s.Receipt] = i
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
			w.step(i, HandlerDone{Receipt: s.Receipt, At: w.now, Result: Result{Outcome: out}})
		})
	}
	for _, c := range rd.Changes {
		w.call(func(now time.Time) ([]error, error) {
			errs := make([]error, len(c.Entries))
			for k, en := range c.Entries {
				errs[k] = w.q.change(now, en.Receipt, en.Timeout)
			}
			return errs, nil
		}, func(at time.Time, entries []error, err error) {
			w.step(i, CallDone{Call: c.Call, At: at, Entries: entries, Err: err})
		})
	}
	for _, d := range rd.Deletes {
		w.call(func(now time.Time) ([]error, error) {
			errs := make([]error, len(d.Receipts))
			for k, r := range d.Receipts {
				errs[k] = w.q.delete(now, r)
			}
			return errs, nil
		}, func(at time.Time, entries []error, err error) {
			w.step(i, CallDone{Call: d.Call, At: at, Entries: entries, Err: err})
		})
	}
	if rc := rd.Receive; rc != nil {
		var got []core.Message
		w.call(func(now time.Time) ([]error, error) {
			got = w.q.receive(now, rc.Max, rc.Visibility)
			return nil, nil
		}, func(at time.Time, _ []error, err error) {
			if err != nil {
				got = nil // lost in a reply that failed: the messages lapse and come back
			}
			if len(got) == 0 && err == nil {
				// An empty long poll returns after a while.
				w.at(at.Add(time.Second), func() { w.step(i, ReceiveDone{Call: rc.Call, At: w.now}) })
				return
			}
			w.step(i, ReceiveDone{Call: rc.Call, At: at, Messages: got, Err: err})
		})
	}
	if !rd.WakeAt.IsZero() {
		w.at(rd.WakeAt, func() { w.step(i, Tick{Now: w.now}) })
	}
	w.check()
}

// check holds the promises across the world after every step.
func (w *world) check() {
	w.steps++
	for r, i := range w.running {
		if w.q.inFlight(w.now, r) == nil {
			w.t.Fatalf("handler for %s on engine %d runs while the queue shows it visible or deleted", r, i)
		}
	}
	for i, e := range w.engines {
		if err := e.checkInvariants(); err != nil {
			w.t.Fatalf("engine %d: %v", i, err)
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

// TestWorkerWorldHidesWhileWorking runs two engines against one strict queue with latency,
// call faults (before and after taking effect) and handlers longer than the window: no
// handler ever runs while the queue shows its message visible, no message runs on two
// engines at once, and once faults stop every message is deleted.
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
			w := &world{t: t, rng: rand.New(rand.NewSource(seed)), now: start, q: &fakeQueue{}, running: map[string]int{}, faults: true}
			for k := range 30 {
				w.q.msgs = append(w.q.msgs, &fqMsg{id: fmt.Sprintf("m%02d", k)})
			}
			for i := range 2 {
				e, err := New(Config{Concurrency: 3, Prefetch: 2, Budget: 20, Rand: rand.New(rand.NewSource(seed*10 + int64(i)))})
				if err != nil {
					t.Fatal(err)
				}
				w.engines = append(w.engines, e)
				w.at(start, func() { w.step(i, Tick{Now: w.now}) })
			}
			for range 4 {
				w.at(start.Add(time.Duration(w.rng.Intn(600))*time.Second), func() {
					w.down = w.now.Add(time.Duration(5+w.rng.Intn(40)) * time.Second)
				})
			}
			if seed%2 == 0 {
				// Engine 1 shuts down mid-run; engine 0 must finish the work.
				w.at(start.Add(time.Duration(60+w.rng.Intn(400))*time.Second), func() { w.step(1, Shutdown{Now: w.now}) })
			}
			w.run(start.Add(10 * time.Minute))
			w.faults = false
			w.run(start.Add(2 * time.Hour))
			var left []string
			for _, m := range w.q.msgs {
				if !m.deleted {
					left = append(left, fmt.Sprintf("%s(count %d)", m.id, m.count))
				}
			}
			slices.SortFunc(left, cmp.Compare[string])
			if len(left) > 0 {
				t.Fatalf("after %d steps, %d messages never deleted: %v", w.steps, len(left), left)
			}
			var st [2]Stats
			for i, e := range w.engines {
				st[i] = e.Status()
			}
			t.Logf("steps=%d engine0: %s lease: renewals=%d retries=%d drops=%v; engine1: %s", w.steps, DescribeStats(st[0]), st[0].Lease.RenewalsSent, st[0].Lease.Retries, st[0].Lease.Drops, DescribeStats(st[1]))
			if st[0].Lease.RenewalsSent+st[1].Lease.RenewalsSent == 0 {
				t.Fatalf("no renewal was ever sent; the handlers were too short to test anything")
			}
			if seed%2 == 0 && !st[1].Done {
				t.Fatalf("engine 1 shut down but never reported done: %s", DescribeStats(st[1]))
			}
			drops += st[0].Dropped + st[1].Dropped
			cancels += st[0].Cancelled + st[1].Cancelled
		})
	}
}
