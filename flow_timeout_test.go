package sluice

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/sluicehq/sluice/sim/disk"
)

// TestAttemptTimeoutOnTheClock: an attempt's context ends exactly its timeout after it
// started, on Config.Clock (a Mock here, so nothing waits on the wall clock), with cause
// ErrAttemptTimeout; the job's own timeout replaces its kind's. What the handler returns then
// decides the outcome: an error is a retryable failure naming the timeout (the hook sees it
// too), nil a success, Permanent stays permanent.
func TestAttemptTimeoutOnTheClock(t *testing.T) {
	type seen struct {
		cause error
		at    time.Duration // from the attempt's start, on the mock clock
	}
	tests := []struct {
		name      string
		payload   string // what the handler returns: "echo" ctx.Err(), "nil", "perm"
		opts      []JobOption
		after     time.Duration // when the context must end
		state     State
		reason    Reason
		lastErr   string
		hookOut   string
		attempts2 bool // a retry is scheduled (Attempts 2)
	}{
		{name: "kind's timeout, the handler echoes ctx.Err()", payload: "echo", after: 5 * time.Second,
			state: StateWaiting, lastErr: "sluice: attempt timed out after 5s", hookOut: "retry", attempts2: true},
		{name: "the job's timeout replaces the kind's", payload: "echo", opts: []JobOption{WithJobAttemptTimeout(2 * time.Second)},
			after: 2 * time.Second, state: StateWaiting, lastErr: "sluice: attempt timed out after 2s", hookOut: "retry", attempts2: true},
		{name: "a success stands", payload: "nil", after: 5 * time.Second, state: StateSucceeded, hookOut: "succeeded"},
		{name: "a permanent failure stays permanent", payload: "perm", after: 5 * time.Second,
			state: StateDead, reason: ReasonPermanent, lastErr: "gave up", hookOut: "permanent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mock := clock.NewMock()
			mock.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			var mu sync.Mutex
			var ended []AttemptEnded
			started := make(chan time.Time, 1)
			done := make(chan seen, 1)
			r := newOn(t, disk.New(1), Config{Capacity: 1, Clock: mock,
				Policy:         Policy{Attempts: 2, Base: time.Hour, Cap: time.Hour},
				OnAttemptEnded: func(e AttemptEnded) { mu.Lock(); ended = append(ended, e); mu.Unlock() }})
			defer r.Close()
			k, err := Register(r, "slow", JSON[string](), func(ctx context.Context, j Job[string]) error {
				t0 := mock.Now()
				started <- t0
				<-ctx.Done()
				done <- seen{context.Cause(ctx), mock.Now().Sub(t0)}
				switch j.Payload {
				case "nil":
					return nil
				case "perm":
					return Permanent(errors.New("gave up"))
				}
				return ctx.Err()
			}, WithAttemptTimeout(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			id, err := k.Enqueue(ctx, time.Time{}, "t", tt.payload, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			drained := make(chan error, 1)
			go func() { drained <- k.DrainDue(ctx) }()
			<-started
			mock.Add(tt.after - time.Millisecond)
			select {
			case s := <-done:
				t.Fatalf("the context ended %v after the start (cause %v), before the timeout %v", s.at, s.cause, tt.after)
			default:
			}
			mock.Add(time.Millisecond)
			var s seen
			select {
			case s = <-done:
			case <-time.After(5 * time.Second): // only a failing run waits this long
				t.Errorf("the context did not end at the timeout %v", tt.after)
				mock.Add(time.Hour) // let the handler return, so that Close does not wait
				s = <-done
			}
			if !errors.Is(s.cause, ErrAttemptTimeout) || s.at != tt.after {
				t.Errorf("the context ended %v after the start with cause %v, want %v and ErrAttemptTimeout", s.at, s.cause, tt.after)
			}
			if err := <-drained; err != nil {
				t.Fatal(err)
			}
			j, err := k.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != tt.state || j.Reason != tt.reason || j.LastErr != tt.lastErr {
				t.Errorf("job: %v %q %q, want %v %q %q", j.State, j.Reason, j.LastErr, tt.state, tt.reason, tt.lastErr)
			}
			if tt.attempts2 && !j.Due.After(mock.Now()) {
				t.Errorf("the retry is due %v, want after its backoff (now %v)", j.Due, mock.Now())
			}
			mu.Lock()
			defer mu.Unlock()
			if len(ended) != 1 || ended[0].Outcome() != tt.hookOut || ended[0].Err != tt.lastErr {
				t.Errorf("OnAttemptEnded saw %+v, want one %q with Err %q", ended, tt.hookOut, tt.lastErr)
			}
		})
	}
}

// TestTimedOutKeepsWhatTheHandlerSaid: the translation of a handler's error after its
// timeout fired, and that nothing changes when it did not fire.
func TestTimedOutKeepsWhatTheHandlerSaid(t *testing.T) {
	fired, cancel := context.WithCancelCause(context.Background())
	cancel(ErrAttemptTimeout)
	cancelled, cancel2 := context.WithCancelCause(context.Background())
	cancel2(ErrJobCancelled)
	boom := errors.New("boom")
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		text string // the error's text after; "" when it is err itself
	}{
		{"nil", fired, nil, ""},
		{"plain", fired, boom, "sluice: attempt timed out after 1s: boom"},
		{"ctx.Err()", fired, context.Canceled, "sluice: attempt timed out after 1s"},
		{"the cause", fired, context.Cause(fired), "sluice: attempt timed out after 1s"},
		{"retry after", fired, RetryAfter(boom, time.Minute), "sluice: attempt timed out after 1s: retry after 1m0s: boom"},
		{"permanent", fired, Permanent(boom), ""},
		{"snooze", fired, Snooze(time.Minute), ""},
		{"panic", fired, &PanicError{Value: "p"}, ""},
		{"not fired", context.Background(), boom, ""},
		{"cancelled, not timed out", cancelled, context.Canceled, ""},
	}
	for _, tt := range tests {
		got := timedOut(tt.ctx, time.Second, tt.err)
		switch {
		case tt.text == "" && got != tt.err:
			t.Errorf("%s: %v, want the handler's error as is", tt.name, got)
		case tt.text != "" && (got == nil || got.Error() != tt.text || !errors.Is(got, ErrAttemptTimeout)):
			t.Errorf("%s: %v, want %q wrapping ErrAttemptTimeout", tt.name, got, tt.text)
		case tt.text != "" && OutcomeName(got) != "retry":
			t.Errorf("%s: outcome %q, want retry", tt.name, OutcomeName(got))
		}
	}
	if got := timedOut(fired, time.Second, RetryAfter(boom, time.Minute)); !strings.Contains(got.Error(), "retry after") {
		t.Errorf("RetryAfter's wait is lost: %v", got)
	}
}
