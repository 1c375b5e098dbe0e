package sluice

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/sim/disk"
)

// The flow-control tests run the real driver and engine over sim/disk inside synctest
// bubbles: handlers "work" with time.Sleep on the bubble's clock, so start times are exact
// and nothing waits on the wall clock.

// starts records each attempt's start: its job's key (or payload) and its time, and how many
// attempts run per key at once.
type starts struct {
	mu      sync.Mutex
	t0      time.Time
	keys    []string
	at      []time.Duration
	running map[string]int
	peak    map[string]int
	// overlap[k] counts starts of key k while another key had an attempt running.
	overlap map[string]int
}

func newStarts() *starts {
	return &starts{t0: time.Now(), running: map[string]int{}, peak: map[string]int{}, overlap: map[string]int{}}
}

// run is a handler body: it records the start of key, works for d, and records the end.
func (s *starts) run(key string, d time.Duration) {
	s.mu.Lock()
	s.keys = append(s.keys, key)
	s.at = append(s.at, time.Since(s.t0))
	for k, n := range s.running {
		if k != key && n > 0 {
			s.overlap[key]++
			break
		}
	}
	s.running[key]++
	s.peak[key] = max(s.peak[key], s.running[key])
	s.mu.Unlock()
	time.Sleep(d)
	s.mu.Lock()
	s.running[key]--
	s.mu.Unlock()
}

// flowKind registers kind "k" on a fresh runner over sim/disk; the handler runs the job's
// payload as its key for d through s.
func flowKind(t *testing.T, s *starts, capacity int, d time.Duration, opts ...KindOption) (*Runner, *Kind[string]) {
	t.Helper()
	r := newOn(t, disk.New(1), Config{Capacity: capacity})
	k, err := Register(r, "k", JSON[string](), func(ctx context.Context, j Job[string]) error {
		s.run(j.Payload, d)
		return nil
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r, k
}

func enqueueKeyed(t *testing.T, k *Kind[string], keys ...string) {
	t.Helper()
	for _, key := range keys {
		if _, err := k.Enqueue(context.Background(), time.Time{}, "t", key, WithKey(key)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKeyConcurrencyBoundsEachKey: key "a" never runs more than its limit of 2 at once, and
// key "b" runs meanwhile (the key's limit does not hold up other keys).
func TestKeyConcurrencyBoundsEachKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStarts()
		r, k := flowKind(t, s, 8, time.Second, WithKeyConcurrency(2))
		defer r.Close()
		enqueueKeyed(t, k, "a", "a", "a", "a", "a", "a", "b", "b")
		if err := r.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s.peak["a"] != 2 || s.peak["b"] != 2 || len(s.keys) != 8 {
			t.Errorf("peaks a %d b %d over %d starts, want 2 and 2 over 8", s.peak["a"], s.peak["b"], len(s.keys))
		}
		if s.overlap["b"] != 2 {
			t.Errorf("%d starts of b while a ran, want 2", s.overlap["b"])
		}
	})
}

// TestKindRateSpacesStarts: WithRate's bucket starts empty at open and after a reopen (no
// burst the runner may have spent), and no window of length w holds more than
// Burst + w·Count/Per starts.
func TestKindRateSpacesStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rate := Rate{Count: 10, Per: time.Second, Burst: 5}
		d := disk.New(1)
		s := newStarts()
		var opened []time.Duration
		for round := range 2 {
			r := newOn(t, d, Config{Capacity: 8})
			opened = append(opened, time.Since(s.t0))
			k, err := Register(r, "k", JSON[string](), func(ctx context.Context, j Job[string]) error {
				s.run(j.Payload, time.Millisecond)
				return nil
			}, WithRate(rate))
			if err != nil {
				t.Fatal(err)
			}
			jobs := make([]NewJob[string], 20)
			for i := range jobs {
				jobs[i] = NewJob[string]{Target: "t", Payload: fmt.Sprint(round)}
			}
			if _, err := k.EnqueueMany(context.Background(), jobs); err != nil {
				t.Fatal(err)
			}
			if err := r.Drain(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Minute) // a full bucket, had it kept its tokens
		}
		cr := rate.core()
		if len(s.at) != 40 {
			t.Fatalf("%d starts, want 40", len(s.at))
		}
		for round, at := range opened {
			// From the open: an empty bucket allows floor(w·Count/Per) starts in w.
			first := s.at[20*round:]
			for i, a := range first[:20] {
				if w := a - at; i+1 > int(w*time.Duration(rate.Count)/rate.Per) {
					t.Errorf("round %d: start %d at %v after the open: more than the empty bucket allows", round, i+1, w)
				}
			}
		}
		for i := range s.at {
			for j := i; j < len(s.at); j++ {
				if n, w := int64(j-i+1), s.at[j]-s.at[i]; n > cr.Allowed(w) {
					t.Errorf("starts %d..%d: %d in %v, want at most %d", i, j, n, w, cr.Allowed(w))
				}
			}
		}
	})
}

