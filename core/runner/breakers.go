package runner

import (
	"maps"
	"slices"

	"github.com/sluicehq/sluice/core/breaker"
)

// TargetBreaker is one target's breaker, as Breakers reports it.
type TargetBreaker struct {
	Target string
	breaker.Status
}

// Breakers returns a copy of every breaker the machine keeps (the targets whose breaker is
// open, half-open, or closed with failures it still remembers; the others are forgotten),
// sorted by target. For inspection only: reading it changes nothing.
func (m *Machine) Breakers() []TargetBreaker {
	out := make([]TargetBreaker, 0, len(m.breakers))
	for _, t := range slices.Sorted(maps.Keys(m.breakers)) {
		out = append(out, TargetBreaker{Target: t, Status: m.breakers[t].Status()})
	}
	return out
}

// Breakers returns the machine's breakers (Machine.Breakers).
func (e *Engine) Breakers() []TargetBreaker { return e.m.Breakers() }
