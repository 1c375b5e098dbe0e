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
	// Base is where the journal's growth starts: the end of the snapshot frame in a file
	// written by Compact, else the end of the header. Cut - Base is what the batches after
	// the last snapshot take (Journal.GrownBytes at open).
	Base int64
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
	// Before is the LSN of the last valid frame that ends at or before Offset. After is the
	// LSN of the frame at Offset (a frame that does not follow on, the refused record, the
	// first past a clean-close mark's length), or, for a bad frame, of the valid frame of a
	// later batch that proves it corrupt, whose offset the Reason names (0: none).
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

// readChunk is how much Open and Read read at a time; with holdChunks and the largest frame it
// bounds the memory a scan uses, whatever the file's size.
const readChunk = 1 << 20

// holdChunks is how many chunks the buffer grows to, at most, to keep a batch not yet complete
// (so that it is replayed from memory once its end frame is valid); a longer batch is read
// again for replay.
const holdChunks = 4

// source is what a scan reads: a whole file in memory (Scan) or a file read in bounded
// chunks (Open, Read).
type source interface {
	size() int64
	// at returns the n bytes at off, where off+n <= size(). The slice is valid until the next
	// call.
	at(off int64, n int) ([]byte, error)
	// hold is at that also keeps the bytes from keep (<= off) buffered when they are and fit
	// holdChunks chunks with the n asked for: the frames of a batch whose end is still to come.
	hold(keep, off int64, n int) ([]byte, error)
	// window returns every byte buffered and the offset of the first, so that a scan walks the
	// frames in it without a call per frame. It is valid until the next at or hold.
	window() ([]byte, int64)
}

type memSource []byte

func (m memSource) size() int64 { return int64(len(m)) }

func (m memSource) at(off int64, n int) ([]byte, error) {
	return m[off : off+int64(n) : off+int64(n)], nil
}

func (m memSource) hold(_, off int64, n int) ([]byte, error) { return m.at(off, n) }

func (m memSource) window() ([]byte, int64) { return m, 0 }

// fileSource reads a file through one buffer of readChunk bytes, grown only to hold a batch
// not yet complete (up to holdChunks of them) or a frame larger than that (a snapshot) while
// it is delivered.
type fileSource struct {
	f     io.ReaderAt // a core.File
	n     int64       // the file's size when the scan began
	chunk int         // bytes read at a time (tests make it small); 0 means readChunk
	buf   []byte
	base  int64 // buf holds the bytes [base, base+len(buf))
}

func (s *fileSource) size() int64 { return s.n }

func (s *fileSource) window() ([]byte, int64) { return s.buf, s.base }

func (s *fileSource) at(off int64, n int) ([]byte, error) { return s.hold(off, off, n) }

func (s *fileSource) hold(keep, off int64, n int) ([]byte, error) {
	if off >= s.base && off+int64(n) <= s.base+int64(len(s.buf)) {
		p := s.buf[off-s.base:]
		return p[:n:n], nil
	}
	chunk := s.chunk
	if chunk == 0 {
		chunk = readChunk
	}
	start, want, kept := off, int(min(int64(max(n, chunk)), s.n-off)), 0
	// The kept bytes move to the front of the buffer: read once, and validated as read. For a
	// batch longer than a chunk the buffer grows, up to holdChunks of them.
	if k, need := s.base+int64(len(s.buf))-keep, off+int64(n)-keep; keep < off && keep >= s.base && k > 0 &&
		need <= int64(holdChunks*chunk) {
		want = chunk
		if need > int64(chunk) {
			want = int(min(need+int64(chunk)/2, int64(holdChunks*chunk)))
		}
		want = int(min(int64(want), s.n-keep))
		start, kept = keep, int(k)
	}
	buf := s.buf
	if cap(buf) < want {
		buf = make([]byte, max(want, min(2*cap(buf), holdChunks*chunk)))
	}
	buf = buf[:want]
	if kept > 0 {
		copy(buf, s.buf[start-s.base:])
	}
	got, err := s.f.ReadAt(buf[kept:], start+int64(kept))
	if got < want-kept {
		s.buf = buf[:0]
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("reading %d bytes at offset %d (%d read): %w", want-kept, start+int64(kept), got, err)
	}
	s.buf, s.base = buf, start
	p := buf[off-start:]
	return p[:n:n], nil
}

