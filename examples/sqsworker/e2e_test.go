package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adapters/sqs"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/fauxqs"
)

// End-to-end: a sluice Worker with its lease controller, through adapters/sqs, against fauxqs
// over HTTP on 127.0.0.1. The tests mostly wait on real time, so they run in parallel on one
// server, each on its own queues.

// TestMain lets the parallel tests all run at once (they sleep, not compute) unless -parallel
// was given, and stops the shared fauxqs server by its PID at the end.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		flag.Set("test.parallel", "8")
	}
	code := m.Run()
	if server != nil {
		server.Stop()
	}
	os.Exit(code)
}

var (
	serverOnce sync.Once
	server     *fauxqs.Server
	serverErr  error
	queueSeq   atomic.Int64
)

// env is one test's view of the shared server.
type env struct {
	t      testing.TB
	client *awssqs.Client
	url    string // the queue under test
	dlq    string // its dead-letter queue, "" without one
}

// newEnv creates fresh queues (with a redrive policy capturing at maxReceive when > 0) on a
// fauxqs server shared by the package's tests.
func newEnv(t testing.TB, maxReceive int) *env {
	t.Helper()
	if os.Getenv(fauxqs.EnvDisable) == "1" {
		t.Skipf("fauxqs: skipped because %s=1 (this test needs the fauxqs SQS server)", fauxqs.EnvDisable)
	}
	serverOnce.Do(func() { server, serverErr = fauxqs.New() })
	if serverErr != nil {
		t.Fatalf("fauxqs: cannot start the SQS test server (set %s=1 to skip tests that need it): %v", fauxqs.EnvDisable, serverErr)
	}
	c, err := sqs.NewClient(context.Background(), sqs.ClientOptions{Endpoint: server.URL, MaxAttempts: 1, Load: server.LoadOptions()})
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("e2e%d-%s", queueSeq.Add(1), regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	e := &env{t: t, client: c}
	if maxReceive > 0 {
		e.url, e.dlq, err = sqs.CreateQueueWithDeadLetter(context.Background(), c, name, maxReceive, nil)
	} else {
		e.url, err = sqs.CreateQueue(context.Background(), c, name, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) transport(url string) *sqs.Transport {
	tr, err := sqs.New(e.client, sqs.Config{QueueURL: url, CallTimeout: 5 * time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	return tr
}

func (e *env) send(body string) string {
	id, err := sqs.Send(context.Background(), e.client, e.url, body)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// logger collects the worker's logs for the test's output on failure.
func (e *env) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// start runs a worker until the returned stop is called; stop returns Run's error.
func (e *env) start(cfg sluice.WorkerConfig, h sluice.WorkerHandler) (*sluice.Worker, func() error) {
	e.t.Helper()
	cfg.Logger = e.logger()
	w, err := sluice.NewWorker(e.transport(e.url), cfg, h)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				runErr = errors.New("worker did not stop within 30 s")
			}
		})
		return runErr
	}
	e.t.Cleanup(func() { stop() })
	return w, stop
}

// eventually polls cond every 50 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// deliveries records what a handler saw.
type deliveries struct {
	mu     sync.Mutex
	counts map[string][]int // message id -> receive counts of the deliveries handled
}

func (d *deliveries) add(m sluice.Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.counts == nil {
		d.counts = map[string][]int{}
	}
	d.counts[m.ID] = append(d.counts[m.ID], m.ReceiveCount)
}

func (d *deliveries) of(id string) []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]int(nil), d.counts[id]...)
}

// TestLongHandlerIsNotRedeliveredWhileRunning: a handler running for 3.5 windows keeps its
// message hidden (renewed by the lease controller); a second consumer polling the queue all
// along never sees it, and the worker handles it exactly once.
func TestLongHandlerIsNotRedeliveredWhileRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	const window = 2 * time.Second
	var seen deliveries
	var finished atomic.Bool
	w, stop := e.start(sluice.WorkerConfig{Window: window, Wait: time.Second, Concurrency: 2},
		func(ctx context.Context, m sluice.Message) error {
			seen.add(m)
			select {
			case <-time.After(7 * time.Second):
			case <-ctx.Done():
				return ctx.Err()
			}
			finished.Store(true)
			return nil
		})
	id := e.send("long")
	eventually(t, 10*time.Second, "handler started", func() bool { return len(seen.of(id)) == 1 })
	spy := e.transport(e.url)
	var stolen []core.Message
	for !finished.Load() {
		ms, err := spy.Receive(context.Background(), core.BatchMax, 0, window)
		if err != nil {
			t.Fatalf("spy receive: %v", err)
		}
		stolen = append(stolen, ms...)
		time.Sleep(200 * time.Millisecond)
	}
	if len(stolen) > 0 {
		t.Fatalf("a second consumer received %d deliveries while the handler ran: %+v", len(stolen), stolen)
	}
	eventually(t, 5*time.Second, "ack", func() bool { return w.Stats().Succeeded == 1 })
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	st := w.Stats()
	if got := seen.of(id); len(got) != 1 || got[0] != 1 {
		t.Fatalf("handled deliveries %v, want one with count 1", got)
	}
	if st.RenewalsSent < 3 || st.Dropped != 0 {
		t.Fatalf("renewals sent %d (want ≥ 3 over 3.5 windows), dropped %d", st.RenewalsSent, st.Dropped)
	}
	// Deleted: nothing comes back after a window.
	time.Sleep(window + 500*time.Millisecond)
	if ms, err := spy.Receive(context.Background(), core.BatchMax, 0, window); err != nil || len(ms) != 0 {
		t.Fatalf("after the ack: %+v, %v", ms, err)
	}
}

