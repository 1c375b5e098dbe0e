// Package flow holds the pure arithmetic of flow control that the local runner (core/runner)
// and the queue runner (core/qjobs) share: a rate as a token bucket (GCRA).
//
// A Rate{Count, Per, Burst} lets at most Burst starts happen at once and refills one start every
// Per/Count (rounded up to a whole nanosecond, so the bucket is never faster than stated). Over
// any window of length W, the starts a Bucket allows number at most Burst + W·Count/Per: the
// bound the simulator's rate check measures.
//
// A Bucket begins empty (Fresh): a process that restarts has no record of the starts it made
// before, so it grants nothing it may already have granted; the first start comes one interval
// after the bucket was made, and the full burst is back after Burst intervals.
package flow

import (
	"fmt"
	"math"
	"time"
)

// Limits on a Rate's fields, so that no product of them overflows.
const (
	CountMax = 1_000_000
	BurstMax = 1_000_000
	PerMax   = 366 * 24 * time.Hour
)

// Rate is at most Count starts per Per, Burst of them at once. The zero Rate is no limit.
type Rate struct {
	Count int
	Per   time.Duration
	// Burst is how many starts may happen back to back; 0 means Count.
	Burst int
}

// On reports whether r limits anything.
func (r Rate) On() bool { return r.Count > 0 }

// Validate refuses a rate that limits nothing meaningful or would overflow, naming the field.
func (r Rate) Validate() error {
	switch {
	case r == Rate{}:
		return nil
	case r.Count < 1 || r.Count > CountMax:
		return fmt.Errorf("Count %d: must be in [1, %d]", r.Count, CountMax)
	case r.Per <= 0 || r.Per > PerMax:
		return fmt.Errorf("Per %v: must be in (0, %v]", r.Per, PerMax)
	case r.Burst < 0 || r.Burst > BurstMax:
		return fmt.Errorf("Burst %d: must be in [0, %d] (0 means Count)", r.Burst, BurstMax)
	}
	return nil
}

// Interval is the time one start refills, Per/Count rounded up (at least 1 ns).
func (r Rate) Interval() int64 {
	n := int64(r.Per) / int64(r.Count)
	if n*int64(r.Count) < int64(r.Per) {
		n++
	}
	return max(n, 1)
}

// BurstSize is Burst, or Count when Burst is 0.
func (r Rate) BurstSize() int {
	if r.Burst == 0 {
		return r.Count
	}
	return r.Burst
}

// Allowed is the most starts r allows in a closed window w long: Burst + floor(w·Count/Per).
func (r Rate) Allowed(w time.Duration) int64 {
	if w < 0 {
		w = 0
	}
	// w·Count can overflow an int64 for windows of years; a float is exact enough here
	// because the bound is only ever compared with small counts.
	refill := math.Floor(float64(w) * float64(r.Count) / float64(r.Per))
	return int64(r.BurstSize()) + int64(min(refill, 1<<53))
}

// Bucket is one rate's state: tat, the theoretical arrival time of GCRA, in UnixNano.
// Invariant: a start is allowed at now exactly when tat ≤ now + (Burst−1)·Interval.
type Bucket struct{ tat int64 }

// Fresh is an empty bucket made at now: its first start is allowed at now + Interval.
func Fresh(r Rate, now int64) Bucket {
	return Bucket{tat: satAdd(now, satMul(int64(r.BurstSize()), r.Interval()))}
}

// ReadyAt is the earliest UnixNano at which b allows a start under r.
func (b Bucket) ReadyAt(r Rate) int64 {
	return satAdd(b.tat, -satMul(int64(r.BurstSize()-1), r.Interval()))
}

// Take spends one start at now; the caller has checked ReadyAt ≤ now.
func (b *Bucket) Take(r Rate, now int64) { b.tat = satAdd(max(b.tat, now), r.Interval()) }

// Full reports whether b holds its whole burst at now (it then equals a bucket of any age).
func (b Bucket) Full(now int64) bool { return b.tat <= now }

func satAdd(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}

func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}
