package runner

import (
	"fmt"
	"sort"
)

// checkInvariants states the machine's invariants in code (O(jobs): for tests and the
// simulator).
func (m *Machine) checkInvariants() error {
	if m.nextID < 1 {
		return fmt.Errorf("runner: next id %d", m.nextID)
	}
	if m.synced > m.seq {
		return fmt.Errorf("runner: synced %d > seq %d", m.synced, m.seq)
	}
	if err := m.pool.CheckInvariants(); err != nil {
		return err
	}
	if err := m.checkSchedules(); err != nil {
		return err
	}
	if len(m.inflight) != m.pool.Status().Used {
		return fmt.Errorf("runner: %d attempts in flight, %d units used", len(m.inflight), m.pool.Status().Used)
	}
	ids := make([]uint64, 0, len(m.jobs))
	for id := range m.jobs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	waiting := 0
	var counts [Cancelled + 1]int
	deferred := 0
	for _, id := range ids {
		j := m.jobs[id]
		switch {
		case j.ID != id || id >= m.nextID:
			return fmt.Errorf("runner: job %d filed under %d, next id %d", j.ID, id, m.nextID)
		case j.State.Terminal() != (j.TermSeq != 0) || j.TermSeq > m.termSeq:
			return fmt.Errorf("runner: job %d %v with terminal sequence %d of %d", id, j.State, j.TermSeq, m.termSeq)
		case (j.State == Dead) != (j.Reason != NoReason):
			return fmt.Errorf("runner: job %d %v with reason %v", id, j.State, j.Reason)
		case j.Deferred && j.State != Waiting:
			return fmt.Errorf("runner: job %d deferred while %v", id, j.State)
		case (j.State == Waiting) != m.queue.holds(j):
			return fmt.Errorf("runner: job %d %v at queue indexes %v", id, j.State, j.idx)
		}
		if j.State == Waiting {
			waiting++
		}
		counts[j.State]++
		if j.Deferred {
			deferred++
		}
		if j.State == Running {
			if p := m.policy(j); j.Attempts < 1 || j.Attempts > p.Attempts {
				return fmt.Errorf("runner: job %d running attempt %d of %d", id, j.Attempts, p.Attempts)
			}
			if _, ok := m.inflight[Token{id, j.Attempts}]; !ok && !m.replaying {
				return fmt.Errorf("runner: job %d running attempt %d holds no unit", id, j.Attempts)
			}
		}
	}
	held := 0
	for _, id := range ids {
		j := m.jobs[id]
		k := uniqueKey(j.Opts)
		if k == "" || j.State.Terminal() {
			continue
		}
		held++
		if m.unique[k] != id {
			return fmt.Errorf("runner: job %d %v holds unique key %q, the index names job %d", id, j.State, j.Opts.Unique, m.unique[k])
		}
	}
	if held != len(m.unique) {
		return fmt.Errorf("runner: unique index has %d keys, %d non-terminal jobs hold one", len(m.unique), held)
	}
	if counts != m.counts || deferred != m.deferred {
		return fmt.Errorf("runner: counts %v deferred %d, kept %v deferred %d", counts, deferred, m.counts, m.deferred)
	}
	if waiting != m.queue.len() || m.queue.prio.len() != m.queue.age.len() {
		return fmt.Errorf("runner: %d waiting jobs, %d queued (%d timers, %d due by priority, %d by age)",
			waiting, m.queue.len(), m.queue.timers.len(), m.queue.prio.len(), m.queue.age.len())
	}
	for _, h := range []*heap{&m.queue.timers, &m.queue.prio, &m.queue.age} {
		for i := 1; i < h.len(); i++ {
			if h.less(h.h[i], h.h[(i-1)/2]) {
				return fmt.Errorf("runner: heap %d out of order at %d", h.slot, i)
			}
		}
	}
	toks := make([]Token, 0, len(m.inflight))
	for tok := range m.inflight {
		toks = append(toks, tok)
	}
	// Sorted so that the same broken state always reports the same first violation.
	sort.Slice(toks, func(a, b int) bool {
		return toks[a].ID < toks[b].ID || toks[a].ID == toks[b].ID && toks[a].Attempt < toks[b].Attempt
	})
	for _, tok := range toks {
		a := m.inflight[tok]
		if a.token != tok || a.dropped {
			return fmt.Errorf("runner: in-flight attempt %v filed as %v (dropped %v)", a.token, tok, a.dropped)
		}
		if !a.dispatched && a.seq <= m.synced {
			return fmt.Errorf("runner: attempt %v synced at %d but not dispatched", tok, a.seq)
		}
	}
	for _, a := range m.starting {
		if a.seq <= m.synced {
			return fmt.Errorf("runner: attempt %v waits for record %d, synced %d", a.token, a.seq, m.synced)
		}
	}
	for _, p := range m.acking {
		if p.seq <= m.synced {
			return fmt.Errorf("runner: ack %v waits for record %d, synced %d", p.ack, p.seq, m.synced)
		}
	}
	targets := make([]string, 0, len(m.breakers))
	for t := range m.breakers {
		targets = append(targets, t)
	}
	sort.Strings(targets)
	for _, t := range targets {
		if err := m.breakers[t].CheckInvariants(); err != nil {
			return fmt.Errorf("runner: target %q: %w", t, err)
		}
	}
	return nil
}
