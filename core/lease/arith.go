package lease

import "time"

// The lease arithmetic of docs/worker.md, on int64 nanosecond offsets (the machine stores times
// as offsets from a base instant, obtained with time.Time.Sub, so monotonic readings are kept
// and a wall-clock step never moves a lease). arith_test.go holds their forms on time.Time,
// which the table and property tests check against the spec and use as an oracle.

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
	// Never under 1 s: Received refuses a window under 1 s, and left is at least 1 s here.
	return min(window.Truncate(time.Second), left.Truncate(time.Second)), true
}
