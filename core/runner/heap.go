package runner

import "time"

// The waiting jobs live in three heaps (each job knows its index in each, so removal and
// re-keying are O(log n)):
//
//   - timers: waiting jobs not yet seen due, by (due, id);
//   - byPrio: due jobs by (priority desc, due, id): who starts next;
//   - byAge:  the same due jobs by (due, id): who has waited longest (the starvation rule).
//
// A job moves from timers to the other two when scheduling finds it due (promote), and back to
// timers when a breaker defers it. Which heap a job is in is not durable: replay puts every
// waiting job in timers and the next schedule promotes the due ones.
const (
	slotTimers = iota
	slotPrio
	slotAge
	slots
)

type heap struct {
	slot int
	prio bool // by (priority desc, due, id) (byPrio), else by (due, id) (byDue)
	h    []*job
}

// less is byPrio or byDue on the cached due key, without a call through a func value (the
// heaps are the owner's hottest code at a large backlog).
func (q *heap) less(a, b *job) bool {
	if q.prio && a.Opts.Priority != b.Opts.Priority {
		return a.Opts.Priority > b.Opts.Priority
	}
	if a.dueKey != b.dueKey {
		return a.dueKey < b.dueKey
	}
	return a.ID < b.ID
}

func byDue(a, b *job) bool {
	if !a.Due.Equal(b.Due) {
		return a.Due.Before(b.Due)
	}
	return a.ID < b.ID
}

func byPrio(a, b *job) bool {
	if a.Opts.Priority != b.Opts.Priority {
		return a.Opts.Priority > b.Opts.Priority
	}
	return byDue(a, b)
}

func (q *heap) len() int        { return len(q.h) }
func (q *heap) min() *job       { return q.h[0] }
func (q *heap) has(j *job) bool { return j.idx[q.slot] >= 0 }

func (q *heap) swap(i, j int) {
	q.h[i], q.h[j] = q.h[j], q.h[i]
	q.h[i].idx[q.slot], q.h[j].idx[q.slot] = i, j
}

func (q *heap) push(j *job) {
	j.idx[q.slot] = len(q.h)
	q.h = append(q.h, j)
	q.up(j.idx[q.slot])
}

func (q *heap) remove(j *job) {
	i := j.idx[q.slot]
	n := len(q.h) - 1
	if i != n {
		q.swap(i, n)
	}
	q.h[n] = nil
	q.h = q.h[:n]
	j.idx[q.slot] = -1
	if i != n {
		if !q.down(i) {
			q.up(i)
		}
	}
}

// fix restores order after j's key changed.
func (q *heap) fix(j *job) {
	if !q.down(j.idx[q.slot]) {
		q.up(j.idx[q.slot])
	}
}

func (q *heap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(q.h[i], q.h[p]) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

func (q *heap) down(i0 int) bool {
	i := i0
	for {
		l := 2*i + 1
		if l >= len(q.h) {
			break
		}
		c := l
		if r := l + 1; r < len(q.h) && q.less(q.h[r], q.h[l]) {
			c = r
		}
		if !q.less(q.h[c], q.h[i]) {
			break
		}
		q.swap(i, c)
		i = c
	}
	return i > i0
}

// queue is the waiting jobs. Invariant: each waiting job is in timers, or in both byPrio and
// byAge; no other job is in any.
type queue struct {
	timers, prio, age heap
}

func newQueue() queue {
	return queue{timers: heap{slot: slotTimers}, prio: heap{slot: slotPrio, prio: true},
		age: heap{slot: slotAge}}
}

// holds reports that j is where a waiting job must be: in timers, or in both due heaps.
func (q *queue) holds(j *job) bool {
	in := func(h *heap) bool {
		i := j.idx[h.slot]
		return i >= 0 && i < h.len() && h.h[i] == j
	}
	t, p, a := in(&q.timers), in(&q.prio), in(&q.age)
	return ((t && !p && !a) || (!t && p && a)) && j.dueKey == j.Due.UnixNano()
}

func (q *queue) len() int { return q.timers.len() + q.prio.len() }

// push adds a waiting job (to timers: scheduling promotes it when due).
func (q *queue) push(j *job) {
	j.dueKey = j.Due.UnixNano()
	q.timers.push(j)
}

func (q *queue) remove(j *job) {
	if q.timers.has(j) {
		q.timers.remove(j)
		return
	}
	q.prio.remove(j)
	q.age.remove(j)
}

// fix re-keys j after its due changed (a deferral moves it later: back to timers).
func (q *queue) fix(j *job) {
	j.dueKey = j.Due.UnixNano()
	if q.timers.has(j) {
		q.timers.fix(j)
		return
	}
	q.prio.remove(j)
	q.age.remove(j)
	q.timers.push(j)
}

// promote moves every job due at or before now from timers to the due heaps.
func (q *queue) promote(now time.Time) {
	for q.timers.len() > 0 && !q.timers.min().Due.After(now) {
		j := q.timers.min()
		q.timers.remove(j)
		q.prio.push(j)
		q.age.push(j)
	}
}

// earliest is the waiting job with the earliest (due, id), or nil.
func (q *queue) earliest() *job {
	switch {
	case q.age.len() == 0 && q.timers.len() == 0:
		return nil
	case q.age.len() == 0:
		return q.timers.min()
	case q.timers.len() == 0:
		return q.age.min()
	case byDue(q.timers.min(), q.age.min()):
		return q.timers.min()
	}
	return q.age.min()
}
