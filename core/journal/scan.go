package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
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
	// Cut is the end of the last complete batch (the header's end when there is none); with a
	// refusal, of the last one before the damage.
	// Invariant: Cut + Spare <= Size, and Cut + Spare == Size unless Kind == TailTorn or the
	// scan refused.
	Cut int64
	// Spare is the number of zero bytes after Cut: space the journal preallocated and no
	// batch has used yet (not torn, nothing dropped). Open keeps it; Spare is 0 unless Kind
	// == TailClean.
	Spare int64
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
	// Closed reports a clean-close mark that the file matches: it was closed cleanly.
	Closed bool
	// Marked reports that the header's mark bytes are not zero (a mark, or one a crash tore
	// while Close wrote it or Open cleared it); Open clears them before it appends.
	Marked bool
}

// Dropped is the number of bytes after the cut that are not spare.
func (t Tail) Dropped() int64 { return t.Size - t.Cut - t.Spare }

// FormatError is a journal that must not be opened: a bad header, corruption of data that had
// been synced, a clean-close mark the file does not match, or a record the replay function
// refused. It unwraps to ErrCorrupt (and ErrBadHeader for a header, and the replay function's
// error when that refused).
type FormatError struct {
	File   string // set by Open and Read; "" from Scan
	Offset int64  // where the bad header, bad frame or refused record starts
	// Before is the LSN of the last valid frame before Offset, After the LSN of the valid
	// frame after it that proves corruption, or of the refused record (0: none).
	Before, After LSN
	Reason        string
	Err           error // ErrBadHeader or ErrCorrupt
	Cause         error // the replay function's error, when it refused a record
}

// advice ends every refusal: what the user can do about a journal that will not open.
const advice = "; nothing was changed. Restore the file from a backup, or move it aside to start " +
	"with an empty journal (its jobs are then lost); a read-only inspection shows the records it holds"

func (e *FormatError) Error() string {
	file := ""
	if e.File != "" {
		file = fmt.Sprintf(" file %q", e.File)
	}
	cause := ""
	if e.Cause != nil {
		cause = ": " + e.Cause.Error()
	}
	return fmt.Sprintf("%v:%s at offset %d (LSN before %d, after %d): %s%s%s",
		e.Err, file, e.Offset, e.Before, e.After, e.Reason, cause, advice)
}

