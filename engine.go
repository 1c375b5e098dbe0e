package sluice

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluicehq/sluice/adapters/osfs"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/core/runner"
)

// The driver runs core/runner's Engine itself: this file opens it (over the directory, or over
// any core.FS through the internal option) and translates between the engine's types and the
// public ones. It decides nothing.

// journalName is the runner's journal file in its directory.
const journalName = "jobs.journal"

// Re-exported sentinels of the engine, so callers can use errors.Is with the sluice names.
var (
	// ErrTerminal: Cancel of a job that already succeeded, died or was cancelled.
	ErrTerminal = runner.ErrTerminal
	// ErrNotDead: Retry of a job that is not dead.
	ErrNotDead = runner.ErrNotDead
	// ErrPoisoned: a journal write, sync or compaction failed; reopen the runner.
	ErrPoisoned = runner.ErrPoisoned
	// ErrFormat: Open found a journal written in another record format (an older or newer
	// sluice); the error says what to do, and nothing was changed.
	ErrFormat = runner.ErrFormat
	// ErrCorrupt: Open found synced journal data damaged and refused; the error names the
	// file, the offset and the LSNs around it, and nothing was changed.
	ErrCorrupt = journal.ErrCorrupt
)

// ErrUnknownKind: Pause or Resume named a kind that is neither registered nor named by a job.
var ErrUnknownKind = errors.New("sluice: no such kind")

// Why a handler's context was cancelled, as context.Cause reports it.
var (
	// ErrAttemptTimeout: the attempt ran past its timeout (WithAttemptTimeout,
	// WithJobAttemptTimeout); the attempt fails, retryably.
	ErrAttemptTimeout = errors.New("sluice: attempt timed out")
	// ErrJobCancelled: Cancel was called for the job; the attempt's outcome is ignored.
	ErrJobCancelled = errors.New("sluice: job cancelled")
)

// opened is an engine and what closes it.
type opened struct {
	eng   *runner.Engine
	close func() error // the FS and the directory lock
}

// openEngine opens the engine: on cfg's internal FS if one is set (no lock), else on dir
// through adapters/osfs, holding dir's lock. Errors carry one sluice: prefix.
func openEngine(dir string, cfg Config, ecfg runner.Config, syncs *counter) (opened, error) {
	op, err := openEngineOn(dir, cfg, ecfg, syncs)
	if err != nil && !errors.Is(err, ErrLocked) {
		err = wrapf(nil, err, "opening runner in %s", dir)
	}
	return op, err
}

func openEngineOn(dir string, cfg Config, ecfg runner.Config, syncs *counter) (opened, error) {
	if cfg.opts.FS != nil {
		e, err := runner.Open(countFS{FS: cfg.opts.FS, syncs: syncs}, journalName, ecfg, cfg.Clock.Now())
		return opened{eng: e, close: func() error { return nil }}, err
	}
	fsys, err := osfs.New(dir)
	if err != nil {
		return opened{}, err
	}
	lock, err := lockDir(filepath.Join(dir, "LOCK"))
	if err != nil {
		_ = fsys.Close()
		return opened{}, err
	}
	e, err := runner.Open(countFS{FS: fsys, syncs: syncs}, journalName, ecfg, cfg.Clock.Now())
	closeAll := func() error {
		err := fsys.Close()
		if lerr := unlockDir(lock); err == nil {
			err = lerr
		}
		return err
	}
	if err != nil {
		_ = closeAll()
		return opened{}, err
	}
	return opened{eng: e, close: closeAll}, nil
}

// mapErr gives the engine's refusals their sluice sentinels.
func mapErr(err error) error {
	switch {
	case errors.Is(err, runner.ErrNotFound):
		return reprefix(ErrNotFound, err)
	case errors.Is(err, runner.ErrUnknownKind):
		return hint(reprefix(ErrUnknownKind, err), "name a registered kind")
	case errors.Is(err, runner.ErrTooLarge):
		return reprefix(ErrTooLarge, err)
	case errors.Is(err, runner.ErrDuplicate):
		return reprefix(ErrDuplicate, err)
	case errors.Is(err, runner.ErrJob), errors.Is(err, runner.ErrTime):
		return reprefix(ErrInvalidJob, err)
	case errors.Is(err, runner.ErrPoisoned):
		return wrapf(nil, err, "runner stopped") // as Run and Drain return it
	case errors.Is(err, runner.ErrClosed):
		return ErrClosed
	case errors.Is(err, runner.ErrNotDead):
		return hint(reprefix(nil, err), "wait until it is dead, or Cancel it if it should not run")
	case errors.Is(err, runner.ErrTerminal):
		return hint(reprefix(nil, err), "Get shows how it ended")
	}
	if err != nil && !strings.HasPrefix(err.Error(), "sluice: ") {
		return reprefix(nil, err) // a core refusal with no sentinel of its own (wrong state)
	}
	return err
}