// Scan classifies the bytes of a whole journal file (header included) and, when they may be
// opened, calls fn (if not nil) for every record of every complete batch, in LSN order, up to
// Tail.Cut. It never panics and never calls fn before the whole input has been classified, so
// a corrupt journal replays nothing. Record.Data aliases b.
//
// It returns a *FormatError for a bad header, corruption or a clean-close mark the bytes do
// not match (rules 6 to 9 and 12 in doc.go), and for fn's first error.
func Scan(b []byte, fn func(Record) error) (Tail, error) {
	t, err := classify(memSource(b), nil, false)
	if err != nil || fn == nil || t.Records == 0 {
		return t, err
	}
	_, err = replayRange(memSource(b), headerLen, t.Cut, 0, fn)
	return t, err
}

// replayRange delivers the records of the complete batches in [from, to), which a scan
// validated, one frame in memory at a time, and returns the last LSN delivered (before if
// none). It trusts the scan's CRCs (the journal has one owner, and CRCs are most of a scan's
// cost) but checks that each frame still fits and follows on, so a file changed between the
// two reads is refused, never half-replayed.
func replayRange(src source, from, to int64, before LSN, fn func(Record) error) (LSN, error) {
	for off := from; off < to; {
		h, err := src.at(off, min(frameMin, int(to-off)))
		if err != nil {
			return before, err
		}
		n := 0
		if len(h) == frameMin {
			n = int(binary.LittleEndian.Uint32(h[0:4]))
		}
		if n < payloadHdrLen || int64(n) > to-off-frameHdrLen ||
			(before != 0 && LSN(binary.LittleEndian.Uint64(h[8:16])) != before+1) {
			return before, &FormatError{Offset: off, Before: before, Err: ErrCorrupt,
				Reason: "a frame that was valid a moment ago no longer is: the file changed while it was read"}
		}
		fb, err := src.at(off, frameHdrLen+n)
		if err != nil {
			return before, err
		}
		f := decodeTrusted(fb, 0)
		rec := Record{LSN: f.lsn, Tag: f.tag, Snapshot: f.flags&flagSnapshot != 0, Data: f.data}
		if err := fn(rec); err != nil {
			return before, refusedRecord(off, before, rec, err)
		}
		before = f.lsn
		off += int64(f.next)
	}
	return before, nil
}

// refusedRecord is the refusal of a record the replay function refused.
func refusedRecord(off int64, before LSN, r Record, err error) error {
	return &FormatError{Offset: off, Before: before, After: r.LSN, Err: ErrCorrupt, Cause: err,
		Reason: fmt.Sprintf("record LSN %d (tag %d, %d bytes) does not replay", r.LSN, r.Tag, len(r.Data))}
}

// classify validates every frame, finds the cut and checks the clean-close mark in one pass
// and, with fn, delivers the records of each complete batch once its end frame is valid
// (Open, Read; Scan classifies with none first). On a *FormatError other than a bad header,
// the Tail still describes the complete batches before the damage (Cut, Records, First,
// Last), the ones delivered.
//
// After fn's first refusal nothing more is delivered but the scan goes on: a refusal of the
// frames outranks it, unless inspect (Read: fn's is the first damage it met, as a replay of
// the batches before the damage would find).
func classify(src source, fn func(Record) error, inspect bool) (Tail, error) {
	size := src.size()
	t := Tail{Size: size}
	if size == 0 {
		return t, nil
	}
	t.Base = headerLen
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
	s := scanner{src: src, size: size, tail: t, good: headerLen, fn: fn, markEnd: headerLen}
	if h.marked == markSet {
		s.markAt = h.mark.size
	}
	t, err = s.run()
	if err == nil && h.marked == markSet {
		t, err = s.checkMark(h.mark)
	}
	if s.refused != nil {
		if _, frames := err.(*FormatError); err == nil || inspect && frames {
			err = s.refused
		}
	}
	return t, err
}

