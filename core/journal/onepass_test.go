package journal

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// readTracker is a ReaderAt that remembers how far into the file it has been read.
type readTracker struct {
	r    *bytes.Reader
	seen int64 // the end of the furthest read
}

func (t *readTracker) ReadAt(p []byte, off int64) (int, error) {
	n, err := t.r.ReadAt(p, off)
	t.seen = max(t.seen, off+int64(n))
	return n, err
}

// TestRecordsOnlyAfterTheirEndFrame: in Open's single pass a batch's records reach the replay
// function only once its end frame has been read (and validated), whatever the chunk size and
// however batches straddle chunks; a batch whose end frame is bad never reaches it, and the
// refusal is the one Scan gives.
func TestRecordsOnlyAfterTheirEndFrame(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		fb := newFile()
		var ends []int // per LSN (from 1): the end of its batch
		batches := rapid.IntRange(1, 6).Draw(t, "batches")
		for range batches {
			var data []string
			for range rapid.IntRange(1, 5).Draw(t, "records") {
				data = append(data, rapid.StringMatching(`[a-z]{0,90}`).Draw(t, "data"))
			}
			fb.batchOf(true, data...)
			for range data {
				ends = append(ends, len(fb.b))
			}
		}
		b := fb.bytes()
		badFirst := LSN(len(ends) + 1) // the first LSN of the batch whose end frame is bad
		if rapid.Bool().Draw(t, "damage an end frame") {
			lsn := rapid.IntRange(1, len(ends)).Draw(t, "in the batch of LSN")
			first := lsn
			for first > 1 && ends[first-2] == ends[lsn-1] {
				first--
			}
			for lsn < len(ends) && ends[lsn] == ends[lsn-1] {
				lsn++ // the batch's last record
			}
			badFirst = LSN(first)
			b[fb.offs[lsn-1]+frameMin-1] ^= 1 // its tag byte: the CRC fails
		}
		wantTail, wantErr := Scan(b, nil)
		chunk := rapid.SampledFrom([]int{1, 7, 64, 200, readChunk}).Draw(t, "chunk")
		rt := &readTracker{r: bytes.NewReader(b)}
		var got []LSN
		tail, err := classify(&fileSource{f: rt, n: int64(len(b)), chunk: chunk}, func(r Record) error {
			if end := int64(ends[r.LSN-1]); rt.seen < end {
				t.Fatalf("LSN %d replayed with %d bytes read, before its batch's end frame (ending at %d)", r.LSN, rt.seen, end)
			}
			if r.LSN >= badFirst {
				t.Fatalf("LSN %d replayed, of a batch whose end frame is bad (from LSN %d)", r.LSN, badFirst)
			}
			got = append(got, r.LSN)
			return nil
		}, false)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || tail != wantTail {
			t.Fatalf("one pass: %+v, %v; Scan: %+v, %v", tail, err, wantTail, wantErr)
		}
		if len(got) != tail.Records || len(got) > 0 && (got[0] != 1 || got[len(got)-1] != tail.Last) {
			t.Fatalf("replayed %v, the tail says %d records to LSN %d", got, tail.Records, tail.Last)
		}
	})
}

