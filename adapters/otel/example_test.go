package otel_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/sluicehq/sluice"
	sluiceotel "github.com/sluicehq/sluice/adapters/otel"
)

// Prometheus users get the metrics through OpenTelemetry's Prometheus exporter: a registry
// (prometheus.DefaultRegisterer in a real service, served by promhttp.Handler()), a meter
// provider reading into it, and the runner's Config instrumented.
func Example_prometheus() {
	dir, _ := os.MkdirTemp("", "sluice-example")
	defer os.RemoveAll(dir)
	handler := func(ctx context.Context, j sluice.Job[string]) error { return nil }

	// README:begin
	reg := prometheus.NewRegistry() // prometheus.DefaultRegisterer in a service
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutTargetInfo(), otelprom.WithoutScopeInfo())
	if err != nil {
		log.Fatal(err)
	}
	in, err := sluiceotel.New(sluiceotel.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))})
	if err != nil {
		log.Fatal(err)
	}
	cfg := in.Runner(sluice.Config{Capacity: 2}) // your Config, with hooks and middleware added
	r, err := sluice.Open(dir, cfg, sluice.JSON[string](), handler)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	stats, _ := in.ObserveRunner(r.Stats) // jobs by state, read at each scrape
	defer stats.Unregister()
	// then serve reg: http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// README:end
	ctx := context.Background()
	for range 3 {
		if _, err := r.Enqueue(ctx, time.Time{}, "mail.example.com", "hello"); err != nil {
			log.Fatal(err)
		}
	}
	if err := r.Drain(ctx); err != nil {
		log.Fatal(err)
	}

	// Scrape it as Prometheus would.
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "sluice_attempt_outcomes_total") || strings.HasPrefix(l, "sluice_runner_jobs{state=\"succeeded\"") {
			fmt.Println(l)
		}
	}
	// Output:
	// sluice_attempt_outcomes_total{next="succeeded",outcome="succeeded",sluice_role="runner",sluice_target="mail.example.com"} 3
	// sluice_runner_jobs{state="succeeded"} 3
}
