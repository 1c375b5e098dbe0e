package sluice_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/sluicehq/sluice"
)

type email struct {
	To, Subject string
}

func Example() {
	dir, err := os.MkdirTemp("", "sluice-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	send := func(ctx context.Context, j sluice.Job[email]) error {
		fmt.Printf("attempt %d: mail %q to %s\n", j.Attempt, j.Payload.Subject, j.Payload.To)
		return nil
	}
	r, err := sluice.Open(dir, sluice.Config{Capacity: 1}, sluice.JSON[email](), send)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	ctx := context.Background()
	// Enqueue returns once the job is on disk (fsynced): it survives a crash from here on.
	id, err := r.Enqueue(ctx, time.Time{}, "smtp.example.com", email{To: "ada@example.com", Subject: "hello"})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	j, _ := r.Get(ctx, id)
	fmt.Println("job", j.ID, j.State, "after", j.Attempts, "attempt")
	// Output:
	// attempt 1: mail "hello" to ada@example.com
	// job 1 succeeded after 1 attempt
}

// ExampleInspect looks at a runner's directory without changing it: nothing is written, no
// lock is taken, and an attempt a crash interrupted would be listed, not recorded.
func ExampleInspect() {
	dir, err := os.MkdirTemp("", "sluice-inspect")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	r, err := sluice.Open(dir, sluice.Config{}, sluice.JSON[email](),
		func(context.Context, sluice.Job[email]) error { return nil })
	if err != nil {
		log.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if _, err := r.Enqueue(context.Background(), later, "smtp.example.com", email{To: "ada@example.com"}); err != nil {
		log.Fatal(err)
	}
	if err := r.Close(); err != nil {
		log.Fatal(err)
	}

	in, err := sluice.Inspect(dir)
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range in.Jobs {
		fmt.Println("job", j.ID, j.State, "attempts", j.Attempts, "target", j.Target)
	}
	fmt.Println("interrupted:", len(in.Interrupted))
	// Output:
	// job 1 pending attempts 0 target smtp.example.com
	// interrupted: 0
}

// ExampleWithPriority shows per-job options: among due jobs the higher priority starts first;
// WithAttempts and WithDeadline replace the policy's budget for one job.
func ExampleWithPriority() {
	dir, err := os.MkdirTemp("", "sluice-priority")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	r, err := sluice.Open(dir, sluice.Config{Capacity: 1}, sluice.JSON[email](),
		func(_ context.Context, j sluice.Job[email]) error {
			fmt.Println("sending", j.Payload.Subject)
			return nil
		})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	for _, e := range []struct {
		subject  string
		priority int
	}{{"newsletter", -5}, {"receipt", 0}, {"password reset", 10}} {
		if _, err := r.Enqueue(ctx, time.Time{}, "smtp.example.com", email{Subject: e.subject},
			sluice.WithPriority(e.priority), sluice.WithAttempts(3), sluice.WithDeadline(time.Hour)); err != nil {
			log.Fatal(err)
		}
	}
	if err := r.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// sending password reset
	// sending receipt
	// sending newsletter
}

// ExampleKind_EnqueueMany journals many jobs in one batch: one fsync for all of them.
func ExampleKind_EnqueueMany() {
	dir, err := os.MkdirTemp("", "sluice-many")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	r, err := sluice.Open(dir, sluice.Config{}, sluice.JSON[email](),
		func(context.Context, sluice.Job[email]) error { return nil })
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	var jobs []sluice.NewJob[email]
	for _, to := range []string{"ada@example.com", "grace@example.com", "alan@example.com"} {
		jobs = append(jobs, sluice.NewJob[email]{Target: "smtp.example.com", Payload: email{To: to, Subject: "hello"}})
	}
	ctx := context.Background()
	before, err := r.Stats(ctx)
	if err != nil {
		log.Fatal(err)
	}
	ids, err := r.EnqueueMany(ctx, jobs)
	if err != nil {
		log.Fatal(err)
	}
	after, err := r.Stats(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ids", ids, "in", after.Commits-before.Commits, "commit")
	// Output:
	// ids [1 2 3] in 1 commit
}

// ExampleWithUnique admits one live job per key: a second enqueue of the same order returns
// the first job's id and journals nothing.
func ExampleWithUnique() {
	dir, err := os.MkdirTemp("", "sluice-unique")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	r, err := sluice.Open(dir, sluice.Config{}, sluice.JSON[email](),
		func(context.Context, sluice.Job[email]) error { return nil })
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	receipt := email{To: "ada@example.com", Subject: "order 7 paid"}
	a, _ := r.Enqueue(ctx, time.Time{}, "smtp.example.com", receipt, sluice.WithUnique("receipt/order-7"))
	var dup bool
	b, _ := r.Enqueue(ctx, time.Time{}, "smtp.example.com", receipt, sluice.WithUnique("receipt/order-7"), sluice.WasDuplicate(&dup))
	fmt.Println(a, b, "duplicate:", dup)
	// Output:
	// 1 1 duplicate: true
}

// ExampleKind_List pages through the dead jobs of one target, 2 at a time, with the cursor.
func ExampleKind_List() {
	dir, err := os.MkdirTemp("", "sluice-list")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	r, err := sluice.Open(dir, sluice.Config{Capacity: 1}, sluice.JSON[email](),
		func(_ context.Context, j sluice.Job[email]) error {
			if j.Payload.To == "" {
				return sluice.Permanent(fmt.Errorf("no recipient"))
			}
			return nil
		})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	for _, to := range []string{"", "ada@example.com", "", ""} {
		if _, err := r.Enqueue(ctx, time.Time{}, "smtp.example.com", email{To: to}); err != nil {
			log.Fatal(err)
		}
	}
	if err := r.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	f := sluice.ListFilter{States: []sluice.State{sluice.StateDead}, Target: "smtp.example.com", Limit: 2}
	for {
		page, err := r.List(ctx, f)
		if err != nil {
			log.Fatal(err)
		}
		for _, j := range page.Jobs {
			fmt.Println("job", j.ID, j.State, j.Reason == sluice.ReasonPermanent, j.LastErr)
		}
		if !page.More {
			break
		}
		f.After = page.Next
	}
	// Output:
	// job 1 dead true no recipient
	// job 3 dead true no recipient
	// job 4 dead true no recipient
}

type resize struct {
	Image string
	Width int
}

// ExampleRegister runs two kinds of job from one runner: one journal, one group commit, one
// pool. Resizes are limited to one at a time; a welcome mail is sent at most once a day per
// user (its unique key stays reserved for 24 hours after the success).
func ExampleRegister() {
	dir, err := os.MkdirTemp("", "sluice-kinds")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	r, err := sluice.New(dir, sluice.Config{Capacity: 4})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	emails, err := sluice.Register(r, "email", sluice.JSON[email](),
		func(ctx context.Context, j sluice.Job[email]) error {
			fmt.Printf("mail %q to %s\n", j.Payload.Subject, j.Payload.To)
			return nil
		})
	if err != nil {
		log.Fatal(err)
	}
	resizes, err := sluice.Register(r, "resize", sluice.JSON[resize](),
		func(ctx context.Context, j sluice.Job[resize]) error {
			fmt.Printf("resize %s to %d px\n", j.Payload.Image, j.Payload.Width)
			return nil
		}, sluice.WithConcurrency(1))
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	welcome := email{To: "ada@example.com", Subject: "welcome"}
	once := []sluice.JobOption{sluice.WithUnique("welcome:ada"), sluice.WithUniqueWindow(24 * time.Hour)}
	if _, err := emails.Enqueue(ctx, time.Time{}, "smtp.example.com", welcome, once...); err != nil {
		log.Fatal(err)
	}
	if _, err := resizes.Enqueue(ctx, time.Time{}, "images", resize{Image: "ada.png", Width: 64}); err != nil {
		log.Fatal(err)
	}
	if err := r.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	// Sent already: within the window the same key is a duplicate of the succeeded job.
	var dup bool
	id, err := emails.Enqueue(ctx, time.Time{}, "smtp.example.com", welcome, append(once, sluice.WasDuplicate(&dup))...)
	if err != nil {
		log.Fatal(err)
	}
	j, _ := emails.Get(ctx, id)
	fmt.Println("duplicate:", dup, "of job", j.ID, j.Kind, j.State)
	// Unordered output:
	// mail "welcome" to ada@example.com
	// resize ada.png to 64 px
	// duplicate: true of job 1 email succeeded
}
