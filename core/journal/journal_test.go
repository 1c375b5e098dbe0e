package journal

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/sim/disk"
	"github.com/sluicehq/sluice/sim/faults"
)

func TestAppendCommitReopen(t *testing.T) {
	d := disk.New(1)
	j, got := mustOpen(t, d, Config{PreallocBytes: -1}) // every batch appended
	if len(got) != 0 {
		t.Fatalf("new journal replayed %v", got)
	}
	if lsn, err := j.Commit(); err != nil || lsn != 0 {
		t.Fatalf("empty Commit = %d, %v; want 0, nil", lsn, err)
	}
	ops := d.Ops()
	if lsn, _ := j.Append(7, []byte("x")); lsn != 1 {
		t.Fatalf("first LSN %d", lsn)
	}
	if d.Ops() != ops {
		t.Fatalf("Append touched the disk: %d ops", d.Ops()-ops)
	}
	if j.Buffered() != 1 || j.Durable() != 0 {
		t.Fatalf("Buffered %d Durable %d", j.Buffered(), j.Durable())
	}
	if lsn := commitBatch(t, j, "y", "z"); lsn != 3 {
		t.Fatalf("Commit = %d, want 3", lsn)
	}
	// Group commit: one write and one sync for the batch.
	if n := d.Ops() - ops; n != 2 {
		t.Fatalf("Commit of one batch took %d disk ops, want 2 (write, sync)", n)
	}
	commitBatch(t, j, "w")
	if g := j.GrownBytes(); g != int64(4*frameMin+4) {
		t.Fatalf("GrownBytes %d, want %d", g, 4*frameMin+4)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(1, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	j, got = mustOpen(t, d, Config{})
	want := []rec{{1, 7, false, "x"}, {2, 1, false, "y"}, {3, 1, false, "z"}, {4, 1, false, "w"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("replay (-want +got):\n%s", diff)
	}
	// The growth is read from the file: a restart does not reset it.
	if j.Durable() != 4 || j.GrownBytes() != int64(4*frameMin+4) {
		t.Fatalf("after reopen Durable %d GrownBytes %d, want 4 and %d", j.Durable(), j.GrownBytes(), 4*frameMin+4)
	}
	if lsn := commitBatch(t, j, "v"); lsn != 5 {
		t.Fatalf("LSN after reopen %d, want 5", lsn)
	}
	// The file holds batches 1 to 3.
	if s := Describe(readFile(t, d, "j")); !strings.Contains(s, "lsn=5 batch=3 tag=1 end") {
		t.Fatalf("dump:\n%s", s)
	}
}

func TestAppendTooLargeWritesNothing(t *testing.T) {
	d := disk.New(1)
	j, _ := mustOpen(t, d, Config{RecordMax: 10, SnapshotMax: 20})
	if _, err := j.Append(1, make([]byte, 10)); err != nil {
		t.Fatalf("Append at RecordMax: %v", err)
	}
	size, ops := j.size, d.Ops()
	if _, err := j.Append(1, make([]byte, 11)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Append over RecordMax: %v, want ErrTooLarge", err)
	}
	if j.Buffered() != 1 || d.Ops() != ops || j.size != size {
		t.Fatalf("a refused Append changed state: buffered %d, ops +%d", j.Buffered(), d.Ops()-ops)
	}
	check(t, j)
	if lsn, err := j.Commit(); err != nil || lsn != 1 {
		t.Fatalf("Commit after a refused Append = %d, %v", lsn, err)
	}
	if err := j.Compact(1, make([]byte, 21)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Compact over SnapshotMax: %v", err)
	}
	if err := j.Compact(1, make([]byte, 20)); err != nil {
		t.Fatalf("Compact at SnapshotMax: %v", err)
	}
}

// TestPoisoning: a failed write or sync poisons the journal; later calls name the first
// failure; a reopen recovers every acknowledged record and none of the failed batch.
func TestPoisoning(t *testing.T) {
	for _, op := range []disk.Op{disk.OpWrite, disk.OpSync} {
		t.Run(op.String(), func(t *testing.T) {
			d := disk.New(1)
			j, _ := mustOpen(t, d, Config{})
			commitBatch(t, j, "a", "b")
			j.Append(1, []byte("lost"))
			d.FailNext(op, nil)
			lsn, err := j.Commit()
			if !errors.Is(err, ErrPoisoned) || !errors.Is(err, disk.ErrInjected) || lsn != 2 {
				t.Fatalf("Commit = %d, %v; want 2 and ErrPoisoned wrapping ErrInjected", lsn, err)
			}
			check(t, j)
			ops := d.Ops()
			for name, call := range map[string]func() error{
				"Append":  func() error { _, err := j.Append(1, nil); return err },
				"Commit":  func() error { _, err := j.Commit(); return err },
				"Compact": func() error { return j.Compact(1, nil) },
			} {
				err := call()
				if !errors.Is(err, ErrPoisoned) || !errors.Is(err, disk.ErrInjected) ||
					!strings.Contains(err.Error(), "batch 2 (LSN 3 to 3)") {
					t.Errorf("%s on a poisoned journal: %v", name, err)
				}
			}
			if d.Ops() != ops {
				t.Errorf("a poisoned journal touched the disk (%d ops)", d.Ops()-ops)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			// Reopen in the same process, then crash: the failed batch was cut and the cut
			// synced, so it neither replays now nor reappears later.
			j2, got := mustOpen(t, d, Config{})
			if diff := cmp.Diff(recs("a b"), got); diff != "" {
				t.Fatalf("reopen (-want +got):\n%s", diff)
			}
			commitBatch(t, j2, "c")
			d.Crash()
			_, got = mustOpen(t, d, Config{})
			if diff := cmp.Diff(recs("a b c"), got); diff != "" {
				t.Fatalf("after a crash (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCompactOutcomes: kept (a failure before the rename) leaves the old journal in use;
// lost (after it) poisons; either way a reopen finds the same state.
func TestCompactOutcomes(t *testing.T) {
	tests := []struct {
		fail     disk.Op
		poisoned bool
	}{
		{disk.OpCreate, false},
		{disk.OpWrite, false},
		{disk.OpSync, false},
		{disk.OpRename, false},
		{disk.OpSyncDir, true},
	}
	for _, tt := range tests {
		t.Run(tt.fail.String(), func(t *testing.T) {
			d := disk.New(1)
			j, _ := mustOpen(t, d, Config{})
			commitBatch(t, j, "a", "b")
			d.FailNext(tt.fail, nil)
			err := j.Compact(9, []byte("a b"))
			if !errors.Is(err, disk.ErrInjected) || errors.Is(err, ErrPoisoned) != tt.poisoned {
				t.Fatalf("Compact: %v; want ErrInjected, poisoned=%v", err, tt.poisoned)
			}
			check(t, j)
			var want []rec
			if tt.poisoned {
				want = []rec{{2, 9, true, "a b"}}
			} else {
				// Kept: the old journal stands and takes more batches.
				commitBatch(t, j, "c")
				want = recs("a b c")
				if names, _ := d.List(); !cmp.Equal(names, []string{"j"}) {
					t.Errorf("after a kept compaction the directory holds %v", names)
				}
			}
			j.Close()
			_, got := mustOpen(t, d, Config{})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("reopen (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompactThenAppend(t *testing.T) {
	d := disk.New(1)
	j, _ := mustOpen(t, d, Config{})
	commitBatch(t, j, "a", "b")
	if err := j.Compact(9, []byte("a b")); err != nil {
		t.Fatal(err)
	}
	check(t, j)
	if j.GrownBytes() != 0 {
		t.Fatalf("GrownBytes after Compact = %d", j.GrownBytes())
	}
	commitBatch(t, j, "c")
	d.Crash()
	_, got := mustOpen(t, d, Config{})
	want := []rec{{2, 9, true, "a b"}, {3, 1, false, "c"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestCompactWithBufferedRecordsPanics(t *testing.T) {
	j, _ := mustOpen(t, disk.New(1), Config{})
	j.Append(1, nil)
	defer func() {
		if recover() == nil {
			t.Fatal("Compact with buffered records did not panic")
		}
	}()
	j.Compact(1, nil)
}

var errDirSync = errors.New("directory fsync failed after the rename")

// TestCompactRenameErrorAfterTheRenameIsLost: a Rename that fails after replacing the journal
// (the old file is unlinked) must not count as kept: appending to the old, unlinked file would
// acknowledge records no reopen can find. The journal poisons itself (lost), and a reopen
// finds the snapshot.
func TestCompactRenameErrorAfterTheRenameIsLost(t *testing.T) {
	d := disk.New(1)
	j, _ := mustOpen(t, d, Config{})
	commitBatch(t, j, "a", "b")
	d.FailAfter(disk.OpRename, errDirSync) // renames, then fails: osfs when its dir fsync fails
	err := j.Compact(9, []byte("a b"))
	if !errors.Is(err, errDirSync) || !errors.Is(err, ErrPoisoned) {
		t.Fatalf("Compact = %v; want the rename's error and ErrPoisoned (lost)", err)
	}
	if _, err := j.Append(1, []byte("c")); !errors.Is(err, ErrPoisoned) {
		t.Fatalf("Append after a lost compaction = %v; want ErrPoisoned", err)
	}
	j.Close()
	_, got := mustOpen(t, d, Config{})
	if diff := cmp.Diff([]rec{{2, 9, true, "a b"}}, got); diff != "" {
		t.Errorf("reopen (-want +got):\n%s", diff)
	}
}

// TestShortMarkWriteIsAnError: a port that writes part of the clean-close mark (or of its
// clearing) and reports no error must not be believed. A clearing that left the mark whole
// would otherwise let the journal take appends under a mark that no longer matches, and the
// next Open would refuse a healthy journal as corruption.
func TestShortMarkWriteIsAnError(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		d := disk.New(seed)
		j, _ := mustOpen(t, d, Config{})
		commitBatch(t, j, "a", "b")
		d.SetFaults(faults.Disk{ShortWrite: 1})
		if err := j.Close(); !errors.Is(err, io.ErrShortWrite) {
			t.Fatalf("seed %d: Close with a silently short mark write returned %v, want io.ErrShortWrite", seed, err)
		}
		d.SetFaults(faults.Disk{})
		j, _ = mustOpen(t, d, Config{}) // a torn mark counts as none
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		before := string(readFile(t, d, "j"))
		d.SetFaults(faults.Disk{ShortWrite: 1})
		if _, err := Open(d, "j", Config{}, nil); !errors.Is(err, io.ErrShortWrite) {
			t.Fatalf("seed %d: Open clearing the mark with a silently short write returned %v, want io.ErrShortWrite", seed, err)
		}
		d.SetFaults(faults.Disk{})
		if after := string(readFile(t, d, "j")); after[:markOff] != before[:markOff] || after[markOff+markLen:] != before[markOff+markLen:] {
			t.Fatalf("seed %d: the refused clearing changed more than the mark", seed)
		}
	}
}
