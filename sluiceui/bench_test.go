package sluiceui_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"sync"
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
		func(context.Context, sluice.Job[string]) error { return nil })
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

// BenchmarkEnqueueBesideHostileRequests measures Enqueue's latency on a runner of 100,000
// jobs, idle and while a visitor repeats the most expensive requests the UI accepts: a jobs
// page filtered to a state no job is in (it looks at 100,000 ids) and the overview (a census
// of every job). Reads run in chunks between which the runner commits, so the median beside
// them stays within about 2× of idle (a megabyte state list took 8.8 to 11.6 s and held every
// Enqueue for as long; it is now refused unread). Metrics: p50 and p99 in µs, and their
// ratio to idle.
func BenchmarkEnqueueBesideHostileRequests(b *testing.B) {
	r, err := sluice.Open(b.TempDir(), sluice.Config{}, sluice.JSON[string](),
		func(context.Context, sluice.Job[string]) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	jobs := make([]sluice.NewJob[string], 1000)
	for i := range jobs {
		jobs[i] = sluice.NewJob[string]{Due: time.Now().Add(time.Hour), Target: "t.example", Payload: "x"}
	}
	for range 100 {
		if _, err := r.EnqueueMany(ctx, jobs); err != nil {
			b.Fatal(err)
		}
	}
	h := sluiceui.New(sluiceui.FromRunner(r.Runner), sluiceui.Options{Logger: quiet, PublicRead: true})
	enqueue := func() time.Duration {
		start := time.Now()
		if _, err := r.Enqueue(ctx, time.Now().Add(time.Hour), "e.example", "y"); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	// visit repeats the expensive requests until stop is closed.
	visit := func(stop chan struct{}, done *sync.WaitGroup) {
		defer done.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			path := "/jobs?state=dead&limit=1000"
			if i%4 == 3 {
				path = "/"
			}
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
		}
	}
	// Idle and busy alternate in rounds, so drift in the machine's load falls on both.
	const rounds, per = 8, 50
	b.ResetTimer()
	for b.Loop() {
		var idle, busy []time.Duration
		for range rounds {
			for range per {
				idle = append(idle, enqueue())
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go visit(stop, &wg)
			for range per {
				busy = append(busy, enqueue())
			}
			close(stop)
			wg.Wait()
		}
		slices.Sort(idle)
		slices.Sort(busy)
		p := func(v []time.Duration, q float64) float64 { return float64(v[int(q*float64(len(v)-1))].Microseconds()) }
		b.ReportMetric(p(idle, .5), "idle-p50-µs")
		b.ReportMetric(p(busy, .5), "busy-p50-µs")
		b.ReportMetric(p(idle, .99), "idle-p99-µs")
		b.ReportMetric(p(busy, .99), "busy-p99-µs")
		b.ReportMetric(p(busy, .5)/p(idle, .5), "p50-ratio")
	}
}