// TestSequenceRunsInOrderOneAtATime: jobs of a sequence start in enqueue order, one at a
// time, while another sequence and jobs without one run beside it.
func TestSequenceRunsInOrderOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStarts()
		r := newOn(t, disk.New(1), Config{Capacity: 4})
		defer r.Close()
		var mu sync.Mutex
		order := map[string][]string{}
		k, err := Register(r, "k", JSON[string](), func(ctx context.Context, j Job[string]) error {
			g, _, _ := strings.Cut(j.Payload, "/")
			mu.Lock()
			order[g] = append(order[g], j.Payload)
			mu.Unlock()
			s.run(g, time.Second)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		want := map[string][]string{}
		for i := range 4 {
			for _, g := range []string{"g", "h", "-"} {
				p := fmt.Sprintf("%s/%d", g, i)
				want[g] = append(want[g], p)
				var opts []JobOption
				if g != "-" {
					opts = append(opts, WithGroup(g))
				}
				if _, err := k.Enqueue(ctx, time.Time{}, "t", p, opts...); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := r.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		for _, g := range []string{"g", "h"} {
			if !slices.Equal(order[g], want[g]) || s.peak[g] != 1 {
				t.Errorf("sequence %s ran %q with %d at once, want %q one at a time", g, order[g], s.peak[g], want[g])
			}
		}
		if s.peak["-"] < 2 {
			t.Errorf("jobs without a sequence ran %d at once, want them beside each other", s.peak["-"])
		}
	})
}

// TestDeadJobHoldsItsSequence: with WithHoldOnDead a dead job keeps the later jobs of its
// sequence waiting, also those enqueued after its death (Drain returns; Stats.Held counts
// them; Blocked names it), until it is retried or cancelled; without it, a dead job releases
// them. The kind's option reaches jobs of Enqueue and EnqueueMany alike.
func TestDeadJobHoldsItsSequence(t *testing.T) {
	for _, how := range []string{"retry", "cancel", "no hold"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newOn(t, disk.New(1), Config{Capacity: 4, Policy: Policy{Attempts: 1}})
				defer r.Close()
				var mu sync.Mutex
				var ran []string
				fail := true
				opts := []KindOption{WithHoldOnDead()}
				if how == "no hold" {
					opts = nil
				}
				k, err := Register(r, "k", JSON[string](), func(ctx context.Context, j Job[string]) error {
					mu.Lock()
					defer mu.Unlock()
					ran = append(ran, j.Payload)
					if j.Payload == "first" && fail {
						fail = false
						return errors.New("boom")
					}
					return nil
				}, opts...)
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				var ids []uint64
				for _, p := range []string{"first", "second", "third"} {
					id, err := k.Enqueue(ctx, time.Time{}, "t", p, WithGroup("s"))
					if err != nil {
						t.Fatal(err)
					}
					ids = append(ids, id)
				}
				if err := r.Drain(ctx); err != nil {
					t.Fatal(err)
				}
				st := readStats(t, r)
				if how == "no hold" {
					if !slices.Equal(ran, []string{"first", "second", "third"}) || st.Held != 0 || st.Dead != 1 {
						t.Errorf("without hold: ran %q, Held %d, Dead %d; want all three, 0, 1", ran, st.Held, st.Dead)
					}
					return
				}
				// A job that joins the sequence after the death waits too.
				late, err := k.EnqueueMany(ctx, []NewJob[string]{{Target: "t", Payload: "fourth", Options: []JobOption{WithGroup("s")}}})
				if err != nil {
					t.Fatal(err)
				}
				if err := r.Drain(ctx); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, late...)
				st = readStats(t, r)
				if !slices.Equal(ran, []string{"first"}) || st.Held != 3 || st.Dead != 1 || st.Waiting != 3 {
					t.Fatalf("held: ran %q, stats %+v; want only the first, 3 held and waiting, 1 dead", ran, st)
				}
				if j, err := k.Get(ctx, ids[1]); err != nil || j.Blocked != fmt.Sprintf(`sequence "s" is held by dead job %d (retry or cancel it)`, ids[0]) {
					t.Errorf("Blocked %q (%v), want the dead job holding it", j.Blocked, err)
				}
				want := []string{"first", "first", "second", "third", "fourth"}
				if how == "retry" {
					err = k.Retry(ctx, ids[0])
				} else {
					err, want = k.Cancel(ctx, ids[0]), []string{"first", "second", "third", "fourth"}
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := r.Drain(ctx); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ran, want) {
					t.Errorf("after %s: ran %q, want %q", how, ran, want)
				}
			})
		})
	}
}

