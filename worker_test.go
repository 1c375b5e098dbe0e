package sluice

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/lease"
	"github.com/sluicehq/sluice/core/worker"
	"github.com/sluicehq/sluice/sim/queue"
)

// memQueue is an in-memory Transport for driver tests: sim/queue's synchronous view behind a
// mutex, reading the (synctest-faked) time, with long polls emulated by sleeping. Renewals can
// be made to fail with a gone fault for chosen message ids.
type memQueue struct {
	mu     sync.Mutex
	q      *queue.Queue
	t      core.Transport
	goneOn map[string]bool   // message ids whose first delivery's renewals fail as gone
	ids    map[string]string // receipt → message id, first deliveries only
	seen   map[string]bool   // message ids delivered before
	calls  map[string]int    // per call kind: receive, change, delete
	// latency delays every change and delete call; flaky makes that many renewal calls in a
	// row fail as retryable (throttled) before one goes through, again and again.
	latency time.Duration
	flaky   int
	failed  int
	// Contract breakers: shortReplies renewal calls answer with no per-entry results and no
	// error; receiveMore extra messages come back on each receive beyond the max asked for.
	shortReplies int
	receiveMore  int
	// fatalReceive makes every receive fail as if the queue did not exist.
	fatalReceive bool
	// stallRenewals makes every renewal call hang until its context ends (an answer the
	// network lost); deadlines records each change or delete call's context deadline.
	stallRenewals bool
	deadlines     []time.Duration
}

func newMemQueue() *memQueue {
	m := &memQueue{q: queue.New(queue.Config{}, nil), goneOn: map[string]bool{}, ids: map[string]string{}, seen: map[string]bool{}, calls: map[string]int{}}
	m.t = m.q.Transport(time.Now)
	return m
}

func (m *memQueue) send(body string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.q.Send(time.Now(), []byte(body))
}

func (m *memQueue) status(id string) queue.MessageStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, _ := m.q.Message(time.Now(), id)
	return s
}

func (m *memQueue) count(kind string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[kind]
}

func (m *memQueue) Receive(ctx context.Context, max int, wait, visibility time.Duration) ([]core.Message, error) {
	end := time.Now().Add(wait)
	for {
		m.mu.Lock()
		m.calls["receive"]++
		if m.fatalReceive {
			m.mu.Unlock()
			return nil, &core.TransportError{Class: core.Fatal, Op: "receive", Code: "AWS.SimpleQueueService.NonExistentQueue", Err: errors.New("injected")}
		}
		msgs, err := m.t.Receive(ctx, min(max+m.receiveMore, core.BatchMax), wait, visibility)
		for _, msg := range msgs {
			if !m.seen[msg.ID] {
				m.seen[msg.ID] = true
				m.ids[msg.Receipt] = msg.ID
			}
		}
		m.mu.Unlock()
		if err != nil || len(msgs) > 0 || !time.Now().Before(end) {
			return msgs, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(100*time.Millisecond, time.Until(end))):
		}
	}
}

func (m *memQueue) ChangeVisibility(ctx context.Context, receipt string, timeout time.Duration) error {
	errs, err := m.ChangeVisibilityBatch(ctx, []core.VisibilityChange{{Receipt: receipt, Timeout: timeout}})
	if err != nil {
		return err
	}
	return errs[0]
}

func (m *memQueue) ChangeVisibilityBatch(ctx context.Context, entries []core.VisibilityChange) ([]error, error) {
	m.noteDeadline(ctx)
	if m.stallRenewals && entries[0].Timeout > 0 {
		<-ctx.Done() // a call without a deadline would hang here for ever
		return nil, &core.TransportError{Class: core.Retryable, Op: "change-visibility", Err: ctx.Err()}
	}
	time.Sleep(m.latency)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["change"]++
	if m.shortReplies > 0 && entries[0].Timeout > 0 {
		m.shortReplies--
		return nil, nil
	}
	if m.flaky > 0 && entries[0].Timeout > 0 {
		if m.failed < m.flaky {
			m.failed++
			return nil, &core.TransportError{Class: core.Retryable, Op: "change-visibility", Code: "ThrottlingException", Err: errors.New("injected")}
		}
		m.failed = 0
	}
	errs, err := m.t.ChangeVisibilityBatch(ctx, entries)
	if err != nil {
		return nil, err
	}
	for i, e := range entries {
		if m.goneOn[m.ids[e.Receipt]] && e.Timeout > 0 {
			errs[i] = &core.TransportError{Class: core.Gone, Op: "change-visibility", Code: "MessageNotInflight", Err: errors.New("injected")}
		}
	}
	return errs, nil
}

