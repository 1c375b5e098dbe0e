// Package transporttest is the shared behaviour suite of the core.Transport port: the same
// cases run against the simulated SQS (sim/queue) and against adapters/sqs talking to fauxqs
// over HTTP, so the simulator's model of SQS is held to what a real server does.
//
// Rules:
//
//  1. Every case gets fresh queues from Harness.New and moves time only through Queue.Wait
//     (the simulator advances its clock, a real server sleeps), so it runs unchanged on both.
//  2. The suite asserts only what real SQS guarantees. Where fauxqs is more lenient
//     (COMPONENTS.md: a garbage or stale receipt in Delete or DeleteBatch answered with
//     success), success is accepted unless Harness.Strict says the implementation behaves as
//     real SQS there; a failure there must be Gone, never Retryable or Fatal.
//  3. Timing uses windows of Scale seconds and waits with at least Scale/2 seconds of margin on
//     both sides of every deadline, so a loaded machine does not flip an assertion.
//  4. Every failed call or batch entry must be a *core.TransportError with a class.
//  5. A call's context rules it: a receive whose context has ended fails Retryable at once,
//     and one cancelled during its long poll returns well before the wait ends (the worker
//     cancels a long poll that way at shutdown).
package transporttest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// Harness makes queues for the suite.
type Harness struct {
	// New returns a fresh, empty queue. With maxReceiveCount > 0 the queue has a redrive
	// policy to a fresh dead-letter queue capturing at that count.
	New func(t *testing.T, maxReceiveCount int) Queue
	// Strict: deletes with a garbage or stale receipt fail with Gone, as on real SQS.
	Strict bool
	// Parallel runs the cases in parallel (for real servers, where Wait sleeps).
	Parallel bool
	// Scale multiplies every window and wait (default 1: 1 s windows), for real servers on
	// loaded machines, where a stall between two calls could otherwise outlast a window.
	Scale int
}

// Queue is one queue under test.
type Queue struct {
	Transport  core.Transport
	DeadLetter core.Transport // nil without a redrive policy
	// Send stores a message and returns its id.
	Send func(t *testing.T, body string) string
	// Wait lets d pass.
	Wait func(d time.Duration)
	// Check, when set, is called at the end of each case (invariants of a simulated queue).
	Check func() error
}

const poll = time.Second // long poll used where a message is expected

// env is what a case runs with.
type env struct {
	h      Harness
	q      Queue
	window time.Duration // the visibility window of most cases: 1 s × Scale
	lapse  time.Duration // a wait after which such a window has lapsed: 1.5 s × Scale
}

// d scales a duration of the case's timeline.
func (e env) d(d time.Duration) time.Duration { return d * time.Duration(e.h.Scale) }

type suiteCase struct {
	name    string
	redrive int
	run     func(t *testing.T, e env)
}

var cases = []suiteCase{
	{"ReceiveHidesUntilWindowLapsesThenRedeliversWithNewReceipt", 0, testRedelivery},
	{"ExtensionKeepsMessageHiddenPastOriginalWindow", 0, testExtension},
	{"ReleaseWithZeroRedeliversAtOnce", 0, testRelease},
	{"DeleteRemovesMessage", 0, testDelete},
	{"ChangeVisibilityOnDeletedReceiptIsGone", 0, testGoneAfterDelete},
	{"StaleReceiptAfterRedeliveryIsNeverRetryableOrFatal", 0, testStaleReceipt},
	{"ChangeVisibilityBatchReportsPerEntryFailures", 0, testBatchChange},
	{"DeleteBatchReportsPerEntryResults", 0, testBatchDelete},
	{"RedriveMovesMessageToDeadLetterQueue", 2, testRedrive},
	{"VisibilityPastTwelveHoursIsFatal", 0, testCeiling},
	{"ReceiveHonoursMax", 0, testReceiveMax},
	{"EmptyOrOversizedBatchIsFatal", 0, testBatchSize},
	{"CancelledContextEndsReceiveRetryable", 0, testCancelledReceive},
}

// Run runs every case as a subtest of t.
func Run(t *testing.T, h Harness) {
	if h.Scale < 1 {
		h.Scale = 1
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if h.Parallel {
				t.Parallel()
			}
			q := h.New(t, c.redrive)
			if (q.DeadLetter != nil) != (c.redrive > 0) {
				t.Fatalf("harness: dead-letter queue present = %v for maxReceiveCount %d", q.DeadLetter != nil, c.redrive)
			}
			e := env{h: h, q: q}
			e.window, e.lapse = e.d(time.Second), e.d(1500*time.Millisecond)
			c.run(t, e)
			if q.Check != nil {
				if err := q.Check(); err != nil {
					t.Fatalf("queue invariants: %v", err)
				}
			}
		})
	}
}

