package runner

import (
	"time"

	"github.com/sluicehq/sluice/core/journal"
)

// IdleThrough reports that no waiting job and no schedule's period is due at or before t and
// nothing holds a unit.
func (m *Machine) IdleThrough(t time.Time) bool {
	e, f := m.earliest(), m.flowWake()
	return (e.IsZero() || e.After(t)) && (f.IsZero() || f.After(t)) && m.pool.Status().Used == 0 && len(m.dueSchedules(t)) == 0
}

// Idle reports that nothing is waiting (due or not, deferred included) or holding a unit.
func (m *Machine) Idle() bool { return m.waiting() == 0 && m.pool.Status().Used == 0 }

// Get returns a copy of job id.
func (m *Machine) Get(id uint64) (Job, bool) {
	j := m.job(id)
	if j == nil {
		return Job{}, false
	}
	var c Job
	j.view(&c)
	c.Payload = append([]byte(nil), j.Payload...)
	j.shared = true
	return c, true
}

// List returns copies of the jobs with ids in [from, to] that match, ascending by id: at most
// limit of them, looking at no more than scanMax ids. next is the last id looked at (the
// cursor to resume from next+1); more reports ids left in the range. Ids are dense (1 to
// NextID-1, minus pruned jobs), so a page costs O(ids scanned), not O(jobs).
func (m *Machine) List(from, to uint64, match func(*Job) bool, limit, scanMax int) (jobs []Job, next uint64, more bool) {
	return m.list(from, to, match, limit, scanMax, true)
}

// ListBare is List with every Payload nil: a listing that shows no payload copies none.
func (m *Machine) ListBare(from, to uint64, match func(*Job) bool, limit, scanMax int) (jobs []Job, next uint64, more bool) {
	return m.list(from, to, match, limit, scanMax, false)
}

// ListBare is Machine.ListBare on the engine's state.
func (e *Engine) ListBare(from, to uint64, match func(*Job) bool, limit, scanMax int) ([]Job, uint64, bool) {
	return e.m.ListBare(from, to, match, limit, scanMax)
}

func (m *Machine) list(from, to uint64, match func(*Job) bool, limit, scanMax int, payloads bool) (jobs []Job, next uint64, more bool) {
	from, to = max(from, 1), min(to, m.nextID-1)
	next = from - 1
	var v Job
	for id := from; id <= to && len(jobs) < limit && scanMax > 0; id++ {
		scanMax--
		next = id
		j := m.job(id)
		if j == nil {
			continue
		}
		if j.view(&v); !match(&v) {
			continue
		}
		v.Payload = nil
		if payloads {
			v.Payload = append([]byte(nil), j.Payload...)
		}
		j.shared = true
		jobs = append(jobs, v)
	}
	return jobs, next, next < to
}

// Status is a summary for Stats and checkers. The journal fields (Durable to Compactions) are
// the Engine's; a bare Machine leaves them zero.
type Status struct {
	Waiting   int // in the queue, including deferred ones
	Deferred  int // waiting after a breaker refusal
	Running   int // jobs whose current attempt is running
	Succeeded int
	Dead      int
	Cancelled int
	InFlight  int // attempts holding a pool unit (dispatched, or awaiting their sync)
	Capacity  int
	NextID    uint64
	WakeAt    time.Time // zero when only a command or an outcome can make progress
	// Dispatching: admission is on. Stopped: admission is off and no attempt is running, or
	// the stop's second grace has passed (those still running are abandoned): the driver may
	// flush, compact and close.
	Dispatching bool
	Stopped     bool
	// Unregistered counts the waiting jobs of kinds not registered (KindsOnly): they wait.
	Unregistered int
	// Paused counts the waiting jobs of paused kinds; Held those behind a dead job holding
	// their group (Opts.Hold). Both are within Waiting and wait for an operator.
	Paused, Held int

	Durable     journal.LSN
	Grown       int64 // journal bytes since open or the last compaction
	Bytes       int64 // the journal's length: header and synced batches (not its spare)
	Poisoned    error
	Orphans     int   // running jobs requeued as interrupted at open
	Commits     int64 // journal batches synced since open
	Records     int64 // records in them
	Compactions int64 // snapshots written since open
}

// Status summarises the machine in O(inflight).
func (m *Machine) Status() Status {
	ps := m.pool.Status()
	s := Status{InFlight: ps.Used, Capacity: ps.Capacity, NextID: m.nextID,
		Waiting: m.counts[Waiting], Deferred: m.deferred, Running: m.counts[Running],
		Succeeded: m.counts[Succeeded], Dead: m.counts[Dead], Cancelled: m.counts[Cancelled],
		WakeAt: m.WakeAt(), Dispatching: m.dispatching, Unregistered: m.unregistered()}
	for _, k := range m.kindList {
		if k.paused {
			s.Paused += k.q.len() + k.parked
		}
		s.Held += k.stuck
	}
	s.Stopped = !m.dispatching && (m.running() == 0 ||
		(m.graceAt.IsZero() && !m.abandonAt.IsZero() && !m.now.Before(m.abandonAt)))
	return s
}
