// Package flakyrun runs sluice queue workers against fauxqs through a seeded fault proxy
// (internal/faultproxy) and checks, from the queue's side, what a flaky network must not
// break. The short version runs in examples/sqsworker's tests; the long one is the command
// examples/sqsworker/cmd/flaky, which prints the figures.
//
// The workers are goroutines in one process, each with its own SQS client and HTTP
// connections (separate OS processes would add start-up time and nothing the proxy cannot
// already break). Each message's body says how its handler behaves: mostly succeed after up
// to half a window, some fail once then succeed, some run longer than the window (their lease is
// renewed), some always fail retryably (the queue's redrive policy dead-letters them).
//
// Checks (Report.Problems lists every breach):
//
//  1. Every message is deleted or dead-lettered: the queue is empty at the end.
//  2. No two handler runs of one message overlap.
//  3. No call about a receipt is sent after the queue handed the message out again under a
//     newer receipt (its lease had ended: the call outlived it), and no call but a delete
//     names a receipt after the queue answered a delete of it.
//
// Duplicates: a successful handler run of a message after an earlier successful one, by
// what kept the earlier one from deleting it, as the proxy's log shows: no delete sent for
// its receipt (lease-lost-before-delete: the lease was lost first), deletes sent but none
// reached the queue (delete-never-reached-queue), a delete the network held until the window
// had lapsed at the queue, which then handed the message out again or answered success and
// did nothing (delete-delayed-past-lease), or one the queue refused.
package flakyrun

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adapters/sqs"
	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/internal/fauxqs"
)

// Options configure a run.
type Options struct {
	Seed        int64
	Messages    int
	Workers     int
	Concurrency int           // handlers per worker
	Window      time.Duration // visibility timeout (whole seconds)
	Deadline    time.Duration // how long the queue may take to empty
	RedriveMax  int           // the queue's maxReceiveCount
	SDKAttempts int           // the workers' clients' SDK MaxAttempts (0: the SDK default)
	Proxy       faultproxy.Config
	Logger      *slog.Logger // worker logs; nil discards
}

// Profile is the network: 5% resets before the call, 3% calls that take effect but
// lose their answer, 3% latency spikes of 2–8 s, and a little of everything else.
func Profile(seed int64) faultproxy.Config {
	return faultproxy.Config{
		Seed: seed, LatencyMin: time.Millisecond, LatencyMax: 15 * time.Millisecond,
		Spike: 0.03, SpikeMin: 2 * time.Second, SpikeMax: 8 * time.Second,
		ResetBefore: 0.05, ResetAfter: 0.03, Truncate: 0.01, Stall: 0.005, StallFor: 4 * time.Second,
		ServerError: 0.01, Throttle: 0.01,
	}
}

// Report is what a run found.
type Report struct {
	Messages     int
	Deleted      int // messages whose last delete the queue answered
	DeadLettered int
	Left         int // still in the queue at the end (a breach)
	Runs         int // handler runs
	SuccessRuns  int
	Duplicates   map[string]int // by cause
	Faults       map[string]int // injected by the proxy
	Calls        int            // calls the proxy saw
	Problems     []string
	Took         time.Duration
}

// Per100 is duplicate successful runs per 100 messages.
func (r Report) Per100() float64 {
	n := 0
	for _, v := range r.Duplicates {
		n += v
	}
	return float64(n) * 100 / float64(max(r.Messages, 1))
}

// Write prints the report.
func (r Report) Write(w io.Writer) {
	fmt.Fprintf(w, "messages       %d (deleted %d, dead-lettered %d, left %d) in %v\n", r.Messages, r.Deleted, r.DeadLettered, r.Left, r.Took.Round(time.Millisecond))
	fmt.Fprintf(w, "handler runs   %d (successful %d)\n", r.Runs, r.SuccessRuns)
	fmt.Fprintf(w, "proxy          %d calls, faults %s\n", r.Calls, counts(r.Faults))
	fmt.Fprintf(w, "duplicates     %.2f per 100 messages: %s\n", r.Per100(), counts(r.Duplicates))
	if len(r.Problems) == 0 {
		fmt.Fprintf(w, "checks         ok\n")
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "PROBLEM        %s\n", p)
	}
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Itoa(m[k])
	}
	return strings.Join(parts, " ")
}

// run is one handler run, as the handler saw it.
type run struct {
	msg     string
	count   int
	start   time.Time
	end     time.Time
	success bool
}

type recorder struct {
	mu      sync.Mutex
	runs    []run
	active  map[string]int
	overlap []string
}

func (rc *recorder) begin(msg string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.active[msg]++
	if rc.active[msg] > 1 {
		rc.overlap = append(rc.overlap, msg)
	}
}

func (rc *recorder) finish(r run) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.active[r.msg]--
	rc.runs = append(rc.runs, r)
}

