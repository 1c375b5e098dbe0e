package journal

import (
	"testing"
)

// GrownBytes counts the batches after the last snapshot as the file holds them, so a journal
// reopened before it grows by a compaction threshold still reaches it.
func TestGrownBytesIsReadFromTheFile(t *testing.T) {
	d := newDisk()
	cfg := Config{PreallocBytes: 256}
	j, _ := mustOpen(t, d, cfg)
	commitBatch(t, j, "a", "bb")
	commitBatch(t, j, "ccc")
	want := int64(3*frameMin + 6)
	if got := j.GrownBytes(); got != want {
		t.Fatalf("GrownBytes %d, want %d", got, want)
	}
	// A crash (no Close) and a clean close both keep it.
	j, _ = mustOpen(t, d, cfg)
	if got := j.GrownBytes(); got != want {
		t.Fatalf("after a reopen without Close: GrownBytes %d, want %d", got, want)
	}
	if err := j.Compact(9, []byte("snapshot")); err != nil {
		t.Fatal(err)
	}
	if got := j.GrownBytes(); got != 0 {
		t.Fatalf("after Compact: GrownBytes %d, want 0", got)
	}
	commitBatch(t, j, "dddd")
	check(t, j)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, got := mustOpen(t, d, cfg)
	defer j.Close()
	if len(got) != 2 || !got[0].Snap {
		t.Fatalf("replayed %v, want the snapshot and one record", got)
	}
	// The snapshot is not growth: only the batch after it.
	if want := int64(frameMin + 4); j.GrownBytes() != want {
		t.Fatalf("reopened compacted journal: GrownBytes %d, want %d (the batch after the snapshot)", j.GrownBytes(), want)
	}
	check(t, j)
}
