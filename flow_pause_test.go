package sluice

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sim/disk"
)

// TestPauseIsDurableAndStartsNothing: a paused kind starts nothing (Drain returns with its
// jobs waiting, and says why), other kinds run; the pause outlives Close and Open; Resume
// lets the jobs run. Pausing twice is fine; an unknown kind is refused with what to do.
func TestPauseIsDurableAndStartsNothing(t *testing.T) {
	d := disk.New(1)
	ctx := context.Background()
	var mu sync.Mutex
	ran := map[string]int{}
	h := func(ctx context.Context, j Job[string]) error {
		mu.Lock()
		ran[j.Kind]++
		mu.Unlock()
		return nil
	}
	open := func() (*Runner, *Kind[string], *Kind[string]) {
		r := newOn(t, d, Config{Capacity: 2})
		mail, err := Register(r, "mail", JSON[string](), h)
		if err != nil {
			t.Fatal(err)
		}
		other, err := Register(r, "other", JSON[string](), h)
		if err != nil {
			t.Fatal(err)
		}
		return r, mail, other
	}
	r, mail, other := open()
	for range 3 {
		if _, err := mail.Enqueue(ctx, time.Time{}, "t", "m"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.Enqueue(ctx, time.Time{}, "t", "o"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := mail.Pause(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	checkPaused := func(when string, want []string, ranMail, waiting int) {
		t.Helper()
		got, err := r.Paused(ctx)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: Paused = %q, %v; want %q", when, got, err, want)
		}
		mu.Lock()
		if ran["mail"] != ranMail {
			t.Errorf("%s: %d mail jobs ran, want %d", when, ran["mail"], ranMail)
		}
		mu.Unlock()
		if st := readStats(t, r); st.Paused != waiting || st.Waiting != waiting {
			t.Errorf("%s: Stats Paused %d Waiting %d, want %d", when, st.Paused, st.Waiting, waiting)
		}
	}
	checkPaused("paused", []string{"mail"}, 0, 3)
	if j, err := mail.Get(ctx, 1); err != nil || j.Blocked != "its kind is paused" {
		t.Errorf("a paused kind's job: Blocked %q (%v), want \"its kind is paused\"", j.Blocked, err)
	}
	if ran["other"] != 1 {
		t.Errorf("the other kind ran %d jobs, want 1", ran["other"])
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r, mail, _ = open()
	defer r.Close()
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	checkPaused("reopened", []string{"mail"}, 0, 3)
	if err := mail.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	checkPaused("resumed", nil, 3, 0)

	err := r.Pause(ctx, "nope")
	if !errors.Is(err, ErrUnknownKind) || strings.Count(err.Error(), "sluice:") != 1 ||
		!strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "name a registered kind") {
		t.Errorf("Pause of an unknown kind: %v, want ErrUnknownKind naming it and what to do", err)
	}
}
