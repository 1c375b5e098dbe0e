package sluice

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/sim/disk"
	"github.com/sluicehq/sluice/sim/queue"
)

// eventLog collects hook and middleware events as lines, in the order they happened.
type eventLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *eventLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *eventLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// recording is middleware that logs each call and its verdict under name.
func recording(l *eventLog, name string) Middleware {
	return func(next CallHandler) CallHandler {
		return func(ctx context.Context, c Call) error {
			l.add("%s> %s %s#%d", name, c.Target, c.ID, c.Attempt)
			err := next(ctx, c)
			l.add("%s< %s %s#%d %v", name, c.Target, c.ID, c.Attempt, OutcomeName(err))
			return err
		}
	}
}

// TestHooksReportEachDurableTransitionOnce runs three jobs on one unit over sim/disk: job 1
// (target good) works 2 s and succeeds; job 2 (target bad) fails, which opens bad's breaker
// (threshold 1); job 3 (target bad) is then deferred by it. The hooks and the middleware must
// see exactly that, in that order, with the durations of the bubble's clock; the commits
// must account for every record written.
func TestHooksReportEachDurableTransitionOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log eventLog
		var records int
		t0 := time.Now()
		cfg := Config{Capacity: 1,
			Policy:           Policy{Attempts: 3, Base: 10 * time.Second, Cap: 10 * time.Second},
			Circuit:          Circuit{Threshold: 1, Cooldown: time.Minute},
			Middleware:       []Middleware{recording(&log, "outer"), recording(&log, "inner")},
			OnAttemptStarted: func(e AttemptStarted) { log.add("started %d#%d %s", e.ID, e.Attempt, e.Target) },
			OnAttemptEnded: func(e AttemptEnded) {
				log.add("ended %d#%d %s %s %v next=%v err=%q", e.ID, e.Attempt, e.Target, e.Outcome(), e.Duration, e.Next, e.Err)
			},
			OnDeferred:  func(e Deferred) { log.add("deferred %d %s for %v", e.ID, e.Target, e.Until.Sub(t0).Round(time.Second)) },
			OnSettled:   func(s Settled) { log.add("settled %d %v", s.ID, s.State) },
			OnCommitted: func(c Committed) { records += c.Records }, // the owner goroutine only
		}
		r := openOn(t, disk.New(1), cfg, func(ctx context.Context, j Job[string]) error {
			if j.Target == "bad" {
				return errors.New("503")
			}
			time.Sleep(2 * time.Second)
			return nil
		})
		ctx := context.Background()
		for _, target := range []string{"good", "bad", "bad"} {
			if _, err := r.Enqueue(ctx, time.Time{}, target, "x"); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.DrainDue(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"started 1#1 good",
			"outer> good 1#1", "inner> good 1#1", "inner< good 1#1 succeeded", "outer< good 1#1 succeeded",
			"ended 1#1 good succeeded 2s next=succeeded err=\"\"",
			"settled 1 succeeded",
			"started 2#1 bad",
			"outer> bad 2#1", "inner> bad 2#1", "inner< bad 2#1 retry", "outer< bad 2#1 retry",
			"ended 2#1 bad retry 0s next=waiting err=\"503\"",
			"deferred 3 bad for 1m2s",
		}
		if diff := cmp.Diff(want, log.get()); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		// 3 enqueued, 2 started, 2 finished, 1 deferred.
		if st := readStats(t, r); int64(records) != st.Records || records != 8 {
			t.Errorf("commits reported %d records, Stats %d, want 8", records, st.Records)
		}
	})
}

