package pool

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustNew(t *testing.T, capacity int) *Pool {
	t.Helper()
	p, err := New(Config{Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAcquireAnswerDecidesAndReleaseFreesAUnit(t *testing.T) {
	p := mustNew(t, 2)
	acquire := func() bool { p.Step(Acquire{}); return p.Ready().Granted }
	var got []bool
	got = append(got, acquire(), acquire(), acquire())
	p.Step(Release{})
	got = append(got, acquire())
	if diff := cmp.Diff([]bool{true, true, false, true}, got); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	if diff := cmp.Diff(Status{Capacity: 2, Used: 2, Free: 0}, p.Status()); diff != "" {
		t.Fatalf("status (-want +got)\n%s", diff)
	}
	if err := p.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestNewRefusesCapacityBelowOne(t *testing.T) {
	for _, c := range []int{0, -1} {
		if _, err := New(Config{Capacity: c}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(Capacity %d) = %v, want ErrInvalidConfig", c, err)
		}
	}
}

func TestReleaseUnacquiredPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	mustNew(t, 1).Step(Release{})
}
