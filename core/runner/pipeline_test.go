package runner

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/sim/disk"
)

// pipelineEngine opens an engine on a fresh disk with admission on.
func pipelineEngine(t *testing.T, d *disk.Disk) *Engine {
	t.Helper()
	e, err := Open(d, journalName, Config{Capacity: 2}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Dispatch(epoch, true); err != nil {
		t.Fatal(err)
	}
	return e
}

func ackTickets(res Result) []Ticket {
	var ts []Ticket
	for _, a := range res.Acks {
		ts = append(ts, a.Ticket)
	}
	return ts
}

// TestPipelinedCommitAcksOnlyWhatItsBatchHeld: commands submitted (and staged) while a batch
// is in flight are acknowledged by the next Finish, not this one; a second Begin before Finish
// panics; the engine is quiet only once everything it produced is durable.
func TestPipelinedCommitAcksOnlyWhatItsBatchHeld(t *testing.T) {
	e := pipelineEngine(t, disk.New(1))
	far := epoch.Add(1e12) // nothing starts
	t1, _, _ := e.Enqueue(epoch, far, "t", []byte("a"))
	t2, _, _ := e.Enqueue(epoch, far, "t", []byte("b"))
	b, err := e.begin(epoch, true)
	if err != nil || b.Empty() {
		t.Fatalf("Begin = %v, empty %v", err, b.Empty())
	}
	t3, _, _ := e.Enqueue(epoch, far, "t", []byte("c"))
	if err := e.stageHeld(); err != nil {
		t.Fatal(err)
	}
	if e.quiet() {
		t.Fatal("quiet with a batch in flight")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a second Begin while a batch flies did not panic")
			}
		}()
		_, _ = e.begin(epoch, true)
	}()
	res, err := e.finish(b, b.Sync())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Ticket{t1, t2}, ackTickets(res)); diff != "" {
		t.Errorf("first Finish acks (-want +got)\n%s", diff)
	}
	if e.quiet() || e.Status().Durable != 2 {
		t.Errorf("after the first Finish: quiet %v, durable %d; want not quiet, 2", e.quiet(), e.Status().Durable)
	}
	b, err = e.begin(epoch, true)
	if err != nil {
		t.Fatal(err)
	}
	res, err = e.finish(b, b.Sync())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Ticket{t3}, ackTickets(res)); diff != "" {
		t.Errorf("second Finish acks (-want +got)\n%s", diff)
	}
	if !e.quiet() || e.Status().Durable != 3 || res.Records != 1 {
		t.Errorf("after the second Finish: quiet %v, durable %d, records %d; want quiet, 3, 1", e.quiet(), e.Status().Durable, res.Records)
	}
}

