package worker

import (
	"cmp"
	"slices"
)

// deliveries returns the receipts m knows, sorted, with their state.
func deliveries(m *Machine) []string {
	out := make([]string, 0, len(m.deliveries))
	for r, d := range m.deliveries {
		out = append(out, r+" "+d.state.String())
	}
	slices.SortFunc(out, cmp.Compare[string])
	return out
}
