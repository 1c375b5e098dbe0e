package pool

import "fmt"

// Pool counts units in use.
type Pool struct {
	capacity int
	// Invariant: 0 ≤ used ≤ capacity.
	used int
}

// New returns a pool of capacity units; capacity < 1 is misuse and panics.
func New(capacity int) *Pool {
	if capacity < 1 {
		panic(fmt.Sprintf("pool: capacity must be ≥ 1, got %d", capacity))
	}
	return &Pool{capacity: capacity}
}

// Acquire takes a unit if one is free.
func (p *Pool) Acquire() bool {
	if p.used >= p.capacity {
		return false
	}
	p.used++
	return true
}

// Release gives a unit back.
func (p *Pool) Release() {
	if p.used == 0 {
		panic("pool: Release without a unit in use")
	}
	p.used--
}

// Free is the number of free units.
func (p *Pool) Free() int { return p.capacity - p.used }

// Used is the number of units in use.
func (p *Pool) Used() int { return p.used }

// Capacity is the number of units.
func (p *Pool) Capacity() int { return p.capacity }

// CheckInvariants reports a broken invariant (for other packages' checkers).
func (p *Pool) CheckInvariants() error { return p.checkInvariants() }

func (p *Pool) checkInvariants() error {
	if p.used < 0 || p.used > p.capacity {
		return fmt.Errorf("pool: %d units used of %d", p.used, p.capacity)
	}
	return nil
}
