package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// TailKind says what a scan found at the end of a journal.
type TailKind uint8

const (
	// TailEmpty: no bytes at all. An empty file counts as no journal.
	TailEmpty TailKind = iota
	// TailClean: a valid header and complete batches to the end.
	TailClean
	// TailTorn: a torn tail after the last complete batch, to be cut at Tail.Cut.
	TailTorn
)

func (k TailKind) String() string {
	switch k {
	case TailEmpty:
		return "empty"
	case TailClean:
		return "clean"
	case TailTorn:
		return "torn"
	}
	return fmt.Sprintf("TailKind(%d)", uint8(k))
}

// Tail is what Scan found.
type Tail struct {
	Kind TailKind
	// Size is the number of bytes scanned.
	Size int64
	// Cut is the end of the last complete batch (the header's end when there is none).
	// Invariant: Cut <= Size, and Cut == Size unless Kind == TailTorn.
	Cut int64
	// Reason says why the tail is torn ("" unless Kind == TailTorn).
	Reason string
	// Records is the number of records in complete batches, the ones Scan replays.
	Records int
	// First and Last are the LSNs of the first and last replayed record (0 when none).
	First, Last LSN
	// LastBatch is the number of the last complete batch (0 when none).
	LastBatch uint64
	// Snapshot reports that the file was written by Compact and starts with a snapshot.
	Snapshot bool
}

// Dropped is the number of bytes after the cut.
func (t Tail) Dropped() int64 { return t.Size - t.Cut }

// FormatError is a journal that must not be opened: a bad header, or corruption of data
// that had been synced. It unwraps to ErrBadHeader or ErrCorrupt.
type FormatError struct {
	File   string // set by Open; "" from Scan
	Offset int64  // where the bad header or bad frame starts
	// Before is the LSN of the last valid frame before Offset, After the LSN of the valid
	// frame after it that proves corruption (0: none).
	Before, After LSN
	Reason        string
	Err           error // ErrBadHeader or ErrCorrupt
}

func (e *FormatError) Error() string {
	file := ""
	if e.File != "" {
		file = fmt.Sprintf(" file %q", e.File)
	}
	return fmt.Sprintf("%v:%s at offset %d (LSN before %d, after %d): %s",
		e.Err, file, e.Offset, e.Before, e.After, e.Reason)
}

func (e *FormatError) Unwrap() error { return e.Err }

// Scan classifies the bytes of a whole journal file (header included) and, when they may be
// opened, calls fn (if not nil) for every record of every complete batch, in LSN order, up to
// Tail.Cut. It never panics and never calls fn before the whole input has been classified, so
// a corrupt journal replays nothing. Record.Data aliases b.
//
// It returns a *FormatError for a bad header or corruption (rules 6 to 9 in doc.go), and fn's
// first error, wrapped.
func Scan(b []byte, fn func(Record) error) (Tail, error) {
	t, err := classify(b)
	if err != nil {
		return t, err
	}
	return t, replayPrefix(b, t, fn)
}

// replayPrefix is the second pass of Scan: it delivers the records classify validated.
func replayPrefix(b []byte, t Tail, fn func(Record) error) error {
	if fn == nil || t.Records == 0 {
		return nil
	}
	for off := headerLen; off < int(t.Cut); {
		f := decodeTrusted(b, off)
		rec := Record{LSN: f.lsn, Tag: f.tag, Snapshot: f.flags&flagSnapshot != 0, Data: f.data}
		if err := fn(rec); err != nil {
			return fmt.Errorf("journal: replaying LSN %d: %w", f.lsn, err)
		}
		off = f.next
	}
	return nil
}

// classify is the first pass of Scan: it validates every frame and finds the cut, but
// delivers nothing.
func classify(b []byte) (Tail, error) {
	t := Tail{Size: int64(len(b))}
	if len(b) == 0 {
		return t, nil
	}
	h, reason := decodeHeader(b)
	if reason != "" {
		return t, &FormatError{Offset: 0, Reason: reason, Err: ErrBadHeader}
	}
	t.Snapshot = h.flags&headerFlagSnapshot != 0
	s := scanner{b: b, tail: t, open: 0, good: headerLen}
	return s.run()
}

// scanner holds the state of one classification pass.
type scanner struct {
	b    []byte
	tail Tail
	// good is the end of the last complete batch.
	good int
	// open is the number of the batch whose frames follow good without its end flag yet
	// (0: none). Invariant: open == 0 || open == tail.LastBatch+1 (after the first batch).
	open uint64
	// last is the LSN of the last valid frame (in a complete batch or in open), valid when
	// frames > 0.
	last   LSN
	frames int // valid frames seen
	// openRecords counts the frames of the open batch.
	openRecords int
}

func (s *scanner) run() (Tail, error) {
	off := headerLen
	for {
		if off == len(s.b) {
			if s.tail.Snapshot && s.frames == 0 {
				return s.tail, s.corrupt(off, 0, "header announces a snapshot but the file has no frame")
			}
			if s.good == off {
				s.tail.Kind, s.tail.Cut = TailClean, int64(off)
				return s.tail, nil
			}
			return s.torn(fmt.Sprintf("batch %d has no end flag", s.open))
		}
		f, ok := decodeFrame(s.b, off)
		if !ok {
			return s.badFrame(off)
		}
		if err := s.accept(off, f); err != nil {
			return s.tail, err
		}
		off = f.next
	}
}

