package sluiceui_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluiceui"
)

// BenchmarkJobsPage renders a page of 100 jobs from a runner holding 10,000 (all pending, an
// hour away), and the same page filtered to a state no job is in (the scan bound decides its
// cost), against the overview as the baseline.
func BenchmarkJobsPage(b *testing.B) {
	r, err := sluice.Open(b.TempDir(), sluice.Config{}, sluice.JSON[string](),
		func(context.Context, sluice.Job[string]) sluice.Outcome { return sluice.Succeeded() })
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	jobs := make([]sluice.NewJob[string], 1000)
	for i := range jobs {
		jobs[i] = sluice.NewJob[string]{Due: time.Now().Add(time.Hour), Target: "t.example", Payload: `{"to":"ada@example.com"}`}
	}
	for range 10 {
		if _, err := r.EnqueueMany(context.Background(), jobs); err != nil {
			b.Fatal(err)
		}
	}
	h := sluiceui.New(sluiceui.FromRunner(r.Runner), sluiceui.Options{Logger: quiet, PublicRead: true})
	for _, bc := range []struct{ name, path string }{
		{"overview", "/"},
		{"jobs100", "/jobs?limit=100"},
		{"deadNone", "/jobs?state=dead&limit=100"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", bc.path, nil))
				if rec.Code != 200 {
					b.Fatalf("GET %s = %d", bc.path, rec.Code)
				}
			}
		})
	}
}