// TestRetryableFailureIsReleasedAndRedeliveredWithHigherCount: the first delivery fails
// retryably, is released after the policy's backoff (about 1 s, far less than the 30 s
// window), and the redelivery carries count 2 and is acked.
func TestRetryableFailureIsReleasedAndRedeliveredWithHigherCount(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	var seen deliveries
	w, stop := e.start(sluice.WorkerConfig{Window: 30 * time.Second, Wait: time.Second,
		Policy: sluice.Policy{Base: time.Second, Cap: 2 * time.Second}},
		func(ctx context.Context, m sluice.Message) error {
			seen.add(m)
			if m.ReceiveCount == 1 {
				return errors.New("transient")
			}
			return nil
		})
	id := e.send("flaky")
	start := time.Now()
	// Wait almost the whole window, so that a release that never happened (the redelivery
	// then comes when the window lapses, after 30 s) is told apart by the timing check below.
	eventually(t, 25*time.Second, "redelivery acked", func() bool { return w.Stats().Succeeded == 1 })
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("redelivery took %v: the message was not released after the 1-2 s backoff", took)
	}
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if got := seen.of(id); !slicesEqual(got, []int{1, 2}) {
		t.Fatalf("deliveries handled %v, want counts [1 2]", got)
	}
	if st := w.Stats(); st.Released != 1 {
		t.Fatalf("released %d, want 1", st.Released)
	}
}

// TestPoisonMessagesReachTheDeadLetterQueue: undecodable messages are never handled; the
// worker sends nothing for them, so they lapse and come back until the queue's redrive policy
// (maxReceiveCount 2) moves them to the dead-letter queue. A good message beside them is acked.
func TestPoisonMessagesReachTheDeadLetterQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	var seen deliveries
	w, stop := e.start(sluice.WorkerConfig{Window: 2 * time.Second, Wait: time.Second, RedriveMax: 2, Decode: decode},
		func(ctx context.Context, m sluice.Message) error {
			seen.add(m)
			return nil
		})
	poison := []string{e.send("poison-1"), e.send("poison-2")}
	good := e.send("good")
	dlq := e.transport(e.dlq)
	got := map[string]bool{}
	eventually(t, 20*time.Second, "both poison messages in the dead-letter queue", func() bool {
		ms, err := dlq.Receive(context.Background(), core.BatchMax, 0, time.Minute)
		if err != nil {
			t.Fatalf("dead-letter receive: %v", err)
		}
		for _, m := range ms {
			got[m.ID] = true
		}
		return got[poison[0]] && got[poison[1]]
	})
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	st := w.Stats()
	for _, id := range poison {
		if h := seen.of(id); len(h) != 0 {
			t.Fatalf("poison message %s was handled: %v", id, h)
		}
	}
	if h := seen.of(good); len(h) != 1 || st.Succeeded != 1 {
		t.Fatalf("good message handled %v, succeeded %d", h, st.Succeeded)
	}
	if st.Poison < 4 || st.Retired != 0 {
		t.Fatalf("poison deliveries counted %d (want ≥ 4: two each before the redrive), retired %d", st.Poison, st.Retired)
	}
	if len(got) != 2 {
		t.Fatalf("dead-letter queue holds %v, want only the poison messages", got)
	}
}

