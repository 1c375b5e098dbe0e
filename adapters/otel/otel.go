// Package otel reports a sluice runner's and worker's work to OpenTelemetry: metrics through a
// metric.MeterProvider and a span per handler call through a trace.TracerProvider. Prometheus
// users get the metrics through OpenTelemetry's Prometheus exporter (see the package example).
//
// Rules:
//
//  1. It only observes: it is built from sluice's hooks and one Middleware, which pass every
//     handler's verdict on unchanged. Hooks already in a Config are kept and called first.
//  2. The runner's attempt durations and outcomes come from OnAttemptEnded (durable ends,
//     released and interrupted attempts included, by Config.Clock); the worker's from the
//     middleware (the handler's own time, by the wall clock). Both go to the same two
//     instruments, told apart by the sluice.role attribute.
//  3. Queue depth is read when the reader collects (ObserveRunner, ObserveWorker), never
//     pushed; breaker state is the deferrals seen: a target is "open" until the last
//     deferral's end.
//  4. Attribute values come from a small fixed set (roles, outcomes, states, reasons), except
//     sluice.target, which has as many values as the runner has targets: keep targets few
//     (hosts, services), not per-job.
//
// The instruments (unit in brackets):
//
//	sluice.attempt.duration         histogram [s]   role, outcome (runner: + target)
//	sluice.attempt.outcomes         counter         role, outcome (runner: + target, next)
//	sluice.runner.jobs              gauge           state: pending+waiting, deferred, running, succeeded, dead, cancelled
//	sluice.runner.deferrals         counter         target
//	sluice.runner.breaker.open      gauge           target (1 while deferring, 0 once after)
//	sluice.runner.settled           counter         state, reason
//	sluice.journal.batch.records    histogram       (records behind one fsync)
//	sluice.journal.commit.duration  histogram [s]
//	sluice.worker.messages          gauge           state: running, waiting, held
//	sluice.worker.received          counter
//	sluice.worker.lease.renewals    counter
//	sluice.worker.lease.drops       counter         reason
//	sluice.worker.disposed          counter         action: delete, release
//
// Spans are named "sluice.attempt" (runner) and "sluice.message" (worker), with
// sluice.job.id, sluice.job.kind (when set), sluice.job.target and sluice.job.attempt, or
// messaging.message.id and sluice.message.receive_count; a call that did not succeed ends
// with status Error and its error recorded.
package otel

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/sluicehq/sluice/adapters/otel"

// Options configures New. Zero fields take the global providers and time.Now.
type Options struct {
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	// Now is the clock of breaker state (compared with deferrals' ends); give the runner's
	// Config.Clock.Now when it is not the wall clock.
	Now func() time.Time
}

// Instruments holds the meters and the tracer; one serves any number of runners and workers.
type Instruments struct {
	tracer trace.Tracer
	meter  metric.Meter
	now    func() time.Time

	duration, batchDur, batchRecords metric.Float64Histogram
	outcomes, deferrals, settled     metric.Int64Counter
	received, renewals, drops, disp  metric.Int64Counter
	breakerOpen                      metric.Int64ObservableGauge

	mu      sync.Mutex
	openTil map[string]time.Time // target → end of its last deferral

	// opts caches attribute sets by their values, so a measurement allocates none.
	opts sync.Map // optKey → metric.MeasurementOption
}

type optKey struct{ a, b, c, d string }

// option returns the attribute set of key, made once by mk.
func (in *Instruments) option(key optKey, mk func() []attribute.KeyValue) metric.MeasurementOption {
	if o, ok := in.opts.Load(key); ok {
		return o.(metric.MeasurementOption)
	}
	o := metric.WithAttributeSet(attribute.NewSet(mk()...))
	in.opts.Store(key, o)
	return o
}

