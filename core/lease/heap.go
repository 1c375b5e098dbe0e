package lease

// timerHeap is a binary min-heap of receipts keyed by (next, seq): one timer structure for
// every receipt (docs/worker.md). Each receipt records its index so removal is O(log n).
type timerHeap struct {
	// Invariant: for every i > 0, !less(items[i], items[(i-1)/2]), and items[i].idx == i.
	items []*receipt
}

func less(a, b *receipt) bool {
	if a.next != b.next {
		return a.next < b.next
	}
	return a.seq < b.seq
}

func (h *timerHeap) len() int      { return len(h.items) }
func (h *timerHeap) top() *receipt { return h.items[0] }
func (h *timerHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].idx = i
	h.items[j].idx = j
}
func (h *timerHeap) pop() *receipt { r := h.items[0]; h.remove(r); return r }

func (h *timerHeap) push(r *receipt) {
	if r.idx >= 0 {
		panic("lease: receipt pushed twice onto the timer heap")
	}
	r.idx = len(h.items)
	h.items = append(h.items, r)
	h.up(r.idx)
}

// remove takes r out of the heap if it is in it.
func (h *timerHeap) remove(r *receipt) {
	i := r.idx
	if i < 0 {
		return
	}
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	r.idx = -1
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
	if cap(h.items) > 64 && len(h.items) < cap(h.items)/4 {
		h.items = append([]*receipt(nil), h.items...)
	}
}

func (h *timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !less(h.items[i], h.items[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

// down sifts item i down and reports whether it moved.
func (h *timerHeap) down(i int) bool {
	start := i
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && less(h.items[r], h.items[l]) {
			c = r
		}
		if !less(h.items[c], h.items[i]) {
			break
		}
		h.swap(i, c)
		i = c
	}
	return i > start
}
