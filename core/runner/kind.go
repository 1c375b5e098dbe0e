package runner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core/flow"
)

// KindConfig is one registered kind of job: its name (Opts.Kind), its concurrency limit and
// its decode-check port.
type KindConfig struct {
	Name string
	// Limit bounds the attempts of this kind holding a pool unit at once; 0: only Capacity.
	Limit int
	// Decode is the kind's decode-check port (see MachineConfig.Decode, used when nil).
	Decode func(payload []byte) (any, error)
	// Rate bounds the kind's starts (zero: none); KeyRate each flow key's (Opts.Key).
	Rate, KeyRate Rate
	// KeyLimit bounds the attempts of one flow key running at once; 0: none.
	KeyLimit int
	// Fair serves the kind's flow keys round-robin: a key that started a job in the current
	// round waits until every other key with a due job has started one (flow.go).
	Fair bool
	// Timeout bounds each attempt of the kind (Attempt.Timeout) unless the job sets its own;
	// 0: none.
	Timeout time.Duration
}

// kind is the machine's state for one kind seen in a job or registered: its waiting jobs and
// its attempts in flight. Kinds are never forgotten (a program has a handful).
type kind struct {
	name       string
	cfg        KindConfig
	registered bool
	warned     bool // the unregistered-kind warning was logged
	// Invariant: holds exactly the Waiting jobs of this kind.
	q queue
	// Invariant: the attempts of this kind in Machine.inflight; ≤ cfg.Limit when it is > 0.
	inflight int
	// replayWaiting counts this kind's waiting jobs in replay (Machine.count keeps it), which
	// builds the queues only at its end; 0 otherwise.
	replayWaiting int
	paused        bool        // journaled: Pause, Resume
	bucket        flow.Bucket // cfg.Rate's
	// round is the fair share's current round (Fair); fairKeys the keys waiting for the next.
	round    uint64
	fairKeys []*flowKey
	// parked counts this kind's parked jobs (flow.go), stuck those behind a dead job holding
	// their group. Invariant: both match the keys' and groups' parked lists.
	parked, stuck int
}

// kindOf returns the kind named name, adding it (unregistered, in name order) if new.
func (m *Machine) kindOf(name string) *kind {
	// Runs of jobs share a kind: the last one found costs a comparison, not a lookup (no
	// kind is ever removed, so it stays valid).
	if k := m.lastKind; k != nil && k.name == name {
		return k
	}
	if k := m.kinds[name]; k != nil {
		m.lastKind = k
		return k
	}
	k := &kind{name: name, q: newQueue(), round: 1}
	m.kinds[name] = k
	m.lastKind = k
	i, _ := slices.BinarySearchFunc(m.kindList, name, func(a *kind, n string) int { return strings.Compare(a.name, n) })
	m.kindList = slices.Insert(m.kindList, i, k)
	return k
}

// register adds a kind's configuration; misuse (a kind twice, a bad limit) is an error.
func (m *Machine) register(c KindConfig) error {
	if err := CheckName("kind", c.Name, true); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if c.Limit < 0 {
		return fmt.Errorf("%w: kind %q: Limit must be ≥ 0 (0: no limit), got %d", ErrInvalidConfig, c.Name, c.Limit)
	}
	if c.KeyLimit < 0 {
		return fmt.Errorf("%w: kind %q: KeyLimit must be ≥ 0 (0: no limit), got %d", ErrInvalidConfig, c.Name, c.KeyLimit)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("%w: kind %q: Timeout must be ≥ 0 (0: none), got %v", ErrInvalidConfig, c.Name, c.Timeout)
	}
	if err := c.Rate.Validate(); err != nil {
		return fmt.Errorf("%w: kind %q: Rate.%w", ErrInvalidConfig, c.Name, err)
	}
	if err := c.KeyRate.Validate(); err != nil {
		return fmt.Errorf("%w: kind %q: KeyRate.%w", ErrInvalidConfig, c.Name, err)
	}
	k := m.kindOf(c.Name)
	if k.registered {
		return fmt.Errorf("%w: kind %q registered twice", ErrInvalidConfig, c.Name)
	}
	k.cfg, k.registered = c, true
	return nil
}

