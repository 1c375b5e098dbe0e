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