// TestMiddlewareErrorReplacesTheHandlers: the error a middleware returns is what the runner
// records, and a panicking middleware is recorded as a panic.
func TestMiddlewareErrorReplacesTheHandlers(t *testing.T) {
	ctx := context.Background()
	strict := func(next CallHandler) CallHandler {
		return func(ctx context.Context, c Call) error {
			if err := next(ctx, c); OutcomeName(err) == "retry" {
				return Permanent(fmt.Errorf("no retries here: %w", err))
			} else {
				return err
			}
		}
	}
	r := openOn(t, disk.New(1), Config{Capacity: 1, Middleware: []Middleware{strict}}, func(context.Context, Job[string]) error {
		return errors.New("503")
	})
	id, _ := r.Enqueue(ctx, time.Time{}, "t", "x")
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if j, _ := r.Get(context.Background(), id); j.State != StateDead || j.Reason != ReasonPermanent || j.LastErr != "no retries here: 503" {
		t.Errorf("job %+v, want dead (permanent) after one attempt", j)
	}
	r.Close()

	boom := func(next CallHandler) CallHandler {
		return func(ctx context.Context, c Call) error { panic("middleware bug") }
	}
	r = openOn(t, disk.New(1), Config{Capacity: 1, Middleware: []Middleware{boom}}, succeedString)
	defer r.Close()
	id, _ = r.Enqueue(ctx, time.Time{}, "t", "x")
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if j, _ := r.Get(context.Background(), id); j.State != StateDead || j.Reason != ReasonPanic {
		t.Errorf("job %+v, want dead (panic)", j)
	}
}

// TestWorkerHooksReportReceiveRenewDropDispose: over the in-memory queue, a slow message is
// renewed and acked, a flaky one is released once and then acked, and one whose renewals are
// answered gone is dropped and its handler cancelled. The hooks see each, and the middleware
// sees each delivery with its receive count.
func TestWorkerHooksReportReceiveRenewDropDispose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mq := newMemQueue()
		slow, flaky, lost := mq.send("slow"), mq.send("flaky"), mq.send("lost")
		mq.goneOn[lost] = true
		var mu sync.Mutex
		byReceipt := map[string]string{} // receipt → message id
		count := map[string]int{}
		note := func(what, receipt string) {
			mu.Lock()
			defer mu.Unlock()
			count[what+" "+byReceipt[receipt]]++
		}
		var calls eventLog
		cfg := WorkerConfig{Window: 5 * time.Second, Logger: quiet, Policy: Policy{Base: time.Second, Cap: time.Second},
			OnReceived: func(m MessageReceived) {
				mu.Lock()
				byReceipt[m.Receipt] = m.ID
				mu.Unlock()
				note("received", m.Receipt)
			},
			OnRenewed: func(e LeaseRenewed) { note("renewed", e.Receipt) },
			OnDropped: func(e LeaseDropped) { note("dropped:"+e.Reason, e.Receipt) },
			OnDisposed: func(e MessageDisposed) {
				if e.Deleted {
					note("deleted", e.Receipt)
				} else {
					note("released", e.Receipt)
				}
			},
			Middleware: []Middleware{func(next CallHandler) CallHandler {
				return func(ctx context.Context, c Call) error {
					err := next(ctx, c)
					calls.add("%s#%d %v", c.ID, c.Attempt, OutcomeName(err))
					return err
				}
			}},
		}
		w, cancel, wait := startWorker(t, mq, cfg, func(ctx context.Context, m Message) error {
			switch string(m.Body) {
			case "flaky":
				if m.ReceiveCount == 1 {
					return errors.New("503")
				}
			case "slow", "lost":
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				case <-time.After(12 * time.Second):
				}
			}
			return nil
		})
		time.Sleep(time.Minute)
		cancel()
		wait()
		settle()
		mu.Lock()
		defer mu.Unlock()
		if count["renewed "+slow] < 2 || count["renewed "+lost] < 1 {
			t.Errorf("renewals %v, want ≥ 2 for the slow message and ≥ 1 for the lost one", count)
		}
		delete(count, "renewed "+slow)
		delete(count, "renewed "+lost)
		lostAgain := 0
		if mq.status(lost).State == queue.Deleted {
			lostAgain = 1 // redelivered after its lease lapsed, and acked
		}
		want := map[string]int{
			"received " + slow: 1, "deleted " + slow: 1,
			"received " + flaky: 2, "released " + flaky: 1, "deleted " + flaky: 1,
			"received " + lost: 1 + lostAgain, "dropped:gone " + lost: 1, "deleted " + lost: lostAgain,
		}
		if lostAgain == 0 {
			delete(want, "deleted "+lost)
		}
		if diff := cmp.Diff(want, count); diff != "" {
			t.Errorf("hook counts (-want +got):\n%s", diff)
		}
		got := strings.Join(calls.get(), "; ")
		for _, c := range []string{slow + "#1 succeeded", flaky + "#1 retry", flaky + "#2 succeeded", lost + "#1 retry"} {
			if !strings.Contains(got, c) {
				t.Errorf("middleware calls %q, want %q among them", got, c)
			}
		}
		if st := w.Stats(); st.Dropped != 1 {
			t.Errorf("stats %+v, want one dropped lease", st)
		}
	})
}