func (e *FormatError) Unwrap() []error {
	errs := []error{e.Err}
	if e.Err != ErrCorrupt {
		errs = append(errs, ErrCorrupt)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}

// readChunk is how much Open and Read read at a time; with the largest frame it bounds the
// memory a scan uses, whatever the file's size.
const readChunk = 1 << 20

// source is what a scan reads: a whole file in memory (Scan) or a file read in bounded
// chunks (Open, Read).
type source interface {
	size() int64
	// at returns the n bytes at off, where off+n <= size(). The slice is valid until the next
	// call.
	at(off int64, n int) ([]byte, error)
}

type memSource []byte

func (m memSource) size() int64 { return int64(len(m)) }

func (m memSource) at(off int64, n int) ([]byte, error) {
	return m[off : off+int64(n) : off+int64(n)], nil
}

// fileSource reads a file through one buffer of readChunk bytes, grown only to hold a frame
// larger than that (a snapshot) while it is delivered.
type fileSource struct {
	f     io.ReaderAt // a core.File
	n     int64       // the file's size when the scan began
	chunk int         // bytes read at a time (tests make it small); 0 means readChunk
	buf   []byte
	base  int64 // buf holds the bytes [base, base+len(buf))
}

func (s *fileSource) size() int64 { return s.n }

func (s *fileSource) at(off int64, n int) ([]byte, error) {
	if off >= s.base && off+int64(n) <= s.base+int64(len(s.buf)) {
		p := s.buf[off-s.base:]
		return p[:n:n], nil
	}
	chunk := s.chunk
	if chunk == 0 {
		chunk = readChunk
	}
	want := int(min(int64(max(n, chunk)), s.n-off))
	if cap(s.buf) < want {
		s.buf = make([]byte, want)
	}
	s.buf = s.buf[:want]
	got, err := s.f.ReadAt(s.buf, off)
	if got < want {
		s.buf = s.buf[:0]
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("reading %d bytes at offset %d (%d read): %w", want, off, got, err)
	}
	s.base = off
	return s.buf[:n:n], nil
}

// Scan classifies the bytes of a whole journal file (header included) and, when they may be
// opened, calls fn (if not nil) for every record of every complete batch, in LSN order, up to
// Tail.Cut. It never panics and never calls fn before the whole input has been classified, so
// a corrupt journal replays nothing. Record.Data aliases b.
//
// It returns a *FormatError for a bad header, corruption or a clean-close mark the bytes do
// not match (rules 6 to 9 and 12 in doc.go), and for fn's first error.
func Scan(b []byte, fn func(Record) error) (Tail, error) {
	t, err := classify(memSource(b))
	if err != nil {
		return t, err
	}
	return t, replayPrefix(memSource(b), t, fn)
}

// replayPrefix is the second pass of a scan: it delivers the records classify validated, one
// frame in memory at a time. It trusts classify's CRCs (the journal has one owner, and CRCs
// are most of a scan's cost) but checks that each frame still fits and follows on, so a file
// changed between the two reads is refused, never half-replayed.
func replayPrefix(src source, t Tail, fn func(Record) error) error {
	if fn == nil || t.Records == 0 {
		return nil
	}
	before := LSN(0)
	for off := int64(headerLen); off < t.Cut; {
		h, err := src.at(off, min(frameMin, int(t.Cut-off)))
		if err != nil {
			return err
		}
		n := 0
		if len(h) == frameMin {
			n = int(binary.LittleEndian.Uint32(h[0:4]))
		}
		if n < payloadHdrLen || int64(n) > t.Cut-off-frameHdrLen ||
			(before != 0 && LSN(binary.LittleEndian.Uint64(h[8:16])) != before+1) {
			return &FormatError{Offset: off, Before: before, Err: ErrCorrupt,
				Reason: "a frame that was valid a moment ago no longer is: the file changed while it was read"}
		}
		fb, err := src.at(off, frameHdrLen+n)
		if err != nil {
			return err
		}
		f := decodeTrusted(fb, 0)
		rec := Record{LSN: f.lsn, Tag: f.tag, Snapshot: f.flags&flagSnapshot != 0, Data: f.data}
		if err := fn(rec); err != nil {
			return &FormatError{Offset: off, Before: before, After: f.lsn, Err: ErrCorrupt, Cause: err,
				Reason: fmt.Sprintf("record LSN %d (tag %d, %d bytes) does not replay", f.lsn, f.tag, len(f.data))}
		}
		before = f.lsn
		off += int64(f.next)
	}
	return nil
}

// classify is the first pass of a scan: it validates every frame, finds the cut and checks
// the clean-close mark, but delivers nothing. On a *FormatError other than a bad header, the
// Tail still describes the complete batches before the damage (Cut, Records, First, Last),
// which read-only inspection replays.
func classify(src source) (Tail, error) {
	size := src.size()
	t := Tail{Size: size}
	if size == 0 {
		return t, nil
	}
	hb, err := src.at(0, int(min(size, headerLen)))
	if err != nil {
		return t, err
	}
	h, reason := decodeHeader(hb)
	if reason != "" {
		return t, &FormatError{Offset: 0, Reason: reason, Err: ErrBadHeader}
	}
	t.Snapshot = h.flags&headerFlagSnapshot != 0
	t.Marked = h.marked != markNone
	s := scanner{src: src, size: size, tail: t, good: headerLen}
	t, err = s.run()
	if err != nil || h.marked != markSet {
		return t, err
	}
	return s.checkMark(h.mark)
}

// checkMark holds a cleanly closed file to its mark: exactly that length, that last LSN, and
// every frame valid (a torn tail, which a crash explains, cannot follow a clean close).
func (s *scanner) checkMark(m mark) (Tail, error) {
	t := s.tail
	closed := fmt.Sprintf("the journal was closed cleanly at %d bytes (last LSN %d), but ", m.size, m.last)
	switch {
	case t.Kind == TailTorn:
		return t, s.corruptAt(t.Cut, 0, closed+"it no longer matches: "+t.Reason)
	// Zeros past the mark's length are preallocated space that Close cut before it wrote the
	// mark, the cut not yet on disk at a crash; any other byte there is refused.
	case t.Cut < m.size:
		return t, s.corruptAt(t.Cut, 0, closed+fmt.Sprintf("the file was cut to %d bytes", t.Cut))
	case t.Cut > m.size:
		return t, s.corruptAt(m.size, 0, closed+fmt.Sprintf("the file has grown to %d bytes", t.Cut))
	case t.Last != m.last:
		return t, s.corruptAt(t.Size, 0, closed+fmt.Sprintf("its last LSN is %d", t.Last))
	}
	s.tail.Closed = true
	return s.tail, nil
}

// scanner holds the state of one classification pass.
type scanner struct {
	src  source
	size int64
	tail Tail
	// good is the end of the last complete batch.
	good int64
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
	off := int64(headerLen)
	for {
		if off == s.size {
			if s.tail.Snapshot && s.frames == 0 {
				return s.tail, s.corrupt(off, 0, "header announces a snapshot but the file has no frame")
			}
			if s.good == off {
				s.tail.Kind, s.tail.Cut = TailClean, off
				return s.tail, nil
			}
			return s.torn(fmt.Sprintf("batch %d has no end flag", s.open))
		}
		f, ok, err := s.frameAt(off)
		if err != nil {
			return s.tail, err
		}
		if !ok {
			if spare, err := s.spareAt(off); err != nil || spare {
				return s.tail, err
			}
			return s.badFrame(off)
		}
		if err := s.accept(off, f); err != nil {
			return s.tail, err
		}
		off = f.end
	}
}

// frameHead is a frame's fixed fields, and where it ends.
type frameHead struct {
	crc   uint32 // the CRC stored in the frame
	lsn   LSN
	batch uint64
	flags uint8
	end   int64
}

// head reads the fixed fields of a frame at off, without checking anything but that they fit.
func (s *scanner) head(off int64) (n int, f frameHead, ok bool, err error) {
	if s.size-off < frameMin {
		return 0, f, false, nil
	}
	b, err := s.src.at(off, frameMin)
	if err != nil {
		return 0, f, false, err
	}
	n = int(binary.LittleEndian.Uint32(b[0:4]))
	if n < payloadHdrLen || int64(n) > s.size-off-frameHdrLen {
		return 0, f, false, nil
	}
	return n, frameHead{
		crc:   binary.LittleEndian.Uint32(b[4:8]),
		lsn:   LSN(binary.LittleEndian.Uint64(b[8:16])),
		batch: binary.LittleEndian.Uint64(b[16:24]),
		flags: b[24],
		end:   off + frameHdrLen + int64(n),
	}, true, nil
}

// crcOK checks the CRC of the frame of payload length n at off, whose head f is, reading the
// payload a chunk at a time.
func (s *scanner) crcOK(off int64, n int, f frameHead) (bool, error) {
	var length [4]byte
	binary.LittleEndian.PutUint32(length[:], uint32(n))
	c := crc32.Update(0, castagnoli, length[:])
	for p, end := off+frameHdrLen, off+frameHdrLen+int64(n); p < end; {
		k := int(min(end-p, readChunk))
		b, err := s.src.at(p, k)
		if err != nil {
			return false, err
		}
		c = crc32.Update(c, castagnoli, b)
		p += int64(k)
	}
	return c == f.crc, nil
}

// frameAt decodes the frame at off and reports whether it is whole and its CRC matches.
func (s *scanner) frameAt(off int64) (frameHead, bool, error) {
	n, f, ok, err := s.head(off)
	if !ok || err != nil {
		return f, false, err
	}
	if n > readChunk {
		ok, err = s.crcOK(off, n, f)
		return f, ok, err
	}
	b, err := s.src.at(off, frameHdrLen+n)
	if err != nil {
		return f, false, err
	}
	return f, binary.LittleEndian.Uint32(b[4:8]) == frameCRC(b), nil
}

// accept checks a CRC-valid frame against the frames before it. A valid frame that does not
// follow on is corruption: torn writes damage frames, they do not forge valid ones.
func (s *scanner) accept(off int64, f frameHead) error {
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
		s.good = f.end
	}
	return nil
}

