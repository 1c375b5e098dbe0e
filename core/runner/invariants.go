package runner

import (
	"fmt"
	"maps"
	"slices"
	"sort"
)

// checkInvariants states the machine's invariants in code (O(jobs): for tests and the
// simulator). Each report shows the whole of what it checked, whichever part broke.
func (m *Machine) checkInvariants() error {
	if m.nextID < 1 || m.synced > m.seq || len(m.inflight) != m.pool.Status().Used {
		return fmt.Errorf("runner: next id %d, synced %d of %d records, %d attempts in flight, %d units used",
			m.nextID, m.synced, m.seq, len(m.inflight), m.pool.Status().Used)
	}
	if err := m.pool.CheckInvariants(); err != nil {
		return err
	}
	if err := m.checkSchedules(); err != nil {
		return err
	}
	waiting, err := m.checkJobs()
	if err != nil {
		return err
	}
	if err := m.checkKinds(waiting); err != nil {
		return err
	}
	if err := m.checkInflight(); err != nil {
		return err
	}
	if err := m.checkFlow(); err != nil {
		return err
	}
	return m.checkBreakers()
}

// checkFlow checks the flow keys and groups (flow.go): each key's running attempts, each
// parked job parked once where its key or group says, each group's jobs in id order with only
// its head running, and the kinds' parked and stuck counts.
func (m *Machine) checkFlow() error {
	running := map[*flowKey]int{}
	inflight := map[*group]int{}
	for _, a := range m.inflight {
		if a.key != nil {
			running[a.key]++
		}
		if a.group != nil {
			inflight[a.group]++
		}
	}
	parkedBy := map[*kind]int{}
	stuck := map[*kind]int{}
	for _, n := range slices.Sorted(maps.Keys(m.keys)) {
		ks := m.keys[n]
		if ks.running != running[ks] || n != ks.kind.name+"\x00"+ks.name {
			return fmt.Errorf("runner: key %q of kind %q counts %d running, %d in flight", ks.name, ks.kind.name, ks.running, running[ks])
		}
		for _, j := range ks.parked {
			if !parked(j) || j.kind != ks.kind || j.Opts.Key != ks.name {
				return fmt.Errorf("runner: key %q holds job %d (%v) as parked", ks.name, j.ID, j.State)
			}
			parkedBy[ks.kind]++
		}
	}
	for _, n := range slices.Sorted(maps.Keys(m.groups)) {
		g := m.groups[n]
		running := 0
		for i, id := range g.ids {
			j := m.job(id)
			if j == nil || (i > 0 && g.ids[i-1] >= id) || j.Opts.Group != g.name || j.kind != g.kind ||
				(j.State.Terminal() && !holds(j)) {
				return fmt.Errorf("runner: group %q holds job %d at %d of %v", g.name, id, i, g.ids)
			}
			if j.State == Running {
				running++
			}
		}
		if running != g.running || running > 1 || g.inflight != inflight[g] || g.inflight > 1 {
			return fmt.Errorf("runner: group %q counts %d running and %d attempts in flight, holds %d and %d: %v", g.name, g.running, g.inflight, running, inflight[g], g.ids)
		}
		held := len(g.ids) > 0 && holds(m.job(g.ids[0]))
		for _, j := range g.parked {
			if !parked(j) || len(g.ids) == 0 || (j.ID == g.ids[0] && g.running == 0 && g.inflight == 0) {
				return fmt.Errorf("runner: group %q parks job %d (%v), head %v", g.name, j.ID, j.State, g.ids)
			}
			parkedBy[g.kind]++
			if held {
				stuck[g.kind]++
			}
		}
	}
	for _, k := range m.kindList {
		if k.parked != parkedBy[k] || k.stuck != stuck[k] {
			return fmt.Errorf("runner: kind %q counts %d parked and %d stuck, holds %d and %d", k.name, k.parked, k.stuck, parkedBy[k], stuck[k])
		}
	}
	return nil
}

