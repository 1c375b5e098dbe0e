package sluice

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/adapters/osfs"
	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/core/runner"
)

// journalName is the runner's journal file in its directory.
const journalName = "jobs.journal"

// coreEngine adapts core/runner's Engine to the driver's engine seam.
type coreEngine struct {
	e    *runner.Engine
	fs   *osfs.FS
	lock *os.File
	log  interface {
		Warn(msg string, args ...any)
	}

	durable     journal.LSN
	commits     int64
	records     int64
	compactions int64
}

// openEngine locks dir, then opens the runner engine over adapters/osfs in it.
func openEngine(dir string, cfg Config, syncs *counter) (engine, error) {
	fsys, err := osfs.New(dir)
	if err != nil {
		return nil, err
	}
	lock, err := lockDir(filepath.Join(dir, "LOCK"))
	if err != nil {
		_ = fsys.Close()
		return nil, err
	}
	ecfg := runner.Config{
		Policy:       retry.Policy{Attempts: cfg.Policy.Attempts, Base: cfg.Policy.Base, Cap: cfg.Policy.Cap, Deadline: cfg.Policy.Deadline},
		Circuit:      breaker.Circuit{Threshold: cfg.Circuit.Threshold, Window: cfg.Circuit.Window, Cooldown: cfg.Circuit.Cooldown, Probes: cfg.Circuit.Probes},
		Capacity:     cfg.Capacity,
		CompactBytes: cfg.CompactBytes,
		Retention:    cfg.Retention,
		RecordMax:    cfg.RecordMax,
		Logger:       cfg.Logger,
		Rand:         rand.New(rand.NewSource(cfg.Seed)),
	}
	e, err := runner.Open(countFS{FS: fsys, syncs: syncs}, journalName, ecfg, cfg.Clock.Now())
	if err != nil {
		_ = fsys.Close()
		_ = unlockDir(lock)
		return nil, err
	}
	if n := e.Orphans(); n > 0 {
		cfg.Logger.Warn("sluice: attempts interrupted by the last stop were requeued", "jobs", n)
	}
	ce := &coreEngine{e: e, fs: fsys, lock: lock, log: cfg.Logger}
	ce.durable = e.Status().Durable
	return ce, nil
}

// Re-exported sentinels of the engine, so callers can use errors.Is with the sluice names.
var (
	// ErrTerminal: Cancel of a job that already succeeded, died or was cancelled.
	ErrTerminal = runner.ErrTerminal
	// ErrNotDead: Retry of a job that is not dead.
	ErrNotDead = runner.ErrNotDead
	// ErrPoisoned: a journal write, sync or compaction failed; reopen the runner.
	ErrPoisoned = runner.ErrPoisoned
	// ErrCorrupt: Open found synced journal data damaged (a bad frame followed by a valid
	// frame of a later batch) and refused; the error names the file, the offset and the LSNs
	// around it, and nothing was truncated.
	ErrCorrupt = journal.ErrCorrupt
)

func mapErr(err error) error {
	switch {
	case errors.Is(err, runner.ErrNotFound):
		return fmt.Errorf("%w (%w)", ErrNotFound, err)
	case errors.Is(err, runner.ErrTooLarge):
		return fmt.Errorf("%w (%w)", ErrTooLarge, err)
	}
	return err
}

func (c *coreEngine) Enqueue(now, due time.Time, target string, payload []byte) (ticket, error) {
	t, _, err := c.e.Enqueue(due, target, payload)
	return ticket(t), mapErr(err)
}

func (c *coreEngine) Cancel(now time.Time, id uint64) (ticket, error) {
	t, err := c.e.Cancel(id)
	return ticket(t), mapErr(err)
}

func (c *coreEngine) Retry(now time.Time, id uint64) (ticket, error) {
	t, err := c.e.Retry(now, id)
	return ticket(t), mapErr(err)
}