// TestFairShareInterleavesKeys: with one unit and every job due at once, WithFairShare serves
// the keys round-robin in the same order each round, so while a key has a due job at most N−1
// starts of other keys come before its next one (N the keys with due jobs; the general bound,
// with jobs falling due at other times, is 2(N−1): core's flow model checks it). Without it,
// key "a" (enqueued first) runs first.
func TestFairShareInterleavesKeys(t *testing.T) {
	keys := []string{"a", "a", "a", "a", "a", "a", "b", "b", "c", "c"}
	for _, fair := range []bool{true, false} {
		t.Run(fmt.Sprint("fair=", fair), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newStarts()
				var opts []KindOption
				if fair {
					opts = append(opts, WithFairShare())
				}
				r, k := flowKind(t, s, 1, time.Second, opts...)
				defer r.Close()
				enqueueKeyed(t, k, keys...)
				// Bounded on the bubble's clock: a job that never starts fails the test
				// rather than deadlock the bubble.
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				if err := r.Drain(ctx); err != nil {
					t.Fatalf("%v; started %q", err, s.keys)
				}
				if !fair {
					if !slices.Equal(s.keys, keys) {
						t.Errorf("without fair share: %q, want enqueue order", s.keys)
					}
					return
				}
				if err := fairBound(keys, s.keys); err != nil {
					t.Errorf("%v: %q", err, s.keys)
				}
			})
		})
	}
}

// fairBound checks the fair-share bound on a start order got of the jobs enqueued (all due at
// once, keyed by enqueued): while key K has jobs left, at most N−1 starts of other keys come
// between two of K's (or before its first), N the keys with jobs left when K's wait began.
func fairBound(enqueued, got []string) error {
	left := map[string]int{}
	for _, k := range enqueued {
		left[k]++
	}
	due := func() int {
		n := 0
		for _, c := range left {
			if c > 0 {
				n++
			}
		}
		return n
	}
	since, allowed := map[string]int{}, map[string]int{} // starts of other keys since K's last
	for k := range left {
		allowed[k] = due() - 1
	}
	for i, k := range got {
		for other, c := range left {
			if other != k && c > 0 {
				if since[other]++; since[other] > allowed[other] {
					return fmt.Errorf("start %d (%s): key %s has waited %d starts of other keys, at most %d allowed", i, k, other, since[other], allowed[other])
				}
			}
		}
		left[k]--
		since[k], allowed[k] = 0, due()-1
	}
	return nil
}

// TestBlockedSaysWhy: JobInfo.Blocked, through Get and List, for a key at its limit and a
// sequence held by a running job.
func TestBlockedSaysWhy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newOn(t, disk.New(1), Config{Capacity: 4})
		defer r.Close()
		release := make(chan struct{})
		h := func(ctx context.Context, j Job[string]) error { <-release; return nil }
		keyed, err := Register(r, "keyed", JSON[string](), h, WithKeyConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		seq, err := Register(r, "seq", JSON[string](), h)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		enqueueKeyed(t, keyed, "a", "a")
		for range 2 {
			if _, err := seq.Enqueue(ctx, time.Time{}, "t", "x", WithGroup("s")); err != nil {
				t.Fatal(err)
			}
		}
		drained := make(chan error, 1)
		go func() { drained <- r.Drain(ctx) }()
		synctest.Wait() // jobs 1 and 3 run; 2 and 4 wait
		for id, want := range map[uint64]string{1: "", 2: `key "a" is at its limit (1 running)`, 3: "", 4: `sequence "s" is held by job 3`} {
			j, err := r.Get(ctx, id)
			if err != nil || j.Blocked != want {
				t.Errorf("Get %d: Blocked %q (%v), want %q", id, j.Blocked, err, want)
			}
		}
		p, err := seq.List(ctx, ListFilter{States: []State{StatePending}})
		if err != nil || len(p.Jobs) != 1 || p.Jobs[0].Blocked != `sequence "s" is held by job 3` {
			t.Errorf("List of the pending seq jobs: %+v (%v), want job 4 held by job 3", p.Jobs, err)
		}
		close(release)
		if err := <-drained; err != nil {
			t.Fatal(err)
		}
		if j, _ := r.Get(ctx, 4); j.Blocked != "" {
			t.Errorf("a succeeded job: Blocked %q, want \"\"", j.Blocked)
		}
	})
}

