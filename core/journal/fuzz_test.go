package journal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fuzzSeeds are the shapes FuzzScan starts from; testdata/fuzz/FuzzScan holds the same set
// (SLUICE_WRITE_FUZZ_SEEDS=1 go test -run TestWriteFuzzSeeds rewrites it).
func fuzzSeeds() map[string][]byte {
	valid := newFile().batchOf(true, "a", "bb").batchOf(true, "ccc").batchOf(true, "d", "e", "f")
	snap := newSnapshotFile(7, 4, "state").batchOf(true, "x", "y")
	rng := rand.New(rand.NewSource(1))
	garbage := make([]byte, 200)
	rng.Read(garbage)
	seeds := map[string][]byte{
		"empty":            {},
		"header-only":      newFile().bytes(),
		"valid":            valid.bytes(),
		"valid-snapshot":   snap.bytes(),
		"torn-short":       valid.bytes()[:len(valid.b)-5],
		"torn-no-end":      newFile().batchOf(true, "a").batchOf(false, "b", "c").bytes(),
		"torn-garbage":     append(valid.bytes(), garbage[:37]...),
		"flip-last-batch":  flipByte(valid.bytes(), len(valid.b)-2),
		"flip-first-batch": flipByte(valid.bytes(), headerLen+frameMin),
		"flip-length":      flipByte(valid.bytes(), valid.offs[2]+1),
		"out-of-order":     zeroRange(valid.bytes(), valid.offs[3], valid.offs[4]),
		"zeroed-middle":    zeroRange(valid.bytes(), valid.offs[2], valid.offs[3]),
		"lsn-gap":          newFile().batchOf(true, "a").frame(3, 2, flagEnd, "c").bytes(),
		"bad-header":       flipByte(valid.bytes(), 2),
		"garbage":          garbage,
		"short-header":     valid.bytes()[:9],
		"flip-snapshot":    flipByte(snap.bytes(), headerLen+frameMin),
		"closed":           markClosed(valid.bytes()),
		"closed-flip-last": flipByte(markClosed(valid.bytes()), len(valid.b)-2),
		"closed-cut":       markClosed(valid.bytes())[:valid.offs[3]],
		"closed-snapshot":  markClosed(snap.bytes()),
		"mark-torn":        flipByte(markClosed(valid.bytes()), markOff+5),
	}
	return seeds
}

func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("SLUICE_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set SLUICE_WRITE_FUZZ_SEEDS=1 to rewrite testdata/fuzz/FuzzScan")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzScan")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range fuzzSeeds() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzScan: Scan never panics, and its result is either a clean or torn cut at a batch
// boundary (at most the input's length; the cut prefix rescans clean, replaying the same
// contiguous records; clean: only zeros after it, the spare) or a *FormatError naming an
// offset inside the input.
func FuzzScan(f *testing.F) {
	for _, b := range fuzzSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := checkScan(b); err != nil {
			t.Fatalf("%v\n%s", err, Describe(b))
		}
	})
}

// checkScan states FuzzScan's property for one input.
func checkScan(b []byte) error {
	if err := checkChunked(b); err != nil {
		return err
	}
	var got []Record
	tail, err := Scan(b, func(r Record) error { got = append(got, r); return nil })
	if err != nil {
		var fe *FormatError
		switch {
		case !errors.As(err, &fe):
			return fmt.Errorf("error %v is not a *FormatError", err)
		case !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrBadHeader):
			return fmt.Errorf("error %v is neither ErrCorrupt nor ErrBadHeader", err)
		case fe.Offset < 0 || fe.Offset > int64(len(b)) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", fe.Offset)):
			return fmt.Errorf("error %v names no offset inside %d bytes", err, len(b))
		case len(got) != 0:
			return fmt.Errorf("a refused journal replayed %d records", len(got))
		}
		return nil
	}
	switch {
	case tail.Size != int64(len(b)) || tail.Cut < 0 || tail.Cut > tail.Size:
		return fmt.Errorf("cut %d, size %d, input %d bytes", tail.Cut, tail.Size, len(b))
	case tail.Kind == TailEmpty && len(b) != 0:
		return fmt.Errorf("empty for %d bytes", len(b))
	case tail.Kind == TailClean && tail.Cut+tail.Spare != tail.Size:
		return fmt.Errorf("clean but cut at %d of %d with %d spare", tail.Cut, tail.Size, tail.Spare)
	case tail.Spare != 0 && (tail.Kind != TailClean || !allZero(b[tail.Cut:])):
		return fmt.Errorf("%v with %d spare bytes after %d", tail.Kind, tail.Spare, tail.Cut)
	case tail.Kind == TailTorn && (tail.Cut >= tail.Size || tail.Cut < headerLen || tail.Reason == ""):
		return fmt.Errorf("torn with cut %d of %d, reason %q", tail.Cut, tail.Size, tail.Reason)
	case len(got) != tail.Records:
		return fmt.Errorf("replayed %d records, tail says %d", len(got), tail.Records)
	}
	for i, r := range got {
		if i > 0 && r.LSN != got[i-1].LSN+1 {
			return fmt.Errorf("LSN %d follows %d", r.LSN, got[i-1].LSN)
		}
		if r.Snapshot != (i == 0 && tail.Snapshot) {
			return fmt.Errorf("record %d snapshot=%v", i, r.Snapshot)
		}
	}
	if len(got) > 0 && (got[0].LSN != tail.First || got[len(got)-1].LSN != tail.Last) {
		return fmt.Errorf("replayed LSN %d..%d, tail says %d..%d", got[0].LSN, got[len(got)-1].LSN, tail.First, tail.Last)
	}
	if tail.Kind == TailTorn {
		again, err := Scan(b[:tail.Cut], nil)
		if err != nil || again.Kind != TailClean || again.Records != tail.Records || again.Last != tail.Last {
			return fmt.Errorf("rescanning the cut prefix: %+v, %v", again, err)
		}
	}
	_ = Describe(b)
	return nil
}

// checkChunked: reading the file in small chunks in one pass (as Open does, with readChunk)
// classifies exactly as scanning it whole in memory and delivers what Scan replays; refused
// for its frames, it has delivered exactly the complete batches before the damage, as Read
// promises (Scan delivers nothing then).
func checkChunked(b []byte) error {
	var whole, chunked, prefix []rec
	wantTail, wantErr := Scan(b, collect(&whole))
	if wantErr != nil && !errors.Is(wantErr, ErrBadHeader) {
		if _, err := replayRange(memSource(b), headerLen, wantTail.Cut, 0, collect(&prefix)); err != nil {
			return fmt.Errorf("replaying the batches before the damage: %v", err)
		}
		whole = prefix
	}
	if len(whole) != wantTail.Records {
		return fmt.Errorf("%d records before the cut, the tail says %d", len(whole), wantTail.Records)
	}
	for _, chunk := range []int{1, 7, 64} {
		chunked = chunked[:0]
		src := &fileSource{f: bytes.NewReader(b), n: int64(len(b)), chunk: chunk}
		tail, err := classify(src, collect(&chunked), false)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			return fmt.Errorf("chunk %d: error %v, whole in memory %v", chunk, err, wantErr)
		}
		if tail != wantTail || !slices.Equal(chunked, whole) {
			return fmt.Errorf("chunk %d: %+v %v, whole in memory %+v %v", chunk, tail, chunked, wantTail, whole)
		}
	}
	return nil
}
