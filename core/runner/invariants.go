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
	if len(m.order) != len(ids) {
		return fmt.Errorf("runner: %d jobs in order, %d filed", len(m.order), len(ids))
	}
	for i, id := range ids {
		if m.order[i] != m.jobs[id] {
			return fmt.Errorf("runner: order holds job %d where job %d belongs", m.order[i].ID, id)
		}
	}
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
		case j.kind != m.kinds[j.Opts.Kind]:
			return fmt.Errorf("runner: job %d of kind %q filed under another kind", id, j.Opts.Kind)
		case (j.State == Waiting) != j.kind.q.holds(j):
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
	queued := 0
	inflight := map[*kind]int{}
	for _, a := range m.inflight {
		inflight[a.kind]++
	}
	if len(m.kindList) != len(m.kinds) {
		return fmt.Errorf("runner: %d kinds listed, %d known", len(m.kindList), len(m.kinds))
	}
	for i, k := range m.kindList {
		q := &k.q
		queued += q.len()
		switch {
		case m.kinds[k.name] != k || (i > 0 && m.kindList[i-1].name >= k.name):
			return fmt.Errorf("runner: kind %q listed out of order or not known", k.name)
		case q.prio.len() != q.age.len():
			return fmt.Errorf("runner: kind %q: %d due by priority, %d by age", k.name, q.prio.len(), q.age.len())
		case k.inflight != inflight[k]:
			return fmt.Errorf("runner: kind %q counts %d attempts in flight, holds %d", k.name, k.inflight, inflight[k])
		case k.cfg.Limit > 0 && k.inflight > k.cfg.Limit:
			return fmt.Errorf("runner: kind %q has %d attempts in flight, limit %d", k.name, k.inflight, k.cfg.Limit)
		case k.inflight > 0 && !m.startable(k):
			return fmt.Errorf("runner: kind %q is not registered but has %d attempts in flight", k.name, k.inflight)
		}
		for _, h := range []*heap{&q.timers, &q.prio, &q.age} {
			for i := 1; i < h.len(); i++ {
				if h.less(h.h[i], h.h[(i-1)/2]) {
					return fmt.Errorf("runner: kind %q: heap %d out of order at %d", k.name, h.slot, i)
				}
			}
		}
	}
	if waiting != queued {
		return fmt.Errorf("runner: %d waiting jobs, %d queued", waiting, queued)
	}
	for k, w := range m.windows {
		if _, held := m.unique[k]; held || w.id >= m.nextID {
			return fmt.Errorf("runner: unique window of job %d for a key also held (%v) or a job not issued", w.id, held)
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
