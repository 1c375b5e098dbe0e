package sluice_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
)

// The functions in this file hold the Go blocks of README.md's runner section, between their
// "// NAME:begin" and "// NAME:end" lines; examples/quickstart's readme_test.go checks that
// README shows them as they are.

// Email is README's payload.
type Email struct {
	To, Subject string
}

// Resize is README's second kind of job.
type Resize struct {
	Image string
	Width int
}

// Report and Sync are README's periodic jobs.
type (
	Report struct{ Team string }
	Sync   struct{}
)

func tempDir(prefix string) string {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		log.Fatal(err)
	}
	return dir
}

// TestReadmeRunnerBlocksRun runs README's first two runner blocks until every job they
// enqueue was handled: each handler ends the context after the last job.
func TestReadmeRunnerBlocksRun(t *testing.T) {
	var mu sync.Mutex
	var handled []string
	handle := func(stop context.CancelFunc, want int, what string) {
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, what)
		if len(handled) == want {
			stop()
		}
	}

	ctx, stop := context.WithCancel(context.Background())
	send := func(_ context.Context, e Email) error { handle(stop, 1, "mail to "+e.To); return nil }
	if err := readmeOpen(ctx, t.TempDir(), send); err != nil {
		t.Fatalf("the Open block: %v", err)
	}
	if diff := cmp.Diff([]string{"mail to ada@example.com"}, handled); diff != "" {
		t.Errorf("the Open block handled (-want +got):\n%s", diff)
	}

	handled = nil
	ctx, stop = context.WithCancel(context.Background())
	sendEmail := func(_ context.Context, j sluice.Job[Email]) error {
		handle(stop, 2, "mail "+j.Payload.Subject)
		return nil
	}
	resize := func(_ context.Context, j sluice.Job[Resize]) error {
		handle(stop, 2, "resize "+j.Payload.Image)
		return nil
	}
	if err := readmeKinds(ctx, t.TempDir(), sendEmail, resize); err != nil {
		t.Fatalf("the New block: %v", err)
	}
	sort.Strings(handled)
	if diff := cmp.Diff([]string{"mail welcome", "resize ada.png"}, handled); diff != "" {
		t.Errorf("the New block handled (-want +got):\n%s", diff)
	}
}

func readmeOpen(ctx context.Context, dir string, send func(context.Context, Email) error) error {
	// open:begin
	r, err := sluice.Open(dir, sluice.Config{Capacity: 8}, sluice.JSON[Email](),
		func(ctx context.Context, j sluice.Job[Email]) error {
			return send(ctx, j.Payload) // nil → succeeded, Permanent(err) → dead, else retried
		})
	if err != nil {
		return err
	}
	if _, err := r.Enqueue(ctx, time.Time{}, "smtp.example.com", Email{To: "ada@example.com"}); err != nil {
		return err
	}
	// Enqueue returned: the job is fsynced and survives any crash from here on.
	return r.Run(ctx) // until ctx ends; then stops gracefully (below) and closes
	// open:end
}

func readmeKinds(ctx context.Context, dir string, sendEmail sluice.Handler[Email], resize sluice.Handler[Resize]) error {
	welcome := Email{To: "ada@example.com", Subject: "welcome"}
	// kinds:begin
	r, err := sluice.New(dir, sluice.Config{Capacity: 8})
	if err != nil {
		return err
	}
	emails, err := sluice.Register(r, "email", sluice.JSON[Email](), sendEmail)
	if err != nil {
		return err
	}
	resizes, err := sluice.Register(r, "resize", sluice.JSON[Resize](), resize, sluice.WithConcurrency(2))
	if err != nil {
		return err
	}
	if _, err := emails.Enqueue(ctx, time.Time{}, "smtp.example.com", welcome,
		sluice.WithUnique("welcome:42"), sluice.WithUniqueWindow(24*time.Hour)); err != nil {
		return err
	}
	if _, err := resizes.Enqueue(ctx, time.Time{}, "images", Resize{Image: "ada.png", Width: 64}); err != nil {
		return err
	}
	return r.Run(ctx)
	// kinds:end
}

// ExampleKind_Enqueue enqueues one job with options and two in one batch.
func ExampleKind_Enqueue() {
	dir := tempDir("sluice-readme-options")
	defer os.RemoveAll(dir)
	r, err := sluice.Open(dir, sluice.Config{Capacity: 1}, sluice.JSON[Email](),
		func(_ context.Context, j sluice.Job[Email]) error {
			fmt.Println("mail", j.Payload.Subject)
			return nil
		})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	reset, a, b := Email{Subject: "reset"}, Email{Subject: "a"}, Email{Subject: "b"}
	// options:begin
	id, err := r.Enqueue(ctx, time.Time{}, "smtp.example.com", reset, sluice.WithPriority(10), sluice.WithAttempts(3))
	if err != nil {
		log.Fatal(err)
	}
	ids, err := r.EnqueueMany(ctx, []sluice.NewJob[Email]{{Target: "smtp.example.com", Payload: a}, {Target: "smtp.example.com", Payload: b}})
	if err != nil {
		log.Fatal(err)
	}
	// options:end
	fmt.Println(id, ids)
	if err := r.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 1 [2 3]
	// mail reset
	// mail a
	// mail b
}

// ExampleKind_Schedule_twoSchedules keeps a cron schedule and an interval that skips missed
// periods; the mock clock stands in for the passing of time.
func ExampleKind_Schedule_twoSchedules() {
	dir := tempDir("sluice-readme-schedule")
	defer os.RemoveAll(dir)
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 3, 2, 8, 58, 0, 0, time.UTC))
	r, err := sluice.New(dir, sluice.Config{Capacity: 1, Clock: clk})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	reports, err := sluice.Register(r, "report", sluice.JSON[Report](), func(_ context.Context, j sluice.Job[Report]) error {
		fmt.Println("report for", j.Payload.Team)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	syncs, err := sluice.Register(r, "sync", sluice.JSON[Sync](), func(_ context.Context, j sluice.Job[Sync]) error {
		fmt.Println("sync at", j.Due.Format("15:04"))
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	// schedule:begin
	err = reports.Schedule(ctx, "daily-ops", "0 9 * * *", "reports", Report{Team: "ops"}) // call at every start
	if err != nil {
		log.Fatal(err)
	}
	err = syncs.Schedule(ctx, "sync", sluice.Every(5*time.Minute), "crm", Sync{}, sluice.SkipMissed())
	if err != nil {
		log.Fatal(err)
	}
	// schedule:end
	clk.Add(3 * time.Minute) // 09:01
	if err := r.DrainDue(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// report for ops
}