// spareAt reports whether everything from off, the end of a complete batch, to the end of
// the file is zero: preallocated space, which ends the journal cleanly. Zeros after a batch
// without its end flag are a torn tail (badFrame), and after a snapshot header with no frame,
// corruption.
func (s *scanner) spareAt(off int64) (bool, error) {
	if s.open != 0 || s.good != off || s.tail.Snapshot && s.frames == 0 {
		return false, nil
	}
	for p := off; p < s.size; {
		n := int(min(s.size-p, readChunk))
		b, err := s.src.at(p, n)
		if err != nil {
			return false, err
		}
		if !allZero(b) {
			return false, nil
		}
		p += int64(n)
	}
	s.tail.Kind, s.tail.Cut, s.tail.Spare = TailClean, off, s.size-off
	return true, nil
}

// allZero reports whether every byte of b is zero.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// badFrame decides between a torn tail and corruption for a short or bad frame at off.
// Because batch N+1 is never written before batch N's sync returned, a valid frame of a later
// batch anywhere after off proves the bad frame had been synced: corruption. Valid frames of
// the open batch after it are an out-of-order torn write.
func (s *scanner) badFrame(off int64) (Tail, error) {
	if s.tail.Snapshot && s.frames == 0 {
		// Compact syncs the snapshot before the rename makes the file visible.
		return s.tail, s.corrupt(off, 0, "bad snapshot frame")
	}
	torn := s.tail.LastBatch + 1
	if s.open != 0 {
		torn = s.open
	}
	p, f, ok, err := s.findLater(off, torn)
	if err != nil {
		return s.tail, err
	}
	if ok {
		return s.tail, s.corrupt(off, f.lsn, fmt.Sprintf(
			"bad frame followed by a valid frame of later batch %d (LSN %d) at offset %d", f.batch, f.lsn, p))
	}
	reason := fmt.Sprintf("bad or short frame at offset %d", off)
	if s.open != 0 {
		reason = fmt.Sprintf("batch %d has a bad or short frame at offset %d", s.open, off)
	}
	return s.torn(reason)
}