// TestRefusalInTheMiddle: a bad frame in the middle of a journal is refused by Open and Read
// with the same *FormatError as before the single pass (the literal below), after the replay
// function has seen the complete batches before it. If the function refused a record first,
// Open still reports the damaged frame (the file is refused for it whatever the runner thinks)
// and Read the refused record, the first damage an inspection meets.
func TestRefusalInTheMiddle(t *testing.T) {
	fb := newFile().batchOf(true, "a", "b").batchOf(true, "c", "d", "e").batchOf(true, "f").batchOf(true, "g", "h")
	b := flipByte(fb.bytes(), fb.offs[3]+frameMin) // the data of "d", LSN 4, in batch 2
	frames := &FormatError{File: "j", Offset: int64(fb.offs[3]), Before: 3, After: 6, Err: ErrCorrupt,
		Reason: fmt.Sprintf("bad frame followed by a valid frame of later batch 3 (LSN 6) at offset %d", fb.offs[5])}
	refusal := errors.New("refused by the test")
	record := &FormatError{File: "j", Offset: int64(fb.offs[0]), Before: 0, After: 1, Err: ErrCorrupt, Cause: refusal,
		Reason: "record LSN 1 (tag 1, 1 bytes) does not replay"}
	for _, tt := range []struct {
		name         string
		refuse       LSN
		open, read   *FormatError
		opened, seen []rec
	}{
		{name: "frames", open: frames, read: frames, opened: recs("a b"), seen: recs("a b")},
		{name: "a refused record before them", refuse: 1, open: frames, read: record},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := newDisk()
			writeFile(t, d, "j", b)
			replay := func(out *[]rec) func(Record) error {
				all := collect(out)
				return func(r Record) error {
					if r.LSN == tt.refuse {
						return refusal
					}
					return all(r)
				}
			}
			var opened, seen []rec
			_, oerr := Open(d, "j", Config{}, replay(&opened))
			_, rerr := Read(d, "j", Config{}, replay(&seen))
			same := cmp.Comparer(func(a, b error) bool { return a == b })
			for _, c := range []struct {
				what      string
				err       error
				want      *FormatError
				got, recs []rec
			}{{"Open", oerr, tt.open, opened, tt.opened}, {"Read", rerr, tt.read, seen, tt.seen}} {
				var fe *FormatError
				if !errors.As(c.err, &fe) {
					t.Fatalf("%s: %v, want a *FormatError", c.what, c.err)
				}
				if diff := cmp.Diff(*c.want, *fe, same); diff != "" {
					t.Errorf("%s refused with (-want +got):\n%s", c.what, diff)
				}
				if diff := cmp.Diff(c.recs, c.got); diff != "" {
					t.Errorf("%s replayed (-want +got):\n%s", c.what, diff)
				}
			}
			if diff := cmp.Diff(b, readFile(t, d, "j")); diff != "" {
				t.Errorf("the file changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestBatchesLargerThanAChunk: batches longer than a chunk, whose first frames have left the
// buffer when their end frame is validated, are read again for replay: the single pass still
// replays exactly what Scan does, and a record refused inside one is refused as Scan refuses
// it.
func TestBatchesLargerThanAChunk(t *testing.T) {
	fb := newFile()
	for b := range 40 {
		var data []string
		for r := range 1 + b*7%37 {
			data = append(data, fmt.Sprintf("%02d.%02d-%s", b, r, "xxxxxxxxxx"[:b%11]))
		}
		fb.batchOf(true, data...)
	}
	b := fb.bytes()
	for _, refuse := range []LSN{0, 1, 300, 700} {
		refusing := func(out *[]rec) func(Record) error {
			all := collect(out)
			return func(r Record) error {
				if r.LSN == refuse {
					return errors.New("refused by the test")
				}
				return all(r)
			}
		}
		var whole []rec
		wantTail, wantErr := Scan(b, refusing(&whole))
		if refuse == 0 && (wantErr != nil || len(whole) != wantTail.Records) {
			t.Fatalf("Scan: %+v, %v", wantTail, wantErr)
		}
		for _, chunk := range []int{64, 256, 1000, 4096} {
			var got []rec
			tail, err := classify(&fileSource{f: bytes.NewReader(b), n: int64(len(b)), chunk: chunk}, refusing(&got), true)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || tail != wantTail {
				t.Errorf("refuse %d, chunk %d: %+v, %v; Scan: %+v, %v", refuse, chunk, tail, err, wantTail, wantErr)
			}
			if diff := cmp.Diff(whole, got); diff != "" {
				t.Errorf("refuse %d, chunk %d: replayed (-Scan +one pass):\n%s", refuse, chunk, diff)
			}
		}
	}
}
