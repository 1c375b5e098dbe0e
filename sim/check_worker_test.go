package sim

import "testing"

// Workers that cancel handlers at the local deadline itself (no stop margin) leave the next
// consumer no room: the stop-margin invariant catches it under the network profile.
func TestMutationNoStopMarginIsCaught(t *testing.T) {
	v := runMutated(t, "network", mutNoStopMargin, 100)
	if v == nil || v.Invariant != InvStopMargin {
		t.Fatalf("violation %v, want %s", v, InvStopMargin)
	}
}
