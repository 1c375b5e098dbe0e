package lease

import (
	"cmp"
	"slices"
	"time"
)

// mustNew is New for configs a test knows are valid.
func mustNew(cfg Config) *Machine {
	m, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return m
}

// receipts returns every receipt m knows, in order of receipt.
func receipts(m *Machine) []string {
	rs := make([]*receipt, 0, len(m.receipts))
	for _, r := range m.receipts {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b *receipt) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.key
	}
	return out
}

// now returns m's current time (the latest event time seen).
func machineNow(m *Machine) time.Time { return m.time(m.now) }
