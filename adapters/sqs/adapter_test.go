package sqs_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adapters/sqs"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/fauxqs"
)

func mustClass(t *testing.T, what string, err error, want core.Class) {
	t.Helper()
	if got := core.ClassOf(err); got != want {
		t.Fatalf("%s: class %v (error %v), want %v", what, got, err, want)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	if _, err := sqs.New(nil, sqs.Config{QueueURL: "u"}); err == nil {
		t.Fatal("nil client accepted")
	}
	s := &fauxqs.Server{URL: "http://127.0.0.1:1"}
	c := newClient(t, s)
	for _, cfg := range []sqs.Config{
		{},
		{QueueURL: "http://127.0.0.1:1/000000000000/q", CallTimeout: -time.Second},
		{QueueURL: "my-queue"}, // a name, not a URL
		{QueueURL: "arn:aws:sqs:us-east-1:000000000000:q"},
		{QueueURL: "http:///000000000000/q"}, // no host
	} {
		_, err := sqs.New(c, cfg)
		if !errors.Is(err, sqs.ErrConfig) {
			t.Errorf("config %+v: err = %v, want ErrConfig", cfg, err)
		}
		if cfg.QueueURL != "" && cfg.CallTimeout == 0 && (err == nil || !strings.Contains(err.Error(), "QueueURL")) {
			t.Errorf("config %+v: err = %v, want it to name QueueURL", cfg, err)
		}
	}
	if _, err := sqs.New(c, sqs.Config{QueueURL: "https://sqs.us-east-1.amazonaws.com/000000000000/q"}); err != nil {
		t.Errorf("a queue URL refused: %v", err)
	}
}

// TestLongPollGetsWaitOnTopOfCallTimeout: a 2 s long poll under a 500 ms call timeout
// returns empty, not a timeout, and a message sent meanwhile ends it early.
func TestLongPollGetsWaitOnTopOfCallTimeout(t *testing.T) {
	_, c, url := newQueue(t)
	ctx := context.Background()
	tr, err := sqs.New(c, sqs.Config{QueueURL: url, CallTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ms, err := tr.Receive(context.Background(), 10, 2*time.Second, time.Second)
	if err != nil || len(ms) != 0 {
		t.Fatalf("empty long poll: %v, %v", ms, err)
	}
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Fatalf("a 2 s long poll on an empty queue returned after %v", took)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		sqs.Send(ctx, c, url, "late")
	}()
	start = time.Now()
	ms, err = tr.Receive(context.Background(), 10, 5*time.Second, time.Second)
	if err != nil || len(ms) != 1 || string(ms[0].Body) != "late" || ms[0].ReceiveCount != 1 {
		t.Fatalf("long poll with a late message: %+v, %v", ms, err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("the long poll did not end when the message arrived (%v)", took)
	}
}

func TestMissingQueueIsFatal(t *testing.T) {
	s := fauxqs.Start(t)
	c := newClient(t, s)
	tr := newTransport(t, c, s.URL+"/000000000000/no-such-queue")
	_, err := tr.Receive(context.Background(), 1, 0, time.Second)
	mustClass(t, "receive from a missing queue", err, core.Fatal)
	_, err = tr.DeleteBatch(context.Background(), []string{"r"})
	mustClass(t, "delete batch on a missing queue", err, core.Fatal)
}

func TestConnectionRefusedIsRetryable(t *testing.T) {
	s, c, url := newQueue(t)
	tr := newTransport(t, c, url)
	s.Stop()
	mustClass(t, "change visibility with the server gone", tr.ChangeVisibility(context.Background(), "r", time.Second), core.Retryable)
	_, err := tr.Receive(context.Background(), 1, 0, time.Second)
	mustClass(t, "receive with the server gone", err, core.Retryable)
}

// TestCallTimeoutAndCancelledContextAreRetryable: a server that accepts and never answers.
func TestCallTimeoutAndCancelledContextAreRetryable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		for {
			conn, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, conn)
		}
	}()
	s := &fauxqs.Server{URL: "http://" + ln.Addr().String()}
	c := newClient(t, s)
	tr, err := sqs.New(c, sqs.Config{QueueURL: s.URL + "/000000000000/q", CallTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	mustClass(t, "delete against a silent server", tr.Delete(context.Background(), "r"), core.Retryable)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the call timeout did not bound the call: %v", took)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = tr.ChangeVisibilityBatch(ctx, []core.VisibilityChange{{Receipt: "r", Timeout: time.Second}})
	mustClass(t, "batch with a cancelled context", err, core.Retryable)
}

func TestFullBatchesRoundTrip(t *testing.T) {
	_, c, url := newQueue(t)
	ctx := context.Background()
	tr := newTransport(t, c, url)
	for range core.BatchMax {
		if _, err := sqs.Send(ctx, c, url, "m"); err != nil {
			t.Fatal(err)
		}
	}
	var ms []core.Message
	for len(ms) < core.BatchMax {
		got, err := tr.Receive(context.Background(), core.BatchMax, time.Second, 30*time.Second)
		if err != nil || len(got) == 0 {
			t.Fatalf("receive: %v, %v (have %d)", got, err, len(ms))
		}
		ms = append(ms, got...)
	}
	changes := make([]core.VisibilityChange, len(ms))
	receipts := make([]string, len(ms))
	for i, m := range ms {
		changes[i] = core.VisibilityChange{Receipt: m.Receipt, Timeout: time.Minute}
		receipts[i] = m.Receipt
	}
	errs, err := tr.ChangeVisibilityBatch(context.Background(), changes)
	if err != nil || len(errs) != core.BatchMax {
		t.Fatalf("change batch: %v, %v", errs, err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("entry %d: %v", i, e)
		}
	}
	errs, err = tr.DeleteBatch(context.Background(), receipts)
	if err != nil || len(errs) != core.BatchMax {
		t.Fatalf("delete batch: %v, %v", errs, err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("entry %d: %v", i, e)
		}
	}
	for _, m := range ms {
		mustClass(t, "change after the batch delete", tr.ChangeVisibility(context.Background(), m.Receipt, time.Second), core.Gone)
	}
}

func TestReceiveRejectsOutOfRangeArgumentsWithoutACall(t *testing.T) {
	s := &fauxqs.Server{URL: "http://127.0.0.1:1"} // nothing listens: a call would be Retryable
	tr := newTransport(t, newClient(t, s), s.URL+"/000000000000/q")
	for _, args := range [][3]time.Duration{{0, 0, 0}, {11, 0, 0}, {1, -1, 0}, {1, 0, -1}} {
		_, err := tr.Receive(context.Background(), int(args[0]), args[1], args[2])
		mustClass(t, "receive with bad arguments", err, core.Fatal)
	}
}

func TestBatchSizeOutOfRangeIsFatalWithoutACall(t *testing.T) {
	s := &fauxqs.Server{URL: "http://127.0.0.1:1"} // nothing listens: a call would be Retryable
	tr := newTransport(t, newClient(t, s), s.URL+"/000000000000/q")
	_, err := tr.DeleteBatch(context.Background(), nil)
	mustClass(t, "empty delete batch", err, core.Fatal)
	_, err = tr.DeleteBatch(context.Background(), make([]string, 11))
	mustClass(t, "delete batch of 11", err, core.Fatal)
	_, err = tr.ChangeVisibilityBatch(context.Background(), nil)
	mustClass(t, "empty change batch", err, core.Fatal)
	_, err = tr.ChangeVisibilityBatch(context.Background(), make([]core.VisibilityChange, 11))
	mustClass(t, "change batch of 11", err, core.Fatal)
}
