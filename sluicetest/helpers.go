package sluicetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/outcome"
)

// FakeJob is attempt 1 of job 1 for payload, targeted "test", due at the simulated epoch.
func FakeJob[A any](payload A) sluice.Job[A] {
	return sluice.Job[A]{ID: 1, Target: "test", Attempt: 1, Due: epoch, Payload: payload}
}

// WithNow returns ctx with the time Now(ctx) reports, for unit tests of handlers that read the
// clock through Now.
func WithNow(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, fixedNowKey{}, t)
}

// RunJob runs h once for job, as the runner would: a panic becomes a *sluice.PanicError. No
// simulation: the handler's calls are real.
func RunJob[A any](ctx context.Context, h sluice.Handler[A], job sluice.Job[A]) error {
	return outcome.Call(ctx, func(ctx context.Context) error { return h(ctx, job) })
}

// Enqueuer is what code that enqueues needs; *sluice.Kind[A] and *Recorder[A] implement it.
type Enqueuer[A any] interface {
	Enqueue(ctx context.Context, due time.Time, target string, payload A, opts ...sluice.JobOption) (uint64, error)
}

var _ Enqueuer[int] = (*sluice.Kind[int])(nil)

// Enqueued is one recorded enqueue.
type Enqueued[A any] struct {
	Due     time.Time
	Target  string
	Payload A
}

// Recorder is an Enqueuer that records instead of running. With Codec set, each payload goes
// through Encode and Decode as the journal would take it, and the decoded value is recorded (a
// field the codec drops shows up in the diff); Err, when set, is returned by every Enqueue.
type Recorder[A any] struct {
	Codec sluice.Codec[A]
	Err   error

	mu   sync.Mutex
	jobs []Enqueued[A]
}

// Enqueue records the job and returns its id (1, 2, ...); options are accepted, not recorded.
func (r *Recorder[A]) Enqueue(ctx context.Context, due time.Time, target string, payload A, _ ...sluice.JobOption) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if r.Err != nil {
		return 0, r.Err
	}
	if r.Codec != nil {
		b, err := r.Codec.Encode(payload)
		if err != nil {
			return 0, fmt.Errorf("sluicetest: enqueue: %w", err)
		}
		if payload, err = r.Codec.Decode(b); err != nil {
			return 0, fmt.Errorf("sluicetest: enqueue: decoding what Encode made: %w", err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs = append(r.jobs, Enqueued[A]{Due: due, Target: target, Payload: payload})
	return uint64(len(r.jobs)), nil
}

// Enqueued returns the recorded jobs in order.
func (r *Recorder[A]) Enqueued() []Enqueued[A] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Enqueued[A](nil), r.jobs...)
}

// Reset forgets the recorded jobs.
func (r *Recorder[A]) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs = nil
}

// RequireEnqueued fails t unless r recorded exactly want, in order, reporting a cmp.Diff
// (-want +got). Options go to cmp (for example cmpopts.IgnoreFields).
func RequireEnqueued[A any](t testing.TB, r *Recorder[A], want []Enqueued[A], opts ...cmp.Option) {
	t.Helper()
	if diff := cmp.Diff(want, r.Enqueued(), opts...); diff != "" {
		t.Fatalf("sluicetest: enqueued jobs differ (-want +got):\n%s", diff)
	}
}
