package lease

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// The lease arithmetic on time.Time: the spec's forms of renewAt, retryUntil and request, which
// the tests below hold to the table, and the other tests use as an oracle.

// RenewAt returns when to renew a receipt whose deadline is deadline: a third of the way
// into what is left, or now when nothing is left.
func RenewAt(now, deadline time.Time) time.Time {
	return now.Add(time.Duration(renewAt(0, int64(deadline.Sub(now)))))
}

// RetryUntil returns the last instant at which a renewal may be sent: deadline − window/10.
// A renewal is sent only strictly before it.
func RetryUntil(window time.Duration, deadline time.Time) time.Time {
	return deadline.Add(-window / 10)
}

// Request returns the visibility timeout to ask for at now: min(window, floor(t0+ceiling−now))
// in whole seconds, and false (none) when less than 1 s is left before the ceiling.
func Request(t0 time.Time, window, ceiling time.Duration, now time.Time) (time.Duration, bool) {
	return request(int64(t0.Sub(now)), window, ceiling, 0)
}

// DeadlineAfter returns the local deadline a successful renewal buys: the instant read before
// the request was sent plus what was requested (never more than was granted).
func DeadlineAfter(sentAt time.Time, requested time.Duration) time.Time {
	return sentAt.Add(requested)
}

func sec(s float64) time.Time { return epoch.Add(time.Duration(s * float64(time.Second))) }

func TestRenewAt(t *testing.T) {
	for _, tc := range []struct {
		now, d, want float64
	}{
		{10, 40, 20}, // docs/worker.md
		{50, 40, 50}, // docs/worker.md: nothing left
		{0, 30, 10},
		{40, 40, 40},
		{39.7, 40, 39.8},
	} {
		got := RenewAt(sec(tc.now), sec(tc.d))
		if diff := cmp.Diff(sec(tc.want), got); diff != "" {
			t.Errorf("RenewAt(%v, %v) (-want +got):\n%s", tc.now, tc.d, diff)
		}
	}
}

func TestRetryUntil(t *testing.T) {
	for _, tc := range []struct {
		w    time.Duration
		d    float64
		want float64
	}{
		{30 * time.Second, 100, 97}, // docs/worker.md
		{time.Second, 10, 9.9},
		{12 * time.Hour, 43200, 38880},
	} {
		got := RetryUntil(tc.w, sec(tc.d))
		if diff := cmp.Diff(sec(tc.want), got); diff != "" {
			t.Errorf("RetryUntil(%v, %v) (-want +got):\n%s", tc.w, tc.d, diff)
		}
	}
}

func TestRequest(t *testing.T) {
	type res struct {
		Req time.Duration
		OK  bool
	}
	for _, tc := range []struct {
		name string
		w, c time.Duration
		now  float64
		want res
	}{
		{"spec: full window", 30 * time.Second, 12 * time.Hour, 100, res{30 * time.Second, true}},
		{"spec: clipped by ceiling", 30 * time.Second, 100 * time.Second, 80, res{20 * time.Second, true}},
		{"spec: under 1 s left", 30 * time.Second, 100 * time.Second, 99.5, res{0, false}},
		{"floor of a fraction", 30 * time.Second, 100 * time.Second, 80.4, res{19 * time.Second, true}},
		{"exactly 1 s left", 30 * time.Second, 100 * time.Second, 99, res{time.Second, true}},
		{"just under 1 s", 30 * time.Second, 100 * time.Second, 99.000000001, res{0, false}},
		{"past the ceiling", 30 * time.Second, 100 * time.Second, 150, res{0, false}},
		{"at the ceiling", 30 * time.Second, 100 * time.Second, 100, res{0, false}},
		{"12 h ceiling, 29 s left", 30 * time.Second, 12 * time.Hour, 43171, res{29 * time.Second, true}},
		{"window equal to ceiling", 100 * time.Second, 100 * time.Second, 0, res{100 * time.Second, true}},
	} {
		req, ok := Request(epoch, tc.w, tc.c, sec(tc.now))
		if diff := cmp.Diff(tc.want, res{req, ok}); diff != "" {
			t.Errorf("%s: Request(t0=0, W=%v, C=%v, now=%v) (-want +got):\n%s", tc.name, tc.w, tc.c, tc.now, diff)
		}
	}
}

func TestDeadlineAfter(t *testing.T) {
	for _, tc := range []struct {
		sent float64
		req  time.Duration
		want float64
	}{
		{20, 30 * time.Second, 50},
		{80, 20 * time.Second, 100},
		{10.25, time.Second, 11.25},
	} {
		got := DeadlineAfter(sec(tc.sent), tc.req)
		if diff := cmp.Diff(sec(tc.want), got); diff != "" {
			t.Errorf("DeadlineAfter(%v, %v) (-want +got):\n%s", tc.sent, tc.req, diff)
		}
	}
}

// TestMonotonicReadingsRule shows a wall-clock step between two readings does not move the
// arithmetic: time.Time.Sub uses the monotonic readings when both times carry one.
func TestMonotonicReadingsRule(t *testing.T) {
	t0 := time.Now()
	later := t0.Add(10 * time.Second)
	stepped := later.Round(0).Add(time.Hour) // the wall clock jumped; no monotonic reading
	if got := RenewAt(t0, later); got.Sub(t0) != 10*time.Second/3 {
		t.Fatalf("RenewAt on monotonic readings = %v after t0, want %v", got.Sub(t0), 10*time.Second/3)
	}
	// Without a monotonic reading the wall step shows; the machine never strips readings.
	if got := stepped.Sub(t0); got == 10*time.Second {
		t.Fatalf("expected a wall-clock step to show without monotonic readings")
	}
}