// New makes the instruments.
func New(opts Options) (*Instruments, error) {
	if opts.MeterProvider == nil {
		opts.MeterProvider = gotel.GetMeterProvider()
	}
	if opts.TracerProvider == nil {
		opts.TracerProvider = gotel.GetTracerProvider()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	in := &Instruments{tracer: opts.TracerProvider.Tracer(ScopeName), meter: opts.MeterProvider.Meter(ScopeName),
		now: opts.Now, openTil: map[string]time.Time{}}
	m := in.meter
	var errs []error
	hist := func(name, unit, desc string, bounds ...float64) metric.Float64Histogram {
		o := []metric.Float64HistogramOption{metric.WithUnit(unit), metric.WithDescription(desc)}
		if len(bounds) > 0 {
			o = append(o, metric.WithExplicitBucketBoundaries(bounds...))
		}
		h, err := m.Float64Histogram(name, o...)
		errs = append(errs, err)
		return h
	}
	count := func(name, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	secs := []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
	in.duration = hist("sluice.attempt.duration", "s", "How long a handler call took.", secs...)
	in.batchDur = hist("sluice.journal.commit.duration", "s", "How long one journal batch took to write and fsync.", secs...)
	in.batchRecords = hist("sluice.journal.batch.records", "{record}", "Records behind one fsync.", 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
	in.outcomes = count("sluice.attempt.outcomes", "Handler calls by outcome.")
	in.deferrals = count("sluice.runner.deferrals", "Jobs a target's breaker held back.")
	in.settled = count("sluice.runner.settled", "Jobs that reached a terminal state.")
	in.received = count("sluice.worker.received", "Deliveries received.")
	in.renewals = count("sluice.worker.lease.renewals", "Lease renewals sent.")
	in.drops = count("sluice.worker.lease.drops", "Running handlers whose lease was dropped.")
	in.disp = count("sluice.worker.disposed", "Dispositions sent.")
	var err error
	in.breakerOpen, err = m.Int64ObservableGauge("sluice.runner.breaker.open",
		metric.WithDescription("1 while a target's breaker defers its jobs."),
		metric.WithInt64Callback(in.observeBreakers))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("sluice: otel: %w", err)
	}
	return in, nil
}

var (
	roleRunner = attribute.String("sluice.role", "runner")
	roleWorker = attribute.String("sluice.role", "worker")
)

// Runner returns cfg with the instruments' hooks and middleware added: cfg's own hooks are
// called first, and the middleware goes outermost.
func (in *Instruments) Runner(cfg sluice.Config) sluice.Config {
	cfg.Middleware = append([]sluice.Middleware{in.Middleware()}, cfg.Middleware...)
	cfg.OnAttemptEnded = then(cfg.OnAttemptEnded, in.attemptEnded)
	cfg.OnDeferred = then(cfg.OnDeferred, in.deferred)
	cfg.OnSettled = then(cfg.OnSettled, in.settledJob)
	cfg.OnCommitted = then(cfg.OnCommitted, in.committed)
	return cfg
}

// Worker returns cfg with the instruments' hooks and middleware added, as Runner does.
func (in *Instruments) Worker(cfg sluice.WorkerConfig) sluice.WorkerConfig {
	cfg.Middleware = append([]sluice.Middleware{in.Middleware()}, cfg.Middleware...)
	ctx := context.Background()
	cfg.OnReceived = then(cfg.OnReceived, func(sluice.MessageReceived) { in.received.Add(ctx, 1) })
	cfg.OnRenewed = then(cfg.OnRenewed, func(sluice.LeaseRenewed) { in.renewals.Add(ctx, 1) })
	cfg.OnDropped = then(cfg.OnDropped, func(e sluice.LeaseDropped) {
		in.drops.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", e.Reason)))
	})
	cfg.OnDisposed = then(cfg.OnDisposed, func(e sluice.MessageDisposed) {
		action := "release"
		if e.Deleted {
			action = "delete"
		}
		in.disp.Add(ctx, 1, metric.WithAttributes(attribute.String("action", action)))
	})
	return cfg
}

// then calls first (if set), then f.
func then[E any](first func(E), f func(E)) func(E) {
	if first == nil {
		return f
	}
	return func(e E) { first(e); f(e) }
}

// ObserveRunner reports the runner's jobs by state whenever the meter's reader collects;
// stats is usually the runner's Stats method, called with the collection's context; its error
// fails that collection. Unregister the result before closing the runner if the meter
// provider outlives it (Stats after Close returns the values at close).
func (in *Instruments) ObserveRunner(stats func(context.Context) (sluice.Stats, error)) (metric.Registration, error) {
	g, err := in.meter.Int64ObservableGauge("sluice.runner.jobs", metric.WithDescription("Jobs by state."))
	if err != nil {
		return nil, fmt.Errorf("sluice: otel: %w", err)
	}
	return in.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		s, err := stats(ctx)
		if err != nil {
			return err
		}
		for _, v := range []struct {
			state string
			n     int
		}{{"waiting", s.Waiting}, {"deferred", s.Deferred}, {"running", s.Running},
			{"succeeded", s.Succeeded}, {"dead", s.Dead}, {"cancelled", s.Cancelled}} {
			o.ObserveInt64(g, int64(v.n), metric.WithAttributes(attribute.String("state", v.state)))
		}
		return nil
	}, g)
}

