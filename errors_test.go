package sluice_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestPublicErrorsHaveOnePrefix walks the error paths a program reaches through the public
// API, with 1 MiB inputs where the input is a string: each error has one "sluice:" prefix,
// at most 512 bytes, and still matches its sentinel.
func TestPublicErrorsHaveOnePrefix(t *testing.T) {
	ctx := context.Background()
	huge := strings.Repeat("x", 1<<20)
	h := func(context.Context, sluice.Job[string]) error { return nil }
	r, err := sluice.New(t.TempDir(), sluice.Config{Logger: quiet(), RecordMax: 4096})
	if err != nil {
		t.Fatal(err)
	}
	k, err := sluice.Register(r, "k", sluice.JSON[string](), h)
	if err != nil {
		t.Fatal(err)
	}
	id, err := k.Enqueue(ctx, time.Time{}, "t", "p", sluice.WithUnique("u"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFleetQueue()
	q, err := sluice.NewQueueRunner(f.queue(), sluice.QueueConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	qk, err := sluice.Register(q, "q", sluice.JSON[string](), h)
	if err != nil {
		t.Fatal(err)
	}
	enq := func(due time.Time, target, payload string, opts ...sluice.JobOption) error {
		_, err := k.Enqueue(ctx, due, target, payload, opts...)
		return err
	}
	cases := []struct {
		name string
		is   error
		err  error
	}{
		{"get unknown id", sluice.ErrNotFound, func() error { _, err := k.Get(ctx, 12345); return err }()},
		{"runner get unknown id", sluice.ErrNotFound, func() error { _, err := r.Get(ctx, 12345); return err }()},
		{"empty target", sluice.ErrInvalidJob, enq(time.Time{}, "", "p")},
		{"huge target", sluice.ErrInvalidJob, enq(time.Time{}, huge, "p")},
		{"bad due", sluice.ErrInvalidJob, enq(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), "t", "p")},
		{"oversize payload", sluice.ErrTooLarge, enq(time.Time{}, "t", huge)},
		{"bad attempts", sluice.ErrInvalidJob, enq(time.Time{}, "t", "p", sluice.WithAttempts(-1))},
		{"huge unique", sluice.ErrInvalidJob, enq(time.Time{}, "t", "p", sluice.WithUnique(huge))},
		{"duplicate unique", sluice.ErrDuplicate, enq(time.Time{}, "t", "p", sluice.WithUnique("u"), sluice.FailOnDuplicate())},
		{"retry a waiting job", sluice.ErrNotDead, k.Retry(ctx, id)},
		{"cancel unknown id", sluice.ErrNotFound, k.Cancel(ctx, 99999)},
		{"retry unknown id", sluice.ErrNotFound, k.Retry(ctx, 99999)},
		{"bad list filter", sluice.ErrInvalidJob, func() error { _, err := k.List(ctx, sluice.ListFilter{Limit: -1}); return err }()},
		{"list huge kind", sluice.ErrInvalidJob, func() error { _, err := r.List(ctx, sluice.ListFilter{Kind: huge}); return err }()},
		{"bad schedule spec", sluice.ErrInvalidSchedule, k.Schedule(ctx, "s", "@every nonsense"+huge, "t", "p")},
		{"unschedule unknown", sluice.ErrNoSchedule, k.Unschedule(ctx, huge)},
		{"register huge name", nil, func() error { _, err := sluice.Register(r, huge, sluice.JSON[string](), h); return err }()},
		{"register twice", nil, func() error { _, err := sluice.Register(r, "k", sluice.JSON[string](), h); return err }()},
		{"bad config", nil, func() error { _, err := sluice.New(t.TempDir(), sluice.Config{Capacity: -1}); return err }()},
		{"bad policy", nil, func() error {
			_, err := sluice.New(t.TempDir(), sluice.Config{Policy: sluice.Policy{Attempts: -1}})
			return err
		}()},
		{"queue get", sluice.ErrQueueUnsupported, func() error { _, err := qk.Get(ctx, 1); return err }()},
		{"queue cancel", sluice.ErrQueueUnsupported, qk.Cancel(ctx, 1)},
		{"queue stats", sluice.ErrQueueUnsupported, func() error { _, err := qk.Stats(ctx); return err }()},
		{"queue breakers", sluice.ErrQueueUnsupported, func() error { _, err := qk.Breakers(ctx); return err }()},
		{"queue unique", sluice.ErrQueueUnsupported, func() error {
			_, err := qk.Enqueue(ctx, time.Time{}, "t", "p", sluice.WithUnique("u"))
			return err
		}()},
		{"queue schedule", sluice.ErrQueueUnsupported, qk.Schedule(ctx, huge, "@every 1m", "t", "p")},
		{"queue huge payload", sluice.ErrTooLarge, func() error { _, err := qk.Enqueue(ctx, time.Time{}, "t", huge); return err }()},
	}
	ch, err := sluice.Register(r, "ch", sluice.JSON[chan int](), func(context.Context, sluice.Job[chan int]) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	_, encErr := ch.Enqueue(ctx, time.Time{}, "t", make(chan int))
	cases = append(cases, struct {
		name string
		is   error
		err  error
	}{"unencodable payload", nil, encErr})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, struct {
		name string
		is   error
		err  error
	}{"closed runner", sluice.ErrClosed, enq(time.Time{}, "t", "p")})
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		msg := c.err.Error()
		t.Logf("%s: %s", c.name, msg)
		if !strings.HasPrefix(msg, "sluice: ") || strings.Count(msg, "sluice:") != 1 {
			t.Errorf("%s: want one \"sluice:\" prefix: %q", c.name, msg)
		}
		if len(msg) > 512 {
			t.Errorf("%s: %d bytes, want at most 512: %.200q", c.name, len(msg), msg)
		}
		if c.is != nil && !errors.Is(c.err, c.is) {
			t.Errorf("%s: %q is not %v", c.name, msg, c.is)
		}
	}
}
