package sim

import "testing"

// Every invariant's name finds its own counter through the checker's table, and the table
// separates every name (none falls back to the map).
func TestInvTableFindsEveryInvariantItsOwnIndex(t *testing.T) {
	c := NewChecker()
	for i, inv := range Invariants {
		if got := c.inv(inv.Name); got != i {
			t.Errorf("inv(%q) = %d, want %d", inv.Name, got, i)
		}
		if e := invTable.slots[invSlot(inv.Name, invTable.mult)]; invTable.mult == 0 || e.name != inv.Name {
			t.Errorf("%q has no slot of its own (multiplier %d)", inv.Name, invTable.mult)
		}
	}
	if got := c.inv("no-such-invariant"); got != 0 {
		t.Errorf("an unknown name maps to %d, want 0 as invIndex gives", got)
	}
}
