package sluicetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Errors a Service call returns.
var (
	// ErrUnavailable: the service answered with a failure. With ServiceFaults.ApplyThenFail
	// the call took effect all the same.
	ErrUnavailable = errors.New("sluicetest: service unavailable")
	// ErrTimeout: no answer within ServiceFaults.TimeoutAfter; the call may have taken effect.
	ErrTimeout = errors.New("sluicetest: service call timed out")
	// ErrCrashed: a call made while the simulated process dies (from a deferred function).
	ErrCrashed = errors.New("sluicetest: process crashed")
	// ErrOutlived: a call made after the attempt's handler returned, by a goroutine it started.
	ErrOutlived = errors.New("sluicetest: service called after the handler returned")
)

// ServiceFaults are a simulated service's latency and fault probabilities (each in [0, 1], per
// call). They apply before the scenario's Horizon and only when the seed's knobs turn service
// faults on; latency always applies.
type ServiceFaults struct {
	LatencyMin, LatencyMax time.Duration // default 5ms and 50ms
	// Fail: the call fails without effect (ErrUnavailable).
	Fail float64
	// ApplyThenFail: the call takes effect, then reports ErrUnavailable (a 502 after the
	// write, a lost response).
	ApplyThenFail float64
	// Timeout: the caller gets ErrTimeout after TimeoutAfter; the call took effect or not,
	// with even odds.
	Timeout      float64
	TimeoutAfter time.Duration // default 1s
}

func (f ServiceFaults) withDefaults() ServiceFaults {
	if f.LatencyMin == 0 && f.LatencyMax == 0 {
		f.LatencyMin, f.LatencyMax = 5*time.Millisecond, 50*time.Millisecond
	}
	if f.LatencyMax < f.LatencyMin {
		f.LatencyMax = f.LatencyMin
	}
	if f.TimeoutAfter == 0 {
		f.TimeoutAfter = time.Second
	}
	return f
}

// Request is one call to a Service. A call with an IdempotencyKey the service has seen takes no
// new effect and returns the first call's response (Response.Replayed), as payment APIs do.
type Request struct {
	Op             string // free text, recorded (e.g. "charge", "post")
	Key            string // what the effect is about (an order, a customer); invariants group by it
	Value          string // stored under Key
	IdempotencyKey string
}

// Response is a Service's answer.
type Response struct {
	Value    string // Get: the value stored under the key
	Replayed bool   // answered from the idempotency key's first call, no new effect
}

// Call is the record of one call, kept in order of completion.
type Call struct {
	Service        string
	Op             string
	Key            string
	Value          string
	IdempotencyKey string
	Read           bool
	Job            uint64
	Attempt        int
	Issued, Done   time.Time
	Applied        bool   // the call took effect
	Replayed       bool   // an idempotency key's replay
	Err            string // what the caller got ("" for success; the caller may be dead)
	// AfterCancel: the call was issued by an attempt whose job's cancellation had already
	// reached it (its handler ignored ctx, e.g. through context.WithoutCancel).
	AfterCancel bool
}

// Service is a simulated key-value/HTTP-like service: seeded latency and faults, every call
// recorded. Handlers reach it through the same interface as their production client (an adapter
// over Do and Get), so the handler code under test is the production code.
type Service struct {
	name   string
	faults ServiceFaults
	w      *sched
	kv     map[string]string
	idem   map[string]Response
	calls  []Call
}

// Name is the service's name.
func (s *Service) Name() string { return s.name }

// Do makes an effectful call: it takes effect on the service at its completion time, whatever
// happened to the caller in between.
func (s *Service) Do(ctx context.Context, req Request) (Response, error) {
	return s.call(ctx, req, false)
}

// Get reads the value stored under key (no effect).
func (s *Service) Get(ctx context.Context, key string) (string, error) {
	r, err := s.call(ctx, Request{Op: "get", Key: key}, true)
	return r.Value, err
}

// Calls returns every completed call so far, in order of completion.
func (s *Service) Calls() []Call { return append([]Call(nil), s.calls...) }

func (s *Service) call(ctx context.Context, req Request, read bool) (Response, error) {
	a, _ := ctx.Value(attemptKey{}).(*attempt)
	if a == nil {
		return Response{}, fmt.Errorf("sluicetest: %s: called with a context that is not a simulated attempt's (pass the handler's ctx)", s.name)
	}
	if a.finished.Load() {
		s.w.noteOutlived(a, s.name)
		return Response{}, ErrOutlived
	}
	if a.dead {
		if !a.exiting {
			a.exiting = true
			runtime.Goexit()
		}
		return Response{}, ErrCrashed
	}
	if ctx.Err() != nil {
		return Response{}, context.Cause(ctx)
	}
	c := &pendingCall{svc: s, req: req, read: read, att: a, afterCancel: a.userCancelled}
	s.w.yield <- yieldMsg{att: a, call: c}
	r := <-a.resume
	if r.die {
		a.exiting = true
		runtime.Goexit()
	}
	return r.resp, r.err
}

// fate is what a call's draw decided.
type fate uint8

const (
	fateOK fate = iota
	fateFail
	fateApplyThenFail
	fateTimeout
)

// pendingCall is a call in flight.
type pendingCall struct {
	svc         *Service
	req         Request
	read        bool
	att         *attempt
	afterCancel bool
	issued      time.Time
	fate        fate
	applies     bool // a timeout's effect
	// abandoned: the caller is gone (crashed, or resumed early by a cancellation): the call
	// still completes on the service, nobody reads the answer.
	abandoned bool
}

// complete applies the call on the service at its completion time and records it.
func (s *Service) complete(c *pendingCall, now time.Time) (Response, error) {
	rec := Call{Service: s.name, Op: c.req.Op, Key: c.req.Key, Value: c.req.Value,
		IdempotencyKey: c.req.IdempotencyKey, Read: c.read, Job: c.att.tok.ID, Attempt: c.att.tok.Attempt,
		Issued: c.issued, Done: now, AfterCancel: c.afterCancel}
	var (
		resp Response
		err  error
	)
	apply := func() {
		if c.read {
			resp.Value = s.kv[c.req.Key]
			return
		}
		if k := c.req.IdempotencyKey; k != "" {
			if prev, ok := s.idem[k]; ok {
				resp = prev
				resp.Replayed = true
				rec.Replayed = true
				return
			}
			s.idem[k] = Response{}
		}
		rec.Applied = true
		s.kv[c.req.Key] = c.req.Value
	}
	switch c.fate {
	case fateOK:
		apply()
	case fateFail:
		err = ErrUnavailable
	case fateApplyThenFail:
		apply()
		err = ErrUnavailable
	case fateTimeout:
		if c.applies {
			apply()
		}
		err = ErrTimeout
	}
	if err != nil {
		err = fmt.Errorf("%s %s %q: %w", s.name, c.req.Op, c.req.Key, err)
		rec.Err = err.Error()
	}
	s.calls = append(s.calls, rec)
	return resp, err
}
