package worker

import (
	"cmp"
	"slices"
	"time"
)

// deliveries returns the receipts m knows, sorted, with their state.
func deliveries(m *Machine) []string {
	out := make([]string, 0, len(m.deliveries))
	for r, d := range m.deliveries {
		out = append(out, r+" "+d.state.String())
	}
	slices.SortFunc(out, cmp.Compare[string])
	return out
}

// request is the renewal request of docs/worker.md, the test's own oracle: min(W,
// floor(t0+C−now)) in whole seconds, and none when under 1 s is left before the ceiling.
func request(t0 time.Time, window, ceiling time.Duration, now time.Time) (time.Duration, bool) {
	left := t0.Add(ceiling).Sub(now)
	if left < time.Second {
		return 0, false
	}
	return min(window, left.Truncate(time.Second)), true
}
