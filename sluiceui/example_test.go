package sluiceui_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluiceui"
)

// Example mounts the UI under /ops/jobs/ in a service's own mux, beside its live runner.
// Actions are allowed to requests that carry the service's admin header; views to everyone
// who can reach the mux (put it behind your own authentication).
func Example() {
	dir, err := os.MkdirTemp("", "sluiceui-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	codec := sluice.JSON[string]()
	r, err := sluice.Open(dir, sluice.Config{}, codec,
		func(context.Context, sluice.Job[string]) error { return nil })
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	allowAdmins := func(req *http.Request, a sluiceui.Action) error {
		if a == sluiceui.ActionView || req.Header.Get("X-Admin-Token") == os.Getenv("ADMIN_TOKEN") && os.Getenv("ADMIN_TOKEN") != "" {
			return nil
		}
		return errors.New("only admins may retry or cancel jobs")
	}
	mux := http.NewServeMux()
	// README:begin
	ui := sluiceui.New(sluiceui.FromRunner(r.Runner), sluiceui.Options{Authorize: allowAdmins})
	mux.Handle("/ops/jobs/", http.StripPrefix("/ops/jobs", ui))
	// README:end
	// The service then serves mux: http.ListenAndServe("127.0.0.1:8080", mux).

	for _, path := range []string{"/ops/jobs/", "/ops/jobs/jobs?state=dead", "/ops/jobs/breakers"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		fmt.Println("GET", path, rec.Code)
	}
	// Output:
	// GET /ops/jobs/ 200
	// GET /ops/jobs/jobs?state=dead 200
	// GET /ops/jobs/breakers 200
}

// ExampleFromDir_blocked reads a stopped directory whose kind was paused: the source lists the
// paused kinds and says why each waiting job does not start (sequences too; the limits and
// rates a program registers are known only to that program's live runner).
func ExampleFromDir_blocked() {
	dir, err := os.MkdirTemp("", "sluiceui-blocked")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	r, err := sluice.New(dir, sluice.Config{})
	if err != nil {
		log.Fatal(err)
	}
	handler := func(context.Context, sluice.Job[string]) error { return nil }
	email, err := sluice.Register(r, "email", sluice.JSON[string](), handler)
	if err != nil {
		log.Fatal(err)
	}
	invoice, err := sluice.Register(r, "invoice", sluice.JSON[string](), handler)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	later := time.Now().Add(time.Hour)
	if _, err := email.Enqueue(ctx, time.Time{}, "smtp", "a@example.com"); err != nil {
		log.Fatal(err)
	}
	for _, n := range []string{"INV-1", "INV-2"} { // one at a time, in order
		if _, err := invoice.Enqueue(ctx, later, "billing", n, sluice.WithGroup("acme")); err != nil {
			log.Fatal(err)
		}
	}
	if err := r.Pause(ctx, "email"); err != nil {
		log.Fatal(err)
	}
	if err := r.Close(); err != nil {
		log.Fatal(err)
	}

	src, err := sluiceui.FromDir(dir)
	if err != nil {
		log.Fatal(err)
	}
	paused, _ := src.Paused(ctx)
	fmt.Println("paused:", paused)
	for id := uint64(1); id <= 3; id++ {
		j, _ := src.Get(ctx, id)
		fmt.Printf("job %d: %q\n", id, j.Blocked)
	}
	// Output:
	// paused: [email]
	// job 1: "its kind is paused"
	// job 2: ""
	// job 3: "sequence \"acme\" is held by job 2"
}