func (m *memQueue) noteDeadline(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := ctx.Deadline()
	if !ok {
		m.deadlines = append(m.deadlines, -1)
		return
	}
	m.deadlines = append(m.deadlines, time.Until(d))
}

func (m *memQueue) Delete(ctx context.Context, receipt string) error {
	errs, err := m.DeleteBatch(ctx, []string{receipt})
	if err != nil {
		return err
	}
	return errs[0]
}

func (m *memQueue) DeleteBatch(ctx context.Context, receipts []string) ([]error, error) {
	m.noteDeadline(ctx)
	time.Sleep(m.latency)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["delete"]++
	return m.t.DeleteBatch(ctx, receipts)
}

// settle lets the goroutines that may outlive Run (an abandoned long poll, at most Wait
// long; a handler that ignored its cancellation) end inside the synctest bubble.
func settle() {
	time.Sleep(time.Minute)
	synctest.Wait()
}

// startWorker makes a worker on mq (failing the test if NewWorker refuses cfg) and runs it in
// a goroutine. cancel ends Run's context; wait waits for Run and fails the test on its error.
func startWorker(t *testing.T, mq *memQueue, cfg WorkerConfig, h WorkerHandler) (*Worker, context.CancelFunc, func()) {
	t.Helper()
	w, err := NewWorker(mq, cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	return w, cancel, func() {
		t.Helper()
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
	}
}

// workWatching is a handler's body that works for n half-seconds, calling check after each;
// it retries if its context ends first and acks otherwise.
func workWatching(ctx context.Context, n int, check func()) error {
	for range n {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		check()
	}
	return nil
}

func TestWorkerSlowHandlerKeepsItsMessageHidden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mq := newMemQueue()
		id := mq.send("slow")
		const window = 5 * time.Second
		var checks, visible atomic.Int64
		w, cancel, wait := startWorker(t, mq, WorkerConfig{Window: window, Logger: quiet}, func(ctx context.Context, m Message) error {
			// Work for six windows, checking the queue every 500 ms: the message must stay
			// in flight under its first delivery the whole time.
			return workWatching(ctx, 60, func() {
				checks.Add(1)
				if s := mq.status(m.ID); s.State != queue.InFlight || s.ReceiveCount != 1 {
					visible.Add(1)
				}
			})
		})
		time.Sleep(40 * time.Second)
		if s := mq.status(id); s.State != queue.Deleted || s.ReceiveCount != 1 {
			t.Errorf("after the handler: %+v, want deleted after exactly one delivery", s)
		}
		if checks.Load() != 60 || visible.Load() != 0 {
			t.Errorf("%d of %d checks saw the message visible or redelivered, want 0 of 60", visible.Load(), checks.Load())
		}
		st := w.Stats()
		// 30 s of work under a 5 s window renewed a third of the way into what is left.
		if st.RenewalsSent < 6 || st.Succeeded != 1 || st.Dropped != 0 {
			t.Errorf("stats %+v, want ≥ 6 renewals, 1 success, no drop", st)
		}
		if hb := w.Heartbeat(); time.Since(hb) > 5*time.Second {
			t.Errorf("heartbeat %v behind", time.Since(hb))
		}
		cancel()
		wait()
		settle()
	})
}

func TestWorkerDroppedLeaseCancelsTheHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mq := newMemQueue()
		lost := mq.send("lost")
		mq.goneOn[lost] = true // its first delivery's renewals are answered gone
		kept := mq.send("kept")
		cancelledAfter := make(chan time.Duration, 1)
		w, cancel, wait := startWorker(t, mq, WorkerConfig{Window: 5 * time.Second, Logger: quiet}, func(ctx context.Context, m Message) error {
			t0 := time.Now()
			select {
			case <-ctx.Done():
				if !errors.Is(context.Cause(ctx), ErrMessageGone) {
					t.Errorf("cause %v, want ErrMessageGone", context.Cause(ctx))
				}
				cancelledAfter <- time.Since(t0)
				return nil // ignored: the lease is gone
			case <-time.After(20 * time.Second):
				return nil
			}
		})
		select {
		case d := <-cancelledAfter:
			// The first renewal goes out a third into the 5 s window and is answered gone.
			if d > 3*time.Second {
				t.Errorf("handler cancelled %v after it started, want at the first renewal (< 3s)", d)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the dropped handler's context was never cancelled")
		}
		synctest.Wait()
		if s := mq.status(lost); s.State == queue.Deleted {
			t.Fatalf("the dropped delivery was acked: a handler finishing after its drop must get no disposition")
		}
		// The message reappears when its last granted window lapses and is handled again.
		time.Sleep(40 * time.Second)
		if s := mq.status(lost); s.State != queue.Deleted || s.ReceiveCount != 2 {
			t.Errorf("dropped message later: %+v, want deleted on its second delivery", s)
		}
		if s := mq.status(kept); s.State != queue.Deleted || s.ReceiveCount != 1 {
			t.Errorf("the other message: %+v, want deleted on its first delivery (a drop affects only its receipt)", s)
		}
		if st := w.Stats(); st.Dropped != 1 || st.Cancelled != 1 || st.Succeeded != 2 {
			t.Errorf("stats %+v, want 1 dropped, 1 cancelled, 2 succeeded", st)
		}
		cancel()
		wait()
		settle()
	})
}

func TestWorkerShutdownReleasesWaitingAndGivesRunningAGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mq := newMemQueue()
		first := mq.send("first")
		second, third := mq.send("second"), mq.send("third")
		started := make(chan string, 3)
		w, cancel, wait := startWorker(t, mq, WorkerConfig{Window: 10 * time.Second, Concurrency: 1, Prefetch: 2, Grace: 10 * time.Second, Logger: quiet},
			func(ctx context.Context, m Message) error {
				started <- m.ID
				time.Sleep(4 * time.Second) // finishes inside the grace period
				return nil
			})
		if got := <-started; got != first {
			t.Fatalf("first handler for %s, want %s", got, first)
		}
		time.Sleep(time.Second) // the other two are received and waiting
		cancel()
		synctest.Wait()
		for _, id := range []string{second, third} {
			if s := mq.status(id); s.State != queue.Visible {
				t.Errorf("waiting message %s right after shutdown: %v, want visible (released at once)", id, s.State)
			}
		}
		wait()
		settle()
		if s := mq.status(first); s.State != queue.Deleted {
			t.Errorf("running message after shutdown: %v, want deleted (it finished within the grace)", s.State)
		}
		if len(started) != 0 {
			t.Errorf("a waiting message was started during shutdown")
		}
		if st := w.Stats(); st.ReleasedAtEnd != 2 || st.Succeeded != 1 {
			t.Errorf("stats %+v, want 2 released at the end and 1 success", st)
		}
	})
}

func TestWorkerRetryReleasesAndPoisonIsRetired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mq := newMemQueue()
		flaky := mq.send("flaky")
		poison := mq.send("poison")
		var runs atomic.Int64
		w, cancel, wait := startWorker(t, mq, WorkerConfig{Window: 5 * time.Second, Budget: 4, Logger: quiet,
			Policy: Policy{Base: 2 * time.Second, Cap: 2 * time.Second},
			Decode: func(m Message) error {
				if string(m.Body) == "poison" {
					return errors.New("not JSON")
				}
				return nil
			}},
			func(ctx context.Context, m Message) error {
				runs.Add(1)
				if m.ReceiveCount < 3 {
					return errors.New("upstream 503")
				}
				return nil
			})
		time.Sleep(time.Minute)
		if s := mq.status(flaky); s.State != queue.Deleted || s.ReceiveCount != 3 {
			t.Errorf("flaky message: %+v, want deleted on its third delivery", s)
		}
		// Poison is never handled; it comes back until the budget (4) retires it.
		if s := mq.status(poison); s.State != queue.Deleted || s.ReceiveCount != 4 {
			t.Errorf("poison message: %+v, want acked once its receive count reached the budget", s)
		}
		if runs.Load() != 3 {
			t.Errorf("handler ran %d times, want 3 (never for the poison message)", runs.Load())
		}
		cancel()
		wait()
		settle()
		if st := w.Stats(); st.Released != 2 || st.Poison < 1 {
			t.Errorf("stats %+v, want 2 releases and the poison counted", st)
		}
	})
}

