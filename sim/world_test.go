package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/core/worker"
)

// These tests break a real world on purpose, each in one way, and assert that the invariant
// meant to catch it fires by name. (check_test.go feeds the checker violating histories; here
// the facts come from the real runner, journal, disk, queue and lease machine.)

func runnerWorld(t *testing.T, profile string) (*World, *runnerNode) {
	t.Helper()
	cfg, err := NewConfig(1, profile)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Nodes, cfg.Workers = 1, 0
	w := newWorld(cfg, nil)
	w.setupRunner()
	n := w.nodes[0]
	if !n.up {
		t.Fatal("node did not open")
	}
	for i := 0; i < 6; i++ {
		due := w.loop.Now() + time.Hour // nothing starts: the state stays put
		a, err := n.propose(runner.Enqueue{Due: Epoch.Add(due), Target: "t1", Payload: []byte("p")}, pendingCmd{kind: cmdEnqueue})
		if err != nil {
			t.Fatal(err)
		}
		w.chk.JobAppended(n.id, a.ID, due, "t1", "p")
		n.commit()
		if f := n.flight; f != nil {
			n.land(f) // the sync returns at once
		}
	}
	if v := w.chk.Violation(); v != nil {
		t.Fatalf("violation while setting up: %v", v)
	}
	if len(n.boundaries) < 3 {
		t.Fatalf("want several batch boundaries, got %v", n.boundaries)
	}
	return w, n
}

func crashQuietly(n *runnerNode) {
	n.up = false
	n.gen++
	n.e = nil
	n.w.chk.NodeCrashed(n.id)
	n.disk.Crash()
}

// A bit flipped in the LAST batch looks like a torn write: the journal cuts it and opens. In the
// bitflip profile that is exactly what corruption-refused exists to catch (the world itself
// only flips before the last batch, where refusal is required).
func TestCorruptionRefusedFires(t *testing.T) {
	w, n := runnerWorld(t, "bitflip")
	last := n.boundaries[len(n.boundaries)-2]
	crashQuietly(n)
	n.disk.FlipBit(journalName, last+12, 3)
	n.flipped = "a bit flipped in the last batch"
	n.start()
	v := w.chk.Violation()
	if v == nil || v.Invariant != InvCorruptionRefused {
		t.Fatalf("violation %v, want %s", v, InvCorruptionRefused)
	}
}

// A flip the world did not ask for (so not expected) makes open refuse: open-recovers fires.
func TestOpenRecoversFires(t *testing.T) {
	w, n := runnerWorld(t, "calm")
	crashQuietly(n)
	n.disk.FlipBit(journalName, 3, 0) // the header's magic
	n.start()
	v := w.chk.Violation()
	if v == nil || v.Invariant != InvRecoveryOpens {
		t.Fatalf("violation %v, want %s", v, InvRecoveryOpens)
	}
}

// Enqueues acknowledged by a commit, then the journal replaced by an older copy: recovery
// misses acknowledged jobs.
func TestNoLostAckFiresOnRealRecovery(t *testing.T) {
	w, n := runnerWorld(t, "calm")
	crashQuietly(n)
	// Truncating the synced journal back to its first batch loses acknowledged records (the
	// disk's truncate is durable after a sync).
	f, err := n.disk.Open(journalName)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(n.boundaries[0]); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	n.start()
	v := w.chk.Violation()
	if v == nil || v.Invariant != InvNoLostAck {
		t.Fatalf("violation %v, want %s", v, InvNoLostAck)
	}
}

// A worker machine fed a reply to a call it never made refuses it: machine-invariants fires.
func TestMachineInvariantsFires(t *testing.T) {
	cfg, err := NewConfig(1, "calm")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Nodes = 0
	w := newWorld(cfg, nil)
	w.setupQueue()
	p := w.workers[0]
	p.step(worker.CallDone{Call: 999, Now: w.now()})
	v := w.chk.Violation()
	if v == nil || v.Invariant != InvMachine {
		t.Fatalf("violation %v, want %s", v, InvMachine)
	}
}

