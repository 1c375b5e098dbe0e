package journal

import (
	"testing"

	"github.com/sluicehq/sluice/sim/disk"
)

// fileSize is the length of d's file "j", unsynced writes included.
func fileSize(t *testing.T, d *disk.Disk) int64 {
	t.Helper()
	n, err := d.Stat("j")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPreallocBatchesOverwriteSpareWithOneWriteAndOneSync: the first batch extends the file by
// PreallocBytes of zeros, later batches that fit overwrite them (one write, one sync, the file
// size unchanged), and the one that no longer fits extends it again.
func TestPreallocBatchesOverwriteSpareWithOneWriteAndOneSync(t *testing.T) {
	d := disk.New(1)
	j, _ := mustOpen(t, d, Config{PreallocBytes: 100})
	ops := d.Ops()
	commitBatch(t, j, "a")
	if n := d.Ops() - ops; n != 3 {
		t.Fatalf("first batch took %d disk ops, want 3 (extend, write, sync)", n)
	}
	end := int64(headerLen + frameMin + 1)
	if got := fileSize(t, d); got != end+100 {
		t.Fatalf("file is %d bytes after the first batch, want %d (its end plus 100 spare)", got, end+100)
	}
	for range 3 { // 3 frames of 27 bytes fit in the 100 spare
		ops = d.Ops()
		commitBatch(t, j, "b")
		if n := d.Ops() - ops; n != 2 {
			t.Fatalf("a batch inside the spare took %d disk ops, want 2 (write, sync)", n)
		}
		end += frameMin + 1
		if got := fileSize(t, d); got != int64(headerLen+frameMin+1+100) {
			t.Fatalf("a batch inside the spare changed the file size to %d", got)
		}
	}
	commitBatch(t, j, "c")
	end += frameMin + 1
	if got := fileSize(t, d); got != end+100 {
		t.Fatalf("file is %d bytes after the batch past the spare, want %d", got, end+100)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, d); got != end {
		t.Fatalf("closed file is %d bytes, want exactly its batches (%d)", got, end)
	}
	_, got := mustOpen(t, d, Config{PreallocBytes: 100})
	if len(got) != 5 {
		t.Fatalf("reopen replayed %d records, want 5", len(got))
	}
}

// TestPreallocNeverExtendsPastJournalMax: the spare stops at JournalMax; a batch that needs
// more room than is left still gets it (Append's bound is on the batches), and appends once
// the spare is used up.
func TestPreallocNeverExtendsPastJournalMax(t *testing.T) {
	d := disk.New(1)
	cfg := Config{RecordMax: 100, SnapshotMax: 100, PreallocBytes: 1 << 20}
	limit := journalMaxLeast(cfg.withDefaults())
	cfg.JournalMax = limit
	j, _ := mustOpen(t, d, cfg)
	commitBatch(t, j, "a")
	if got := fileSize(t, d); got != limit {
		t.Fatalf("file is %d bytes, want the spare cut at JournalMax (%d)", got, limit)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPreallocOffAppendsEveryBatch: a negative PreallocBytes writes no zeros.
func TestPreallocOffAppendsEveryBatch(t *testing.T) {
	d := disk.New(1)
	j, _ := mustOpen(t, d, Config{PreallocBytes: -1})
	commitBatch(t, j, "a")
	if got, want := fileSize(t, d), int64(headerLen+frameMin+1); got != want {
		t.Fatalf("file is %d bytes, want %d (no spare)", got, want)
	}
}