// TestFlowOptionErrors: a bad flow option is refused at Register or Enqueue with one
// "sluice:" prefix, naming the option.
func TestFlowOptionErrors(t *testing.T) {
	r := newOn(t, disk.New(1), Config{})
	defer r.Close()
	for _, tt := range []struct {
		opt  KindOption
		name string
	}{
		{WithRate(Rate{}), "WithRate"},
		{WithRate(Rate{Count: 1}), "WithRate"},
		{WithKeyRate(Rate{Count: -1, Per: time.Second}), "WithKeyRate"},
		{WithKeyConcurrency(0), "WithKeyConcurrency(0)"},
		{WithAttemptTimeout(0), "WithAttemptTimeout(0s)"},
	} {
		_, err := Register(r, "k", JSON[string](), succeedString, tt.opt)
		if err == nil || strings.Count(err.Error(), "sluice:") != 1 || !strings.Contains(err.Error(), tt.name) {
			t.Errorf("Register with %s: %v, want a refusal naming it", tt.name, err)
		}
	}
	k, err := Register(r, "k", JSON[string](), succeedString)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		opt  JobOption
		name string
	}{
		{WithKey(""), `WithKey(""): the key is empty`},
		{WithKey(strings.Repeat("k", NameMax+1)), `WithKey("kkkk`},
		{WithKey("a\x00b"), `WithKey("a\x00b"): the key "a\x00b" holds a NUL byte`},
		{WithJobAttemptTimeout(-time.Second), "WithJobAttemptTimeout(-1s)"},
		{WithGroup(""), `WithGroup(""): the key must be 1 to 128 bytes`},
	} {
		_, err := k.Enqueue(context.Background(), time.Time{}, "t", "x", tt.opt)
		if !errors.Is(err, ErrInvalidJob) || strings.Count(err.Error(), "sluice:") != 1 || !strings.Contains(err.Error(), tt.name) {
			t.Errorf("Enqueue with %s: %v, want ErrInvalidJob naming it", tt.name, err)
		}
	}
}

// TestKeyOptionsTogetherDrain: every mix of the key options drains a backlog of two keys (a
// key with several jobs parked must get each of them out, whatever parked them), within each
// key's limit and rate: no window of length w holds more than Burst + w·Count/Per starts of
// one key.
func TestKeyOptionsTogetherDrain(t *testing.T) {
	rate := Rate{Count: 20, Per: time.Second, Burst: 2}
	combos := []struct {
		name  string
		opts  []KindOption
		limit int
		rated bool
	}{
		{"rate", []KindOption{WithKeyRate(rate)}, 0, true},
		{"limit", []KindOption{WithKeyConcurrency(2)}, 2, false},
		{"fair", []KindOption{WithFairShare()}, 0, false},
		{"fair+limit", []KindOption{WithFairShare(), WithKeyConcurrency(2)}, 2, false},
		{"fair+rate", []KindOption{WithFairShare(), WithKeyRate(rate)}, 0, true},
		{"limit+rate", []KindOption{WithKeyConcurrency(2), WithKeyRate(rate)}, 2, true},
		{"all", []KindOption{WithFairShare(), WithKeyConcurrency(2), WithKeyRate(rate)}, 2, true},
	}
	for _, c := range combos {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newStarts()
				r, k := flowKind(t, s, 4, 50*time.Millisecond, c.opts...)
				defer r.Close()
				enqueueKeyed(t, k, "a", "a", "a", "a", "a", "a", "b", "b", "b")
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				if err := r.Drain(ctx); err != nil {
					t.Fatalf("%v; started %q", err, s.keys)
				}
				for _, key := range []string{"a", "b"} {
					if c.limit > 0 && s.peak[key] > c.limit {
						t.Errorf("key %s ran %d at once, limit %d", key, s.peak[key], c.limit)
					}
					if !c.rated {
						continue
					}
					var at []time.Duration
					for i, k := range s.keys {
						if k == key {
							at = append(at, s.at[i])
						}
					}
					for i := range at {
						for j := i; j < len(at); j++ {
							if n, w := int64(j-i+1), at[j]-at[i]; n > rate.core().Allowed(w) {
								t.Errorf("key %s: %d starts in %v, want at most %d", key, n, w, rate.core().Allowed(w))
							}
						}
					}
				}
			})
		})
	}
}
