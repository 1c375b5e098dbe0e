package sluicetest

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice"
)

// duePoll is how often DrainDue looks at the runner while it works.
const duePoll = time.Millisecond

// DrainDue works what is due at now on a real runner and returns, without waiting for jobs
// due later: it runs Drain and ends it once no attempt runs and every job is terminal or due
// after now (a retry's backoff included). With a clock.Mock as Config.Clock, pass the mock's
// Now; advance the mock and call again to work the next jobs. It returns Drain's error, or
// ctx's if ctx ends first. It watches the runner through Stats and Get, so it suits tests with
// few jobs.
func DrainDue(ctx context.Context, r *sluice.Runner, now time.Time) error {
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- r.Drain(dctx) }()
	t := time.NewTicker(duePoll)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			<-done
			return ctx.Err()
		case <-t.C:
		}
		quiet, err := nothingDue(ctx, r, now)
		if err != nil {
			stop()
			<-done
			return err
		}
		if quiet {
			stop()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		}
	}
}

// nothingDue reports that no attempt runs and no job is due at now.
func nothingDue(ctx context.Context, r *sluice.Runner, now time.Time) (bool, error) {
	st, err := r.Stats(ctx)
	if err != nil || st.Running > 0 {
		return false, err
	}
	for id := uint64(1); id <= st.LastID; id++ {
		j, err := r.Get(ctx, id)
		if errors.Is(err, sluice.ErrNotFound) {
			continue // pruned by compaction: terminal
		}
		if err != nil {
			return false, err
		}
		if j.State == sluice.StateRunning || (!j.State.Terminal() && !j.Due.After(now)) {
			return false, nil
		}
	}
	return true, nil
}