// hint is e with what to do next added to its message.
func hint(e error, next string) error {
	u := e.(*usageError)
	u.msg = bounded(u.msg + "; " + next)
	return u
}

// causeOf is the context cause for an engine's cancel.
func causeOf(w runner.Why) error {
	if w == runner.ByStop {
		return ErrShutdown
	}
	return ErrJobCancelled
}

func settledOf(s runner.Settled) Settled {
	var err error
	if s.LastErr != "" && s.State == runner.Dead {
		err = errors.New(s.LastErr)
	}
	return Settled{ID: s.ID, State: stateOf(s.State, false, s.Attempts), Attempts: s.Attempts,
		Reason: reasonOf(s.Reason), Err: err}
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

func reasonOf(r runner.Reason) Reason {
	if r == runner.NoReason {
		return ""
	}
	return Reason(r.String())
}

func statsOf(st runner.Status, syncs int64) Stats {
	return Stats{Waiting: st.Waiting - st.Deferred, Deferred: st.Deferred, Running: st.Running,
		Succeeded: st.Succeeded, Dead: st.Dead, Cancelled: st.Cancelled, LastID: st.NextID - 1,
		Commits: st.Commits, Records: st.Records, Compactions: st.Compactions, Syncs: syncs,
		Unregistered: st.Unregistered, Paused: st.Paused, Held: st.Held}
}

// infoOf is a job in public terms, its payload still encoded.
func infoOf(j runner.Job) JobInfo[[]byte] {
	var hist []Attempt
	for _, h := range j.History {
		hist = append(hist, Attempt{Number: h.Attempt, Start: h.Start, End: h.End, Outcome: h.Outcome.String(), Err: h.Err})
	}
	return JobInfo[[]byte]{History: hist, ID: j.ID, Kind: j.Opts.Kind, UniqueWindow: j.Opts.UniqueFor, Target: j.Target, State: stateOf(j.State, j.Deferred, j.Attempts),
		Attempts: j.Attempts, FirstDue: j.FirstDue, Due: j.Due, Reason: reasonOf(j.Reason),
		LastErr: j.LastErr, Priority: j.Opts.Priority, Unique: j.Opts.Unique, Payload: j.Payload,
		Key: j.Opts.Key, Group: j.Opts.Group, HoldOnDead: j.Opts.Hold}
}

// Inspection is what Inspect found in a runner's directory.
type Inspection struct {
	// Jobs are every job the journal holds (terminal ones until compaction prunes them),
	// ascending by id, payloads as journaled (decode them with the runner's codec).
	Jobs []JobInfo[[]byte]
	// LastID is the highest id issued so far (0: none).
	LastID uint64
	// Interrupted are the ids of jobs whose attempt was running when the journal was last
	// written: the next Open records each as a failed `interrupted` attempt (Inspect does not).
	Interrupted []uint64
	// Schedules are the periodic jobs' schedules, by name.
	Schedules []ScheduleInfo
	// Paused are the kinds paused (Pause) as of the last write, by name.
	Paused []string
}

// Inspect reads the runner journal in dir and reports its jobs, without writing anything and
// without taking the directory's lock, so it may run beside a live runner (it then sees the
// journal as of its last sync). A directory without a journal holds no jobs. Opening a
// directory to look at it never changes what happens to its jobs: attempts a crash
// interrupted are reported in Interrupted, not recorded.
func Inspect(dir string) (Inspection, error) {
	if _, err := os.Stat(filepath.Join(dir, journalName)); errors.Is(err, os.ErrNotExist) && !exists(filepath.Join(dir, journalName+".compact")) {
		if _, derr := os.Stat(dir); derr != nil {
			return Inspection{}, wrapf(nil, derr, "inspecting %s", dir)
		}
		return Inspection{}, nil
	}
	fsys, err := osfs.New(dir)
	if err != nil {
		return Inspection{}, wrapf(nil, err, "inspecting %s", dir)
	}
	defer fsys.Close()
	return inspectFS(fsys)
}

// exists reports whether path names a file (a .compact without its journal is refused, not empty).
func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// inspectFS is Inspect on any core.FS.
func inspectFS(fsys core.FS) (Inspection, error) {
	ec, err := runner.Config{Capacity: 1}.WithDefaults()
	if err != nil {
		return Inspection{}, err
	}
	m, err := runner.ReplayMachine(fsys, journalName, ec)
	if err != nil {
		return Inspection{}, wrapf(nil, err, "inspecting")
	}
	s, _ := m.Snapshot(math.MaxInt)
	in := Inspection{LastID: s.NextID - 1, Jobs: make([]JobInfo[[]byte], 0, len(s.Jobs)), Schedules: schedulesOf(s.Schedules),
		Paused: s.Paused}
	for _, j := range s.Jobs {
		in.Jobs = append(in.Jobs, infoOf(j))
		if j.State == runner.Running {
			in.Interrupted = append(in.Interrupted, j.ID)
		}
	}
	journalBlocks(&in, s, m)
	return in, nil
}