// TestPipelinedStartsWaitForTheirBatchSync: an attempt admitted by Begin is returned by that
// batch's Finish only; an outcome stepped during the flight frees its unit, but the job it
// admits next starts only after the following batch's sync.
func TestPipelinedStartsWaitForTheirBatchSync(t *testing.T) {
	e := pipelineEngine(t, disk.New(1))
	_, id1, _ := e.Enqueue(epoch, epoch, "t", []byte("a"))
	_, id2, _ := e.Enqueue(epoch, epoch, "t", []byte("b"))
	_, id3, _ := e.Enqueue(epoch, epoch, "t", []byte("c"))
	b, _ := e.begin(epoch, true) // admits 1 and 2 (Capacity 2)
	res, err := e.finish(b, b.Sync())
	if err != nil || len(res.Starts) != 2 || res.Starts[0].Token.ID != id1 || res.Starts[1].Token.ID != id2 {
		t.Fatalf("Finish = %+v, %v; want starts of %d and %d", res.Starts, err, id1, id2)
	}
	b, _ = e.begin(epoch, true) // nothing new: an empty batch
	if !b.Empty() {
		t.Fatal("Begin with nothing to write wrote a batch")
	}
	if _, err := e.finish(b, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.AttemptDone(epoch, res.Starts[0].Token, Success()); err != nil {
		t.Fatal(err)
	}
	b, _ = e.begin(epoch, true) // Finished(1) and Started(3)
	// Job 2's outcome arrives during the flight.
	if err := e.AttemptDone(epoch, res.Starts[1].Token, Success()); err != nil {
		t.Fatal(err)
	}
	if err := e.stageHeld(); err != nil {
		t.Fatal(err)
	}
	res, err = e.finish(b, b.Sync())
	if err != nil || len(res.Starts) != 1 || res.Starts[0].Token.ID != id3 {
		t.Fatalf("Finish = %+v, %v; want job %d started", res.Starts, err, id3)
	}
	if len(res.Settled) != 1 || res.Settled[0].ID != id1 {
		t.Errorf("settled %+v, want job %d only (job %d's end is not durable yet)", res.Settled, id1, id2)
	}
}

// TestPipelinedFailedSyncAcknowledgesNothing: a failed sync poisons the engine; neither the
// batch's commands nor those staged during its flight are acknowledged, and a reopen finds
// only what an earlier sync made durable.
func TestPipelinedFailedSyncAcknowledgesNothing(t *testing.T) {
	d := disk.New(1)
	e := pipelineEngine(t, d)
	far := epoch.Add(1e12)
	_, _, _ = e.Enqueue(epoch, far, "t", []byte("kept"))
	if _, err := e.Commit(epoch); err != nil {
		t.Fatal(err)
	}
	_, _, _ = e.Enqueue(epoch, far, "t", []byte("lost"))
	b, err := e.begin(epoch, true)
	if err != nil {
		t.Fatal(err)
	}
	_, _, _ = e.Enqueue(epoch, far, "t", []byte("staged"))
	_ = e.stageHeld()
	res, err := e.finish(b, errors.New("simulated fsync failure"))
	if !errors.Is(err, ErrPoisoned) || len(res.Acks) != 0 {
		t.Fatalf("Finish = %+v, %v; want no acks and ErrPoisoned", res.Acks, err)
	}
	_ = e.Close()
	e, err = Open(d, journalName, Config{Capacity: 2}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if s := e.State(); len(s.Jobs) != 1 || string(s.Jobs[0].Payload) != "kept" {
		t.Fatalf("reopened with %+v, want only the job acknowledged before", s.Jobs)
	}
}

// TestCrashDuringAFlightLosesNothingAcknowledged: a crash with a batch written and unsynced
// and more staged recovers every acknowledged job, the unsynced batch whole or not at all, and
// never a staged record (it was never written).
func TestCrashDuringAFlightLosesNothingAcknowledged(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		d := disk.New(seed)
		e := pipelineEngine(t, d)
		far := epoch.Add(1e12)
		_, _, _ = e.Enqueue(epoch, far, "t", []byte("acked"))
		if _, err := e.Commit(epoch); err != nil {
			t.Fatal(err)
		}
		_, _, _ = e.Enqueue(epoch, far, "t", []byte("flying1"))
		_, _, _ = e.Enqueue(epoch, far, "t", []byte("flying2"))
		if _, err := e.begin(epoch, true); err != nil {
			t.Fatal(err)
		}
		_, _, _ = e.Enqueue(epoch, far, "t", []byte("staged"))
		_ = e.stageHeld()
		d.Crash() // the engine is dropped without Finish or Close
		e, err := Open(d, journalName, Config{Capacity: 2}, epoch)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var got []string
		for _, j := range e.State().Jobs {
			got = append(got, string(j.Payload))
		}
		if !cmp.Equal(got, []string{"acked"}) && !cmp.Equal(got, []string{"acked", "flying1", "flying2"}) {
			t.Errorf("seed %d: recovered %q; want the acknowledged job, with the unsynced batch whole or not at all", seed, got)
		}
		_ = e.Close()
	}
}
