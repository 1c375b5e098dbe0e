package lease

import "time"

// The lease arithmetic of docs/worker.md. Each exported function has an internal twin on int64
// nanosecond offsets (the machine stores times as offsets from a base instant, obtained with
// time.Time.Sub, so monotonic readings are kept and a wall-clock step never moves a lease).
// The twins are one line each and the table and property tests hold them to the exported forms.

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

func renewAt(now, deadline int64) int64 {
	return now + max(0, deadline-now)/3
}

func retryUntil(window time.Duration, deadline int64) int64 {
	return deadline - int64(window/10)
}

func request(t0 int64, window, ceiling time.Duration, now int64) (time.Duration, bool) {
	left := time.Duration(t0 + int64(ceiling) - now)
	if left < time.Second {
		return 0, false
	}
	req := min(window.Truncate(time.Second), left.Truncate(time.Second))
	if req < time.Second {
		return 0, false
	}
	return req, true
}