// receive collects want messages, polling a few times (a real queue may answer a long poll
// with fewer messages than are visible).
func receive(t *testing.T, tr core.Transport, want int, visibility time.Duration) []core.Message {
	t.Helper()
	var out []core.Message
	for range 5 {
		ms, err := tr.Receive(context.Background(), core.BatchMax, poll, visibility)
		mustTyped(t, "receive", err)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		out = append(out, ms...)
		if len(out) >= want {
			break
		}
	}
	if len(out) != want {
		t.Fatalf("received %d messages, want %d: %v", len(out), want, describe(out))
	}
	for _, m := range out {
		if m.ID == "" || m.Receipt == "" || m.ReceiveCount < 1 {
			t.Fatalf("incomplete message %+v", m)
		}
	}
	return out
}

// receiveNone asserts that nothing is delivered now (a short poll).
func receiveNone(t *testing.T, tr core.Transport, why string) {
	t.Helper()
	ms, err := tr.Receive(context.Background(), core.BatchMax, 0, 30*time.Second)
	mustTyped(t, "receive", err)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if len(ms) != 0 {
		t.Fatalf("%s, but received %v", why, describe(ms))
	}
}

func describe(ms []core.Message) string {
	s := "["
	for i, m := range ms {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%s(count %d, body %q)", m.ID, m.ReceiveCount, m.Body)
	}
	return s + "]"
}

func mustTyped(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var te *core.TransportError
	if !errors.As(err, &te) {
		t.Fatalf("%s: error %v (%T) is not a *core.TransportError", what, err, err)
	}
	if te.Class < core.Retryable || te.Class > core.Fatal {
		t.Fatalf("%s: error %v has no valid class", what, err)
	}
}

func mustClass(t *testing.T, what string, err error, want core.Class) {
	t.Helper()
	mustTyped(t, what, err)
	if got := core.ClassOf(err); got != want {
		t.Fatalf("%s: class %v (error %v), want %v", what, got, err, want)
	}
}

// mustLenient accepts success or Gone (never Retryable or Fatal), and only Gone when strict.
func mustLenient(t *testing.T, what string, err error, strict bool) {
	t.Helper()
	if err == nil && !strict {
		return
	}
	mustClass(t, what, err, core.Gone)
}

func one(t *testing.T, q Queue, body string, visibility time.Duration) (id string, m core.Message) {
	t.Helper()
	id = q.Send(t, body)
	m = receive(t, q.Transport, 1, visibility)[0]
	if m.ID != id || string(m.Body) != body || m.ReceiveCount != 1 {
		t.Fatalf("first delivery %+v, want id %s body %q count 1", m, id, body)
	}
	return id, m
}

func testRedelivery(t *testing.T, e env) {
	q := e.q
	id, first := one(t, q, "a", e.window)
	receiveNone(t, q.Transport, "the message is in flight")
	q.Wait(e.lapse)
	again := receive(t, q.Transport, 1, e.window)[0]
	if again.ID != id || string(again.Body) != "a" {
		t.Fatalf("redelivered %+v, want id %s body a", again, id)
	}
	if again.Receipt == first.Receipt {
		t.Fatalf("redelivery kept receipt %q", first.Receipt)
	}
	if again.ReceiveCount <= first.ReceiveCount {
		t.Fatalf("redelivery count %d, not above %d", again.ReceiveCount, first.ReceiveCount)
	}
}

func testExtension(t *testing.T, e env) {
	q := e.q
	id, m := one(t, q, "b", e.window)
	if err := q.Transport.ChangeVisibility(context.Background(), m.Receipt, e.d(4*time.Second)); err != nil {
		t.Fatalf("extend: %v", err)
	}
	q.Wait(e.d(2 * time.Second))
	receiveNone(t, q.Transport, "the message was extended to 4 windows and 2 passed")
	q.Wait(e.d(3 * time.Second))
	again := receive(t, q.Transport, 1, e.window)[0]
	if again.ID != id || again.ReceiveCount <= m.ReceiveCount {
		t.Fatalf("after the extension lapsed got %+v, want id %s with a higher count", again, id)
	}
}

func testRelease(t *testing.T, e env) {
	q := e.q
	id, m := one(t, q, "c", 30*time.Second)
	if err := q.Transport.ChangeVisibility(context.Background(), m.Receipt, 0); err != nil {
		t.Fatalf("release: %v", err)
	}
	again := receive(t, q.Transport, 1, 30*time.Second)[0]
	if again.ID != id || again.Receipt == m.Receipt || again.ReceiveCount <= m.ReceiveCount {
		t.Fatalf("after release got %+v, want id %s with a new receipt and a higher count", again, id)
	}
}

