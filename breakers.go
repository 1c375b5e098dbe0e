package sluice

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/core/runner"
)

// BreakerInfo is one target's circuit breaker, as Breakers reports it.
type BreakerInfo struct {
	Target   string
	State    string    // "closed", "open" or "half-open"
	Until    time.Time // open: when the cooldown ends and it may half-open; zero otherwise
	Failures int       // closed: counted failures remembered within Circuit.Window
	InFlight int       // half-open: probes running
}

// Breakers returns the targets whose breaker is open, half-open, or closed with recent
// failures, sorted by target, from the owner's consistent view; a target not listed has a
// closed breaker with no failure in its window. Breaker state is not journaled: after a
// restart every breaker starts closed. It waits for the runner's owner, so ctx bounds it;
// after Close it returns ErrClosed.
func (r *Runner) Breakers(ctx context.Context) ([]BreakerInfo, error) {
	rep, err := r.call(ctx, command{kind: cmdBreakers})
	if err != nil {
		return nil, err
	}
	if rep.err != nil {
		return nil, rep.err
	}
	return rep.breakers, nil
}

func breakersOf(bs []runner.TargetBreaker) []BreakerInfo {
	out := make([]BreakerInfo, len(bs))
	for i, b := range bs {
		out[i] = BreakerInfo{Target: b.Target, State: b.State.String(), Until: b.Until, Failures: b.Failures, InFlight: b.InFlight}
	}
	return out
}
