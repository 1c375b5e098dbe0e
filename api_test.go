package sluice

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/sim/disk"
)

func TestJSONCodecRoundTrip(t *testing.T) {
	type payload struct {
		URL   string
		Tries int
		Tags  []string
	}
	c := JSON[payload]()
	want := payload{URL: "https://example.com/x", Tries: 3, Tags: []string{"a", "b"}}
	b, err := c.Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if _, err := c.Decode([]byte("{not json")); err == nil || !strings.Contains(err.Error(), "sluice: decoding JSON") {
		t.Errorf("Decode(garbage) = %v, want a sluice JSON error", err)
	}
	if _, err := JSON[func()]().Encode(func() {}); err == nil {
		t.Error("Encode(func) succeeded, want an error")
	}
}

func TestBytesCodecCopies(t *testing.T) {
	c := Bytes()
	src := []byte("hello")
	b, _ := c.Encode(src)
	got, _ := c.Decode(b)
	if string(got) != "hello" {
		t.Fatalf("Decode = %q, want hello", got)
	}
	got[0] = 'j'
	if string(b) != "hello" {
		t.Errorf("Decode shares memory with its input: input became %q", b)
	}
}

// TestOutcomeNameClassifiesWrappers: the outermost wrapper that says something decides,
// through any wrapping, and a nil error given to a wrapper is still a failure.
func TestOutcomeNameClassifiesWrappers(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, "succeeded"},
		{"plain", boom, "retry"},
		{"retry after", RetryAfter(boom, time.Second), "retry"},
		{"permanent", Permanent(boom), "permanent"},
		{"wrapped permanent", errors.Join(errors.New("ctx"), Permanent(boom)), "permanent"},
		{"fmt-wrapped permanent", fmt.Errorf("sending: %w", Permanent(boom)), "permanent"},
		{"dead letter", DeadLetter(boom), "deadletter"},
		{"permanent nil", Permanent(nil), "permanent"},
		{"panic", &PanicError{Value: 1}, "panicked"},
	}
	for _, tt := range tests {
		if got := OutcomeName(tt.err); got != tt.want {
			t.Errorf("%s: OutcomeName(%v) = %q, want %q", tt.name, tt.err, got, tt.want)
		}
	}
	var ra *RetryAfterError
	if err := RetryAfter(boom, -time.Second); !errors.As(err, &ra) || ra.After != 0 || !errors.Is(err, boom) {
		t.Errorf("RetryAfter(boom, -1s) = %#v, want a RetryAfterError wrapping boom with After 0", err)
	}
	if err := Permanent(nil); err.Error() == "" || !errors.Is(err, errNilFailure) {
		t.Errorf("Permanent(nil) = %q, want a failure saying it had no error", err)
	}
}

// TestHandlerPanicIsRecordedNotRetried: a handler's panic reaches the middleware as a
// *PanicError with its stack, and the job is dead (reason panic) after one attempt, with and
// without middleware.
func TestHandlerPanicIsRecordedNotRetried(t *testing.T) {
	ctx := context.Background()
	var seen error
	watch := func(next CallHandler) CallHandler {
		return func(ctx context.Context, c Call) error { seen = next(ctx, c); return seen }
	}
	for _, mws := range [][]Middleware{nil, {watch}} {
		r := openOn(t, disk.New(1), Config{Capacity: 1, Middleware: mws}, func(context.Context, Job[string]) error { panic("kaboom") })
		id, _ := r.Enqueue(ctx, time.Time{}, "t", "x")
		if err := r.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		if j, _ := r.Get(context.Background(), id); j.State != StateDead || j.Reason != ReasonPanic || j.Attempts != 1 || j.LastErr != "kaboom" {
			t.Errorf("middleware %d: job %+v, want dead (panic) after one attempt", len(mws), j)
		}
		r.Close()
	}
	var pe *PanicError
	if !errors.As(seen, &pe) || pe.Value != "kaboom" || len(pe.Stack) == 0 {
		t.Errorf("middleware saw %v, want a PanicError with value kaboom and a stack", seen)
	}
}

