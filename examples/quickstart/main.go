// Command quickstart is README's quick start: a durable runner that sends (here: prints) one
// email, in a directory given as the first argument (default: a new temporary directory).
//
// README shows the region between the "README:begin" and "README:end" lines of run, as it
// is; readme_test.go fails if the two differ, so the quick start always compiles.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/sluicehq/sluice"
)

// Email is the job's payload, journaled as JSON.
type Email struct {
	To, Subject string
}

// send stands for the real work: it may fail, and sluice retries it.
func send(ctx context.Context, e Email) error {
	fmt.Printf("sending %q to %s\n", e.Subject, e.To)
	return nil
}

func main() {
	dir := ""
	if len(os.Args) > 1 {
		dir = os.Args[1]
	} else {
		var err error
		if dir, err = os.MkdirTemp("", "sluice-quickstart"); err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(dir)
	}
	if err := run(dir); err != nil {
		log.Fatal(err)
	}
}

func run(dir string) error {
	// README:begin
	r, err := sluice.Open(dir, sluice.Config{}, sluice.JSON[Email](),
		func(ctx context.Context, j sluice.Job[Email]) error {
			return send(ctx, j.Payload) // nil: succeeded; Permanent(err): dead; else retried
		})
	if err != nil {
		return err
	}
	defer r.Close()

	ctx := context.Background()
	id, err := r.Enqueue(ctx, time.Time{}, "smtp.example.com", Email{To: "ada@example.com", Subject: "hello"})
	if err != nil {
		return err
	}
	// Enqueue returned: the job is on disk (fsynced) and survives a crash from here on.

	if err := r.Drain(ctx); err != nil { // work until nothing is left; a service calls r.Run(ctx)
		return err
	}
	job, err := r.Get(ctx, id)
	if err != nil {
		return err
	}
	fmt.Println("job", job.ID, job.State, "after", job.Attempts, "attempt")
	// README:end
	return nil
}