func testDelete(t *testing.T, e env) {
	q := e.q
	_, m := one(t, q, "d", e.window)
	if err := q.Transport.Delete(context.Background(), m.Receipt); err != nil {
		t.Fatalf("delete: %v", err)
	}
	q.Wait(e.lapse)
	receiveNone(t, q.Transport, "the message was deleted")
}

func testGoneAfterDelete(t *testing.T, e env) {
	q := e.q
	_, m := one(t, q, "e", 30*time.Second)
	if err := q.Transport.Delete(context.Background(), m.Receipt); err != nil {
		t.Fatalf("delete: %v", err)
	}
	mustClass(t, "change-visibility of a deleted receipt", q.Transport.ChangeVisibility(context.Background(), m.Receipt, 10*time.Second), core.Gone)
	errs, err := q.Transport.ChangeVisibilityBatch(context.Background(), []core.VisibilityChange{{Receipt: m.Receipt, Timeout: 10 * time.Second}})
	if err != nil || len(errs) != 1 {
		t.Fatalf("change-visibility batch: %v, %v", errs, err)
	}
	mustClass(t, "batch change-visibility of a deleted receipt", errs[0], core.Gone)
}

func testStaleReceipt(t *testing.T, e env) {
	q := e.q
	id, old := one(t, q, "f", e.window)
	q.Wait(e.lapse)
	cur := receive(t, q.Transport, 1, 30*time.Second)[0]
	if cur.ID != id || cur.Receipt == old.Receipt {
		t.Fatalf("redelivery %+v", cur)
	}
	// SQS answers Gone, or may answer success doing nothing; never Retryable or Fatal.
	mustLenient(t, "change-visibility of a stale receipt", q.Transport.ChangeVisibility(context.Background(), old.Receipt, 0), false)
	mustLenient(t, "delete of a stale receipt", q.Transport.Delete(context.Background(), old.Receipt), e.h.Strict)
	// The current delivery is still governed by its own receipt.
	if err := q.Transport.ChangeVisibility(context.Background(), cur.Receipt, 30*time.Second); err != nil {
		t.Fatalf("extend the current receipt: %v", err)
	}
	if err := q.Transport.Delete(context.Background(), cur.Receipt); err != nil {
		t.Fatalf("delete the current receipt: %v", err)
	}
}

func testBatchChange(t *testing.T, e env) {
	q := e.q
	for _, b := range []string{"g0", "g1", "g2"} {
		q.Send(t, b)
	}
	ms := receive(t, q.Transport, 3, e.window)
	if err := q.Transport.Delete(context.Background(), ms[1].Receipt); err != nil {
		t.Fatalf("delete: %v", err)
	}
	errs, err := q.Transport.ChangeVisibilityBatch(context.Background(), []core.VisibilityChange{
		{Receipt: ms[0].Receipt, Timeout: e.d(4 * time.Second)},
		{Receipt: ms[1].Receipt, Timeout: e.d(4 * time.Second)},
		{Receipt: ms[2].Receipt, Timeout: e.d(4 * time.Second)},
	})
	if err != nil {
		t.Fatalf("change-visibility batch failed as a whole: %v", err)
	}
	if len(errs) != 3 {
		t.Fatalf("%d results for 3 entries", len(errs))
	}
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("good entries failed: %v, %v", errs[0], errs[2])
	}
	mustClass(t, "batch entry naming a deleted message", errs[1], core.Gone)
	q.Wait(e.d(2 * time.Second))
	receiveNone(t, q.Transport, "both live messages were extended to 4 windows and 2 passed")
	errs, err = q.Transport.ChangeVisibilityBatch(context.Background(), []core.VisibilityChange{
		{Receipt: ms[0].Receipt, Timeout: 0},
		{Receipt: ms[2].Receipt, Timeout: 0},
	})
	if err != nil || len(errs) != 2 || errs[0] != nil || errs[1] != nil {
		t.Fatalf("release batch: %v, %v", errs, err)
	}
	again := receive(t, q.Transport, 2, 30*time.Second)
	got := map[string]bool{}
	for _, m := range again {
		got[m.ID] = m.ReceiveCount >= 2
	}
	if !got[ms[0].ID] || !got[ms[2].ID] {
		t.Fatalf("after the release batch got %s, want %s and %s redelivered", describe(again), ms[0].ID, ms[2].ID)
	}
}

