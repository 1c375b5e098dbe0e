package sluicetest_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

type Email struct {
	To string `json:"to"`
}

// Mailer is the handler's view of the mail provider; production implements it over SMTP or an
// HTTP API, the test over a simulated service.
type Mailer interface {
	Send(ctx context.Context, to, idempotencyKey string) error
}

type simMailer struct{ svc *sluicetest.Service }

func (m simMailer) Send(ctx context.Context, to, key string) error {
	_, err := m.svc.Do(ctx, sluicetest.Request{Op: "send", Key: to, IdempotencyKey: key})
	return err
}

// sendWelcome is the production handler: it sends without an idempotency key.
func sendWelcome(m Mailer) sluice.Handler[Email] {
	return func(ctx context.Context, j sluice.Job[Email]) error {
		return m.Send(ctx, j.Payload.To, "")
	}
}

// A sweep over a handler that sends mail without an idempotency key finds a welcome mail sent
// twice. In a test, call sluicetest.Check(t, sc, sluicetest.Seeds(500)) instead of Find: each
// seed is a subtest, and a failure prints the shrunk run, its replay token and its timeline.
func Example() {
	sc := sluicetest.Scenario[Email]{
		Config: sluice.Config{Capacity: 2, Policy: sluice.Policy{Attempts: 5, Base: 100 * time.Millisecond}},
		Setup: func(env *sluicetest.Env) sluice.Handler[Email] {
			return sendWelcome(simMailer{env.Service("mail", sluicetest.ServiceFaults{ApplyThenFail: 0.1})})
		},
		Workload: func(r *rand.Rand, p *sluicetest.Plan[Email]) {
			for i := range 1 + r.Intn(5) {
				p.Enqueue(time.Duration(r.Intn(5000))*time.Millisecond, "mail", Email{To: fmt.Sprintf("user%d@example.com", i)})
			}
		},
		Invariants: []sluicetest.Invariant[Email]{
			sluicetest.ExactlyOnce("mail", func(e Email) string { return e.To }),
		},
	}
	f, err := sluicetest.Find(sc, sluicetest.Seeds(200), sluicetest.TimelineDir(os.TempDir()))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("found:", f != nil)
	fmt.Println("invariant:", f.Shrunk.Invariant)
	// Output:
	// found: true
	// invariant: exactly-once mail effect per key
}

// A Recorder stands in for the runner where code only enqueues; RequireEnqueued compares what
// was enqueued with cmp.Diff.
func ExampleRecorder() {
	signup := func(ctx context.Context, q sluicetest.Enqueuer[Email], to string) error {
		_, err := q.Enqueue(ctx, time.Time{}, "mail", Email{To: to})
		return err
	}
	r := &sluicetest.Recorder[Email]{Codec: sluice.JSON[Email]()}
	_ = signup(context.Background(), r, "ada@example.com")
	fmt.Printf("%+v\n", r.Enqueued())
	// Output: [{Due:0001-01-01 00:00:00 +0000 UTC Target:mail Payload:{To:ada@example.com}}]
}

// A queue worker's handler under worker crashes, graceful shutdowns, lost leases and a faulty
// network: a message redelivered after its handler already shipped the order ships it twice
// unless the handler sends an idempotency key. In a test: sluicetest.CheckWorker(t, sc, ...).
func ExampleFindWorker() {
	sc := sluicetest.WorkerScenario{
		Config: sluice.WorkerConfig{Window: 5 * time.Second, Concurrency: 2},
		Setup: func(env *sluicetest.Env) sluice.WorkerHandler {
			ship := env.Service("ship", sluicetest.ServiceFaults{})
			return func(ctx context.Context, m sluice.Message) error {
				_, err := ship.Do(ctx, sluicetest.Request{Op: "ship", Key: string(m.Body)}) // no idempotency key
				return err
			}
		},
		Workload: func(r *rand.Rand, p *sluicetest.Sends) {
			for i := range 1 + r.Intn(5) {
				p.Send(time.Duration(r.Intn(5000))*time.Millisecond, []byte(fmt.Sprintf("order-%d", i)))
			}
		},
		Invariants: []sluicetest.WorkerInvariant{
			sluicetest.ExactlyOnceMessages("ship", func(body []byte) string { return string(body) }),
		},
	}
	f, err := sluicetest.FindWorker(sc, sluicetest.Seeds(300), sluicetest.TimelineDir(os.TempDir()))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("found:", f != nil)
	fmt.Println("invariant:", f.Shrunk.Invariant)
	// Output:
	// found: true
	// invariant: exactly-once ship effect per key
}