func TestWorkerAbandonsHandlersThatIgnoreCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mq := newMemQueue()
		id := mq.send("stubborn")
		release := make(chan struct{})
		started := make(chan struct{})
		_, cancel, wait := startWorker(t, mq, WorkerConfig{Window: 5 * time.Second, Grace: 3 * time.Second, Logger: quiet},
			func(ctx context.Context, m Message) error {
				close(started)
				<-release // ignores ctx
				return nil
			})
		<-started
		t0 := time.Now()
		cancel()
		wait()
		// Grace (3 s) renewing, then cancelled, then another Grace before abandoning it.
		if d := time.Since(t0); d < 6*time.Second || d > 8*time.Second {
			t.Errorf("Run returned %v after shutdown began, want about two grace periods (6s)", d)
		}
		if s := mq.status(id); s.State == queue.Deleted {
			t.Errorf("an abandoned handler's message was deleted; its lease must just lapse")
		}
		close(release) // the late handler's event is dropped, not sent to a dead loop
		settle()
	})
}

func TestWorkerRidesOutFailedRenewalsWithLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mq := newMemQueue()
		mq.latency = 300 * time.Millisecond
		mq.flaky = 2 // two throttled renewals before each success (docs/worker.md: no drop)
		id := mq.send("slow")
		var visible atomic.Int64
		w, cancel, wait := startWorker(t, mq, WorkerConfig{Window: 10 * time.Second, Logger: quiet}, func(ctx context.Context, m Message) error {
			return workWatching(ctx, 120, func() { // a minute of work, six windows
				if s := mq.status(m.ID); s.State != queue.InFlight || s.ReceiveCount != 1 {
					visible.Add(1)
				}
			})
		})
		time.Sleep(75 * time.Second)
		st := w.Stats()
		if visible.Load() != 0 || st.Dropped != 0 || st.Succeeded != 1 || st.RenewalRetries == 0 {
			t.Errorf("visible %d times; stats %+v; want never visible, no drop, 1 success, renewal retries > 0", visible.Load(), st)
		}
		if s := mq.status(id); s.State != queue.Deleted || s.ReceiveCount != 1 {
			t.Errorf("message %+v, want deleted after one delivery", s)
		}
		cancel()
		wait()
		settle()
	})
}

// TestWorkerShutdownCancelsALongPoll: a long poll in flight at shutdown is cancelled through
// its context once nothing else is left, so Run returns at once and no receive outlives it:
// a message sent afterwards is received by no one.
func TestWorkerShutdownCancelsALongPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mq := newMemQueue()
		var runs atomic.Int64
		w, cancel, wait := startWorker(t, mq, WorkerConfig{Window: 30 * time.Second, Wait: 20 * time.Second, Logger: quiet},
			func(ctx context.Context, m Message) error {
				runs.Add(1)
				return nil
			})
		time.Sleep(2 * time.Second) // an empty queue: the first 20 s long poll is waiting
		t0 := time.Now()
		cancel()
		wait()
		if d := time.Since(t0); d > time.Second {
			t.Errorf("Run returned %v after shutdown began, want at once (not after the 18 s left of the poll)", d)
		}
		synctest.Wait() // every goroutine Run started has ended, or is blocked for good
		receives := mq.count("receive")
		id := mq.send("late")
		time.Sleep(time.Minute)
		if s := mq.status(id); s.State != queue.Visible || s.ReceiveCount != 0 {
			t.Errorf("message sent after Run returned: %+v, want never received", s)
		}
		if n := mq.count("receive"); n != receives || runs.Load() != 0 {
			t.Errorf("receive calls went from %d to %d and the handler ran %d times after Run returned", receives, n, runs.Load())
		}
		if err := w.Run(context.Background()); !errors.Is(err, ErrStopped) {
			t.Errorf("second Run = %v, want ErrStopped", err)
		}
	})
}