func testBatchDelete(t *testing.T, e env) {
	q := e.q
	q.Send(t, "h0")
	q.Send(t, "h1")
	ms := receive(t, q.Transport, 2, e.window)
	errs, err := q.Transport.DeleteBatch(context.Background(), []string{ms[0].Receipt, "not-a-receipt", ms[1].Receipt})
	if err != nil {
		t.Fatalf("delete batch failed as a whole: %v", err)
	}
	if len(errs) != 3 {
		t.Fatalf("%d results for 3 entries", len(errs))
	}
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("good entries failed: %v, %v", errs[0], errs[2])
	}
	mustLenient(t, "batch entry with a garbage receipt", errs[1], e.h.Strict)
	q.Wait(e.lapse)
	receiveNone(t, q.Transport, "both messages were deleted by the batch")
}

func testRedrive(t *testing.T, e env) {
	q := e.q
	id, m := one(t, q, "poison", e.window)
	q.Wait(e.lapse)
	m2 := receive(t, q.Transport, 1, e.window)[0]
	if m2.ID != id || m2.ReceiveCount <= m.ReceiveCount {
		t.Fatalf("second delivery %+v", m2)
	}
	q.Wait(e.lapse)
	// The receive that would exceed maxReceiveCount 2 moves the message instead.
	receiveNone(t, q.Transport, "the message was received maxReceiveCount times")
	dead := receive(t, q.DeadLetter, 1, 30*time.Second)[0]
	if dead.ID != id || string(dead.Body) != "poison" {
		t.Fatalf("dead-letter queue delivered %+v, want id %s body poison", dead, id)
	}
	receiveNone(t, q.Transport, "the message is in the dead-letter queue")
}

func testCeiling(t *testing.T, e env) {
	q := e.q
	_, m := one(t, q, "i", 30*time.Second)
	mustClass(t, "change-visibility past 12 h", q.Transport.ChangeVisibility(context.Background(), m.Receipt, 12*time.Hour+time.Second), core.Fatal)
	if err := q.Transport.ChangeVisibility(context.Background(), m.Receipt, 0); err != nil {
		t.Fatalf("release after a refused extension: %v", err)
	}
	receive(t, q.Transport, 1, 30*time.Second)
}

func testReceiveMax(t *testing.T, e env) {
	q := e.q
	for _, b := range []string{"j0", "j1", "j2"} {
		q.Send(t, b)
	}
	ms, err := q.Transport.Receive(context.Background(), 2, poll, 30*time.Second)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if len(ms) < 1 || len(ms) > 2 {
		t.Fatalf("receive max 2 returned %d messages", len(ms))
	}
	seen := map[string]bool{}
	for _, m := range ms {
		if seen[m.ID] {
			t.Fatalf("message %s delivered twice in one receive", m.ID)
		}
		seen[m.ID] = true
	}
}

func testBatchSize(t *testing.T, e env) {
	tr := e.q.Transport
	_, err := tr.DeleteBatch(context.Background(), nil)
	mustClass(t, "empty delete batch", err, core.Fatal)
	_, err = tr.ChangeVisibilityBatch(context.Background(), nil)
	mustClass(t, "empty change-visibility batch", err, core.Fatal)
	_, err = tr.DeleteBatch(context.Background(), make([]string, core.BatchMax+1))
	mustClass(t, "oversized delete batch", err, core.Fatal)
	changes := make([]core.VisibilityChange, core.BatchMax+1)
	for i := range changes {
		changes[i] = core.VisibilityChange{Receipt: "r", Timeout: time.Second}
	}
	_, err = tr.ChangeVisibilityBatch(context.Background(), changes)
	mustClass(t, "oversized change-visibility batch", err, core.Fatal)
}

// testCancelledReceive: a receive whose context already ended fails Retryable and takes
// nothing; one whose context ends during a long poll returns long before its wait; the
// message sent afterwards is received as usual.
func testCancelledReceive(t *testing.T, e env) {
	tr := e.q.Transport
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ms, err := tr.Receive(ctx, core.BatchMax, 0, e.window)
	mustClass(t, "receive with an ended context", err, core.Retryable)
	if len(ms) != 0 {
		t.Fatalf("receive with an ended context returned %s", describe(ms))
	}
	wait := 10 * time.Second
	ctx, cancel = context.WithTimeout(context.Background(), e.d(300*time.Millisecond))
	defer cancel()
	start := time.Now()
	ms, err = tr.Receive(ctx, core.BatchMax, wait, e.window)
	if took := time.Since(start); took >= wait/2 {
		t.Fatalf("a long poll of %v cancelled after %v returned only after %v", wait, e.d(300*time.Millisecond), took)
	}
	if err == nil && len(ms) != 0 {
		t.Fatalf("a cancelled long poll on an empty queue returned %s", describe(ms))
	}
	if err != nil {
		mustClass(t, "a long poll cancelled midway", err, core.Retryable)
	}
	id := e.q.Send(t, "after")
	got := receive(t, tr, 1, e.window)
	if got[0].ID != id {
		t.Fatalf("received %s, want %s", describe(got), id)
	}
}