// findLater looks at every offset after off for a CRC-valid frame of a batch after torn,
// reading the rest of the file a chunk at a time. Cheap field checks come before the CRC so
// that scanning garbage stays linear in practice.
func (s *scanner) findLater(off int64, torn uint64) (int64, frameHead, bool, error) {
	last := LSN(0)
	if s.frames > 0 {
		last = s.last
	}
	// No more frames than this can fit after off: bounds plausible batch numbers and LSNs.
	room := uint64((s.size-off)/frameMin) + 1
	for p := off + 1; p+frameMin <= s.size; p++ {
		n, f, ok, err := s.head(p)
		if err != nil {
			return 0, f, false, err
		}
		if !ok || f.batch <= torn || f.batch-torn > room || f.lsn <= last || uint64(f.lsn-last) > room ||
			f.flags&^flagsKnown != 0 || f.flags&flagSnapshot != 0 {
			continue
		}
		if ok, err := s.crcOK(p, n, f); err != nil || ok {
			return p, f, ok, err
		}
	}
	return 0, frameHead{}, false, nil
}

func (s *scanner) torn(reason string) (Tail, error) {
	s.tail.Kind = TailTorn
	s.tail.Cut = s.good
	s.tail.Reason = reason
	return s.tail, nil
}

func (s *scanner) corrupt(off int64, after LSN, reason string) error {
	s.tail.Cut = s.good
	return s.corruptAt(off, after, reason)
}

func (s *scanner) corruptAt(off int64, after LSN, reason string) error {
	before := LSN(0)
	if s.frames > 0 {
		before = s.last
	}
	return &FormatError{Offset: off, Before: before, After: after, Reason: reason, Err: ErrCorrupt}
}

var (
	// ErrCorrupt: the journal must not be opened (synced data is damaged, a cleanly closed
	// file does not match its mark, a record does not replay); Open refuses and changes
	// nothing. Every refusal is a *FormatError wrapping it.
	ErrCorrupt = errors.New("journal: corrupt")
	// ErrBadHeader: the file is not a journal this code can read (it wraps ErrCorrupt too).
	ErrBadHeader = errors.New("journal: bad header")
)
