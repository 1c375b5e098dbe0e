package pool

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is wrapped by New's errors; the message names the field.
var ErrInvalidConfig = errors.New("pool: invalid config")

// Config configures a Pool.
type Config struct {
	Capacity int // units; ≥ 1
}

// Event is the sealed set of inputs to Pool.Step.
type Event interface{ isEvent() }

// Acquire asks for a unit; Ready().Granted is the answer and decides whether the caller may
// start anything.
type Acquire struct{}

// Release gives a unit back.
type Release struct{}

func (Acquire) isEvent() {}
func (Release) isEvent() {}

// Ready is the answer to the last Acquire; it counts as done once read (Ready resets it).
type Ready struct {
	Granted bool
}

// Status is a read-only summary.
type Status struct {
	Capacity int
	Used     int
	Free     int
}

// Pool counts units in use.
type Pool struct {
	capacity int
	// Invariant: 0 ≤ used ≤ capacity.
	used  int
	ready Ready
}

// New returns a pool, or an error naming Capacity when it is < 1.
func New(cfg Config) (*Pool, error) {
	if cfg.Capacity < 1 {
		return nil, fmt.Errorf("%w: Capacity must be ≥ 1, got %d", ErrInvalidConfig, cfg.Capacity)
	}
	return &Pool{capacity: cfg.Capacity}, nil
}

// Step applies one event. Releasing a unit not in use is misuse and panics.
func (p *Pool) Step(ev Event) {
	switch ev.(type) {
	case Acquire:
		p.ready.Granted = p.used < p.capacity
		if p.ready.Granted {
			p.used++
		}
	case Release:
		if p.used == 0 {
			panic("pool: Release without a unit in use")
		}
		p.used--
	default:
		panic(fmt.Sprintf("pool: unknown event %T", ev))
	}
}

// Ready returns the answer to the last Acquire and resets it.
func (p *Pool) Ready() Ready {
	rd := p.ready
	p.ready = Ready{}
	return rd
}

// Status summarises the pool.
func (p *Pool) Status() Status {
	return Status{Capacity: p.capacity, Used: p.used, Free: p.capacity - p.used}
}

// CheckInvariants reports a broken invariant (for other packages' checkers).
func (p *Pool) CheckInvariants() error { return p.checkInvariants() }

func (p *Pool) checkInvariants() error {
	if p.used < 0 || p.used > p.capacity {
		return fmt.Errorf("pool: %d units used of %d", p.used, p.capacity)
	}
	return nil
}