// Workers that never come back leave messages live: liveness fires at the bound.
func TestLivenessFires(t *testing.T) {
	cfg, err := NewConfig(3, "calm")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Nodes = 0
	cfg.Safety = time.Minute
	w := newWorld(cfg, nil)
	w.setupQueue()
	for _, p := range w.workers {
		p.up = false // dead for good: no restart is scheduled
		p.gen++
	}
	w.loop.At(w.safetyEnd, w.beginLiveness)
	w.runLoop()
	v := w.chk.Violation()
	if v == nil || v.Invariant != InvLiveness {
		t.Fatalf("violation %v, want %s", v, InvLiveness)
	}
}

// runMutated runs seeds with a planted defect and returns the first violation found.
func runMutated(t *testing.T, profile string, m mutation, seeds int) *Violation {
	t.Helper()
	for seed := int64(1); seed <= int64(seeds); seed++ {
		cfg, err := NewConfig(seed, profile)
		if err != nil {
			t.Fatal(err)
		}
		w := newWorld(cfg, nil)
		w.mutation = m
		w.run()
		if v := w.chk.Violation(); v != nil {
			return v
		}
	}
	return nil
}

// A driver that acknowledges an enqueue before its commit loses acknowledged jobs in crashes.
func TestMutationAckEarlyIsCaught(t *testing.T) {
	v := runMutated(t, "disk", mutAckEarly, 30)
	if v == nil || v.Invariant != InvNoLostAck {
		t.Fatalf("violation %v, want %s", v, InvNoLostAck)
	}
}

// A worker that keeps handling after its receipt was dropped handles visible messages.
func TestMutationKeepDroppedIsCaught(t *testing.T) {
	v := runMutated(t, "network", mutKeepDropped, 100)
	if v == nil || (v.Invariant != InvHiddenWhileWork && v.Invariant != InvNoConcurrent) {
		t.Fatalf("violation %v, want %s or %s", v, InvHiddenWhileWork, InvNoConcurrent)
	}
}

// A worker process that stays up after a fatal receive error (as Run did before it returned
// the error) is caught by the bound on the shutdown that error starts.
func TestMutationIgnoreFatalIsCaught(t *testing.T) {
	v := runMutated(t, "network", mutIgnoreFatal, 200)
	if v == nil || v.Invariant != InvFatalEndsRun || !strings.Contains(v.Detail, "fatal receive") {
		t.Fatalf("violation %v, want %s about a fatal receive", v, InvFatalEndsRun)
	}
}

// A replay of a copy of the disk that differs from the live state is reported (here the live
// side is altered: a job's due moved, as a machine that forgot to journal a transition would).
func TestReplayCheckFires(t *testing.T) {
	w, n := runnerWorld(t, "calm")
	live := jobViews(n.e.State())
	n.checkReplay(live)
	if v := w.chk.Violation(); v != nil {
		t.Fatalf("unaltered state: %v", v)
	}
	live[0].Due += time.Second
	n.checkReplay(live)
	v := w.chk.Violation()
	if v == nil || v.Invariant != InvReplayEqualsLive {
		t.Fatalf("violation %v, want %s", v, InvReplayEqualsLive)
	}
}

// A runner opened with a larger record limit than the world expects accepts an oversize
// enqueue: record-limit fires. With the right limit it refuses, and nothing fires.
func TestRecordLimitFires(t *testing.T) {
	w, n := runnerWorld(t, "calm")
	big := strings.Repeat("x", recordMax+1)
	if !n.enqueue(w.loop.Now(), "t1", big, true) || w.chk.Violation() != nil {
		t.Fatalf("refused oversize enqueue reported: %v", w.chk.Violation())
	}
	crashQuietly(n)
	n.cfg.RecordMax, n.cfg.SnapshotMax = 1<<20, 0 // (a node may run the least SnapshotMax)
	n.start()
	if n.enqueue(w.loop.Now(), "t1", big, true) {
		t.Fatal("accepted oversize enqueue not reported")
	}
	v := w.chk.Violation()
	if v == nil || v.Invariant != InvRecordLimit {
		t.Fatalf("violation %v, want %s", v, InvRecordLimit)
	}
}
