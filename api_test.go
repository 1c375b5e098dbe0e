package sluice

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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

func TestOutcomeOf(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name      string
		err       error
		kind      OutcomeKind
		retryable bool
	}{
		{"nil", nil, KindSucceeded, false},
		{"plain", boom, KindFailed, true},
		{"permanent", Permanent(boom), KindFailed, false},
		{"wrapped permanent", errors.Join(errors.New("ctx"), Permanent(boom)), KindFailed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := OutcomeOf(tt.err)
			got := struct {
				Kind      OutcomeKind
				Retryable bool
			}{o.Kind, o.Retryable}
			want := struct {
				Kind      OutcomeKind
				Retryable bool
			}{tt.kind, tt.retryable}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("OutcomeOf(%v) (-want +got):\n%s", tt.err, diff)
			}
		})
	}
	o := FailedAfter(boom, -time.Second)
	if !o.Retryable || o.After == nil || *o.After != 0 {
		t.Errorf("FailedAfter(-1s) = %+v, want retryable with After 0", o)
	}
}

func TestRunHandlerRecoversPanicsAndBadOutcomes(t *testing.T) {
	job := Job[int]{ID: 1, Attempt: 1}
	panicky := func(context.Context, Job[int]) Outcome { panic("kaboom") }
	o := runHandler(context.Background(), Handler[int](panicky), job)
	var pe *PanicError
	if o.Kind != KindPanicked || !errors.As(o.Err, &pe) || pe.Value != "kaboom" || len(pe.Stack) == 0 {
		t.Errorf("panicking handler gave %+v, want Panicked with value kaboom and a stack", o)
	}
	zero := func(context.Context, Job[int]) Outcome { return Outcome{} }
	if o := runHandler(context.Background(), Handler[int](zero), job); o.Kind != KindFailed || o.Retryable || o.Err == nil {
		t.Errorf("zero outcome gave %+v, want a non-retryable failure", o)
	}
	nilErr := func(context.Context, Job[int]) Outcome { return Outcome{Kind: KindFailed, Retryable: true} }
	if o := runHandler(context.Background(), Handler[int](nilErr), job); o.Err == nil || !o.Retryable {
		t.Errorf("failure without error gave %+v, want a retryable failure with an error", o)
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
	if diff := cmp.Diff(DefaultPolicy, c.Policy); diff != "" {
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
	h := func(context.Context, Message) Result { return Ack() }
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

func TestResultOf(t *testing.T) {
	boom := errors.New("boom")
	for _, tt := range []struct {
		err  error
		want ResultKind
	}{{nil, ResultAck}, {boom, ResultRetry}, {Permanent(boom), ResultPermanent}} {
		if got := ResultOf(tt.err).Kind; got != tt.want {
			t.Errorf("ResultOf(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
	if r := RetryAfter(boom, -1); r.After == nil || *r.After != 0 {
		t.Errorf("RetryAfter(-1) = %+v, want After 0", r)
	}
}