// TestHooksReportAttemptsACrashInterrupted: an attempt running at a crash is recorded at the
// next Open as a failed, retryable "interrupted" attempt; the first commit after Open reports
// it (and, with Attempts 1, the job's death) to the hooks, as if it had just ended.
func TestHooksReportAttemptsACrashInterrupted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := disk.New(1)
		started, finish := make(chan struct{}), make(chan struct{})
		old := openOn(t, d, Config{Capacity: 1, Policy: Policy{Attempts: 1}}, func(ctx context.Context, j Job[string]) error {
			close(started)
			<-finish
			return nil
		})
		ctx := context.Background()
		id, _ := old.Enqueue(ctx, time.Time{}, "a", "x")
		go func() { _ = old.Drain(ctx) }()
		<-started
		time.Sleep(3 * time.Second)
		synctest.Wait()
		d.Crash()
		var log eventLog
		r := openOn(t, d, Config{Capacity: 1, Policy: Policy{Attempts: 1},
			OnAttemptEnded: func(e AttemptEnded) {
				log.add("ended %d#%d %s %v next=%v reason=%s err=%s", e.ID, e.Attempt, e.Outcome(), e.Duration, e.Next, e.Reason, e.Err)
			},
			OnSettled: func(s Settled) { log.add("settled %d %v", s.ID, s.State) },
		}, succeedString)
		if _, err := r.Get(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		want := []string{"ended 1#1 retry 3s next=dead reason=spent err=interrupted", "settled 1 dead"}
		if diff := cmp.Diff(want, log.get()); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		_ = r.Close()
		close(finish)
		_ = old.Close()
	})
}

// TestSnoozeMovesTheDueWithoutAnAttempt: with one attempt allowed and a breaker that opens on
// one failure, a handler that snoozes twice still runs a third time and succeeds: the
// snoozes spend no attempt and do not open the breaker, each waits its time, and the hooks
// and the middleware name them.
func TestSnoozeMovesTheDueWithoutAnAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log eventLog
		t0 := time.Now()
		calls := 0
		cfg := Config{Capacity: 1, Policy: Policy{Attempts: 1}, Circuit: Circuit{Threshold: 1, Cooldown: time.Hour},
			Middleware: []Middleware{recording(&log, "mw")},
			OnAttemptEnded: func(e AttemptEnded) {
				due := ""
				if e.Next == StateWaiting {
					due = fmt.Sprintf(" due=+%v", e.Due.Sub(t0).Round(time.Second))
				}
				log.add("ended %d#%d %s next=%v%s", e.ID, e.Attempt, e.Outcome(), e.Next, due)
			},
		}
		r := openOn(t, disk.New(1), cfg, func(ctx context.Context, j Job[string]) error {
			if calls++; calls < 3 {
				return Snooze(30 * time.Second)
			}
			log.add("ran at +%v", time.Since(t0).Round(time.Second))
			return nil
		})
		defer r.Close()
		ctx := context.Background()
		id, err := r.Enqueue(ctx, time.Time{}, "t", "x")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		j, _ := r.Get(context.Background(), id)
		var hist []string
		for _, a := range j.History {
			hist = append(hist, fmt.Sprintf("%d:%s", a.Number, a.Outcome))
		}
		if j.State != StateSucceeded || j.Attempts != 1 || strings.Join(hist, ",") != "1:snoozed,1:snoozed,1:succeeded" {
			t.Errorf("job %v attempts %d history %v, want succeeded after 1 attempt and 2 snoozes", j.State, j.Attempts, hist)
		}
		want := []string{
			"mw> t 1#1", "mw< t 1#1 snoozed", "ended 1#1 snoozed next=waiting due=+30s",
			"mw> t 1#1", "mw< t 1#1 snoozed", "ended 1#1 snoozed next=waiting due=+1m0s",
			"mw> t 1#1", "ran at +1m0s", "mw< t 1#1 succeeded", "ended 1#1 succeeded next=succeeded",
		}
		if diff := cmp.Diff(want, log.get()); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
}
