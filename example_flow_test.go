package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// newRunner opens a runner in a temporary directory; done closes it and removes the directory.
func newRunner(capacity int, policy sluice.Policy) (r *sluice.Runner, done func()) {
	dir, err := os.MkdirTemp("", "sluice-flow")
	if err != nil {
		log.Fatal(err)
	}
	r, err = sluice.New(dir, sluice.Config{Capacity: capacity, Policy: policy})
	if err != nil {
		log.Fatal(err)
	}
	return r, func() { r.Close(); os.RemoveAll(dir) }
}

// ExampleWithRate bounds a kind's starts: 20 a second, one at a time (Burst 1). The bucket
// starts empty when the runner opens, so a restart grants no burst: the first start waits one
// interval (50ms) too.
func ExampleWithRate() {
	r, done := newRunner(4, sluice.Policy{})
	defer done()
	k, err := sluice.Register(r, "api", sluice.JSON[string](),
		func(context.Context, sluice.Job[string]) error { return nil },
		sluice.WithRate(sluice.Rate{Count: 20, Per: time.Second, Burst: 1}))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	ids, err := k.EnqueueMany(ctx, []sluice.NewJob[string]{{Target: "t"}, {Target: "t"}, {Target: "t"}})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	var last time.Time
	for i, id := range ids {
		j, _ := k.Get(ctx, id)
		start := j.History[0].Start // as journaled: when the runner started it
		if i > 0 {
			fmt.Printf("job %d started at least 50ms after job %d: %v\n", id, ids[i-1], start.Sub(last) >= 50*time.Millisecond)
		}
		last = start
	}
	// Output:
	// job 2 started at least 50ms after job 1: true
	// job 3 started at least 50ms after job 2: true
}

// ExampleWithKeyConcurrency runs at most one attempt per customer (WithKey) at once, while
// other customers' jobs run beside it.
func ExampleWithKeyConcurrency() {
	r, done := newRunner(4, sluice.Policy{})
	defer done()
	var mu sync.Mutex
	running, most := map[string]int{}, map[string]int{}
	k, err := sluice.Register(r, "report", sluice.JSON[string](),
		func(ctx context.Context, j sluice.Job[string]) error {
			mu.Lock()
			running[j.Payload]++
			most[j.Payload] = max(most[j.Payload], running[j.Payload])
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			mu.Lock()
			running[j.Payload]--
			mu.Unlock()
			return nil
		}, sluice.WithKeyConcurrency(1))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for _, customer := range []string{"acme", "acme", "acme", "globex", "globex"} {
		if _, err := k.Enqueue(ctx, time.Time{}, "reports", customer, sluice.WithKey(customer)); err != nil {
			log.Fatal(err)
		}
	}
	if err := r.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("at once, at most: acme", most["acme"], "globex", most["globex"])
	// Output: at once, at most: acme 1 globex 1
}

// ExampleWithKeyRate bounds each flow key's starts on its own: 10 a second per customer, one
// at a time (Burst 1). One customer's backlog waits for its own tokens; another customer's
// job starts beside it without waiting for them.
func ExampleWithKeyRate() {
	r, done := newRunner(4, sluice.Policy{})
	defer done()
	k, err := sluice.Register(r, "sync", sluice.JSON[string](),
		func(context.Context, sluice.Job[string]) error { return nil },
		sluice.WithKeyRate(sluice.Rate{Count: 10, Per: time.Second, Burst: 1}))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	var jobs []sluice.NewJob[string]
	for _, customer := range []string{"acme", "acme", "acme", "globex"} {
		jobs = append(jobs, sluice.NewJob[string]{Target: "crm", Payload: customer,
			Options: []sluice.JobOption{sluice.WithKey(customer)}})
	}
	ids, err := k.EnqueueMany(ctx, jobs)
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	start := func(id uint64) time.Time { j, _ := k.Get(ctx, id); return j.History[0].Start }
	gap := func(a, b uint64) bool { return start(b).Sub(start(a)) >= 100*time.Millisecond }
	fmt.Println("acme's jobs 100ms apart:", gap(ids[0], ids[1]), gap(ids[1], ids[2]))
	fmt.Println("globex waited for acme's backlog:", !start(ids[3]).Before(start(ids[2])))
	// Output:
	// acme's jobs 100ms apart: true true
	// globex waited for acme's backlog: false
}

