package sluiceui_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"

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