// accept checks a CRC-valid frame against the frames before it. A valid frame that does not
// follow on is corruption: torn writes damage frames, they do not forge valid ones.
func (s *scanner) accept(off int, f frame) error {
	if f.flags&^flagsKnown != 0 {
		return s.corrupt(off, f.lsn, fmt.Sprintf("unknown frame flags %#x", f.flags))
	}
	snap := f.flags&flagSnapshot != 0
	if s.frames == 0 {
		switch {
		case s.tail.Snapshot && !snap:
			return s.corrupt(off, f.lsn, "first frame is not the snapshot the header announces")
		case !s.tail.Snapshot && snap:
			return s.corrupt(off, f.lsn, "snapshot frame in a file whose header announces none")
		case snap && f.flags&flagEnd == 0:
			return s.corrupt(off, f.lsn, "snapshot frame without the end flag")
		case !snap && f.lsn != 1:
			return s.corrupt(off, f.lsn, fmt.Sprintf("first LSN is %d, want 1", f.lsn))
		case !snap && f.batch != 1:
			return s.corrupt(off, f.lsn, fmt.Sprintf("first batch is %d, want 1", f.batch))
		case f.batch == 0:
			return s.corrupt(off, f.lsn, "batch number 0")
		}
	} else {
		want := s.tail.LastBatch + 1
		if s.open != 0 {
			want = s.open
		}
		switch {
		case snap:
			return s.corrupt(off, f.lsn, "snapshot frame after the first frame")
		case f.lsn != s.last+1:
			return s.corrupt(off, f.lsn, fmt.Sprintf("LSN %d follows LSN %d", f.lsn, s.last))
		case f.batch != want:
			return s.corrupt(off, f.lsn, fmt.Sprintf("batch %d where batch %d was due", f.batch, want))
		}
	}
	s.frames++
	s.last = f.lsn
	s.open = f.batch
	s.openRecords++
	if f.flags&flagEnd != 0 {
		if s.tail.Records == 0 {
			s.tail.First = LSN(uint64(f.lsn) - uint64(s.openRecords) + 1)
		}
		s.tail.Records += s.openRecords
		s.tail.Last = f.lsn
		s.tail.LastBatch = f.batch
		s.open, s.openRecords = 0, 0
		s.good = f.next
	}
	return nil
}

// badFrame decides between a torn tail and corruption for a short or bad frame at off.
// Because batch N+1 is never written before batch N's sync returned, a valid frame of a later
// batch anywhere after off proves the bad frame had been synced: corruption. Valid frames of
// the open batch after it are an out-of-order torn write.
func (s *scanner) badFrame(off int) (Tail, error) {
	if s.tail.Snapshot && s.frames == 0 {
		// Compact syncs the snapshot before the rename makes the file visible.
		return s.tail, s.corrupt(off, 0, "bad snapshot frame")
	}
	torn := s.tail.LastBatch + 1
	if s.open != 0 {
		torn = s.open
	}
	if p, f, ok := s.findLater(off, torn); ok {
		return s.tail, s.corrupt(off, f.lsn, fmt.Sprintf(
			"bad frame followed by a valid frame of later batch %d (LSN %d) at offset %d", f.batch, f.lsn, p))
	}
	reason := fmt.Sprintf("bad or short frame at offset %d", off)
	if s.open != 0 {
		reason = fmt.Sprintf("batch %d has a bad or short frame at offset %d", s.open, off)
	}
	return s.torn(reason)
}

// findLater looks at every offset after off for a CRC-valid frame of a batch after torn.
// Cheap field checks come before the CRC so that scanning garbage stays linear in practice.
func (s *scanner) findLater(off int, torn uint64) (int, frame, bool) {
	b := s.b
	last := LSN(0)
	if s.frames > 0 {
		last = s.last
	}
	// No more frames than this can fit after off: bounds plausible batch numbers and LSNs.
	room := uint64((len(b)-off)/frameMin) + 1
	for p := off + 1; p+frameMin <= len(b); p++ {
		n := int(binary.LittleEndian.Uint32(b[p : p+4]))
		if n < payloadHdrLen || n > len(b)-p-frameHdrLen {
			continue
		}
		q := b[p+frameHdrLen:]
		lsn := binary.LittleEndian.Uint64(q[0:8])
		batch := binary.LittleEndian.Uint64(q[8:16])
		if batch <= torn || batch-torn > room || lsn <= uint64(last) || lsn-uint64(last) > room ||
			q[16]&^flagsKnown != 0 || q[16]&flagSnapshot != 0 {
			continue
		}
		if f, ok := decodeFrame(b, p); ok {
			return p, f, true
		}
	}
	return 0, frame{}, false
}

func (s *scanner) torn(reason string) (Tail, error) {
	s.tail.Kind = TailTorn
	s.tail.Cut = int64(s.good)
	s.tail.Reason = reason
	return s.tail, nil
}

func (s *scanner) corrupt(off int, after LSN, reason string) error {
	before := LSN(0)
	if s.frames > 0 {
		before = s.last
	}
	return &FormatError{Offset: int64(off), Before: before, After: after, Reason: reason, Err: ErrCorrupt}
}

var (
	// ErrCorrupt: synced data is damaged; Open refuses and truncates nothing.
	ErrCorrupt = errors.New("journal: corrupt")
	// ErrBadHeader: the file is not a journal this code can read.
	ErrBadHeader = errors.New("journal: bad header")
)
