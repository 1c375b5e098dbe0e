package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/qjobs"
	"github.com/sluicehq/sluice/sim/queue"
)

// fleetQueue is a queue and its dead-letter queue in memory for driver tests: sim/queue
// behind one mutex, reading the synctest-faked time, long polls emulated by sleeping.
type fleetQueue struct {
	mu      sync.Mutex
	q, dlq  *queue.Queue
	t       core.Transport
	send    core.Sender
	dlqSend core.Sender
	batches int // send batches to the main queue
}

func newFleetQueue() *fleetQueue {
	f := &fleetQueue{q: queue.New(queue.Config{Name: "jobs"}, nil), dlq: queue.New(queue.Config{Name: "dead"}, nil)}
	f.t, f.send, f.dlqSend = f.q.Transport(time.Now), f.q.Sender(time.Now), f.dlq.Sender(time.Now)
	return f
}

// runner is a queue runner on f with cfg, its Logger quiet unless cfg sets one.
func (f *fleetQueue) runner(t testing.TB, cfg sluice.QueueConfig) *sluice.QueueRunner {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	r, err := sluice.NewQueueRunner(f.queue(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *fleetQueue) queue() sluice.Queue {
	return sluice.Queue{Transport: f, Send: lockedSender{f, &f.send, true}, DeadLetter: lockedSender{f, &f.dlqSend, false}}
}

type lockedSender struct {
	f    *fleetQueue
	s    *core.Sender
	main bool
}

func (l lockedSender) SendBatch(ctx context.Context, msgs []core.Outgoing) ([]error, error) {
	l.f.mu.Lock()
	defer l.f.mu.Unlock()
	if l.main {
		l.f.batches++
	}
	return (*l.s).SendBatch(ctx, msgs)
}

func (f *fleetQueue) Receive(ctx context.Context, max int, wait, visibility time.Duration) ([]core.Message, error) {
	end := time.Now().Add(wait)
	for {
		f.mu.Lock()
		msgs, err := f.t.Receive(ctx, max, wait, visibility)
		f.mu.Unlock()
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

func (f *fleetQueue) ChangeVisibility(ctx context.Context, receipt string, timeout time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t.ChangeVisibility(ctx, receipt, timeout)
}

func (f *fleetQueue) ChangeVisibilityBatch(ctx context.Context, entries []core.VisibilityChange) ([]error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t.ChangeVisibilityBatch(ctx, entries)
}

func (f *fleetQueue) Delete(ctx context.Context, receipt string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t.Delete(ctx, receipt)
}

func (f *fleetQueue) DeleteBatch(ctx context.Context, receipts []string) ([]error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t.DeleteBatch(ctx, receipts)
}

// counts returns the main queue's live and deleted messages and the dead-letter queue's live ones.
func (f *fleetQueue) counts() (live, deleted, dead int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	live, deleted, _ = f.q.Counts()
	dead, _, _ = f.dlq.Counts()
	return live, deleted, dead
}

// deadLetters receives every dead letter and returns their attributes and payloads.
func (f *fleetQueue) deadLetters(t *testing.T) map[string]qjobs.Attrs {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]qjobs.Attrs{}
	for {
		msgs := f.dlq.Receive(time.Now(), 10, time.Hour)
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			a, p, err := qjobs.Decode(m)
			if err != nil {
				t.Fatal(err)
			}
			out[string(p)] = a
		}
	}
}

type mail struct{ To string }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestQueueRunnerRunsKindsLikeTheLocalRunner registers a kind on a QueueRunner exactly as on a
// Runner, enqueues one job and 24 more in batches of 10, and runs them: successes are
// deleted, a target that always fails spends the job's attempts (WithAttempts) and the job is
// dead-lettered with its last error, and a job due later runs no earlier than its due time.
func TestQueueRunnerRunsKindsLikeTheLocalRunner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleetQueue()
		r, err := sluice.NewQueueRunner(f.queue(), sluice.QueueConfig{Logger: quiet(), Seed: 1,
			Policy: sluice.Policy{Attempts: 3, Base: time.Second, Cap: 4 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		attempts := map[string][]int{}
		var ranAt time.Time
		start := time.Now()
		emails, err := sluice.Register(r, "email", sluice.JSON[mail](), func(ctx context.Context, j sluice.Job[mail]) error {
			mu.Lock()
			attempts[j.Payload.To] = append(attempts[j.Payload.To], j.Attempt)
			if j.Payload.To == "later" {
				ranAt = time.Now()
			}
			mu.Unlock()
			if j.ID == 0 {
				return sluice.Permanent(fmt.Errorf("job %s without an id", j.Payload.To))
			}
			if j.Target == "down" {
				return fmt.Errorf("smtp down for %s", j.Payload.To)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		doomedID, err := emails.Enqueue(ctx, time.Time{}, "down", mail{To: "doomed"}, sluice.WithAttempts(2))
		if err != nil || doomedID == 0 {
			t.Fatalf("Enqueue = %d, %v; want a job id", doomedID, err)
		}
		if _, err := emails.Enqueue(ctx, start.Add(5*time.Minute), "up", mail{To: "later"}); err != nil {
			t.Fatal(err)
		}
		var jobs []sluice.NewJob[mail]
		for i := range 24 {
			jobs = append(jobs, sluice.NewJob[mail]{Target: "up", Payload: mail{To: fmt.Sprint("a", i)}})
		}
		before := f.batches
		if _, err := emails.EnqueueMany(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		if got := f.batches - before; got != 3 {
			t.Errorf("EnqueueMany of 24 sent %d batches, want 3", got)
		}
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		for range 1000 {
			if live, _, dead := f.counts(); live == 0 && dead == 1 {
				break
			}
			time.Sleep(time.Second)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		live, deleted, dead := f.counts()
		if live != 0 || dead != 1 {
			t.Fatalf("queue: %d live, %d deleted, %d dead; want 0 live, 1 dead", live, deleted, dead)
		}
		dl := f.deadLetters(t)
		got := dl[`{"To":"doomed"}`]
		want := qjobs.Attrs{ID: doomedID, Kind: "email", Target: "down", FirstDue: got.FirstDue, Attempts: 2, AttemptsMax: 2,
			LastErr: "smtp down for doomed", Reason: qjobs.ReasonSpent}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("dead letter (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]int{1, 2}, attempts["doomed"]); diff != "" {
			t.Errorf("attempts of the doomed job (-want +got):\n%s", diff)
		}
		for i := range 24 {
			if a := attempts[fmt.Sprint("a", i)]; len(a) != 1 {
				t.Errorf("job a%d ran attempts %v, want one", i, a)
			}
		}
		if ranAt.Before(start.Add(5 * time.Minute)) {
			t.Errorf("the job due at +5m ran at +%v", ranAt.Sub(start))
		}
		if st := r.Stats(); st.Succeeded != 25 || st.DeadLettered != 1 {
			t.Errorf("stats %+v, want 25 succeeded, 1 dead-lettered", st)
		}
	})
}

// TestQueueRunnerRefusesWhatAQueueCannotHonour: each refusal wraps ErrQueueUnsupported, has
// one sluice: prefix, and names what it refused.
func TestQueueRunnerRefusesWhatAQueueCannotHonour(t *testing.T) {
	f := newFleetQueue()
	r, err := sluice.NewQueueRunner(f.queue(), sluice.QueueConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, sluice.Job[mail]) error { return nil }
	if _, err := sluice.Register(r, "limited", sluice.JSON[mail](), h, sluice.WithConcurrency(2)); !errors.Is(err, sluice.ErrQueueUnsupported) || !strings.Contains(err.Error(), "WithConcurrency") {
		t.Errorf("WithConcurrency: %v", err)
	}
	k, err := sluice.Register(r, "email", sluice.JSON[mail](), h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sluice.Register(r, "email", sluice.JSON[mail](), h); err == nil {
		t.Error("a second Register of the same kind was accepted")
	}
	ctx := context.Background()
	for name, err := range map[string]error{
		"WithPriority": func() error { _, err := k.Enqueue(ctx, time.Time{}, "t", mail{}, sluice.WithPriority(3)); return err }(),
		"WithUnique":   func() error { _, err := k.Enqueue(ctx, time.Time{}, "t", mail{}, sluice.WithUnique("k")); return err }(),
		"cancel":       k.Cancel(ctx, 1),
		"retry":        k.Retry(ctx, 1),
		"get":          func() error { _, err := k.Get(ctx, 1); return err }(),
		"stats":        func() error { _, err := k.Stats(ctx); return err }(),
		"breakers":     func() error { _, err := k.Breakers(ctx); return err }(),
		"list":         func() error { _, err := k.List(ctx, sluice.ListFilter{}); return err }(),
		"drain":        k.Drain(ctx),
		"schedule":     k.Schedule(ctx, "nightly", "@every 1h", "t", mail{}),
		"unschedule":   k.Unschedule(ctx, "nightly"),
		"schedules":    func() error { _, err := k.Schedules(ctx); return err }(),
	} {
		if !errors.Is(err, sluice.ErrQueueUnsupported) || !strings.Contains(err.Error(), name) || strings.Count(err.Error(), "sluice:") != 1 {
			t.Errorf("%s: %v; want ErrQueueUnsupported, naming it, one sluice: prefix", name, err)
		}
	}
	if _, err := k.Enqueue(ctx, time.Time{}, "", mail{}); !errors.Is(err, sluice.ErrInvalidJob) || strings.Count(err.Error(), "sluice:") != 1 || !strings.Contains(err.Error(), "target") {
		t.Errorf("empty target: %v, want ErrInvalidJob naming the target, one sluice: prefix", err)
	}
	if _, err := k.Enqueue(ctx, time.Time{}, "t", mail{To: strings.Repeat("x", sluice.QueueMessageMax)}); !errors.Is(err, sluice.ErrTooLarge) || strings.Count(err.Error(), "sluice:") != 1 {
		t.Errorf("oversized: %v, want ErrTooLarge, one sluice: prefix", err)
	}
	many := []sluice.NewJob[mail]{{Target: "t"}, {Target: "t", Payload: mail{To: strings.Repeat("x", sluice.QueueMessageMax)}}}
	if _, err := k.EnqueueMany(ctx, many); !errors.Is(err, sluice.ErrTooLarge) || !strings.Contains(err.Error(), "(job 1)") {
		t.Errorf("EnqueueMany with an oversized second job: %v, want ErrTooLarge naming job 1", err)
	}
	if live, _, _ := f.counts(); live != 0 {
		t.Errorf("%d messages sent by refused enqueues, want none", live)
	}
	if _, err := sluice.NewQueueRunner(sluice.Queue{Transport: f}, sluice.QueueConfig{}); err == nil || !strings.HasPrefix(err.Error(), "sluice: ") {
		t.Errorf("NewQueueRunner without senders: %v", err)
	}
}

// TestQueueRunnerDelaysFarDuesAtMost15Minutes: a due in year 9999 is accepted and its first
// message delayed the longest delay, 15 min (clamped before rounding: no overflow to 0).
func TestQueueRunnerDelaysFarDuesAtMost15Minutes(t *testing.T) {
	f := newFleetQueue()
	r, err := sluice.NewQueueRunner(f.queue(), sluice.QueueConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	k, err := sluice.Register(r, "email", sluice.JSON[mail](), func(context.Context, sluice.Job[mail]) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	far := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	before := time.Now()
	if _, err := k.Enqueue(context.Background(), far, "t", mail{}); err != nil {
		t.Fatal(err)
	}
	st := f.q.Status(time.Now())
	if len(st.Messages) != 1 {
		t.Fatalf("%d messages sent, want 1", len(st.Messages))
	}
	if d := st.Messages[0].VisibleAt.Sub(before); d < 15*time.Minute || d > 15*time.Minute+time.Minute {
		t.Errorf("visible %v after the enqueue, want 15m", d)
	}
}

// TestQueueRunnerMovesStrangersToTheDeadLetterQueue: a message that is not a job goes to the
// dead-letter queue as it is; a job of a kind not registered here waits (re-sent, no attempt).
func TestQueueRunnerMovesStrangersToTheDeadLetterQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleetQueue()
		r, err := sluice.NewQueueRunner(f.queue(), sluice.QueueConfig{Logger: quiet(), Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		h := func(context.Context, sluice.Job[mail]) error { return nil }
		if _, err := sluice.Register(r, "mail", sluice.JSON[mail](), h); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		stranger := map[string]string{"trace-id": "abc"}
		f.q.SendOutgoing(time.Now(), core.Outgoing{Body: []byte("hello, not a job"), Attributes: stranger})
		f.q.SendOutgoing(time.Now(), qjobs.Encode(qjobs.Attrs{Kind: "resize", Target: "img", FirstDue: time.Now()}, []byte("{}")))
		f.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		time.Sleep(time.Minute)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		msgs := f.dlq.Receive(time.Now(), 10, time.Hour)
		st := f.q.Status(time.Now())
		f.mu.Unlock()
		if len(msgs) != 1 || string(msgs[0].Body) != "hello, not a job" {
			t.Errorf("dead-letter queue holds %v, want the stranger as it was", msgs)
		} else if diff := cmp.Diff(stranger, msgs[0].Attributes); diff != "" {
			t.Errorf("the stranger's attributes in the dead-letter queue (-want +got):\n%s", diff)
		}
		if st.Visible+st.InFlight != 1 {
			t.Errorf("queue status %+v: want the unregistered kind's job still there (re-sent)", st)
		}
		if s := r.Stats(); s.Runs != 0 || s.Deferred < 1 {
			t.Errorf("stats %+v: want no run, the resize job deferred", s)
		}
	})
}

// unknownSender stores every message in q and answers the first lost calls with an error
// wrapping core.ErrSendUnknown, as a send whose answer was lost; on a FIFO queue it drops a
// message whose deduplication id it stored already.
type unknownSender struct {
	f    *fleetQueue
	lose int // calls still to lose
	seen map[string]bool
}

func (u *unknownSender) SendBatch(ctx context.Context, msgs []core.Outgoing) ([]error, error) {
	u.f.mu.Lock()
	defer u.f.mu.Unlock()
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if m.DedupID == "" || !u.seen[m.DedupID] {
			u.f.q.SendOutgoing(time.Now(), m)
		}
		if m.DedupID != "" {
			u.seen[m.DedupID] = true
		}
		if u.lose > 0 {
			errs[i] = fmt.Errorf("read tcp: connection reset: %w", core.ErrSendUnknown)
		}
	}
	u.lose--
	return errs, nil
}

// TestQueueRunnerNeverDoublesAnEnqueue: a standard queue's send whose answer was lost is not
// sent again: the error wraps ErrEnqueueUnknown and names the job id. On a FIFO queue the
// runner sends it again under the same deduplication id (the queue drops the copy) and the
// enqueue succeeds; WithGroup is refused on a standard queue.
func TestQueueRunnerNeverDoublesAnEnqueue(t *testing.T) {
	h := func(context.Context, sluice.Job[mail]) error { return nil }
	for _, fifo := range []bool{false, true} {
		f := newFleetQueue()
		u := &unknownSender{f: f, lose: 1, seen: map[string]bool{}}
		q := f.queue()
		q.Send = u
		r, err := sluice.NewQueueRunner(q, sluice.QueueConfig{Logger: quiet(), FIFO: fifo})
		if err != nil {
			t.Fatal(err)
		}
		k, err := sluice.Register(r, "email", sluice.JSON[mail](), h)
		if err != nil {
			t.Fatal(err)
		}
		id, err := k.Enqueue(context.Background(), time.Time{}, "t", mail{To: "ada"}, sluice.WithGroup("ada"))
		switch {
		case fifo && err != nil:
			t.Errorf("FIFO: %v, want the repeat under one deduplication id to succeed", err)
		case !fifo && !errors.Is(err, sluice.ErrQueueUnsupported):
			t.Errorf("WithGroup on a standard queue: %v, want ErrQueueUnsupported", err)
		}
		if !fifo {
			id, err = k.Enqueue(context.Background(), time.Time{}, "t", mail{To: "ada"})
			if !errors.Is(err, sluice.ErrEnqueueUnknown) || !errors.Is(err, core.ErrSendUnknown) || id != 0 || strings.Count(err.Error(), "sluice:") != 1 {
				t.Errorf("standard: id %d, %v; want ErrEnqueueUnknown, one sluice: prefix", id, err)
			} else if ms := f.q.Receive(time.Now(), 10, time.Hour); len(ms) != 1 || !strings.Contains(err.Error(), "id "+ms[0].Attributes[qjobs.AttrID]) {
				t.Errorf("standard: %d messages stored, error %q; want one, its id named", len(ms), err)
			}
			continue
		}
		if ms := f.q.Receive(time.Now(), 10, time.Hour); len(ms) != 1 || ms[0].Attributes[qjobs.AttrID] != fmt.Sprint(id) {
			t.Errorf("FIFO: %d messages stored, want one with id %d", len(ms), id)
		}
	}
}

// TestQueueRunnerGracefulStopGivesTheAttemptBack: a job with one attempt whose handler a
// graceful stop cancels is released at once (not hidden for the window) and not
// dead-lettered; the next process runs it as attempt 1, with the same id.
func TestQueueRunnerGracefulStopGivesTheAttemptBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleetQueue()
		var mu sync.Mutex
		var seen []sluice.Job[mail]
		started := make(chan struct{}, 1)
		run := func(block bool) {
			r, err := sluice.NewQueueRunner(f.queue(), sluice.QueueConfig{Logger: quiet(), Seed: 1,
				Worker: sluice.WorkerConfig{Window: 30 * time.Second, Grace: time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			k, err := sluice.Register(r, "email", sluice.JSON[mail](), func(ctx context.Context, j sluice.Job[mail]) error {
				mu.Lock()
				seen = append(seen, j)
				mu.Unlock()
				if !block {
					return nil
				}
				started <- struct{}{}
				<-ctx.Done()
				return ctx.Err()
			})
			if err != nil {
				t.Fatal(err)
			}
			if block {
				if _, err := k.Enqueue(context.Background(), time.Time{}, "t", mail{To: "ada"}, sluice.WithAttempts(1)); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- r.Run(ctx) }()
			if block {
				<-started
			} else {
				time.Sleep(5 * time.Second)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		run(true)
		stopped := time.Now()
		f.mu.Lock()
		st := f.q.Status(time.Now())
		f.mu.Unlock()
		if len(st.Messages) != 1 || st.Messages[0].VisibleAt.After(stopped.Add(time.Second)) {
			t.Fatalf("after the stop: %+v; want the job's message visible again within a second", st.Messages)
		}
		run(false)
		if live, _, dead := f.counts(); live != 0 || dead != 0 || len(seen) != 2 {
			t.Fatalf("%d live, %d dead, %d runs; want the job run again and done", live, dead, len(seen))
		}
		if seen[1].Attempt != 1 || seen[1].ID != seen[0].ID || seen[0].ID == 0 {
			t.Errorf("runs %+v: want attempt 1 twice with one non-zero id", seen)
		}
	})
}