// ExampleWithKeyFunc derives each job's flow key from its payload at Register, so no
// Enqueue has to pass WithKey: here one sync per tenant at a time.
func ExampleWithKeyFunc() {
	type sync struct{ Tenant, Table string }
	r, done := newRunner(4, sluice.Policy{})
	defer done()
	k, err := sluice.Register(r, "sync", sluice.JSON[sync](),
		func(context.Context, sluice.Job[sync]) error { return nil },
		sluice.WithKeyFunc(func(s sync) string { return s.Tenant }), sluice.WithKeyConcurrency(1))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	id, err := k.Enqueue(ctx, time.Time{}, "warehouse", sync{Tenant: "acme", Table: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	j, _ := k.Get(ctx, id)
	fmt.Println("key:", j.Key)
	// Output: key: acme
}

// ExampleWithFairShare serves the keys of a kind in turn: a tenant that enqueued a backlog
// first does not keep another tenant's jobs waiting behind all of it.
func ExampleWithFairShare() {
	r, done := newRunner(1, sluice.Policy{})
	defer done()
	var order []string
	k, err := sluice.Register(r, "sync", sluice.JSON[string](),
		func(ctx context.Context, j sluice.Job[string]) error {
			order = append(order, j.Payload) // one unit: one handler at a time
			return nil
		}, sluice.WithFairShare())
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tenant := range []string{"a", "a", "a", "a", "b", "b"} {
		if _, err := k.Enqueue(ctx, time.Time{}, "t", tenant, sluice.WithKey(tenant)); err != nil {
			log.Fatal(err)
		}
	}
	if err := r.Drain(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Println(strings.Join(order, " "))
	// Output: a b a b a a
}

// ExampleWithGroup runs a sequence: the jobs of one group start one at a time, in enqueue
// order. With WithHoldOnDead a dead job keeps the rest waiting until it is retried (or
// cancelled): a migration that failed is not followed by the next one.
func ExampleWithGroup() {
	r, done := newRunner(4, sluice.Policy{Attempts: 1})
	defer done()
	failed := false
	k, err := sluice.Register(r, "migrate", sluice.JSON[string](),
		func(ctx context.Context, j sluice.Job[string]) error {
			fmt.Println("run", j.Payload)
			if j.Payload == "step 1" && !failed {
				failed = true
				return errors.New("lock timeout")
			}
			return nil
		}, sluice.WithHoldOnDead())
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	var ids []uint64
	for _, step := range []string{"step 1", "step 2", "step 3"} {
		id, err := k.Enqueue(ctx, time.Time{}, "db", step, sluice.WithGroup("db"))
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := r.Drain(ctx); err != nil { // returns: the held jobs wait for an operator
		log.Fatal(err)
	}
	st, _ := r.Stats(ctx)
	fmt.Println("dead", st.Dead, "held", st.Held)
	if err := k.Retry(ctx, ids[0]); err != nil {
		log.Fatal(err)
	}
	if err := r.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// run step 1
	// dead 1 held 2
	// run step 1
	// run step 2
	// run step 3
}

// ExampleKind_Pause stops a kind from starting attempts, durably (a restart keeps it
// paused), until Resume. Its jobs wait, and say why.
func ExampleKind_Pause() {
	r, done := newRunner(4, sluice.Policy{})
	defer done()
	k, err := sluice.Register(r, "mail", sluice.JSON[string](),
		func(ctx context.Context, j sluice.Job[string]) error { fmt.Println("sent", j.Payload); return nil })
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := k.Pause(ctx); err != nil {
		log.Fatal(err)
	}
	id, err := k.Enqueue(ctx, time.Time{}, "smtp", "hello")
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Drain(ctx); err != nil { // returns: a paused kind's jobs are not waited for
		log.Fatal(err)
	}
	paused, _ := r.Paused(ctx)
	j, _ := k.Get(ctx, id)
	fmt.Printf("paused %q; job %d %v: %s\n", paused, id, j.State, j.Blocked)
	if err := k.Resume(ctx); err != nil {
		log.Fatal(err)
	}
	if err := r.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// paused ["mail"]; job 1 pending: its kind is paused
	// sent hello
}

// ExampleWithAttemptTimeout bounds each attempt: the handler's context ends after 50ms with
// cause ErrAttemptTimeout, and the attempt fails, retryably (with one attempt allowed, the
// job dies).
func ExampleWithAttemptTimeout() {
	r, done := newRunner(1, sluice.Policy{Attempts: 1})
	defer done()
	k, err := sluice.Register(r, "fetch", sluice.JSON[string](),
		func(ctx context.Context, j sluice.Job[string]) error {
			<-ctx.Done() // a call that honours its context
			fmt.Println("cause:", context.Cause(ctx))
			return ctx.Err()
		}, sluice.WithAttemptTimeout(50*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	id, err := k.Enqueue(ctx, time.Time{}, "upstream", "page")
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	j, _ := k.Get(ctx, id)
	fmt.Println(j.State, j.Reason, j.LastErr)
	// Output:
	// cause: sluice: attempt timed out
	// dead spent sluice: attempt timed out after 50ms
}
