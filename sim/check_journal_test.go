package sim

import "testing"

func init() { firedElsewhere[InvJournalDurable] = "TestMutationNoDirSyncIsCaught" }

// An engine whose directory fsyncs do nothing (a create or a compaction's rename never made
// durable) is caught at its first open by journal-entry-durable. With that muted, the crashes
// that roll the rename back must still end as a verdict on the code (lost acknowledged jobs),
// never as a simulator fault: the damage family finds no synced data of the engine's to damage
// and leaves the judgement to recovery.
func TestMutationNoDirSyncIsCaught(t *testing.T) {
	if v := runMutated(t, "swarm", mutNoDirSync, 1); v == nil || v.Invariant != InvJournalDurable {
		t.Fatalf("violation %v, want %s", v, InvJournalDurable)
	}
	caught := map[string]int{}
	for seed := int64(1); seed <= 20; seed++ {
		cfg, err := NewConfig(seed, "swarm")
		if err != nil {
			t.Fatal(err)
		}
		w := newWorld(cfg, nil)
		w.mutation = mutNoDirSync
		w.chk.mute(InvJournalDurable)
		if fault := w.runSafely(); fault != "" {
			t.Fatalf("seed %d: simulator fault: %s", seed, fault)
		}
		if v := w.chk.Violation(); v != nil {
			caught[v.Invariant]++
		}
	}
	if caught[InvNoLostAck] == 0 {
		t.Fatalf("no seed of 20 lost an acknowledged job with directory fsyncs dropped: %v", caught)
	}
	t.Log(caught)
}