// behaviour is what a message's handler does, from its body: "ok:MS", "once:MS" (fail
// retryably on the first delivery, then succeed), "long:MS", "never" (always retryable).
func behaviour(rnd *rand.Rand, window time.Duration) string {
	u := rnd.Float64()
	// Up to half a window, so many handlers finish while a renewal of their receipt is out.
	short := 20 + rnd.Intn(int(window.Milliseconds()/2))
	switch {
	case u < 0.78:
		return "ok:" + strconv.Itoa(short)
	case u < 0.88:
		return "once:" + strconv.Itoa(short)
	case u < 0.95:
		return "long:" + strconv.Itoa(int(window.Milliseconds())*(12+rnd.Intn(8))/10)
	}
	return "never"
}

func handler(rc *recorder) sluice.WorkerHandler {
	return func(ctx context.Context, m sluice.Message) error {
		rc.begin(m.ID)
		r := run{msg: m.ID, count: m.ReceiveCount, start: time.Now()}
		kind, arg, _ := strings.Cut(string(m.Body), ":")
		ms, _ := strconv.Atoi(arg)
		var res error
		switch {
		case kind == "never" || (kind == "once" && m.ReceiveCount == 1):
			ms = 30
			res = fmt.Errorf("flaky: %s fails", kind)
		}
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			res = ctx.Err()
		}
		t.Stop()
		r.end = time.Now()
		r.success = res == nil && ctx.Err() == nil
		rc.finish(r)
		return res
	}
}

// Run runs the workers through the proxy against server until the queue is empty or
// o.Deadline passes, then stops them and checks.
func Run(ctx context.Context, server *fauxqs.Server, o Options) (Report, error) {
	start := time.Now()
	rep := Report{Messages: o.Messages, Duplicates: map[string]int{}}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	admin, err := sqs.NewClient(ctx, sqs.ClientOptions{Endpoint: server.URL, MaxAttempts: 1, Load: server.LoadOptions()})
	if err != nil {
		return rep, err
	}
	name := fmt.Sprintf("flaky-%d-%d", o.Seed, time.Now().UnixNano())
	url, dlq, err := sqs.CreateQueueWithDeadLetter(ctx, admin, name, o.RedriveMax, nil)
	if err != nil {
		return rep, err
	}
	rnd := rand.New(rand.NewSource(o.Seed))
	for i := 0; i < o.Messages; i++ {
		if _, err := sqs.Send(ctx, admin, url, behaviour(rnd, o.Window)); err != nil {
			return rep, err
		}
	}
	pc := o.Proxy
	pc.Target = server.URL
	px, err := faultproxy.New(pc)
	if err != nil {
		return rep, err
	}
	defer px.Close()

	rc := &recorder{active: map[string]int{}}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make([]error, o.Workers)
	for i := 0; i < o.Workers; i++ {
		c, err := sqs.NewClient(ctx, sqs.ClientOptions{Endpoint: px.URL, MaxAttempts: o.SDKAttempts, Load: server.LoadOptions()})
		if err != nil {
			return rep, err
		}
		tr, err := sqs.New(c, sqs.Config{QueueURL: url, CallTimeout: 5 * time.Second})
		if err != nil {
			return rep, err
		}
		w, err := sluice.NewWorker(tr, sluice.WorkerConfig{
			Window: o.Window, Wait: time.Second, Concurrency: o.Concurrency, RedriveMax: o.RedriveMax,
			Policy: sluice.Policy{Base: 200 * time.Millisecond, Cap: time.Second}, Grace: 3 * time.Second,
			Seed: o.Seed*100 + int64(i), Logger: o.Logger.With("worker", i),
		}, handler(rc))
		if err != nil {
			return rep, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.Run(wctx)
		}()
	}
	deadline := time.Now().Add(o.Deadline)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if n, err := InQueue(ctx, admin, url); err == nil && n == 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	stop()
	wg.Wait()
	px.Close()
	rep.Took = time.Since(start)
	for i, err := range errs {
		if err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("worker %d: Run returned %v", i, err))
		}
	}
	if rep.Left, err = InQueue(ctx, admin, url); err != nil {
		return rep, err
	}
	if rep.Left > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d messages neither deleted nor dead-lettered after %v", rep.Left, o.Deadline))
	}
	if rep.DeadLettered, err = InQueue(ctx, admin, dlq); err != nil {
		return rep, err
	}
	rep.Faults = px.Faults()
	check(&rep, rc, px.Log())
	return rep, nil
}

// InQueue counts the messages of the queue at url visible, in flight or delayed.
func InQueue(ctx context.Context, c *awssqs.Client, url string) (int, error) {
	out, err := c.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible, types.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, v := range out.Attributes {
		k, _ := strconv.Atoi(v)
		n += k
	}
	return n, nil
}

