package outcome

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/core/worker"
)

// TestTranslations: each error a handler returns, as the runner's and the worker's machines
// take it (the table of docs/results.md).
func TestTranslations(t *testing.T) {
	boom := errors.New("boom")
	sec := time.Second
	tests := []struct {
		name   string
		err    error
		runner runner.Outcome
		worker worker.Outcome
		after  *time.Duration
	}{
		{"nil", nil, runner.Success(), worker.Success, nil},
		{"plain", boom, runner.Failure("boom", true), worker.Retryable, nil},
		{"retry after", RetryAfter(boom, sec), runner.Outcome{Kind: runner.OutcomeFailed, Err: "boom", Retryable: true, After: &sec}, worker.Retryable, &sec},
		{"permanent", fmt.Errorf("x: %w", Permanent(boom)), runner.Failure("x: permanent: boom", false), worker.Permanent, nil},
		{"dead letter", DeadLetter(boom), runner.Failure("boom", false), worker.Terminal, nil},
		{"panic", &PanicError{Value: "p"}, runner.Panicked("p"), worker.Permanent, nil},
		{"snooze", fmt.Errorf("busy: %w", Snooze(sec)), runner.Snoozed(sec), worker.Retryable, &sec},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.runner, Runner(tt.err)); diff != "" {
			t.Errorf("%s: Runner (-want +got):\n%s", tt.name, diff)
		}
		w := Worker(tt.err)
		if w.Outcome != tt.worker || !cmp.Equal(w.After, tt.after) || (tt.err != nil) != (w.Err != nil) {
			t.Errorf("%s: Worker = %+v, want outcome %v after %v", tt.name, w, tt.worker, tt.after)
		}
	}
}
