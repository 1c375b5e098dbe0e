package runner

// queue is a min-heap of waiting jobs ordered by (due, id); each job knows its index so
// removal and re-keying are O(log n).
type queue []*job

func (q queue) less(i, j int) bool {
	a, b := q[i], q[j]
	if !a.Due.Equal(b.Due) {
		return a.Due.Before(b.Due)
	}
	return a.ID < b.ID
}

func (q queue) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].idx, q[j].idx = i, j
}

func (q *queue) push(j *job) {
	j.idx = len(*q)
	*q = append(*q, j)
	q.up(j.idx)
}

func (q *queue) remove(j *job) {
	i := j.idx
	n := len(*q) - 1
	if i != n {
		q.swap(i, n)
	}
	(*q)[n] = nil
	*q = (*q)[:n]
	j.idx = -1
	if i != n {
		if !q.down(i) {
			q.up(i)
		}
	}
}

// fix restores order after j's due changed.
func (q *queue) fix(j *job) {
	if !q.down(j.idx) {
		q.up(j.idx)
	}
}

func (q queue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

func (q queue) down(i0 int) bool {
	i := i0
	for {
		l := 2*i + 1
		if l >= len(q) {
			break
		}
		c := l
		if r := l + 1; r < len(q) && q.less(r, l) {
			c = r
		}
		if !q.less(c, i) {
			break
		}
		q.swap(i, c)
		i = c
	}
	return i > i0
}
