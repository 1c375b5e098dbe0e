package runner

import (
	"fmt"
	"math"
	"slices"
	"time"
)

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
//
// Each heap is a binary heap plus a run: entries pushed in ascending order (jobs enqueued
// due now, in id order, as a backlog is) are appended to the run, a sorted FIFO, in O(1), and
// the minimum leaves it in O(1); an entry that would break the run's order goes to the binary
// heap. The heap's minimum is the smaller of the two heads: the same order either way.
const (
	slotTimers = iota
	slotPrio
	slotAge
	slots
)

type heap struct {
	slot int
	prio bool // by (priority desc, due, id) (byPrio), else by (due, id) (byDue)
	h    []entry
	// run[head:] ascends by less, with holes (entry{}) where entries were removed; holes
	// counts them. Invariant: head is len(run) or a live entry. A job at run[p] has index
	// -2-p (-1: in neither).
	run   []entry
	head  int
	holes int
	last  entry // the key of the last entry appended to run (a push not below it may append)
}

// runIndex is the index a job at run[p] has; runPos undoes it.
func runIndex(p int) int { return -2 - p }
func runPos(i int) int   { return -2 - i }

// entry is a job in a heap with its sort key copied in: comparisons read the heap's own
// array, not the jobs (the heaps are the owner's hottest code at a large backlog).
// Invariant: the key is the job's (queue.holds).
type entry struct {
	rank int64 // -Priority in a byPrio heap, else 0: lower goes first
	due  int64 // the job's dueKey
	id   uint64
	j    *job
}

// entryOf is j's entry in q.
func (q *heap) entryOf(j *job) entry {
	e := entry{due: j.dueKey, id: j.ID, j: j}
	if q.prio {
		e.rank = -int64(j.Opts.Priority)
	}
	return e
}

// less is byPrio or byDue on the entries' keys.
func (q *heap) less(a, b entry) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	if a.due != b.due {
		return a.due < b.due
	}
	return a.id < b.id
}

func byDue(a, b *job) bool {
	if a.dueKey != b.dueKey {
		return a.dueKey < b.dueKey
	}
	return a.ID < b.ID
}

func byPrio(a, b *job) bool {
	if a.Opts.Priority != b.Opts.Priority {
		return a.Opts.Priority > b.Opts.Priority
	}
	return byDue(a, b)
}

func (q *heap) len() int        { return len(q.h) + len(q.run) - q.head - q.holes }
func (q *heap) has(j *job) bool { return j.idx[q.slot] != -1 }

// min is the first job by the heap's order; the heap must not be empty.
func (q *heap) min() *job {
	switch {
	case q.head == len(q.run):
		return q.h[0].j
	case len(q.h) == 0 || q.less(q.run[q.head], q.h[0]):
		return q.run[q.head].j
	}
	return q.h[0].j
}

// runPush appends e to the run if that keeps it sorted.
func (q *heap) runPush(e entry) bool {
	if q.head < len(q.run) && q.less(e, q.last) {
		return false
	}
	e.j.idx[q.slot] = int32(runIndex(len(q.run)))
	q.run = append(q.run, e)
	q.last = e
	q.last.j = nil // the key is enough; keep no job alive
	return true
}

// reserve makes room for n more entries in the run (a bulk push in ascending order).
func (q *heap) reserve(n int) { q.run = slices.Grow(q.run, n) }

// runRemove takes the job at run[p] out, then keeps head on a live entry and the holes few.
func (q *heap) runRemove(p int) {
	q.run[p].j.idx[q.slot] = -1
	q.run[p] = entry{}
	if p != q.head {
		q.holes++
	} else {
		for q.head++; q.head < len(q.run) && q.run[q.head].j == nil; q.head++ {
			q.holes--
		}
	}
	switch {
	case q.head == len(q.run):
		q.run, q.head, q.holes = q.run[:0], 0, 0
	case q.head+q.holes > len(q.run)/2 && len(q.run) >= 64:
		// Mostly dead: move the live entries down (amortised O(1) per removal).
		n := 0
		for _, e := range q.run[q.head:] {
			if e.j != nil {
				e.j.idx[q.slot] = int32(runIndex(n))
				q.run[n] = e
				n++
			}
		}
		clear(q.run[n:])
		q.run, q.head, q.holes = q.run[:n], 0, 0
	}
}

// disorder is the first position that breaks the heap's or the run's order, or "".
func (q *heap) disorder() string {
	for i := 1; i < len(q.h); i++ {
		if q.less(q.h[i], q.h[(i-1)/2]) {
			return fmt.Sprintf("heap at %d", i)
		}
	}
	prev := -1
	for p := q.head; p < len(q.run); p++ {
		if q.run[p].j == nil {
			continue
		}
		if prev >= 0 && !q.less(q.run[prev], q.run[p]) || q.less(q.last, q.run[p]) {
			return fmt.Sprintf("run at %d", p)
		}
		prev = p
	}
	if q.head < len(q.run) && q.run[q.head].j == nil {
		return "run head on a hole"
	}
	return ""
}

func (q *heap) swap(i, j int) {
	q.h[i], q.h[j] = q.h[j], q.h[i]
	q.h[i].j.idx[q.slot], q.h[j].j.idx[q.slot] = int32(i), int32(j)
}

func (q *heap) push(j *job) {
	if q.runPush(q.entryOf(j)) {
		return
	}
	j.idx[q.slot] = int32(len(q.h))
	q.h = append(q.h, q.entryOf(j))
	q.up(len(q.h) - 1)
}

func (q *heap) remove(j *job) {
	i := int(j.idx[q.slot])
	if i < -1 {
		q.runRemove(runPos(i))
		return
	}
	n := len(q.h) - 1
	if i != n {
		q.swap(i, n)
	}
	q.h[n] = entry{}
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
	if j.idx[q.slot] < -1 {
		q.remove(j)
		q.push(j)
		return
	}
	i := int(j.idx[q.slot])
	q.h[i] = q.entryOf(j)
	if !q.down(i) {
		q.up(i)
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
		i := int(j.idx[h.slot])
		if p := runPos(i); i < -1 {
			return p >= h.head && p < len(h.run) && h.run[p] == h.entryOf(j)
		}
		return i >= 0 && i < len(h.h) && h.h[i] == h.entryOf(j)
	}
	t, p, a := in(&q.timers), in(&q.prio), in(&q.age)
	return (t && !p && !a) || (!t && p && a)
}

func (q *queue) len() int { return q.timers.len() + q.prio.len() }

// push adds a waiting job (to timers: scheduling promotes it when due).
func (q *queue) push(j *job) {
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
	if now.Before(timeMin) {
		return // every due is at or after timeMin
	}
	through := int64(math.MaxInt64)
	if !now.After(timeMax) {
		through = now.UnixNano()
	}
	for q.timers.len() > 0 && q.timers.min().dueKey <= through {
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
