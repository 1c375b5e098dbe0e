package journal

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/sim/disk"
)

// TestWriteThenSyncedPipelines: Write returns the batch in flight; records appended meanwhile
// go into the next batch, which Write refuses (a panic) until Synced took the first one's sync;
// a reopen replays both batches in order.
func TestWriteThenSyncedPipelines(t *testing.T) {
	d := disk.New(1)
	j, _ := mustOpen(t, d, Config{})
	j.Append(1, []byte("a"))
	j.Append(1, []byte("b"))
	fl, err := j.Write()
	if err != nil || fl.Empty() || fl.Through() != 2 {
		t.Fatalf("Write = %+v, %v; want a batch through LSN 2", fl, err)
	}
	if lsn, err := j.Append(1, []byte("c")); err != nil || lsn != 3 {
		t.Fatalf("Append during the flight = %d, %v; want LSN 3", lsn, err)
	}
	check(t, j)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Write with a batch in flight did not panic")
			}
		}()
		_, _ = j.Write()
	}()
	if j.Durable() != 0 {
		t.Fatalf("durable %d before the sync returned", j.Durable())
	}
	if lsn, err := j.Synced(fl, fl.Sync()); err != nil || lsn != 2 {
		t.Fatalf("Synced = %d, %v; want 2", lsn, err)
	}
	check(t, j)
	if lsn, err := j.Commit(); err != nil || lsn != 3 {
		t.Fatalf("Commit of the staged record = %d, %v; want 3", lsn, err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	_, got := mustOpen(t, d, Config{})
	if len(got) != 3 {
		t.Fatalf("reopened with %d records, want 3", len(got))
	}
}

// TestSyncedFailurePoisonsAndDropsTheNextBatch: a failed sync poisons the journal, cuts the
// failed batch, and drops what was appended during its flight; a reopen finds neither.
func TestSyncedFailurePoisonsAndDropsTheNextBatch(t *testing.T) {
	d := disk.New(1)
	j, _ := mustOpen(t, d, Config{})
	commitBatch(t, j, "kept")
	j.Append(1, []byte("failed"))
	fl, err := j.Write()
	if err != nil {
		t.Fatal(err)
	}
	j.Append(1, []byte("staged"))
	lsn, err := j.Synced(fl, errors.New("simulated fsync failure"))
	if !errors.Is(err, ErrPoisoned) || lsn != 1 {
		t.Fatalf("Synced = %d, %v; want 1 and ErrPoisoned", lsn, err)
	}
	check(t, j)
	if _, err := j.Write(); !errors.Is(err, ErrPoisoned) {
		t.Fatalf("Write after the failure = %v, want ErrPoisoned", err)
	}
	_ = j.Close()
	_, got := mustOpen(t, d, Config{})
	if len(got) != 1 {
		t.Fatalf("reopened with %d records, want the 1 acknowledged", len(got))
	}
}

// TestCloseWithABatchInFlightWritesNoMark: closing with a batch in flight leaves no clean-close
// mark (the batch was never acknowledged), so the next Open judges the file as after a crash.
func TestCloseWithABatchInFlightWritesNoMark(t *testing.T) {
	d := disk.New(1)
	j, _ := mustOpen(t, d, Config{})
	commitBatch(t, j, "kept")
	j.Append(1, []byte("flying"))
	if _, err := j.Write(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// A mark would name the length without the flying batch, which the file exceeds: Open
	// would refuse. Without one, the complete unacknowledged batch is simply replayed.
	if _, err := Open(d, "j", Config{}, nil); err != nil {
		t.Fatalf("Open after a close with a batch in flight: %v", err)
	}
}