// checkMark holds a cleanly closed file to its mark: exactly that length, that last LSN, and
// every frame valid (a torn tail, which a crash explains, cannot follow a clean close). Each
// refusal names one place: its offset, the LSN of the frame that ends there and of the one
// that starts there (0: none).
func (s *scanner) checkMark(m mark) (Tail, error) {
	t := s.tail
	closed := fmt.Sprintf("the journal was closed cleanly at %d bytes (last LSN %d), but ", m.size, m.last)
	switch {
	case t.Kind == TailTorn:
		after := LSN(0)
		if s.frames > 0 && s.last > t.Last {
			after = t.Last + 1 // the first frame of the batch without its end
		}
		return t, s.refuseAt(t.Cut, t.Last, after, closed+"it no longer matches: "+t.Reason)
	// Zeros past the mark's length are preallocated space that Close cut before it wrote the
	// mark, the cut not yet on disk at a crash; any other byte there is refused.
	case t.Cut < m.size:
		return t, s.refuseAt(t.Cut, t.Last, 0, closed+fmt.Sprintf("the file was cut to %d bytes", t.Cut))
	case t.Cut > m.size && s.markEnd == m.size:
		return t, s.refuseAt(m.size, s.markLast, s.markLast+1, closed+fmt.Sprintf(
			"the file has grown to %d bytes: LSN %d to %d follow the mark's length", t.Cut, s.markLast+1, t.Last))
	case t.Cut > m.size:
		return t, s.refuseAt(s.markEnd, s.markLast, s.markLast+1, closed+fmt.Sprintf(
			"no batch ends at that length (the last before it ends here) and the file has grown to %d bytes", t.Cut))
	case t.Last != m.last:
		return t, s.refuseAt(t.Cut, t.Last, 0, closed+fmt.Sprintf("its last LSN is %d", t.Last))
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

	// fn receives the records of each complete batch (nil: none); delivered is the LSN of
	// the last it took, refused its first refusal, after which it receives nothing.
	fn        func(Record) error
	delivered LSN
	refused   error

	// markAt is the length a clean-close mark records (0: none); markEnd is the end of the
	// last complete batch at or before it and markLast that batch's last LSN (the header's
	// end and 0 when none), so a refusal names the place the mark points to.
	markAt, markEnd int64
	markLast        LSN

	// crcLen and crcHead cache the CRC state after a frame's length field, for the payload
	// length seen last: in a journal of like records it rarely changes.
	crcLen  int
	crcHead uint32
}

func (s *scanner) run() (Tail, error) {
	off := int64(headerLen)
	for {
		next, err := s.walk(off)
		if err != nil {
			return s.tail, err
		}
		off = next
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

// walk takes the frames buffered from off on that follow on plainly (CRC-valid, after the
// first frame, no flag but the end flag, the next LSN, the due batch) without a call per
// frame, and returns the offset of the first it leaves to frameAt and accept, which decide
// every other case (their errors included).
func (s *scanner) walk(off int64) (int64, error) {
	b, base := s.src.window()
	if s.frames == 0 || off < base || off > base+int64(len(b)) {
		return off, nil
	}
	p := int(off - base)
	for {
		rest := b[p:]
		if len(rest) < frameMin {
			break
		}
		n := int(binary.LittleEndian.Uint32(rest))
		if n < payloadHdrLen || n > len(rest)-frameHdrLen {
			break
		}
		f := rest[:frameHdrLen+n]
		if n != s.crcLen {
			s.crcLen, s.crcHead = n, crc32.Update(0, castagnoli, f[:4])
		}
		if crc32.Update(s.crcHead, castagnoli, f[frameHdrLen:]) != binary.LittleEndian.Uint32(f[4:8]) {
			break
		}
		lsn := LSN(binary.LittleEndian.Uint64(f[8:16]))
		batch := binary.LittleEndian.Uint64(f[16:24])
		flags := f[24]
		want := s.open
		if want == 0 {
			want = s.tail.LastBatch + 1
		}
		if flags&^flagEnd != 0 || lsn != s.last+1 || batch != want {
			break
		}
		s.frames++
		s.last = lsn
		s.open = batch
		s.openRecords++
		p += len(f)
		if flags&flagEnd != 0 {
			if err := s.complete(base + int64(p)); err != nil {
				return base + int64(p), err
			}
			if nb, nbase := s.src.window(); nbase != base || len(nb) != len(b) {
				return base + int64(p), nil // delivery read the batch again
			}
		}
	}
	return base + int64(p), nil
}

// frameHead is a frame's fixed fields, and where it ends.
type frameHead struct {
	crc   uint32 // the CRC stored in the frame
	lsn   LSN
	batch uint64
	flags uint8
	end   int64
}

// head reads the fixed fields of a frame at off, without checking anything but that they
// fit; the bytes from keep stay buffered if they can (the open batch's).
func (s *scanner) head(off, keep int64) (n int, f frameHead, ok bool, err error) {
	if s.size-off < frameMin {
		return 0, f, false, nil
	}
	b, err := s.src.hold(keep, off, frameMin)
	if err != nil {
		return 0, f, false, err
	}
	n, f = parseHead(b, off)
	if n < payloadHdrLen || int64(n) > s.size-off-frameHdrLen {
		return 0, f, false, nil
	}
	return n, f, true, nil
}

// parseHead decodes the fixed fields of the frame at off from b, at least frameMin bytes
// from its start.
func parseHead(b []byte, off int64) (int, frameHead) {
	n := int(binary.LittleEndian.Uint32(b[0:4]))
	return n, frameHead{
		crc:   binary.LittleEndian.Uint32(b[4:8]),
		lsn:   LSN(binary.LittleEndian.Uint64(b[8:16])),
		batch: binary.LittleEndian.Uint64(b[16:24]),
		flags: b[24],
		end:   off + frameHdrLen + int64(n),
	}
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

// frameAt decodes the frame at off and reports whether it is whole and its CRC matches,
// keeping the open batch's frames buffered when they fit holdChunks chunks.
func (s *scanner) frameAt(off int64) (frameHead, bool, error) {
	n, f, ok, err := s.head(off, s.good)
	if !ok || err != nil {
		return f, false, err
	}
	if n > readChunk {
		ok, err = s.crcOK(off, n, f)
		return f, ok, err
	}
	b, err := s.src.hold(s.good, off, frameHdrLen+n)
	if err != nil {
		return f, false, err
	}
	// The fields come from the bytes the CRC covers, read again if the frame left the buffer.
	if m, g := parseHead(b, off); m == n {
		return g, g.crc == frameCRC(b), nil
	}
	return f, false, nil
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
		return s.complete(f.end)
	}
	return nil
}

// complete ends the open batch, whose end frame (the last valid one) ends at end, and
// delivers its records.
func (s *scanner) complete(end int64) error {
	if s.tail.Records == 0 {
		s.tail.First = LSN(uint64(s.last) - uint64(s.openRecords) + 1)
		if s.tail.Snapshot {
			s.tail.Base = end
		}
	}
	s.tail.Records += s.openRecords
	s.tail.Last = s.last
	if end <= s.markAt {
		s.markEnd, s.markLast = end, s.last
	}
	s.tail.LastBatch = s.open
	start := s.good
	s.open, s.openRecords = 0, 0
	s.good = end
	return s.deliver(start, end)
}

// deliver hands fn the records of the complete batch [start, end): from the buffer, which
// holds the bytes just validated, or, for a batch longer than the buffer keeps, read again.
// A refusal by fn is kept (s.refused), not returned: the scan classifies on.
func (s *scanner) deliver(start, end int64) error {
	if s.fn == nil || s.refused != nil {
		return nil
	}
	b, base := s.src.window()
	if start < base || end > base+int64(len(b)) {
		last, err := replayRange(s.src, start, end, s.delivered, s.fn)
		s.delivered = last
		if fe, ok := err.(*FormatError); ok && fe.Cause != nil {
			s.refused, err = err, nil
		}
		return err
	}
	for p, q := int(start-base), int(end-base); p < q; {
		f := b[p : p+frameHdrLen+int(binary.LittleEndian.Uint32(b[p:]))]
		r := Record{LSN: LSN(binary.LittleEndian.Uint64(f[8:16])), Tag: f[25],
			Snapshot: f[24]&flagSnapshot != 0, Data: f[frameMin:len(f):len(f)]}
		if err := s.fn(r); err != nil {
			s.refused = refusedRecord(base+int64(p), s.delivered, r, err)
			return nil
		}
		s.delivered = r.LSN
		p += len(f)
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
		n, f, ok, err := s.head(p, p)
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
	return s.refuseAt(off, before, after, reason)
}

// refuseAt is the refusal at off, between the frames of LSN before and after (0: none).
func (s *scanner) refuseAt(off int64, before, after LSN, reason string) error {
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
