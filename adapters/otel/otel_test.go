package otel_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluicehq/sluice"
	sluiceotel "github.com/sluicehq/sluice/adapters/otel"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/sim/queue"
)

// The tests run the real OpenTelemetry SDK (a ManualReader and a SpanRecorder) under a real
// runner on a temporary directory and a real worker on sim/queue, inside synctest bubbles so
// durations are the bubble's exact ones.

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// sdk is a meter and tracer provider reading into memory.
type sdk struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	in     *sluiceotel.Instruments
}

func newSDK(t *testing.T) sdk {
	t.Helper()
	s := sdk{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	in, err := sluiceotel.New(sluiceotel.Options{
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader)),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans)),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.in = in
	return s
}

// points collects and returns, per metric name, its data points as "attr=v,... → value"
// (a histogram's value is "count/sum"), sorted.
func (s sdk) points(t *testing.T) map[string][]string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	key := func(set attribute.Set) string {
		s := ""
		for _, kv := range set.ToSlice() {
			if s != "" {
				s += ","
			}
			s += string(kv.Key) + "=" + kv.Value.Emit()
		}
		return s
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var ps []string
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					ps = append(ps, key(p.Attributes)+" → "+itoa(p.Value))
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					ps = append(ps, key(p.Attributes)+" → "+itoa(p.Value))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					ps = append(ps, key(p.Attributes)+" → "+itoa(int64(p.Count))+"/"+time.Duration(p.Sum*float64(time.Second)).Round(time.Millisecond).String())
				}
			default:
				t.Fatalf("metric %s: unexpected data %T", m.Name, m.Data)
			}
			sort.Strings(ps)
			out[m.Name] = ps
		}
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestOTelRunnerReportsMetricsAndSpansOfARun runs five jobs on one unit: three to target
// good (each works 100 ms and succeeds), then one to target bad that fails (Attempts 1: dead,
// spent), which opens bad's breaker (threshold 1), so the fifth job, to bad, is deferred. The
// SDK must read exactly that.
func TestOTelRunnerReportsMetricsAndSpansOfARun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSDK(t)
		cfg := s.in.Runner(sluice.Config{Capacity: 1, Logger: quiet,
			Policy: sluice.Policy{Attempts: 1}, Circuit: sluice.Circuit{Threshold: 1, Cooldown: time.Minute}})
		r, err := sluice.Open(t.TempDir(), cfg, sluice.JSON[string](), func(ctx context.Context, j sluice.Job[string]) error {
			if j.Target == "bad" {
				return errors.New("503 from bad")
			}
			time.Sleep(100 * time.Millisecond)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		reg, err := s.in.ObserveRunner(r.Stats)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, target := range []string{"good", "good", "good", "bad", "bad"} {
			if _, err := r.Enqueue(ctx, time.Time{}, target, "x"); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.DrainDue(ctx); err != nil {
			t.Fatal(err)
		}
		got := s.points(t)
		st, err := r.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		records := st.Records
		_ = reg.Unregister()
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}

		want := map[string][]string{
			"sluice.attempt.duration": {
				"outcome=retry,sluice.role=runner,sluice.target=bad → 1/0s",
				"outcome=succeeded,sluice.role=runner,sluice.target=good → 3/300ms",
			},
			"sluice.attempt.outcomes": {
				"next=dead,outcome=retry,sluice.role=runner,sluice.target=bad → 1",
				"next=succeeded,outcome=succeeded,sluice.role=runner,sluice.target=good → 3",
			},
			"sluice.runner.deferrals":    {"sluice.target=bad → 1"},
			"sluice.runner.breaker.open": {"sluice.target=bad → 1"},
			"sluice.runner.settled":      {"reason=spent,state=dead → 1", "state=succeeded → 3"},
			"sluice.runner.jobs": {"state=cancelled → 0", "state=dead → 1", "state=deferred → 1",
				"state=running → 0", "state=succeeded → 3", "state=waiting → 0"},
		}
		for name, w := range want {
			if diff := cmp.Diff(w, got[name]); diff != "" {
				t.Errorf("%s (-want +got):\n%s", name, diff)
			}
		}
		// Every record written was behind one of the reported fsyncs.
		sum := batchRecordSum(t, s)
		if int64(sum) != records || records == 0 {
			t.Errorf("batch records sum %v, want Stats.Records %d", sum, records)
		}
		if len(got["sluice.journal.commit.duration"]) != 1 {
			t.Errorf("commit durations %v, want one series", got["sluice.journal.commit.duration"])
		}

		spans := s.spans.Ended()
		if len(spans) != 4 {
			t.Fatalf("%d spans, want 4 (one per attempt)", len(spans))
		}
		var lines []string
		for _, sp := range spans {
			l := sp.Name()
			for _, kv := range sp.Attributes() {
				l += " " + string(kv.Key) + "=" + kv.Value.Emit()
			}
			if sp.Status().Code == codes.Error {
				l += " error=" + sp.Status().Description
			}
			lines = append(lines, l)
		}
		wantSpans := []string{
			"sluice.attempt sluice.job.id=1 sluice.job.target=good sluice.job.attempt=1 sluice.job.kind=default sluice.outcome=succeeded",
			"sluice.attempt sluice.job.id=2 sluice.job.target=good sluice.job.attempt=1 sluice.job.kind=default sluice.outcome=succeeded",
			"sluice.attempt sluice.job.id=3 sluice.job.target=good sluice.job.attempt=1 sluice.job.kind=default sluice.outcome=succeeded",
			"sluice.attempt sluice.job.id=4 sluice.job.target=bad sluice.job.attempt=1 sluice.job.kind=default sluice.outcome=retry error=503 from bad",
		}
		if diff := cmp.Diff(wantSpans, lines); diff != "" {
			t.Errorf("spans (-want +got):\n%s", diff)
		}
	})
}