// Register adds a kind before the machine first dispatches (more kinds may follow); after
// that it is misuse and returns an error, as does a kind registered twice.
func (m *Machine) Register(c KindConfig) error {
	if m.dispatched {
		return fmt.Errorf("%w: kind %q registered after dispatching began", ErrInvalidConfig, c.Name)
	}
	return m.register(c)
}

// startable reports whether jobs of k may start at all: registered, or any kind may run.
func (m *Machine) startable(k *kind) bool { return k.registered || !m.cfg.KindsOnly }

// runnable reports whether a job of k may start now: startable, not paused and under its
// limit (its rate is kindReady's).
func (m *Machine) runnable(k *kind) bool {
	return m.startable(k) && (!k.paused || m.cfg.Defect == DefectPauseIgnored) && (k.cfg.Limit == 0 || k.inflight < k.cfg.Limit)
}

// pick is the due job to consider next at now among the kinds that may start one: the one
// due longest if it has waited at least AgeMax, else the highest priority, then (due, id):
// the single queue's order with the kinds at their limit or unregistered left out.
func (m *Machine) pick(now time.Time) *job {
	var old, best *job
	for _, k := range m.kindList {
		if !m.runnable(k) || k.q.prio.len() == 0 || !m.kindReady(k, now) {
			continue
		}
		if o := k.q.age.min(); old == nil || byDue(o, old) {
			old = o
		}
		if p := k.q.prio.min(); best == nil || byPrio(p, best) {
			best = p
		}
	}
	if old != nil && m.cfg.AgeMax > 0 && !now.Before(old.due().Add(m.cfg.AgeMax)) {
		return old
	}
	return best
}

// earliest is when the first waiting job of the kinds that may start one could start: its
// (due, id), later if its kind's rate allows none before (zero: none).
func (m *Machine) earliest() time.Time {
	var e time.Time
	for _, k := range m.kindList {
		if !m.runnable(k) {
			continue
		}
		j := k.q.earliest()
		if j == nil {
			continue
		}
		t := j.due()
		if r := k.cfg.Rate; r.On() {
			if at := time.Unix(0, k.bucket.ReadyAt(r)).UTC(); at.After(t) {
				t = at
			}
		}
		if e.IsZero() || t.Before(e) {
			e = t
		}
	}
	return e
}

// waiting counts the waiting jobs that may start: of kinds registered (or any may run) and
// not paused, parked ones included but those behind a dead job holding their group.
func (m *Machine) waiting() int {
	n := 0
	for _, k := range m.kindList {
		if m.startable(k) && !k.paused {
			n += k.q.len() + k.parked - k.stuck
		}
	}
	return n
}

// warnUnregistered logs, once per kind, that jobs of an unregistered kind wait (when
// dispatching begins, for the journal's jobs; later, for a job that names such a kind).
func (m *Machine) warnUnregistered() {
	for _, k := range m.kindList {
		m.maybeWarn(k)
	}
}

func (m *Machine) maybeWarn(k *kind) {
	if m.cfg.KindsOnly && m.dispatched && !k.registered && !k.warned && k.q.len() > 0 {
		k.warned = true
		m.cfg.Logger.Warn("runner: jobs of an unregistered kind wait, never started; register the kind to run them",
			"kind", k.name, "waiting", k.q.len())
	}
}

// Unregistered counts the waiting jobs whose kind is not registered (with KindsOnly).
func (m *Machine) unregistered() int {
	if !m.cfg.KindsOnly {
		return 0
	}
	n := 0
	for _, k := range m.kindList {
		if !k.registered {
			n += k.q.len()
		}
	}
	return n
}

// KindStatus is one kind's summary (Machine.Kinds).
type KindStatus struct {
	Name       string
	Registered bool // with KindsOnly false every kind is reported registered
	Limit      int
	Waiting    int
	InFlight   int
}

// Kinds summarises every kind seen or registered, by name.
func (m *Machine) Kinds() []KindStatus {
	out := make([]KindStatus, 0, len(m.kindList))
	for _, k := range m.kindList {
		out = append(out, KindStatus{Name: k.name, Registered: m.startable(k), Limit: k.cfg.Limit,
			Waiting: k.q.len(), InFlight: k.inflight})
	}
	return out
}
