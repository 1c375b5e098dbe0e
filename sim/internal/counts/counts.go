// Package counts is the simulator's named counters, rendered in name order so a run's report
// never depends on map order.
package counts

import (
	"sort"
	"strconv"
	"strings"
)

// Counts is a set of named counters rendered in name order.
type Counts struct{ m map[string]int }

// Add adds n to the counter k.
func (c *Counts) Add(k string, n int) {
	if c.m == nil {
		c.m = make(map[string]int)
	}
	c.m[k] += n
}

// Get returns the counter k.
func (c Counts) Get(k string) int { return c.m[k] }

// Total is the sum of all counters.
func (c Counts) Total() int {
	n := 0
	for _, v := range c.m {
		n += v
	}
	return n
}

// String renders "a=1 b=2" in key order, or "none".
func (c Counts) String() string {
	if len(c.m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(c.m))
	for k := range c.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Itoa(c.m[k]))
	}
	return b.String()
}
