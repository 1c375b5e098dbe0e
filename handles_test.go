package sluice_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// callAll calls every exported method of handle with zero arguments (a live context, since a
// nil one is a caller's bug) and returns, per method, its error result ("" for none) or a
// panic or a hang as a failure.
func callAll(t *testing.T, name string, handle any, ctx context.Context) map[string]error {
	t.Helper()
	v := reflect.ValueOf(handle)
	out := map[string]error{}
	ctxType := reflect.TypeOf((*context.Context)(nil)).Elem()
	errType := reflect.TypeOf((*error)(nil)).Elem()
	for i := 0; i < v.NumMethod(); i++ {
		m, mt := v.Method(i), v.Type().Method(i)
		args := make([]reflect.Value, m.Type().NumIn())
		for j := range args {
			in := m.Type().In(j)
			if in == ctxType {
				args[j] = reflect.ValueOf(ctx)
			} else {
				args[j] = reflect.Zero(in)
			}
		}
		done := make(chan error, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s.%s panicked: %v", name, mt.Name, p)
				}
				close(done)
			}()
			var res []reflect.Value
			if m.Type().IsVariadic() {
				res = m.CallSlice(args)
			} else {
				res = m.Call(args)
			}
			if n := len(res); n > 0 && m.Type().Out(n-1) == errType {
				err, _ := res[n-1].Interface().(error)
				done <- err
				return
			}
			done <- nil
		}()
		select {
		case err := <-done:
			out[mt.Name] = err
		case <-time.After(5 * time.Second):
			t.Errorf("%s.%s did not return within 5s", name, mt.Name)
		}
	}
	return out
}

// returnsError reports the methods of handle whose last result is an error.
func returnsError(handle any) map[string]bool {
	errType := reflect.TypeOf((*error)(nil)).Elem()
	ty := reflect.TypeOf(handle)
	out := map[string]bool{}
	for i := 0; i < ty.NumMethod(); i++ {
		mt := ty.Method(i).Type
		out[ty.Method(i).Name] = mt.NumOut() > 0 && mt.Out(mt.NumOut()-1) == errType
	}
	return out
}

// TestZeroHandlesDoNotPanic calls every exported method of a nil and of a zero value of each
// handle: none panics or blocks, and each that returns an error returns one wrapping
// ErrClosed with a single "sluice:" prefix.
func TestZeroHandlesDoNotPanic(t *testing.T) {
	handles := map[string]any{
		"nil Runner": (*sluice.Runner)(nil), "zero Runner": &sluice.Runner{},
		"nil Kind": (*sluice.Kind[string])(nil), "zero Kind": &sluice.Kind[string]{},
		"nil QueueRunner": (*sluice.QueueRunner)(nil), "zero QueueRunner": &sluice.QueueRunner{},
		"nil Worker": (*sluice.Worker)(nil), "zero Worker": &sluice.Worker{},
	}
	for name, h := range handles {
		t.Run(name, func(t *testing.T) {
			hasErr := returnsError(h)
			for m, err := range callAll(t, name, h, context.Background()) {
				if !hasErr[m] {
					continue
				}
				if err == nil {
					t.Errorf("%s.%s: nil error, want one wrapping ErrClosed", name, m)
					continue
				}
				if !errors.Is(err, sluice.ErrClosed) || strings.Count(err.Error(), "sluice:") != 1 {
					t.Errorf("%s.%s: %q: want one \"sluice:\" prefix and ErrClosed", name, m, err)
				}
			}
		})
	}
	for name, reg := range map[string]sluice.Registrar{"nil": nil, "zero Runner": &sluice.Runner{},
		"zero QueueRunner": &sluice.QueueRunner{}, "nil Runner": (*sluice.Runner)(nil)} {
		if _, err := sluice.Register(reg, "k", sluice.JSON[string](), func(context.Context, sluice.Job[string]) error { return nil }); !errors.Is(err, sluice.ErrClosed) {
			t.Errorf("Register on %s: %v, want ErrClosed", name, err)
		}
	}
}

// TestQueueKindRefusesWhatAQueueCannotDo calls every exported method of a queue-backed kind:
// none panics, and each that returns an error, except those a queue does (Enqueue,
// EnqueueMany, Run, Close), returns ErrQueueUnsupported.
func TestQueueKindRefusesWhatAQueueCannotDo(t *testing.T) {
	f := newFleetQueue()
	q, err := sluice.NewQueueRunner(f.queue(), sluice.QueueConfig{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	k, err := sluice.Register(q, "k", sluice.JSON[string](), func(context.Context, sluice.Job[string]) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Run returns at once
	works := map[string]bool{"Enqueue": true, "EnqueueMany": true, "Run": true, "Close": true}
	hasErr := returnsError(k)
	called := callAll(t, "queue Kind", k, ctx)
	for m, err := range called {
		if !hasErr[m] || works[m] {
			continue
		}
		if !errors.Is(err, sluice.ErrQueueUnsupported) || strings.Count(err.Error(), "sluice:") != 1 {
			t.Errorf("queue Kind.%s: %v: want ErrQueueUnsupported with one \"sluice:\" prefix", m, err)
		}
	}
	for _, m := range []string{"Pause", "Resume", "Paused"} {
		if _, ok := called[m]; !ok || !hasErr[m] {
			t.Errorf("queue Kind.%s: not called, or returns no error", m)
		} else if !strings.Contains(called[m].Error(), m) {
			t.Errorf("queue Kind.%s: %v: want the method named", m, called[m])
		}
	}
}

// TestNilArgumentsAreErrors: nil codecs, handlers and transports are refused, not panics.
func TestNilArgumentsAreErrors(t *testing.T) {
	h := func(context.Context, sluice.Job[string]) error { return nil }
	if _, err := sluice.Register(&sluice.Runner{}, "k", nil, h); err == nil {
		t.Error("Register with a nil codec: no error")
	}
	if _, err := sluice.Register[string](&sluice.Runner{}, "k", sluice.JSON[string](), nil); err == nil {
		t.Error("Register with a nil handler: no error")
	}
	if _, err := sluice.Open[string](t.TempDir(), sluice.Config{}, nil, h); err == nil {
		t.Error("Open with a nil codec: no error")
	}
	if _, err := sluice.NewWorker(nil, sluice.WorkerConfig{}, nil); err == nil {
		t.Error("NewWorker with a nil transport: no error")
	}
	if _, err := sluice.NewQueueRunner(sluice.Queue{}, sluice.QueueConfig{}); err == nil {
		t.Error("NewQueueRunner with no transport: no error")
	}
}
