package sluiceui

import (
	"fmt"

	"github.com/sluicehq/sluice/adapters/osfs"
	"github.com/sluicehq/sluice/core/runner"
)

// journalFlow is what a directory's journal says of flow control, read without writing: the
// paused kinds, each waiting job's flow key and sequence, the attempts running per key at the
// last write, and why a waiting job is held back by its kind's pause or its sequence (core's
// Machine.Blocked, the rule the runner applies). Limits, rates and fair share are the options
// a program registers its kinds with, and a bucket's fill lives only in the running process:
// a directory knows none of them.
type journalFlow struct {
	paused  []string
	jobs    map[uint64]jobFlow
	running map[[2]string]int // (kind, key) → attempts running at the last write
}

type jobFlow struct {
	key, group string
	hold       bool
	blocked    string
}

// readFlow replays dir's journal into a machine that is never started (Replay writes nothing
// and cuts no torn tail) and asks it why each waiting job waits.
func readFlow(dir string) (journalFlow, error) {
	fl := journalFlow{jobs: map[uint64]jobFlow{}, running: map[[2]string]int{}}
	fsys, err := osfs.New(dir)
	if err != nil {
		return fl, fmt.Errorf("sluice: inspecting %s: %w", dir, err)
	}
	defer fsys.Close()
	cfg, err := runner.Config{Capacity: 1}.WithDefaults()
	if err != nil {
		return fl, err
	}
	s, err := runner.Replay(fsys, journalName, cfg)
	if err != nil {
		return fl, fmt.Errorf("sluice: inspecting %s: %w", dir, err)
	}
	fl.paused = s.Paused
	grouped := false
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if j.Opts.Key != "" || j.Opts.Group != "" {
			fl.jobs[j.ID] = jobFlow{key: j.Opts.Key, group: j.Opts.Group, hold: j.Opts.Hold}
		}
		if j.State == runner.Running {
			fl.running[[2]string{j.Opts.Kind, j.Opts.Key}]++
		}
		grouped = grouped || j.Opts.Group != ""
	}
	if len(s.Paused) == 0 && !grouped {
		return fl, nil // nothing of flow control holds a job back
	}
	m, err := runner.New(runner.MachineConfig{Policy: cfg.Policy, Circuit: cfg.Circuit, Capacity: cfg.Capacity,
		RecordMax: cfg.RecordMax, Logger: cfg.Logger, Rand: cfg.Rand})
	if err != nil {
		return fl, err
	}
	if err := m.Replay(runner.TagSnapshot, true, runner.EncodeSnapshot(s)); err != nil {
		return fl, fmt.Errorf("sluice: inspecting %s: %w", dir, err)
	}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if j.State != runner.Waiting {
			continue
		}
		// Only the reasons the journal decides: the machine here has no kind's options and
		// no clock, so its limits, rates, due times and pool say nothing of the real runner.
		switch b := m.Blocked(j.ID); b.Reason {
		case runner.BlockPaused, runner.BlockGroup, runner.BlockGroupDead:
			f := fl.jobs[j.ID]
			f.blocked = b.String()
			fl.jobs[j.ID] = f
		}
	}
	return fl, nil
}
