package retry

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDefaultPolicyIsSpecDefault(t *testing.T) {
	want := Policy{Attempts: 5, Base: time.Second, Cap: 5 * time.Minute, Deadline: 0}
	if diff := cmp.Diff(want, DefaultPolicy()); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	if err := DefaultPolicy().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateNamesField(t *testing.T) {
	for _, tc := range []struct {
		p     Policy
		field string
	}{
		{Policy{Attempts: 0, Base: 1, Cap: 1}, "Attempts"},
		{Policy{Attempts: 1, Base: 0, Cap: 1}, "Base"},
		{Policy{Attempts: 1, Base: 2, Cap: 1}, "Cap"},
		{Policy{Attempts: 1, Base: 1, Cap: 1, Deadline: -1}, "Deadline"},
	} {
		err := tc.p.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Validate(%+v) = %v, want an ErrInvalid naming %s", tc.p, err, tc.field)
		}
	}
}

func TestDelay(t *testing.T) {
	p := DefaultPolicy()
	huge := Policy{Attempts: 1, Base: time.Duration(math.MaxInt64 / 4), Cap: time.Duration(math.MaxInt64)}
	for _, tc := range []struct {
		p    Policy
		n    int
		want time.Duration
	}{
		{p, 0, time.Second},
		{p, 1, 2 * time.Second},
		{p, 8, 256 * time.Second},
		{p, 9, 5 * time.Minute}, // 512s > cap
		{p, 62, 5 * time.Minute},
		{p, 63, 5 * time.Minute},
		{p, 1000, 5 * time.Minute},
		{huge, 1, time.Duration(math.MaxInt64/4) * 2},
		{huge, 2, time.Duration(math.MaxInt64/4) * 4}, // just fits
		{huge, 3, time.Duration(math.MaxInt64)},       // would overflow: capped
		{Policy{Base: 1, Cap: time.Duration(math.MaxInt64)}, 62, 1 << 62},
		{Policy{Base: 1, Cap: time.Duration(math.MaxInt64)}, 63, time.Duration(math.MaxInt64)},
	} {
		if got := tc.p.Delay(tc.n); got != tc.want {
			t.Errorf("%+v.Delay(%d) = %v, want %v", tc.p, tc.n, got, tc.want)
		}
	}
}

func TestWaitEqualJitterBounds(t *testing.T) {
	p := DefaultPolicy()
	d := func(v time.Duration) *time.Duration { return &v }
	for _, tc := range []struct {
		name  string
		n     int
		r     uint32
		after *time.Duration
		want  time.Duration
	}{
		{"r=0 gives delay/2", 0, 0, nil, 500 * time.Millisecond},
		// h = 5e8; r mod (h+1) = 4294967295 mod 500000001 = 294967287
		{"r=max", 0, math.MaxUint32, nil, 500*time.Millisecond + 294967287},
		{"r=h gives delay", 0, 500_000_000, nil, time.Second},
		{"r=h+1 wraps to delay/2", 0, 500_000_001, nil, 500 * time.Millisecond},
		{"capped delay, r=0", 20, 0, nil, 150 * time.Second},
		{"after replaces jitter", 0, 12345, d(7 * time.Second), 7 * time.Second},
		{"after capped", 0, 0, d(time.Hour), 5 * time.Minute},
		{"negative after floored", 0, 0, d(-time.Second), 0},
		{"after zero", 3, 99, d(0), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Wait(tc.n, tc.r, tc.after); got != tc.want {
				t.Fatalf("Wait = %v, want %v", got, tc.want)
			}
		})
	}
	// Odd delays: h = floor(delay/2), wait ∈ [h, delay] and never above delay.
	odd := Policy{Attempts: 1, Base: 3, Cap: 3}
	for _, r := range []uint32{0, 1, 2, 3, math.MaxUint32} {
		if got := odd.Wait(0, r, nil); got < 1 || got > 2 {
			t.Errorf("odd.Wait(r=%d) = %v, want in [1ns, 2ns]", r, got)
		}
	}
	for n := 0; n < 70; n++ {
		for _, r := range []uint32{0, 1, math.MaxUint32 / 2, math.MaxUint32} {
			del := p.Delay(n)
			if got := p.Wait(n, r, nil); got < del/2 || got > del {
				t.Fatalf("Wait(%d,%d) = %v outside [%v, %v]", n, r, got, del/2, del)
			}
		}
	}
}

func TestDeadline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := Policy{Attempts: 3, Base: time.Second, Cap: 4 * time.Second, Deadline: 10 * time.Second}
	for _, tc := range []struct {
		name string
		p    Policy
		at   time.Duration
		want bool
	}{
		{"before", p, 10*time.Second - 1, false},
		{"at deadline is late", p, 10 * time.Second, true},
		{"after", p, 11 * time.Second, true},
		{"no deadline never late", DefaultPolicy(), 1000 * time.Hour, false},
	} {
		if got := tc.p.Late(t0, t0.Add(tc.at)); got != tc.want {
			t.Errorf("%s: Late = %v, want %v", tc.name, got, tc.want)
		}
	}
	type next struct {
		Due     time.Duration
		Verdict Verdict
	}
	for _, tc := range []struct {
		name    string
		now     time.Duration
		attempt int
		r       uint32
		want    next
	}{
		{"first retry scheduled", 0, 1, 0, next{500 * time.Millisecond, Retry}},
		{"retry landing just before deadline", 9*time.Second - 1, 1, 500_000_000, next{10*time.Second - 1, Retry}},
		{"retry landing exactly at deadline is late", 9 * time.Second, 1, 500_000_000, next{-1, DeadLate}},
		{"budget spent beats lateness", 20 * time.Second, 3, 0, next{-1, DeadSpent}},
	} {
		due, v := p.Next(t0, t0.Add(tc.now), tc.attempt, tc.r, nil)
		got := next{-1, v}
		if v == Retry {
			got.Due = due.Sub(t0)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", tc.name, diff)
		}
	}
}

func TestAdmitOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		c       Candidate
		breaker bool
		want    Verdict
		asked   bool
	}{
		{"no unit: nothing else considered", Candidate{UnitFree: false, Late: true, Spent: true}, true, NoUnit, false},
		{"late before spent", Candidate{UnitFree: true, Late: true, Spent: true}, true, DeadLate, false},
		{"spent before breaker", Candidate{UnitFree: true, Spent: true}, false, DeadSpent, false},
		{"breaker refuses", Candidate{UnitFree: true}, false, Defer, true},
		{"start", Candidate{UnitFree: true}, true, Start, true},
	} {
		asked := 0
		got := Admit(tc.c, func() bool { asked++; return tc.breaker })
		if got != tc.want || (asked == 1) != tc.asked || asked > 1 {
			t.Errorf("%s: Admit = %v (breaker asked %d times), want %v (asked=%v)", tc.name, got, asked, tc.want, tc.asked)
		}
	}
}
