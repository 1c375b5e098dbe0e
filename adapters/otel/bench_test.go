package otel_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sluicehq/sluice"
	sluiceotel "github.com/sluicehq/sluice/adapters/otel"
	"github.com/sluicehq/sluice/internal/runneropt"
	"github.com/sluicehq/sluice/sim/disk"
)

// benchInstruments are instruments on the real SDK as a service would run it: every span
// sampled and batched to an exporter (one that discards), metrics aggregated for a reader.
func benchInstruments(b *testing.B) *sluiceotel.Instruments {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	in, err := sluiceotel.New(sluiceotel.Options{
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
		TracerProvider: tp,
	})
	if err != nil {
		b.Fatal(err)
	}
	return in
}

// BenchmarkMiddlewareCall is the middleware alone around a handler that does nothing: each
// round makes 1,000 bare calls, then 1,000 through the instruments' middleware (a span, and for
// a worker call the two metric records), so both see the same machine load; it reports the
// cost of each per call and their difference.
func BenchmarkMiddlewareCall(b *testing.B) {
	inner := func(context.Context, sluice.Call) error {
		return nil
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		call sluice.Call
	}{{"runner", sluice.Call{ID: "1", Target: "t", Attempt: 1}}, {"worker", sluice.Call{Worker: true, ID: "m-1", Attempt: 1}}} {
		b.Run(c.name, func(b *testing.B) {
			h := benchInstruments(b).Middleware()(inner)
			var bare, inst time.Duration
			n := 0
			for b.Loop() {
				t0 := time.Now()
				for range 1000 {
					inner(ctx, c.call)
				}
				t1 := time.Now()
				for range 1000 {
					h(ctx, c.call)
				}
				bare, inst, n = bare+t1.Sub(t0), inst+time.Since(t1), n+1000
			}
			b.ReportMetric(float64(bare.Nanoseconds())/float64(n), "bare-ns/call")
			b.ReportMetric(float64(inst.Nanoseconds())/float64(n), "otel-ns/call")
			b.ReportMetric(float64((inst-bare).Nanoseconds())/float64(n), "overhead-ns/call")
		})
	}
}

// BenchmarkRunnerAttempt is the cost per job of a runner with and without the instruments
// (hooks and middleware). Each round opens two fresh runners (not timed), one bare and one
// instrumented, and in each enqueues 256 jobs in one batch and drains them (timed), so both see
// the same machine load. The journal is on sim/disk, so the driver's CPU cost is measured
// rather than the disk's fsync (which, on a real disk, dominates both and hides the difference
// in noise). It reports ns per job of each and the ratio otel/bare: the overhead a user pays
// per attempt.
func BenchmarkRunnerAttempt(b *testing.B) {
	ctx := context.Background()
	jobs := make([]sluice.NewJob[string], 256)
	for i := range jobs {
		jobs[i] = sluice.NewJob[string]{Target: "t", Payload: "x"}
	}
	instCfg := benchInstruments(b).Runner(sluice.Config{Capacity: 8, Logger: quiet})
	// The same instruments with tracing off: what the metrics alone cost.
	metricsOnly, err := sluiceotel.New(sluiceotel.Options{
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
		TracerProvider: tracenoop.NewTracerProvider(),
	})
	if err != nil {
		b.Fatal(err)
	}
	metricsCfg := metricsOnly.Runner(sluice.Config{Capacity: 8, Logger: quiet})
	round := func(cfg sluice.Config) time.Duration {
		b.StopTimer()
		defer b.StartTimer()
		sluice.SetInternalOptions(&cfg, runneropt.Options{FS: disk.New(1)})
		r, err := sluice.Open("", cfg, sluice.JSON[string](), func(context.Context, sluice.Job[string]) error {
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		b.StartTimer()
		t0 := time.Now()
		if _, err := r.EnqueueMany(ctx, jobs); err != nil {
			b.Fatal(err)
		}
		if err := r.Drain(ctx); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		b.StopTimer()
		return d
	}
	var bare, inst, metrics time.Duration
	n := 0
	for b.Loop() {
		bare += round(sluice.Config{Capacity: 8, Logger: quiet})
		inst += round(instCfg)
		metrics += round(metricsCfg)
		n += len(jobs)
	}
	b.ReportMetric(float64(bare.Nanoseconds())/float64(n), "bare-ns/job")
	b.ReportMetric(float64(inst.Nanoseconds())/float64(n), "otel-ns/job")
	b.ReportMetric(float64(inst)/float64(bare), "otel/bare")
	b.ReportMetric(float64(metrics)/float64(bare), "metrics-only/bare")
}
