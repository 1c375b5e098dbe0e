// Command smallest is the smallest program of the package documentation (doc.go): a runner in
// the directory "jobs" that sends (here: prints) one email and then runs until interrupted.
// The documentation shows the region between the "doc.go:begin" and "doc.go:end" lines;
// readme_test.go in the parent directory fails if the two differ.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice"
)

// doc.go:begin
type Email struct{ To, Subject string }

func main() {
	r, err := sluice.Open("jobs", sluice.Config{}, sluice.JSON[Email](),
		func(ctx context.Context, j sluice.Job[Email]) error {
			return send(ctx, j.Payload) // nil: done; else retried
		})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if _, err := r.Enqueue(ctx, time.Time{}, "smtp.example.com", Email{To: "ada@example.com"}); err != nil {
		log.Fatal(err)
	}
	log.Fatal(r.Run(ctx)) // until ctx ends; then a graceful stop and Close
}

// doc.go:end

func send(ctx context.Context, e Email) error {
	fmt.Println("sending to", e.To)
	return nil
}
