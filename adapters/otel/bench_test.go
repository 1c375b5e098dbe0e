package otel_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

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

// BenchmarkMiddlewareCall is the middleware alone around a handler that does nothing: bare
// is the call, otel the call with a span (and, for a worker, the two metric records).
func BenchmarkMiddlewareCall(b *testing.B) {
	inner := func(context.Context, sluice.Call) sluice.Verdict {
		return sluice.Verdict{Kind: sluice.VerdictSucceeded}
	}
	ctx := context.Background()
	run := func(b *testing.B, h sluice.CallHandler, c sluice.Call) {
		b.ReportAllocs()
		for b.Loop() {
			h(ctx, c)
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, inner, sluice.Call{ID: "1", Target: "t", Attempt: 1}) })
	b.Run("otel-runner", func(b *testing.B) {
		run(b, benchInstruments(b).Middleware()(inner), sluice.Call{ID: "1", Target: "t", Attempt: 1})
	})
	b.Run("otel-worker", func(b *testing.B) {
		run(b, benchInstruments(b).Middleware()(inner), sluice.Call{Worker: true, ID: "m-1", Attempt: 1})
	})
}

// BenchmarkRunnerAttempt is the cost per job of a runner with and without the instruments
// (hooks and middleware): a fresh runner (not timed) enqueues 256 jobs in one batch and drains
// them (timed). The journal is on sim/disk, so the driver's CPU cost is measured rather than
// the disk's fsync (which, on a real disk, dominates both and hides the difference in noise).
// The ratio otel/bare is the overhead a user pays per attempt.
func BenchmarkRunnerAttempt(b *testing.B) {
	for _, c := range []struct {
		name string
		inst bool
	}{{"bare", false}, {"otel", true}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := sluice.Config{Capacity: 8, Logger: quiet}
			if c.inst {
				cfg = benchInstruments(b).Runner(cfg)
			}
			ctx := context.Background()
			jobs := make([]sluice.NewJob[string], 256)
			for i := range jobs {
				jobs[i] = sluice.NewJob[string]{Target: "t", Payload: "x", Due: time.Time{}}
			}
			n := 0
			for b.Loop() {
				b.StopTimer()
				cfg := cfg
				runneropt.Set(&cfg, runneropt.Options{FS: disk.New(1)})
				r, err := sluice.Open("", cfg, sluice.JSON[string](), func(context.Context, sluice.Job[string]) sluice.Outcome {
					return sluice.Succeeded()
				})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := r.EnqueueMany(ctx, jobs); err != nil {
					b.Fatal(err)
				}
				if err := r.Drain(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				r.Close()
				b.StartTimer()
				n += len(jobs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/job")
		})
	}
}