// ObserveWorker reports the worker's messages by state (running, waiting, held) whenever the
// meter's reader collects; stats is usually the worker's Stats method.
func (in *Instruments) ObserveWorker(stats func() sluice.WorkerStats) (metric.Registration, error) {
	g, err := in.meter.Int64ObservableGauge("sluice.worker.messages", metric.WithDescription("Messages by state."))
	if err != nil {
		return nil, fmt.Errorf("sluice: otel: %w", err)
	}
	return in.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := stats()
		o.ObserveInt64(g, int64(s.Running), metric.WithAttributes(attribute.String("state", "running")))
		o.ObserveInt64(g, int64(s.Waiting), metric.WithAttributes(attribute.String("state", "waiting")))
		o.ObserveInt64(g, int64(s.Held), metric.WithAttributes(attribute.String("state", "held")))
		return nil
	}, g)
}

// Middleware starts a span per handler call and, for the worker, records the call's duration
// and outcome. It passes the handler's error on unchanged.
func (in *Instruments) Middleware() sluice.Middleware {
	return func(next sluice.CallHandler) sluice.CallHandler {
		return func(ctx context.Context, c sluice.Call) error {
			name, attrs := spanOf(c)
			ctx, span := in.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
			start := time.Now()
			err := next(ctx, c)
			outcome := sluice.OutcomeName(err)
			if c.Worker {
				set := in.option(optKey{"worker", outcome, "", ""}, func() []attribute.KeyValue {
					return []attribute.KeyValue{roleWorker, attribute.String("outcome", outcome)}
				})
				in.duration.Record(ctx, time.Since(start).Seconds(), set)
				in.outcomes.Add(ctx, 1, set)
			}
			span.SetAttributes(attribute.String("sluice.outcome", outcome))
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
			return err
		}
	}
}

func spanOf(c sluice.Call) (string, []attribute.KeyValue) {
	if c.Worker {
		return "sluice.message", []attribute.KeyValue{
			attribute.String("messaging.message.id", c.ID),
			attribute.Int("sluice.message.receive_count", c.Attempt),
		}
	}
	attrs := []attribute.KeyValue{
		attribute.String("sluice.job.id", c.ID),
		attribute.String("sluice.job.target", c.Target),
		attribute.Int("sluice.job.attempt", c.Attempt),
	}
	if c.Kind != "" {
		attrs = append(attrs, attribute.String("sluice.job.kind", c.Kind))
	}
	return "sluice.attempt", attrs
}

func (in *Instruments) attemptEnded(e sluice.AttemptEnded) {
	ctx := context.Background()
	outcome, next := e.Outcome(), e.Next.String()
	in.duration.Record(ctx, e.Duration.Seconds(), in.option(optKey{"runner", outcome, e.Target, ""}, func() []attribute.KeyValue {
		return []attribute.KeyValue{roleRunner, attribute.String("outcome", outcome), attribute.String("sluice.target", e.Target)}
	}))
	in.outcomes.Add(ctx, 1, in.option(optKey{"runner", outcome, e.Target, next}, func() []attribute.KeyValue {
		return []attribute.KeyValue{roleRunner, attribute.String("outcome", outcome), attribute.String("sluice.target", e.Target), attribute.String("next", next)}
	}))
}

func (in *Instruments) deferred(e sluice.Deferred) {
	in.deferrals.Add(context.Background(), 1, metric.WithAttributes(attribute.String("sluice.target", e.Target)))
	in.mu.Lock()
	defer in.mu.Unlock()
	if e.Until.After(in.openTil[e.Target]) {
		in.openTil[e.Target] = e.Until
	}
}

func (in *Instruments) settledJob(s sluice.Settled) {
	state := s.State.String()
	in.settled.Add(context.Background(), 1, in.option(optKey{"settled", state, string(s.Reason), ""}, func() []attribute.KeyValue {
		attrs := []attribute.KeyValue{attribute.String("state", state)}
		if s.Reason != "" {
			attrs = append(attrs, attribute.String("reason", string(s.Reason)))
		}
		return attrs
	}))
}

func (in *Instruments) committed(c sluice.Committed) {
	ctx := context.Background()
	in.batchRecords.Record(ctx, float64(c.Records))
	in.batchDur.Record(ctx, c.Duration.Seconds())
}

// observeBreakers reports 1 for each target deferring now, and 0 once for each that stopped.
func (in *Instruments) observeBreakers(_ context.Context, o metric.Int64Observer) error {
	now := in.now()
	in.mu.Lock()
	defer in.mu.Unlock()
	targets := make([]string, 0, len(in.openTil))
	for t := range in.openTil {
		targets = append(targets, t)
	}
	sort.Strings(targets)
	for _, t := range targets {
		v := int64(1)
		if !now.Before(in.openTil[t]) {
			v = 0
			delete(in.openTil, t)
		}
		o.Observe(v, metric.WithAttributes(attribute.String("sluice.target", t)))
	}
	return nil
}
