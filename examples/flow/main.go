// Command flow syncs the accounts of a few tenants on the local runner with flow control: a
// big tenant's backlog does not hold up a small one (WithFairShare), no tenant runs more than
// two syncs at once (WithKeyConcurrency) nor starts more than 20 a second (WithKeyRate), and
// an attempt that hangs is cut after 2 s (WithAttemptTimeout). Schema migrations run as a
// sequence (WithGroup) that a failed step holds (WithHoldOnDead).
//
//	go run ./examples/flow -dir /tmp/flow
//
// It enqueues the work, drains it, and prints the order the syncs started in and what waits.
// main_test.go runs it and checks the limits held.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// Sync is the sync kind's payload: one page of one tenant's accounts.
type Sync struct {
	Tenant string `json:"tenant"`
	Page   int    `json:"page"`
}

func main() {
	dir := flag.String("dir", "", "the runner's directory")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "flow: give -dir")
		os.Exit(2)
	}
	if _, err := run(context.Background(), *dir, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "flow:", err)
		os.Exit(1)
	}
}

// report is what a run saw.
type report struct {
	mu      sync.Mutex
	order   []string       // tenants, in the order their syncs started
	running map[string]int // syncs running, by tenant
	peak    map[string]int // the most that ran at once, by tenant
	steps   []string       // migration steps, in the order they ran
}

func (r *report) start(tenant string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.order = append(r.order, tenant)
	r.running[tenant]++
	r.peak[tenant] = max(r.peak[tenant], r.running[tenant])
}

func (r *report) end(tenant string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[tenant]--
}

// run enqueues 12 pages of tenant "big" and 3 of "small", and three migration steps the first
// of which fails once; it drains, retries the failed step, drains again and reports to out.
func run(ctx context.Context, dir string, out io.Writer) (*report, error) {
	rep := &report{running: map[string]int{}, peak: map[string]int{}}
	r, err := sluice.New(dir, sluice.Config{Capacity: 4, Policy: sluice.Policy{Attempts: 1}})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	syncs, err := sluice.Register(r, "sync", sluice.JSON[Sync](),
		func(ctx context.Context, j sluice.Job[Sync]) error {
			rep.start(j.Payload.Tenant)
			defer rep.end(j.Payload.Tenant)
			select { // the call to the tenant's API
			case <-time.After(5 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		sluice.WithFairShare(), sluice.WithKeyConcurrency(2),
		sluice.WithKeyRate(sluice.Rate{Count: 20, Per: time.Second, Burst: 2}),
		sluice.WithAttemptTimeout(2*time.Second))
	if err != nil {
		return nil, err
	}
	failed := false
	migrations, err := sluice.Register(r, "migrate", sluice.JSON[string](),
		func(ctx context.Context, j sluice.Job[string]) error {
			rep.mu.Lock()
			defer rep.mu.Unlock()
			rep.steps = append(rep.steps, j.Payload)
			if j.Payload == "add column" && !failed {
				failed = true
				return errors.New("lock timeout")
			}
			return nil
		}, sluice.WithHoldOnDead())
	if err != nil {
		return nil, err
	}

	var jobs []sluice.NewJob[Sync]
	for tenant, pages := range map[string]int{"big": 12, "small": 3} {
		for p := range pages {
			jobs = append(jobs, sluice.NewJob[Sync]{Target: "api", Payload: Sync{tenant, p},
				Options: []sluice.JobOption{sluice.WithKey(tenant)}})
		}
	}
	if _, err := syncs.EnqueueMany(ctx, jobs); err != nil {
		return nil, err
	}
	var steps []uint64
	for _, step := range []string{"add column", "backfill", "drop old column"} {
		id, err := migrations.Enqueue(ctx, time.Time{}, "db", step, sluice.WithGroup("schema"))
		if err != nil {
			return nil, err
		}
		steps = append(steps, id)
	}
	if err := r.Drain(ctx); err != nil {
		return nil, err
	}
	st, err := r.Stats(ctx)
	if err != nil {
		return nil, err
	}
	held, err := migrations.Get(ctx, steps[1])
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "syncs started: %s\n", strings.Join(rep.order, " "))
	fmt.Fprintf(out, "migrations: %d dead, %d held; %q: %s\n", st.Dead, st.Held, held.Payload, held.Blocked)
	if err := migrations.Retry(ctx, steps[0]); err != nil {
		return nil, err
	}
	if err := r.Drain(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "migration steps ran: %s\n", strings.Join(rep.steps, ", "))
	return rep, nil
}
