package runner

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Replay applies one journal record (tag, data) during open.
func (m *Machine) Replay(tag uint8, snapshot bool, data []byte) error {
	first := m.snapshots == 0
	m.snapshots++
	if snapshot || tag == TagSnapshot {
		if !snapshot || tag != TagSnapshot || !first {
			return fmt.Errorf("runner: replay: %w: snapshot tag %d (snapshot flag %v) at record %d", ErrDecode, tag, snapshot, m.snapshots)
		}
		if err := m.loadSnapshot(data); err != nil {
			return fmt.Errorf("runner: replay snapshot: %w", err)
		}
		return nil
	}
	// The payload aliases data: applying an Enqueued record copies it, nothing else keeps it.
	if m.names == nil {
		m.names = &interner{m: map[string]string{}}
	}
	var r Record
	if err := decodeRecord(reader{b: data, alias: true, names: m.names}, tag, &r); err != nil {
		return fmt.Errorf("runner: replay record %d: %w", m.snapshots, err)
	}
	if _, _, err := m.apply(&r); err != nil {
		return fmt.Errorf("runner: replay record %d: %w: %w", m.snapshots, ErrDecode, err)
	}
	return nil
}

// loadSnapshot installs a snapshot's payload, decoding its jobs in place into one slab (not
// into a []Job copied after), interning their names and cutting their payloads from the
// replay's slabs. It validates as DecodeSnapshot does before it installs anything.
func (m *Machine) loadSnapshot(data []byte) error {
	if m.names == nil {
		m.names = &interner{m: map[string]string{}}
	}
	var s Snapshot
	var jobs []job
	err := decodeSnapshot(reader{b: data, alias: true, names: m.names}, &s,
		func(n int) { jobs = make([]job, n) },
		func(i int, v *Job) { jobs[i].fromView(v, m.shareOpts(&v.Opts)) })
	if err != nil {
		return err
	}
	if err := validateJobs(s.NextID, s.TermSeq, len(jobs), func(i int) (uint64, string) {
		return jobs[i].ID, jobs[i].broken(s.TermSeq)
	}); err != nil {
		return err
	}
	if err := s.validateRest(); err != nil {
		return err
	}
	if err := m.load(s, jobs); err != nil {
		return fmt.Errorf("%w: %w", ErrDecode, err)
	}
	return nil
}

// load installs a snapshot whose jobs are jobs (filled by fromView, s.Jobs unused); the
// unique index is rebuilt from the jobs' keys.
func (m *Machine) load(s Snapshot, jobs []job) error {
	m.nextID, m.termSeq = s.NextID, s.TermSeq
	m.order = slices.Grow(m.order, len(jobs)) // sized once, not grown by doubling
	for _, w := range s.Windows {
		m.windows[uniqueKey(&Opts{Kind: w.Kind, Unique: w.Unique})] = window{id: w.ID, until: w.Until}
	}
	for i := range jobs {
		j := &jobs[i]
		j.kind = m.kindOf(j.Opts.Kind)
		for k := range j.idx {
			j.idx[k] = -1
		}
		j.Payload = m.keepPayload(j.Payload) // it aliased the record's data
		if k := uniqueKey(j.Opts); k != "" && !j.State.Terminal() {
			if id, held := m.unique[k]; held {
				return fmt.Errorf("jobs %d and %d both hold unique key %q", id, j.ID, j.Opts.Unique)
			}
			if w, held := m.windows[k]; held {
				return fmt.Errorf("job %d holds unique key %q in job %d's window", j.ID, j.Opts.Unique, w.id)
			}
			m.unique[k] = j.ID
		}
		m.order = append(m.order, j)
		if !j.State.Terminal() || holds(j) {
			m.joinGroup(j)
		}
		if j.State == Running {
			m.groupRunning(j, +1)
		}
		m.count(j.kind, j.State, j.Deferred, +1)
		if j.State == Waiting {
			m.qpush(j)
		}
	}
	for _, k := range s.Paused {
		m.kindOf(k).paused = true
	}
	return m.loadSchedules(s.Schedules)
}

