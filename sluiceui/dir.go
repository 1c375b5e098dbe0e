package sluiceui

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// journalName is the runner's journal file in its directory (the root package's journalName).
const journalName = "jobs.journal"

// FromDir returns a read-only Source over the runner directory dir, read with sluice.Inspect:
// it writes nothing and takes no lock, so it also works beside a live runner (it then sees the
// journal as of its last sync). It re-reads the journal when the file's size or modification
// time changed. Breaker state lives only in a running process: a directory has none.
func FromDir(dir string) (Source, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("sluice: runner directory %s: %w", dir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("sluice: runner directory %s is not a directory", dir)
	}
	d := &dirSource{dir: dir}
	if err := d.load(); err != nil {
		return nil, err
	}
	return d, nil
}

type dirSource struct {
	dir string

	mu     sync.Mutex
	size   int64
	mtime  time.Time
	jobs   []Job // ascending by id
	last   uint64
	scheds []sluice.ScheduleInfo
	paused []string
}

// load re-inspects the directory if its journal changed since the last look.
func (d *dirSource) load() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var size int64
	var mtime time.Time
	if fi, err := os.Stat(filepath.Join(d.dir, journalName)); err == nil {
		size, mtime = fi.Size(), fi.ModTime()
		if d.jobs != nil && size == d.size && mtime.Equal(d.mtime) {
			return nil
		}
	}
	in, err := sluice.Inspect(d.dir)
	if err != nil {
		return err
	}
	running := map[[2]string]int{} // (kind, key) → attempts running at the last write
	for _, j := range in.Jobs {
		if j.State == sluice.StateRunning && j.Key != "" {
			running[[2]string{j.Kind, j.Key}]++
		}
	}
	jobs := make([]Job, len(in.Jobs))
	for i, j := range in.Jobs {
		jobs[i] = Job{ID: j.ID, Kind: j.Kind, Target: j.Target, State: j.State, Attempts: j.Attempts, FirstDue: j.FirstDue,
			Due: j.Due, Reason: j.Reason, LastErr: j.LastErr, Priority: j.Priority, Unique: j.Unique,
			History: j.History, Payload: j.Payload, Interrupted: slices.Contains(in.Interrupted, j.ID),
			Key: j.Key, Group: j.Group, Hold: j.HoldOnDead, Blocked: j.Blocked}
		if j.Key != "" {
			jobs[i].KeyRunning = running[[2]string{j.Kind, j.Key}]
		}
	}
	d.jobs, d.last, d.scheds, d.paused, d.size, d.mtime = jobs, in.LastID, in.Schedules, in.Paused, size, mtime
	return nil
}

func (d *dirSource) snapshot() ([]Job, uint64, error) {
	if err := d.load(); err != nil {
		return nil, 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.jobs, d.last, nil
}

func (d *dirSource) Stats(context.Context) (sluice.Stats, error) {
	jobs, last, err := d.snapshot()
	if err != nil {
		return sluice.Stats{}, err
	}
	st := sluice.Stats{LastID: last}
	for _, j := range jobs {
		switch j.State {
		case sluice.StatePending, sluice.StateWaiting:
			st.Waiting++
		case sluice.StateDeferred:
			st.Deferred++
		case sluice.StateRunning:
			st.Running++
		case sluice.StateSucceeded:
			st.Succeeded++
		case sluice.StateDead:
			st.Dead++
		case sluice.StateCancelled:
			st.Cancelled++
		}
	}
	return st, nil
}

func (d *dirSource) List(_ context.Context, f Filter) (Page, error) {
	jobs, _, err := d.snapshot()
	if err != nil {
		return Page{}, err
	}
	i, _ := slices.BinarySearchFunc(jobs, f.After+1, byID)
	p := Page{Next: f.After}
	states := f.stateSet()
	for scan := 0; i < len(jobs); i, scan = i+1, scan+1 {
		if len(p.Jobs) == f.limit() || scan == sluice.ListScanMax {
			p.More = true
			break
		}
		if f.match(&jobs[i], states) {
			p.Jobs = append(p.Jobs, jobs[i])
		}
		p.Next = jobs[i].ID
	}
	return p, nil
}

func (d *dirSource) Get(_ context.Context, id uint64) (Job, error) {
	jobs, _, err := d.snapshot()
	if err != nil {
		return Job{}, err
	}
	i, ok := slices.BinarySearchFunc(jobs, id, byID)
	if !ok {
		return Job{}, fmt.Errorf("sluice: job %d in %s: %w", id, d.dir, sluice.ErrNotFound)
	}
	return jobs[i], nil
}

func (d *dirSource) Breakers(context.Context) ([]Breaker, error) { return nil, nil }

func (d *dirSource) Schedules(context.Context) ([]sluice.ScheduleInfo, error) {
	if err := d.load(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.scheds, nil
}
func (d *dirSource) Paused(context.Context) ([]string, error) {
	if err := d.load(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.paused, nil
}

func (d *dirSource) Retry(context.Context, uint64) error  { return ErrReadOnly }
func (d *dirSource) Cancel(context.Context, uint64) error { return ErrReadOnly }
func (d *dirSource) Pause(context.Context, string) error  { return ErrReadOnly }
func (d *dirSource) Resume(context.Context, string) error { return ErrReadOnly }
func (d *dirSource) ReadOnly() bool                       { return true }

func byID(j Job, id uint64) int { return cmp.Compare(j.ID, id) }
