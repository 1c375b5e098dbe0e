package sluice_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/core/qjobs"
)

type tenantSync struct{ Tenant string }

func tenantOf(p tenantSync) string { return p.Tenant }

// registerTenants registers kind "sync" on reg, keyed by tenant, one attempt per tenant at once.
func registerTenants(t *testing.T, reg sluice.Registrar) *sluice.Kind[tenantSync] {
	t.Helper()
	k, err := sluice.Register(reg, "sync", sluice.JSON[tenantSync](),
		func(context.Context, sluice.Job[tenantSync]) error { return nil },
		sluice.WithKeyFunc(tenantOf), sluice.WithKeyConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestKeyFuncKeysEveryEnqueue: WithKeyFunc's key reaches Enqueue's, EnqueueMany's and a
// schedule's jobs as WithKey would put it; a job's own WithKey replaces it, and "" leaves the
// shared key.
func TestKeyFuncKeysEveryEnqueue(t *testing.T) {
	r, done := newRunner(2, sluice.Policy{})
	defer done()
	k := registerTenants(t, r)
	ctx := context.Background()
	later := time.Now().Add(time.Hour)
	var ids []uint64
	for _, e := range []struct {
		tenant string
		opts   []sluice.JobOption
	}{{"acme", nil}, {"acme", []sluice.JobOption{sluice.WithKey("own")}}, {"", nil}} {
		id, err := k.Enqueue(ctx, later, "crm", tenantSync{e.tenant}, e.opts...)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	many, err := k.EnqueueMany(ctx, []sluice.NewJob[tenantSync]{{Due: later, Target: "crm", Payload: tenantSync{"globex"}}})
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, many...)
	if err := k.Schedule(ctx, "nightly", "@every 1h", "crm", tenantSync{"initech"}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, id := range ids {
		j, err := k.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, j.Key)
	}
	if want := []string{"acme", "own", "", "globex"}; !slices.Equal(keys, want) {
		t.Errorf("keys %q, want %q", keys, want)
	}
	scheds, err := r.Schedules(ctx)
	if err != nil || len(scheds) != 1 || scheds[0].Key != "initech" {
		t.Errorf("schedules %+v (%v): want one keyed initech", scheds, err)
	}
}

// TestKeyFuncRefusals: a function of another payload type and a nil function are refused at
// Register, naming WithKeyFunc.
func TestKeyFuncRefusals(t *testing.T) {
	r, done := newRunner(1, sluice.Policy{})
	defer done()
	h := func(context.Context, sluice.Job[tenantSync]) error { return nil }
	_, err := sluice.Register(r, "a", sluice.JSON[tenantSync](), h, sluice.WithKeyFunc(func(n int) string { return "" }))
	if err == nil || !strings.Contains(err.Error(), "WithKeyFunc") || !strings.Contains(err.Error(), "func(sluice_test.tenantSync) string") {
		t.Errorf("a func(int) string for a kind of tenantSync: %v", err)
	}
	_, err = sluice.Register(r, "b", sluice.JSON[tenantSync](), h, sluice.WithKeyFunc[tenantSync](nil))
	if err == nil || !strings.Contains(err.Error(), "WithKeyFunc(nil)") {
		t.Errorf("a nil function: %v", err)
	}
	// A key the function derives is checked as WithKey's, and the error says where it came from.
	k, err := sluice.Register(r, "c", sluice.JSON[tenantSync](), h, sluice.WithKeyFunc(tenantOf))
	if err != nil {
		t.Fatal(err)
	}
	_, err = k.Enqueue(context.Background(), time.Time{}, "t", tenantSync{"a\x00b"})
	if !errors.Is(err, sluice.ErrInvalidJob) || !strings.Contains(err.Error(), `WithKeyFunc returned "a\x00b" for this payload`) || strings.Count(err.Error(), "sluice:") != 1 {
		t.Errorf("a derived key with a NUL byte: %v", err)
	}
}

// TestKeyFuncOnAQueue: on a queue runner the key travels in the message's sluice-key.
func TestKeyFuncOnAQueue(t *testing.T) {
	f := newFleetQueue()
	r := f.runner(t, sluice.QueueConfig{Seed: 1})
	k := registerTenants(t, r)
	ctx := context.Background()
	if _, err := k.Enqueue(ctx, time.Time{}, "crm", tenantSync{"acme"}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.EnqueueMany(ctx, []sluice.NewJob[tenantSync]{{Target: "crm", Payload: tenantSync{"globex"}}}); err != nil {
		t.Fatal(err)
	}
	msgs, err := f.Receive(ctx, 10, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range msgs {
		keys = append(keys, m.Attributes[qjobs.AttrKey])
	}
	slices.Sort(keys)
	if want := []string{"acme", "globex"}; !slices.Equal(keys, want) {
		t.Errorf("message keys %q, want %q", keys, want)
	}
}