// checkJobs checks every filed job against its kind, its policy, the unique index and the
// kept counts, and returns how many wait.
func (m *Machine) checkJobs() (waiting int, err error) {
	// order holds every filed job once, ascending by id, each found by its id and none
	// pruned. Checked without sorting: the simulator runs this after every commit.
	for i, j := range m.order {
		if (i > 0 && m.order[i-1].ID >= j.ID) || m.job(j.ID) != j || j.pruned {
			return 0, fmt.Errorf("runner: order holds job %d at %d, out of id order, not found by its id, or pruned", j.ID, i)
		}
	}
	var counts [Cancelled + 1]int
	deferred, held, indexed := 0, 0, 0
	// The kind last looked up: jobs share a few kinds, and this runs after every commit.
	lastKind, lastName, looked := (*kind)(nil), "", false
	for _, j := range m.order {
		id := j.ID
		// A running job runs an attempt of its policy's, which holds a unit of the pool
		// (replay restores running jobs without their units).
		unit := false
		if j.State == Running {
			_, unit = m.inflight[Token{id, j.Attempts}]
		}
		if !looked || j.Opts.Kind != lastName {
			lastKind, lastName, looked = m.kinds[j.Opts.Kind], j.Opts.Kind, true
		}
		running := j.State != Running || j.Attempts <= m.policy(j).Attempts && (unit || m.replaying)
		filed, queued := j.kind == lastKind, j.kind.q.holds(j) || parked(j)
		if j.broken(m.termSeq) != "" || j.ID != id || id >= m.nextID || !running || !filed || (j.State == Waiting) != queued {
			return 0, fmt.Errorf("runner: job %d filed under %d (next id %d), attempt holds a unit %v, of %d allowed, under its kind %q %v, queued %v at %v: %s",
				j.ID, id, m.nextID, unit, m.policy(j).Attempts, j.Opts.Kind, filed, queued, j.idx, j.broken(m.termSeq))
		}
		if j.State == Waiting {
			waiting++
		}
		counts[j.State]++
		if j.Deferred {
			deferred++
		}
		// Every non-terminal job with a unique key holds it in the index, and only those.
		if j.Opts.Unique != "" && !j.State.Terminal() {
			held++
			if m.unique[uniqueKey(j.Opts)] == id {
				indexed++
			}
		}
	}
	if held != len(m.unique) || indexed != held {
		return 0, fmt.Errorf("runner: unique index has %d keys, %d non-terminal jobs hold one, %d of them indexed", len(m.unique), held, indexed)
	}
	if counts != m.counts || deferred != m.deferred {
		return 0, fmt.Errorf("runner: counts %v deferred %d, kept %v deferred %d", counts, deferred, m.counts, m.deferred)
	}
	return waiting, nil
}

// checkKinds checks each kind's listing, queues, heaps and attempts in flight, and that its
// queues hold the waiting jobs.
func (m *Machine) checkKinds(waiting int) error {
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
		queued += q.len() + k.parked
		listed := m.kinds[k.name] == k && (i == 0 || m.kindList[i-1].name < k.name)
		if !listed || q.prio.len() != q.age.len() || k.inflight != inflight[k] || k.cfg.Limit > 0 && k.inflight > k.cfg.Limit ||
			k.inflight > 0 && !m.startable(k) || k.replayWaiting != 0 {
			return fmt.Errorf("runner: kind %q (listed in order and known %v, startable %v): %d due by priority, %d by age; counts %d attempts in flight, holds %d, limit %d; %d waiting counted for a replay",
				k.name, listed, m.startable(k), q.prio.len(), q.age.len(), k.inflight, inflight[k], k.cfg.Limit, k.replayWaiting)
		}
		for _, h := range []*heap{&q.timers, &q.prio, &q.age} {
			if at := h.disorder(); at != "" {
				return fmt.Errorf("runner: kind %q: heap %d out of order: %s", k.name, h.slot, at)
			}
		}
	}
	if waiting != queued {
		return fmt.Errorf("runner: %d waiting jobs, %d queued", waiting, queued)
	}
	return nil
}

// checkInflight checks the unique windows, the attempts in flight and what waits for a
// record to be synced.
func (m *Machine) checkInflight() error {
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
		// Filed under its own token, not dropped, and dispatched once its record is synced.
		if a := m.inflight[tok]; a.token != tok || a.dropped || !a.dispatched && a.seq <= m.synced {
			return fmt.Errorf("runner: in-flight attempt %v filed as %v (dropped %v, dispatched %v, record %d, synced %d)",
				a.token, tok, a.dropped, a.dispatched, a.seq, m.synced)
		}
	}
	// What waits for a record (an attempt to start, an ack) waits for one not yet synced.
	least := m.synced + 1
	for _, a := range m.starting {
		least = min(least, a.seq)
	}
	for _, p := range m.acking {
		least = min(least, p.seq)
	}
	if least <= m.synced {
		return fmt.Errorf("runner: %d attempts and %d acks wait for records from %d, synced %d", len(m.starting), len(m.acking), least, m.synced)
	}
	return nil
}

// checkBreakers checks every target's breaker, in target order.
func (m *Machine) checkBreakers() error {
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