func TestConfigDefaults(t *testing.T) {
	c, _, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Capacity < 1 || c.Grace != DefaultGrace || c.CompactBytes != DefaultCompactBytes ||
		c.Retention != DefaultRetention || c.RecordMax != DefaultRecordMax || c.Logger == nil ||
		c.Clock == nil || c.Seed == 0 {
		t.Errorf("defaults not filled: %+v", c)
	}
	if diff := cmp.Diff(DefaultPolicy(), c.Policy); diff != "" {
		t.Errorf("default policy (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Circuit{Threshold: 5, Window: 30 * time.Second, Cooldown: 30 * time.Second, Probes: 1}, c.Circuit); diff != "" {
		t.Errorf("default circuit (-want +got):\n%s", diff)
	}
}

func TestConfigValidationNamesTheField(t *testing.T) {
	tests := []struct {
		cfg   Config
		field string
	}{
		{Config{Capacity: -1}, "Capacity"},
		{Config{Grace: -time.Second}, "Grace"},
		{Config{Policy: Policy{Attempts: -1}}, "Policy.Attempts"},
		{Config{Policy: Policy{Base: time.Minute, Cap: time.Second}}, "Policy.Cap"},
		{Config{Policy: Policy{Deadline: -1}}, "Policy.Deadline"},
		{Config{Circuit: Circuit{Probes: -1}}, "Circuit.Probes"},
		{Config{Circuit: Circuit{Threshold: -2}}, "Circuit.Threshold"},
		{Config{CompactBytes: -1}, "CompactBytes"},
		{Config{Retention: -1}, "Retention"},
		{Config{RecordMax: -1}, "RecordMax"},
	}
	for _, tt := range tests {
		_, _, err := tt.cfg.withDefaults()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tt.field {
			t.Errorf("%+v: err = %v, want a ConfigError naming %s", tt.cfg, err, tt.field)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tt.field) {
			t.Errorf("error %q does not name %s", err, tt.field)
		}
		if strings.Count(msg, "sluice:") != 1 || strings.Contains(msg, "runner:") || strings.Contains(msg, "retry:") || strings.Contains(msg, "breaker:") {
			t.Errorf("error %q: want one sluice: prefix and no internal package names", msg)
		}
	}
}

// TestConfigNeverBlamesAnUnsetField: a field the user did not set takes its default before
// any check, so a set field that is valid on its own never fails against an unset one.
func TestConfigNeverBlamesAnUnsetField(t *testing.T) {
	for _, cfg := range []Config{
		{Policy: Policy{Base: 10 * time.Minute}},    // above the default Cap: Cap follows Base
		{Policy: Policy{Cap: 2 * time.Second}},      // above the default Base
		{Circuit: Circuit{Window: time.Hour}},       // any Window with the other defaults
		{RecordMax: 64 << 20},                       // above the default... nothing else depends on it
		{Grace: time.Nanosecond, Capacity: 1 << 20}, // extremes that are valid
	} {
		if _, _, err := cfg.withDefaults(); err != nil {
			t.Errorf("%+v: %v, want the unset fields defaulted and no error", cfg, err)
		}
	}
}

// TestWorkerConfigErrorsNameTheFieldSet: NewWorker's errors name the WorkerConfig field the
// user set (a 13h Window is a bad Window, not a bad default Ceiling).
func TestWorkerConfigErrorsNameTheFieldSet(t *testing.T) {
	h := func(context.Context, Message) error { return nil }
	if _, err := NewWorker(newMemQueue(), WorkerConfig{RedriveMax: 7, Logger: quiet}, h); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		cfg   WorkerConfig
		field string
	}{
		{WorkerConfig{Window: 500 * time.Millisecond}, "WorkerConfig.Window"},
		{WorkerConfig{Window: 13 * time.Hour}, "WorkerConfig.Window"},
		{WorkerConfig{Window: time.Hour, Ceiling: time.Minute}, "WorkerConfig.Ceiling"},
		{WorkerConfig{Concurrency: -1}, "WorkerConfig.Concurrency"},
		{WorkerConfig{Window: 10 * time.Second, Wait: 7 * time.Second}, "WorkerConfig.Wait"},
		{WorkerConfig{Window: 10 * time.Second, StopMargin: time.Second}, "WorkerConfig.StopMargin"},
		{WorkerConfig{Policy: Policy{Base: -1}}, "WorkerConfig.Policy.Base"},
		{WorkerConfig{RedriveMax: -1}, "WorkerConfig.RedriveMax"},
	} {
		tt.cfg.Logger = quiet
		_, err := NewWorker(newMemQueue(), tt.cfg, h)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tt.field {
			t.Errorf("%+v: err = %v, want a ConfigError naming %s", tt.cfg, err, tt.field)
		}
	}
}