// batchRecordSum collects sluice.journal.batch.records' sum.
func batchRecordSum(t *testing.T, s sdk) float64 {
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "sluice.journal.batch.records" {
				var sum float64
				for _, p := range h.DataPoints {
					sum += p.Sum
				}
				return sum
			}
		}
	}
	return 0
}

// lockedQueue is sim/queue's transport behind a mutex, with long polls emulated by sleeping
// (inside the bubble).
type lockedQueue struct {
	mu sync.Mutex
	q  *queue.Queue
	t  core.Transport
}

func (l *lockedQueue) Receive(ctx context.Context, max int, wait, vis time.Duration) ([]core.Message, error) {
	end := time.Now().Add(wait)
	for {
		l.mu.Lock()
		msgs, err := l.t.Receive(ctx, max, wait, vis)
		l.mu.Unlock()
		if err != nil || len(msgs) > 0 || !time.Now().Before(end) {
			return msgs, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (l *lockedQueue) ChangeVisibility(ctx context.Context, receipt string, d time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.ChangeVisibility(ctx, receipt, d)
}

func (l *lockedQueue) ChangeVisibilityBatch(ctx context.Context, es []core.VisibilityChange) ([]error, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.ChangeVisibilityBatch(ctx, es)
}

func (l *lockedQueue) Delete(ctx context.Context, receipt string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.Delete(ctx, receipt)
}

func (l *lockedQueue) DeleteBatch(ctx context.Context, rs []string) ([]error, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.DeleteBatch(ctx, rs)
}

// TestOTelWorkerReportsMetricsAndSpansOfARun: two messages, one acked after 12 s of work
// under a 5 s window (so its lease is renewed), one retried once and then acked.
func TestOTelWorkerReportsMetricsAndSpansOfARun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSDK(t)
		q := queue.New(queue.Config{}, nil)
		lq := &lockedQueue{q: q, t: q.Transport(time.Now)}
		q.Send(time.Now(), []byte("slow"))
		q.Send(time.Now(), []byte("flaky"))
		cfg := s.in.Worker(sluice.WorkerConfig{Window: 5 * time.Second, Logger: quiet,
			Policy: sluice.Policy{Base: time.Second, Cap: time.Second}})
		w, err := sluice.NewWorker(lq, cfg, func(ctx context.Context, m sluice.Message) error {
			if string(m.Body) == "flaky" && m.ReceiveCount == 1 {
				return errors.New("503")
			}
			if string(m.Body) == "slow" {
				time.Sleep(12 * time.Second)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.in.ObserveWorker(w.Stats); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		time.Sleep(30 * time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := s.points(t)
		want := map[string][]string{
			"sluice.attempt.duration": {"outcome=retry,sluice.role=worker → 1/0s", "outcome=succeeded,sluice.role=worker → 2/12s"},
			"sluice.attempt.outcomes": {"outcome=retry,sluice.role=worker → 1", "outcome=succeeded,sluice.role=worker → 2"},
			"sluice.worker.received":  {" → 3"},
			"sluice.worker.disposed":  {"action=delete → 2", "action=release → 1"},
			"sluice.worker.messages":  {"state=held → 0", "state=running → 0", "state=waiting → 0"},
		}
		for name, w := range want {
			if diff := cmp.Diff(w, got[name]); diff != "" {
				t.Errorf("%s (-want +got):\n%s", name, diff)
			}
		}
		if r := got["sluice.worker.lease.renewals"]; len(r) != 1 || r[0] == " → 0" {
			t.Errorf("renewals %v, want some for the slow message", r)
		}
		if n := len(s.spans.Ended()); n != 3 {
			t.Errorf("%d spans, want 3 (one per delivery handled)", n)
		}
		for _, sp := range s.spans.Ended() {
			if sp.Name() != "sluice.message" {
				t.Errorf("span %q, want sluice.message", sp.Name())
			}
		}
	})
}