// TestGracefulShutdownReleasesUnstartedMessagesAtOnce: one handler slot, five prefetched
// messages waiting for it; on shutdown the five are released with ChangeVisibilityBatch(0)
// and another consumer gets them at once, long before the 30 s window would lapse, while the
// running one stays hidden (its handler is cancelled after the grace and its lease lapses).
func TestGracefulShutdownReleasesUnstartedMessagesAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	var started atomic.Int32
	var cancelled atomic.Bool
	w, stop := e.start(sluice.WorkerConfig{Window: 30 * time.Second, Wait: time.Second,
		Concurrency: 1, Prefetch: 5, Grace: 500 * time.Millisecond},
		func(ctx context.Context, m sluice.Message) error {
			started.Add(1)
			<-ctx.Done()
			cancelled.Store(true)
			return ctx.Err()
		})
	sent := map[string]bool{}
	for i := range 6 {
		sent[e.send(fmt.Sprintf("m%d", i))] = true
	}
	eventually(t, 10*time.Second, "one running, five waiting", func() bool {
		st := w.Stats()
		return st.Running == 1 && st.Waiting == 5
	})
	stopped := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if took := time.Since(stopped); took > 5*time.Second {
		t.Fatalf("shutdown took %v with Wait 1s and Grace 0.5s", took)
	}
	st := w.Stats()
	if st.ReleasedAtEnd != 5 || started.Load() != 1 || !cancelled.Load() {
		t.Fatalf("released at end %d (want 5), handlers started %d (want 1), running one cancelled %v",
			st.ReleasedAtEnd, started.Load(), cancelled.Load())
	}
	other := e.transport(e.url)
	var got []core.Message
	for range 3 {
		ms, err := other.Receive(context.Background(), core.BatchMax, time.Second, 30*time.Second)
		if err != nil {
			t.Fatalf("receive after shutdown: %v", err)
		}
		got = append(got, ms...)
	}
	if took := time.Since(stopped); len(got) != 5 || took > 15*time.Second {
		t.Fatalf("another consumer got %d messages %v after shutdown (want the 5 released, well inside the 30 s window)", len(got), time.Since(stopped))
	}
	for _, m := range got {
		if !sent[m.ID] || m.ReceiveCount != 2 {
			t.Fatalf("unexpected delivery %+v", m)
		}
	}
}

// TestExampleProgramWorksAQueue runs the command itself: it creates a queue, sends three
// bodies, handles them (one rejected) and stops cleanly on cancel.
func TestExampleProgramWorksAQueue(t *testing.T) {
	e := newEnv(t, 0) // starts the server; the program creates its own queue
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", fauxqs.Region)
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-endpoint", server.URL, "-create", "example-" + fmt.Sprint(queueSeq.Add(1)),
			"-window", "5s", "-wait", "1s", "-send", "hello,sleep=100ms world,reject"}, &out, testWriter{e.t})
	}()
	eventually(t, 15*time.Second, "three messages handled", func() bool { return strings.Count(out.String(), "handled ") == 3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{"result=succeeded body=hello", "result=succeeded body=sleep=100ms world", "result=permanent body=reject", "stopped received=3 succeeded=2"} {
		if !strings.Contains(text, want) {
			t.Fatalf("output lacks %q:\n%s", want, text)
		}
	}
}

func TestParseNeedsAQueue(t *testing.T) {
	t.Setenv("SQS_QUEUE_URL", "")
	for _, args := range [][]string{{}, {"-queue-url", "u", "-create", "n"}, {"-queue-url", "u", "extra"}} {
		if _, err := parse(args, io.Discard); err == nil {
			t.Fatalf("parse(%q) accepted", args)
		}
	}
	o, err := parse([]string{"-queue-url", "u", "-window", "5s"}, io.Discard)
	if err != nil || o.queueURL != "u" || o.window != 5*time.Second {
		t.Fatalf("parse: %+v, %v", o, err)
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestMissingQueueEndsRun: a worker pointed at a queue that does not exist gets a fatal error
// from its first receive and Run returns it (wrapping ErrFatal, naming the queue and the
// code) within a few seconds, instead of retrying forever while looking healthy.
func TestMissingQueueEndsRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	missing := e.url + "-missing"
	w, err := sluice.NewWorker(e.transport(missing), sluice.WorkerConfig{Wait: time.Second, Logger: e.logger()},
		func(ctx context.Context, m sluice.Message) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- w.Run(context.Background()) }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run still running 10 s after its queue was found missing")
	}
	if !errors.Is(err, sluice.ErrFatal) || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "NonExistentQueue") {
		t.Fatalf("Run = %v, want ErrFatal naming %s and NonExistentQueue", err, missing)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Run returned after %v, want within a few seconds", took)
	}
	if err := w.Run(context.Background()); !errors.Is(err, sluice.ErrStopped) {
		t.Errorf("Run after Run = %v, want ErrStopped", err)
	}
}
