package journal

import (
	"errors"
	"strings"
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

// A refusal of a cleanly closed journal names one place: the offset, the LSN of the frame
// that ends there and of the one that starts there.
func TestMarkRefusalsNameOnePlace(t *testing.T) {
	three := newFile().batchOf(true, "a", "b").batchOf(true, "c").batchOf(true, "d", "e")
	closedAt := func(n int) []byte { // the first n batches, closed, then the rest of three
		fb := newFile()
		for _, d := range [][]string{{"a", "b"}, {"c"}, {"d", "e"}}[:n] {
			fb.batchOf(true, d...)
		}
		b := markClosed(fb.bytes())
		return append(b, three.b[len(b):]...)
	}
	mid := closedAt(1)
	copy(mid[markOff:], encodeMark(mark{size: int64(three.offs[2]) + 3, last: 3})) // inside LSN 3's frame
	more := newFile().batchOf(true, "a", "b").batchOf(true, "c").batchOf(true, "d", "e")
	torn := markClosed(more.bytes())
	torn = append(torn, more.batchOf(false, "f", "g").b[len(torn):]...)
	tests := []struct {
		name          string
		b             []byte
		off           int64
		before, after LSN
		reason        string
	}{
		{"grown by two batches", closedAt(1), int64(three.offs[2]), 2, 3, "LSN 3 to 5 follow the mark's length"},
		{"grown by one batch", closedAt(2), int64(three.offs[3]), 3, 4, "LSN 4 to 5 follow"},
		{"cut short", markClosed(three.bytes())[:three.offs[3]], int64(three.offs[3]), 3, 0, "the file was cut to"},
		{"mark inside a frame", mid, int64(three.offs[2]), 2, 3, "no batch ends at that length"},
		{"a batch without its end", torn, int64(len(three.b)), 5, 6, "no longer matches: batch 4 has no end flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Scan(tt.b, nil)
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("Scan: %v, want a *FormatError", err)
			}
			got := [3]int64{fe.Offset, int64(fe.Before), int64(fe.After)}
			if want := [3]int64{tt.off, int64(tt.before), int64(tt.after)}; got != want {
				t.Errorf("refusal at offset %d (LSN before %d, after %d), want %v: %v", got[0], got[1], got[2], want, err)
			}
			if !strings.Contains(fe.Reason, tt.reason) {
				t.Errorf("reason %q does not say %q", fe.Reason, tt.reason)
			}
		})
	}
}