// check reads the proxy's log (the queue's view) and the handlers' runs.
func check(rep *Report, rc *recorder, log []faultproxy.Record) {
	rep.Calls = len(log)
	for _, m := range rc.overlap {
		rep.Problems = append(rep.Problems, "two handler runs of message "+m+" overlapped")
	}
	q := queueViewOf(log)
	msgsDeleted := map[string]bool{}
	for rc := range q.deleted {
		msgsDeleted[q.msgOf[rc]] = true
	}
	rep.Deleted = len(msgsDeleted)
	for _, r := range log {
		isDelete := r.Op == "DeleteMessageBatch" || r.Op == "DeleteMessage"
		for _, rc := range r.Receipts {
			if again, ok := q.next(rc); ok && r.Sent.After(again) {
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s naming receipt of %s sent %v after the queue handed the message out again",
					r.Op, q.msgOf[rc], r.Sent.Sub(again).Round(time.Millisecond)))
			}
			if t, ok := q.deleted[rc]; ok && !isDelete && r.Sent.After(t) {
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s naming receipt of %s sent after the queue deleted it", r.Op, q.msgOf[rc]))
			}
		}
	}
	q.duplicates(rep, rc)
}

type handout struct {
	receipt string
	at      time.Time // the queue answered the receive
}

// queueView is what the proxy's log says the queue did with each message and receipt.
type queueView struct {
	byMsg         map[string][]handout // in receive-count order
	receiptOf     map[string]string    // msg/count -> receipt
	msgOf         map[string]string    // receipt -> msg
	deleted       map[string]time.Time // receipt -> first delete the queue answered OK
	deleteSent    map[string]bool      // receipt -> some delete entered the proxy
	deleteReached map[string]time.Time // receipt -> first delete the queue saw
}

func queueViewOf(log []faultproxy.Record) *queueView {
	q := &queueView{byMsg: map[string][]handout{}, receiptOf: map[string]string{}, msgOf: map[string]string{},
		deleted: map[string]time.Time{}, deleteSent: map[string]bool{}, deleteReached: map[string]time.Time{}}
	for _, r := range log {
		for _, d := range r.Deliveries {
			q.byMsg[d.MessageID] = append(q.byMsg[d.MessageID], handout{d.Receipt, r.Answered})
			q.receiptOf[d.MessageID+"/"+strconv.Itoa(d.ReceiveCount)] = d.Receipt
			q.msgOf[d.Receipt] = d.MessageID
		}
	}
	for _, hs := range q.byMsg {
		sort.Slice(hs, func(i, j int) bool { return hs[i].at.Before(hs[j].at) })
	}
	for _, r := range log {
		if r.Op != "DeleteMessageBatch" && r.Op != "DeleteMessage" {
			continue
		}
		for _, rc := range r.Receipts {
			q.deleteSent[rc] = true
			if !r.Answered.IsZero() {
				if t, ok := q.deleteReached[rc]; !ok || r.Answered.Before(t) {
					q.deleteReached[rc] = r.Answered
				}
				if r.Status == 200 && !slices.Contains(r.Failed, rc) {
					if t, ok := q.deleted[rc]; !ok || r.Answered.Before(t) {
						q.deleted[rc] = r.Answered
					}
				}
			}
		}
	}
	return q
}

// next is when the queue handed receipt's message out again.
func (q *queueView) next(receipt string) (time.Time, bool) {
	hs := q.byMsg[q.msgOf[receipt]]
	for i, h := range hs {
		if h.receipt == receipt && i+1 < len(hs) {
			return hs[i+1].at, true
		}
	}
	return time.Time{}, false
}

// duplicates counts the successful runs after a message's first, by the fate of the earlier
// one's delete.
func (q *queueView) duplicates(rep *Report, rec *recorder) {
	succ := map[string][]run{}
	for _, r := range rec.runs {
		rep.Runs++
		if r.success {
			rep.SuccessRuns++
			succ[r.msg] = append(succ[r.msg], r)
		}
	}
	for _, rs := range succ {
		sort.Slice(rs, func(i, j int) bool { return rs[i].start.Before(rs[j].start) })
		for _, prev := range rs[:len(rs)-1] {
			rc := q.receiptOf[prev.msg+"/"+strconv.Itoa(prev.count)]
			again, _ := q.next(rc)
			cause := "other"
			switch t, reached := q.deleteReached[rc]; {
			case rc == "":
				cause = "unknown-receipt"
			case !q.deleteSent[rc]:
				cause = "lease-lost-before-delete"
			case !reached:
				cause = "delete-never-reached-queue"
			case !again.IsZero() && t.After(again), !q.deleted[rc].IsZero() && !again.IsZero():
				// The network held the delete until the window had lapsed at the queue,
				// which handed the message out again, or answered success and did nothing.
				cause = "delete-delayed-past-lease"
			case q.deleted[rc].IsZero():
				cause = "delete-refused-by-queue"
			}
			rep.Duplicates[cause]++
		}
	}
}
