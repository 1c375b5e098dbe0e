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

	send := func(ctx context.Context, j sluice.Job[email]) sluice.Outcome {
		fmt.Printf("attempt %d: mail %q to %s\n", j.Attempt, j.Payload.Subject, j.Payload.To)
		return sluice.Succeeded()
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
	j, _ := r.Get(id)
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
		func(context.Context, sluice.Job[email]) sluice.Outcome { return sluice.Succeeded() })
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
