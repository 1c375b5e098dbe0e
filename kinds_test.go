package sluice

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/runneropt"
	"github.com/sluicehq/sluice/sim/disk"
)

// newOn is New over fsys (the internal FS option), with cfg's logger kept if set.
func newOn(t *testing.T, fsys core.FS, cfg Config) *Runner {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	cfg.opts = runneropt.Options{FS: fsys}
	r, err := New("", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustRegister[A any](t *testing.T, r *Runner, name string, codec Codec[A], h Handler[A], opts ...KindOption) *Kind[A] {
	t.Helper()
	k, err := Register(r, name, codec, h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestKindsShareOneRunner: two kinds with their own payload types and handlers run from one
// runner; each handle reads its own jobs typed, refuses the other kind's, and lists only its
// own; Runner.List sees both.
func TestKindsShareOneRunner(t *testing.T) {
	r := newOn(t, disk.New(1), Config{Capacity: 2})
	defer r.Close()
	var mu sync.Mutex
	var ran []string
	strs := mustRegister(t, r, "str", JSON[string](), func(_ context.Context, j Job[string]) error {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, j.Kind+":"+j.Payload)
		return nil
	})
	ints := mustRegister(t, r, "int", JSON[int](), func(_ context.Context, j Job[int]) error {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, j.Kind+":"+strings.Repeat("i", j.Payload))
		return nil
	})
	ctx := context.Background()
	sid, err := strs.Enqueue(ctx, time.Time{}, "a", "hello")
	if err != nil {
		t.Fatal(err)
	}
	iids, err := ints.EnqueueMany(ctx, []NewJob[int]{{Target: "a", Payload: 2}, {Target: "b", Payload: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := strings.Join(ran, ",")
	mu.Unlock()
	for _, want := range []string{"str:hello", "int:ii", "int:iii"} {
		if !strings.Contains(got, want) {
			t.Errorf("handlers ran %s, missing %s", got, want)
		}
	}
	if j, err := ints.Get(context.Background(), iids[1]); err != nil || j.Payload != 3 || j.Kind != "int" || j.State != StateSucceeded {
		t.Errorf("ints.Get(context.Background(), %d) = %+v, %v", iids[1], j, err)
	}
	if _, err := ints.Get(context.Background(), sid); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `kind "str"`) {
		t.Errorf("ints.Get of a str job: %v, want ErrNotFound naming its kind", err)
	}
	p, err := ints.List(ctx, ListFilter{})
	if err != nil || len(p.Jobs) != 2 || p.Jobs[0].Payload != 2 {
		t.Errorf("ints.List = %+v, %v", p, err)
	}
	all, err := r.List(ctx, ListFilter{})
	if err != nil || len(all.Jobs) != 3 {
		t.Errorf("Runner.List = %d jobs, %v; want 3", len(all.Jobs), err)
	}
	if _, err := strs.List(ctx, ListFilter{Kind: "int"}); !errors.Is(err, ErrInvalidJob) {
		t.Errorf("strs.List with Kind int: %v, want ErrInvalidJob", err)
	}
}

// TestRegisterRefusesMisuse: an empty name, a name twice, a bad limit, and any Register once
// Run or Drain has begun are refused with errors naming the kind.
func TestRegisterRefusesMisuse(t *testing.T) {
	r := newOn(t, disk.New(1), Config{Capacity: 1})
	defer r.Close()
	mustRegister(t, r, "a", JSON[string](), succeedString)
	for name, reg := range map[string]func() error{
		"empty name": func() error { _, err := Register(r, "", JSON[string](), succeedString); return err },
		"twice":      func() error { _, err := Register(r, "a", JSON[string](), succeedString); return err },
		"limit 0": func() error {
			_, err := Register(r, "b", JSON[string](), succeedString, WithConcurrency(0))
			return err
		},
	} {
		if err := reg(); err == nil || strings.Count(err.Error(), "sluice:") != 1 {
			t.Errorf("%s: %v, want one sluice: error", name, err)
		}
	}
	if err := r.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := Register(r, "late", JSON[string](), succeedString)
	if err == nil || !strings.Contains(err.Error(), `"late"`) || !strings.Contains(err.Error(), "before") {
		t.Fatalf("Register after Drain: %v, want a refusal naming the kind", err)
	}
}

// TestUnregisteredKindWaits: a journal holding jobs of a kind the new process does not
// register opens; those jobs wait (never started, never dropped), Stats.Unregistered counts
// them, one warning names the kind, Drain returns with them waiting, and a process that
// registers the kind again runs them.
func TestUnregisteredKindWaits(t *testing.T) {
	d := disk.New(1)
	ctx := context.Background()
	r := newOn(t, d, Config{Capacity: 2})
	a := mustRegister(t, r, "a", JSON[string](), succeedString)
	b := mustRegister(t, r, "b", JSON[string](), succeedString)
	if _, err := a.Enqueue(ctx, time.Time{}, "t", "x"); err != nil {
		t.Fatal(err)
	}
	bid, err := b.Enqueue(ctx, time.Time{}, "t", "y")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	r = newOn(t, d, Config{Capacity: 2, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	mustRegister(t, r, "a", JSON[string](), succeedString)
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Drain(ctx); err != nil { // a second dispatch does not warn again
		t.Fatal(err)
	}
	st := readStats(t, r)
	if st.Unregistered != 1 || st.Waiting != 1 || st.Succeeded != 1 {
		t.Errorf("stats %+v, want 1 unregistered waiting, 1 succeeded", st)
	}
	if j, err := r.Get(context.Background(), bid); err != nil || j.State != StatePending || j.Kind != "b" {
		t.Errorf("job %d of the unregistered kind: %+v %v, want pending", bid, j, err)
	}
	if n := strings.Count(logs.String(), "unregistered kind"); n != 1 || !strings.Contains(logs.String(), "kind=b") {
		t.Errorf("warnings %q, want one naming kind b", logs.String())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	r = newOn(t, d, Config{Capacity: 2})
	defer r.Close()
	b = mustRegister(t, r, "b", JSON[string](), succeedString)
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if j, err := b.Get(context.Background(), bid); err != nil || j.State != StateSucceeded || j.Payload != "y" {
		t.Errorf("job %d once its kind is registered: %+v %v, want succeeded", bid, j, err)
	}
	if st := readStats(t, r); st.Unregistered != 0 {
		t.Errorf("stats %+v, want none unregistered", st)
	}
}

// TestKindConcurrencyLimit: with capacity 4 and a kind limited to 1, one attempt of that kind
// runs while the other kind's jobs start and finish; the limited kind's next job starts only
// when its running one ends.
func TestKindConcurrencyLimit(t *testing.T) {
	r := newOn(t, disk.New(1), Config{Capacity: 4})
	defer r.Close()
	release := make(chan struct{})
	var fastDone sync.WaitGroup
	fastDone.Add(2)
	slow := mustRegister(t, r, "slow", JSON[string](), func(ctx context.Context, _ Job[string]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}, WithConcurrency(1))
	fast := mustRegister(t, r, "fast", JSON[string](), func(context.Context, Job[string]) error {
		fastDone.Done()
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 3 {
		if _, err := slow.Enqueue(ctx, time.Time{}, "s", "x"); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := fast.Enqueue(ctx, time.Time{}, "f", "y"); err != nil {
			t.Fatal(err)
		}
	}
	drained := make(chan error, 1)
	go func() { drained <- r.Drain(ctx) }()
	fastDone.Wait() // the fast jobs ran beside the one slow attempt
	p, err := slow.List(ctx, ListFilter{States: []State{StateRunning}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Jobs) != 1 {
		t.Fatalf("%d slow jobs running while the fast ones ran, limit 1", len(p.Jobs))
	}
	close(release)
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	if st := readStats(t, r); st.Succeeded != 5 {
		t.Fatalf("stats %+v, want 5 succeeded", st)
	}
}

// TestUniqueWindowAfterSuccess: WithUniqueWindow keeps a succeeded job's key reserved: an
// Enqueue inside the window is a duplicate of it, also after a reopen; after the window a new
// job takes the key. The window needs a key.
func TestUniqueWindowAfterSuccess(t *testing.T) {
	d := disk.New(1)
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx := context.Background()
	open := func() *Kind[string] {
		k, err := Register(newOn(t, d, Config{Capacity: 1, Clock: mock}), "mail", JSON[string](), succeedString)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k := open()
	once := []JobOption{WithUnique("welcome"), WithUniqueWindow(time.Hour)}
	first, err := k.Enqueue(ctx, time.Time{}, "t", "hi", once...)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.DrainDue(ctx); err != nil {
		t.Fatal(err)
	}
	mock.Add(59 * time.Minute)
	var dup bool
	if id, err := k.Enqueue(ctx, time.Time{}, "t", "again", append(once, WasDuplicate(&dup))...); err != nil || id != first || !dup {
		t.Fatalf("enqueue inside the window: id %d dup %v err %v, want job %d as a duplicate", id, dup, err, first)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	k = open()
	defer k.Close()
	if id, err := k.Enqueue(ctx, time.Time{}, "t", "again", FailOnDuplicate(), WithUnique("welcome")); !errors.Is(err, ErrDuplicate) || id != first {
		t.Fatalf("enqueue inside the window after a reopen: id %d err %v, want ErrDuplicate of job %d", id, err, first)
	}
	mock.Add(time.Minute)
	id, err := k.Enqueue(ctx, time.Time{}, "t", "next day", once...)
	if err != nil || id == first {
		t.Fatalf("enqueue after the window: id %d err %v, want a new job", id, err)
	}
	j, err := k.Get(context.Background(), id)
	j.Blocked = "" // what the flow tests check
	if diff := cmp.Diff(JobInfo[string]{ID: id, Kind: "mail", Target: "t", State: StatePending, FirstDue: mock.Now().UTC(),
		Due: mock.Now().UTC(), Unique: "welcome", UniqueWindow: time.Hour, Payload: "next day"}, j); err != nil || diff != "" {
		t.Fatalf("the new job (-want +got) %v\n%s", err, diff)
	}
	if _, err := k.Enqueue(ctx, time.Time{}, "t", "x", WithUniqueWindow(time.Hour)); !errors.Is(err, ErrInvalidJob) {
		t.Fatalf("a window without a key: %v, want ErrInvalidJob", err)
	}
}