// TestWorkerFatalReceiveEndsRun: a queue that answers receives with a fatal error (here: it
// does not exist) ends Run without its context ending, after the running handler's grace;
// the error wraps ErrFatal and names the code. The handler's cancellation says shutdown.
func TestWorkerFatalReceiveEndsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mq := newMemQueue()
		mq.send("one")
		cause := make(chan error, 1)
		w, err := NewWorker(mq, WorkerConfig{Window: 5 * time.Second, Grace: 2 * time.Second, Logger: quiet},
			func(ctx context.Context, m Message) error {
				mq.mu.Lock()
				mq.fatalReceive = true // the queue is deleted while the handler runs
				mq.mu.Unlock()
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return ctx.Err()
			})
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		err = w.Run(context.Background())
		if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "NonExistentQueue") {
			t.Errorf("Run = %v, want ErrFatal naming the code", err)
		}
		if d := time.Since(t0); d > 10*time.Second {
			t.Errorf("Run returned after %v, want within the grace periods", d)
		}
		if c := <-cause; !errors.Is(c, ErrShutdown) {
			t.Errorf("handler's cause %v, want ErrShutdown", c)
		}
	})
}

// TestWorkerSurvivesATransportBreakingTheBatchContract: a renewal reply without per-entry
// results counts as a retryable failure (the renewal is retried, the message stays hidden),
// and messages beyond the maximum asked for are released at once; the worker keeps running.
func TestWorkerSurvivesATransportBreakingTheBatchContract(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mq := newMemQueue()
		mq.shortReplies = 2
		mq.receiveMore = 2
		ids := []string{mq.send("a"), mq.send("b"), mq.send("c")}
		var visible atomic.Int64
		w, cancel, wait := startWorker(t, mq, WorkerConfig{Window: 5 * time.Second, Concurrency: 1, Logger: quiet},
			func(ctx context.Context, m Message) error {
				return workWatching(ctx, 20, func() { // 10 s: two windows, so renewals must work
					if s := mq.status(m.ID); s.State != queue.InFlight {
						visible.Add(1)
					}
				})
			})
		time.Sleep(time.Minute)
		for _, id := range ids {
			if s := mq.status(id); s.State != queue.Deleted {
				t.Errorf("message %s: %+v, want deleted", id, s)
			}
		}
		if st := w.Stats(); visible.Load() != 0 || st.Dropped != 0 || st.RenewalRetries < 2 || st.Succeeded != 3 || st.ReleasedExtra == 0 {
			t.Errorf("visible %d times; stats %+v; want never visible, no drop, ≥ 2 renewal retries, 3 successes, extra messages released", visible.Load(), st)
		}
		cancel()
		wait()
		settle()
	})
}

// TestWorkerGracefulShutdownLogsNoLeaseLost: a handler cancelled because shutdown's grace
// ended had its receipt released on purpose: nothing is logged as a lost lease, and the
// handler's context.Cause says shutdown.
func TestWorkerGracefulShutdownLogsNoLeaseLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mq := newMemQueue()
		mq.send("long")
		var logs syncBuffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		started := make(chan struct{})
		cause := make(chan error, 1)
		_, cancel, wait := startWorker(t, mq, WorkerConfig{Window: 5 * time.Second, Grace: time.Second, Logger: logger},
			func(ctx context.Context, m Message) error {
				close(started)
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return ctx.Err()
			})
		<-started
		cancel()
		wait()
		if c := <-cause; !errors.Is(c, ErrShutdown) {
			t.Errorf("handler's cause %v, want ErrShutdown", c)
		}
		if out := logs.String(); strings.Contains(out, "lease lost") || !strings.Contains(out, "grace period over") {
			t.Errorf("logs say a lease was lost, or not that the grace ended:\n%s", out)
		}
	})
}

