package journal

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// TestDamageInLastBatchIsTornElsewhereCorrupt: damage (a zeroed range or a flipped bit) that
// starts in the last batch is cut as a torn tail at that batch's start, whatever survives
// after it in the same batch (zeros to the end are the spare, kept: nothing to cut); damage that starts in an earlier batch, with later batches
// intact, is refused as corruption naming the damaged frame and the LSNs around it. In a
// cleanly closed file, damage anywhere is refused. Reading in small chunks changes nothing.
func TestDamageInLastBatchIsTornElsewhereCorrupt(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		fb := newFile()
		var batchStart []int // frame index of each batch's first frame
		for b := range rapid.IntRange(1, 5).Draw(t, "batches") {
			var data []string
			for r := range rapid.IntRange(1, 4).Draw(t, "records") {
				data = append(data, fmt.Sprintf("%d.%d-%s", b, r,
					rapid.StringMatching(`[a-z]{0,40}`).Draw(t, "data")))
			}
			batchStart = append(batchStart, len(fb.offs))
			fb.batchOf(true, data...)
		}
		frames := len(fb.offs)
		k := rapid.IntRange(0, frames-1).Draw(t, "damaged frame")
		batch := 0
		for batch+1 < len(batchStart) && batchStart[batch+1] <= k {
			batch++
		}
		lastBatch := batch == len(batchStart)-1
		end := len(fb.b)
		if k+1 < frames {
			end = fb.offs[k+1]
		}
		b := fb.bytes()
		closed := rapid.Bool().Draw(t, "closed cleanly")
		if closed {
			markClosed(b)
		}
		// The damage stays inside frame k, so every other frame is intact.
		if rapid.Bool().Draw(t, "zero") {
			from := rapid.IntRange(fb.offs[k], end-1).Draw(t, "from")
			to := rapid.IntRange(from+1, end).Draw(t, "to")
			if isZero(b[from:to]) {
				t.Skip("the range is already zero")
			}
			zeroRange(b, from, to)
		} else {
			off := rapid.IntRange(fb.offs[k], end-1).Draw(t, "off")
			b[off] ^= 1 << rapid.IntRange(0, 7).Draw(t, "bit")
		}

		if err := checkChunked(b); err != nil {
			t.Fatal(err)
		}
		tail, err := Scan(b, nil)
		start := fb.offs[batchStart[batch]]
		if closed {
			// After a clean close no crash explains any damage: refused wherever it is.
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("damage in batch %d of %d of a cleanly closed file not refused: %+v, %v",
					batch+1, len(batchStart), tail, err)
			}
			return
		}
		if lastBatch {
			want := Tail{Kind: TailTorn, Size: int64(len(b)), Cut: int64(start), Records: batchStart[batch],
				LastBatch: uint64(batch), Reason: tail.Reason, Base: headerLen}
			if isZero(b[start:]) {
				// The whole last batch zeroed reads as preallocated space (rule 16): clean.
				want.Kind, want.Spare, want.Reason = TailClean, int64(len(b)-start), ""
			}
			if batch > 0 {
				want.First, want.Last = 1, LSN(batchStart[batch])
			}
			if err != nil {
				t.Fatalf("damage in the last batch refused: %v", err)
			}
			if diff := cmp.Diff(want, tail); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			return
		}
		var fe *FormatError
		if !errors.As(err, &fe) || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("damage in batch %d of %d not refused: %+v, %v", batch+1, len(batchStart), tail, err)
		}
		want := FormatError{Offset: int64(fb.offs[k]), Before: LSN(k), After: LSN(batchStart[batch+1] + 1),
			Err: ErrCorrupt, Reason: fe.Reason}
		if diff := cmp.Diff(want, *fe, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
	})
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