// window is a succeeded job's hold on its unique key until a time.
type window struct {
	id    uint64
	until time.Time
}

// holder is the job holding key k at the machine's now: a non-terminal job, or a succeeded
// one whose window has not ended.
func (m *Machine) holder(k string) (uint64, bool) {
	if k == "" {
		return 0, false
	}
	if id, ok := m.unique[k]; ok {
		return id, true
	}
	if w, ok := m.windows[k]; ok && m.now.Before(w.until) {
		return w.id, true
	}
	return 0, false
}

// addClamped is t+d, at most timeMax.
func addClamped(t time.Time, d time.Duration) time.Time {
	if t.After(timeMax.Add(-d)) {
		return timeMax
	}
	return t.Add(d)
}

// Snapshot returns the durable state with all but the last retain terminal jobs left out, and
// the ids left out (for Prune once the snapshot is durable). It sorts ids, not Job values:
// the simulator calls it on every commit.
func (m *Machine) Snapshot(retain int) (Snapshot, []uint64) {
	return m.snapshot(retain, time.Time{})
}

// snapshot is Snapshot leaving out the unique windows ended at or before ended (compaction
// passes now; zero keeps them all).
func (m *Machine) snapshot(retain int, ended time.Time) (Snapshot, []uint64) {
	s := Snapshot{NextID: m.nextID, TermSeq: m.termSeq}
	keys := make([]string, 0, len(m.windows))
	for k, w := range m.windows {
		if w.until.After(ended) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys) // kind, NUL, key: the order of (kind, key)
	for _, k := range keys {
		kind, key, _ := strings.Cut(k, "\x00")
		w := m.windows[k]
		s.Windows = append(s.Windows, UniqueWindow{Kind: kind, Unique: key, ID: w.id, Until: w.until})
	}
	terminal := 0
	for _, j := range m.order {
		if j.State.Terminal() {
			terminal++
		}
	}
	var dropped []uint64
	if terminal > retain {
		// Drop the terminal jobs with the lowest terminal sequence: those before cut.
		seqs := make([]uint64, 0, terminal)
		for _, j := range m.order {
			if j.State.Terminal() {
				seqs = append(seqs, j.TermSeq)
			}
		}
		slices.Sort(seqs)
		cut := uint64(math.MaxUint64) // retain ≤ 0: drop them all
		if retain > 0 {
			cut = seqs[terminal-retain] // TermSeqs are unique: keep exactly retain of them
		}
		for _, j := range m.order {
			if j.State.Terminal() && j.TermSeq < cut && !holds(j) {
				dropped = append(dropped, j.ID)
			}
		}
	}
	s.Jobs = make([]Job, 0, len(m.order)-len(dropped))
	d := 0
	for _, j := range m.order {
		if d < len(dropped) && dropped[d] == j.ID {
			d++
			continue
		}
		s.Jobs = s.Jobs[:len(s.Jobs)+1]
		j.view(&s.Jobs[len(s.Jobs)-1])
		j.shared = true
	}
	if len(m.scheds) > 0 {
		s.Schedules = m.Schedules()
	}
	s.Paused = m.Paused()
	return s, dropped
}

// pruneWindows forgets the unique windows ended at or before ended (after a snapshot without
// them is durable).
func (m *Machine) pruneWindows(ended time.Time) {
	for k, w := range m.windows {
		if !w.until.After(ended) {
			delete(m.windows, k)
		}
	}
}

// Prune forgets terminal jobs (after a snapshot without them is durable).
func (m *Machine) Prune(ids []uint64) {
	pruned := 0
	for _, id := range ids {
		if j := m.job(id); j != nil && j.State.Terminal() && !j.pruned {
			m.count(j.kind, j.State, j.Deferred, -1)
			j.pruned = true
			pruned++
		}
	}
	if pruned > 0 {
		m.order = slices.DeleteFunc(m.order, func(j *job) bool { return j.pruned })
	}
}