// syncBuffer is a bytes.Buffer safe for the worker's goroutines to log into.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A success waiting behind a renewal whose answer never comes still gets its turn: the
// renewal's context ends at retryUntil (W/10 before the local deadline), so the delete goes
// out with the lease still held, and every call about the receipt carries a deadline no later
// than its stop point.
func TestWorkerSuccessBehindAStalledRenewalIsDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mq := newMemQueue()
		mq.stallRenewals = true
		id := mq.send("behind a renewal")
		_, cancel, wait := startWorker(t, mq, WorkerConfig{Window: 6 * time.Second, Logger: quiet}, func(ctx context.Context, m Message) error {
			select {
			case <-time.After(2500 * time.Millisecond): // past the first renewal, sent at 2 s
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		time.Sleep(6 * time.Second)
		if s := mq.status(id); s.State != queue.Deleted || s.ReceiveCount != 1 {
			t.Errorf("message %+v, want deleted on its first delivery", s)
		}
		cancel()
		wait()
		mq.mu.Lock()
		defer mq.mu.Unlock()
		if len(mq.deadlines) < 2 {
			t.Fatalf("calls with deadlines %v, want a renewal and a delete", mq.deadlines)
		}
		for i, d := range mq.deadlines {
			// Sent at 2 s (renewal) and about 5.4 s (delete): none may outlive 6 s − 300 ms.
			if d < 0 || d > 4*time.Second {
				t.Errorf("call %d: context deadline %v from its start, want one within the lease", i, d)
			}
		}
		settle()
	})
}

// The Kit sluicetest builds is NewWorker's: config refusals name the WorkerConfig field,
// results map through the table, panics and invalid results are permanent failures, the
// middleware wraps the handler, and a drop's reason becomes the context's cause.
func TestWorkerKitIsNewWorkers(t *testing.T) {
	if _, err := NewWorkerKit(WorkerConfig{RedriveMax: -1}, WorkerHandler(func(context.Context, Message) error { return nil })); err == nil ||
		!strings.Contains(err.Error(), "WorkerConfig.RedriveMax") {
		t.Fatalf("Build with RedriveMax -1: %v, want a refusal naming WorkerConfig.RedriveMax", err)
	}
	after := 3 * time.Second
	for _, tc := range []struct {
		name string
		h    WorkerHandler
		mw   []Middleware
		want worker.Outcome
	}{
		{"ack", func(context.Context, Message) error { return nil }, nil, worker.Success},
		{"retry-after", func(context.Context, Message) error { return RetryAfter(errors.New("busy"), after) }, nil, worker.Retryable},
		{"reject", func(context.Context, Message) error { return Permanent(errors.New("bad")) }, nil, worker.Permanent},
		{"dead-letter", func(context.Context, Message) error { return DeadLetter(errors.New("bad")) }, nil, worker.Terminal},
		{"panic", func(context.Context, Message) error { panic("boom") }, nil, worker.Permanent},
		{"middleware", func(context.Context, Message) error { return nil }, []Middleware{func(next CallHandler) CallHandler {
			return func(ctx context.Context, c Call) error {
				next(ctx, c)
				return errors.New("middleware says retry")
			}
		}}, worker.Retryable},
	} {
		kit, err := NewWorkerKit(WorkerConfig{Middleware: tc.mw}, tc.h)
		if err != nil {
			t.Fatal(err)
		}
		if got := kit.Handle(context.Background(), core.Message{ID: "m1", Receipt: "r1", ReceiveCount: 1}); got.Outcome != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	kit, err := NewWorkerKit(WorkerConfig{}, WorkerHandler(func(context.Context, Message) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	for reason, want := range map[lease.DropReason]error{lease.DropShutdown: ErrShutdown, lease.DropGone: ErrMessageGone, lease.DropMargin: ErrLeaseLost} {
		if got := kit.Cause(reason); !errors.Is(got, want) {
			t.Errorf("Cause(%v) = %v, want %v", reason, got, want)
		}
	}
}