func (c *coreEngine) Done(now time.Time, tok token, out Outcome) {
	var o runner.Outcome
	switch out.Kind {
	case KindSucceeded:
		o = runner.Success()
	case KindPanicked:
		var pe *PanicError
		if errors.As(out.Err, &pe) {
			o = runner.Panicked(fmt.Sprint(pe.Value))
		} else {
			o = runner.Panicked(fmt.Sprint(out.Err))
		}
	default:
		o = runner.Failure(fmt.Sprint(out.Err), out.Retryable)
		o.After = out.After
	}
	// An error here means the engine is poisoned; the next Commit reports it.
	_ = c.e.AttemptDone(now, runner.Token{ID: tok.ID, Attempt: tok.Attempt}, o)
}

func (c *coreEngine) Commit(now time.Time, dispatch bool) (ready, error) {
	var (
		res runner.Result
		err error
	)
	if dispatch {
		res, err = c.e.Commit(now)
	} else {
		res, err = c.e.Flush(now)
	}
	if err != nil {
		return ready{}, err
	}
	st := c.e.Status()
	if st.Durable != c.durable {
		c.commits++
		c.records += int64(st.Durable - c.durable)
		c.durable = st.Durable
	}
	if res.Compacted {
		c.compactions++
		c.durable = st.Durable
	}
	if res.CompactErr != nil {
		c.log.Warn("sluice: compaction failed", "err", res.CompactErr)
	}
	rd := ready{Wake: res.Wake}
	for _, a := range res.Acks {
		rd.Acks = append(rd.Acks, ack{Ticket: ticket(a.Ticket), ID: a.ID})
	}
	for _, s := range res.Starts {
		rd.Starts = append(rd.Starts, start{Token: token{ID: s.Token.ID, Attempt: s.Token.Attempt},
			Target: s.Target, FirstDue: s.FirstDue, Payload: s.Payload})
	}
	for _, s := range res.Settled {
		var err error
		if s.LastErr != "" && s.State == runner.Dead {
			err = errors.New(s.LastErr)
		}
		rd.Settled = append(rd.Settled, Settled{ID: s.ID, State: stateOf(s.State, false, s.Attempts),
			Attempts: s.Attempts, Reason: reasonOf(s.Reason), Err: err})
	}
	return rd, nil
}

func stateOf(s runner.JobState, deferred bool, attempts int) State {
	switch s {
	case runner.Waiting:
		switch {
		case deferred:
			return StateDeferred
		case attempts == 0:
			return StatePending
		}
		return StateWaiting
	case runner.Running:
		return StateRunning
	case runner.Succeeded:
		return StateSucceeded
	case runner.Dead:
		return StateDead
	case runner.Cancelled:
		return StateCancelled
	}
	panic(fmt.Sprintf("sluice: unknown engine job state %v", s))
}

func reasonOf(r runner.Reason) string {
	if r == runner.NoReason {
		return ""
	}
	return r.String()
}

func (c *coreEngine) Get(id uint64) (jobView, bool) {
	j, ok := c.e.Get(id)
	if !ok {
		return jobView{}, false
	}
	return jobView{ID: j.ID, Target: j.Target, State: stateOf(j.State, j.Deferred, j.Attempts),
		Attempts: j.Attempts, FirstDue: j.FirstDue, Due: j.Due, Reason: reasonOf(j.Reason),
		LastErr: j.LastErr, Payload: j.Payload}, true
}

func (c *coreEngine) Stats() Stats {
	st := c.e.Status()
	return Stats{Waiting: st.Waiting - st.Deferred, Deferred: st.Deferred, Running: st.Running,
		Succeeded: st.Succeeded, Dead: st.Dead, Cancelled: st.Cancelled, LastID: st.NextID - 1,
		Commits: c.commits, Records: c.records, Compactions: c.compactions}
}

func (c *coreEngine) Idle() bool { return c.e.Idle() }

func (c *coreEngine) Poisoned() error { return c.e.Poisoned() }

func (c *coreEngine) Compact() error {
	if err := c.e.Compact(); err != nil {
		return err
	}
	c.compactions++
	c.durable = c.e.Status().Durable
	return nil
}

func (c *coreEngine) Close() error {
	err := c.e.Close()
	if ferr := c.fs.Close(); err == nil {
		err = ferr
	}
	if lerr := unlockDir(c.lock); err == nil {
		err = lerr
	}
	return err
}
