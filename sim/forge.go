package sim

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/bits"
	"math/rand"
	"slices"

	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/core/runner"
)

// Forged damage: synced bytes rewritten so that every checksum still matches, as a buggy
// writer, a wrong copy or a bad restore would leave them. The journal's CRCs cannot see it;
// its frame rules (LSN and batch order, flags), the runner's record decoding or its replay
// rules must, and the corruption-refused rule checks that open refuses the file naming
// corruption. The forger knows the journal's frame layout (length u32 | crc u32 | lsn u64 |
// batch u64 | flags u8 | tag u8 | data, CRC-32C over the length and everything after the
// crc) and the runner's codec only as far as its leading fields (version u8, id u64, then
// an attempt u32, an enqueue's due u64 and target length u32, a finish's kind u8 and
// retryable bool; a snapshot's version u8, next id u64, term seq u64, job count u32, then
// jobs starting id u64, state u8) and the fixed sizes of its short records.

const (
	frameHdr   = 8  // length u32 | crc u32
	payloadHdr = 18 // lsn u64 | batch u64 | flags u8 | tag u8
	fileHdr    = 40 // the journal's header, clean-close mark included
	snapFlag   = 1 << 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordVersion is the runner codec's version byte, read from an encoded record (a constant
// here fell behind the codec once); one less is the format of an earlier sluice, which open
// refuses as ErrFormat (not as corruption) when it is the first record.
var recordVersion = runner.EncodeRecord(runner.Record{Tag: runner.TagCancelled, ID: 1})[0]

// olderFormat names that forgery: the refusal it must meet is runner.ErrFormat.
const olderFormat = "the first record in an older format"

// forgedFrame is one frame of a journal image, as the forger reads it.
type forgedFrame struct {
	off   int
	n     int // payload length
	flags byte
}

// framesBefore lists the frames that lie wholly before end, in order; nil if the image does
// not parse that far (the forger then leaves the damage to a bit flip).
// spare reports whether b is all zeros: the journal's preallocated space after its frames.
func spare(b []byte) bool { return !slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) }

func framesBefore(b []byte, end int) []forgedFrame {
	var fs []forgedFrame
	for off := fileHdr; off+frameHdr+payloadHdr <= end; {
		n := int(binary.LittleEndian.Uint32(b[off:]))
		if n == 0 && spare(b[off:end]) {
			return fs // the journal's preallocated zeros
		}
		if n < payloadHdr || off+frameHdr+n > end {
			return nil
		}
		fs = append(fs, forgedFrame{off: off, n: n, flags: b[off+frameHdr+16]})
		off += frameHdr + n
	}
	return fs
}

// Fixed payload sizes of the runner's record tags (version u8 | id u64 | ...): a retag between
// two of different sizes must fail decoding (short data or trailing bytes).
var recordSizes = map[uint8]int{runner.TagStarted: 13, runner.TagReleased: 13, runner.TagDeferred: 17,
	runner.TagRetried: 17, runner.TagCancelled: 9, runner.TagExpired: 10}

// forgeRecord rewrites one field of the runner record in payload p (not a snapshot) so that
// it must be refused: by the codec (a length prefix beyond the data, a retag to a tag of
// another size, a bool byte that is neither 0 nor 1) or by replay (an id no job has, an
// attempt out of order). It returns "" when the record has no such field.
func forgeRecord(r *rand.Rand, k int, p []byte) string {
	tag, data := p[17], p[payloadHdr:]
	attempt := tag == runner.TagStarted || tag == runner.TagFinished || tag == runner.TagReleased
	switch {
	case k == 6 && len(data) >= 9:
		binary.LittleEndian.PutUint64(data[1:], binary.LittleEndian.Uint64(data[1:])+1<<40)
		return "a job id no job has"
	case k == 7 && attempt && len(data) >= 13:
		binary.LittleEndian.PutUint32(data[9:], binary.LittleEndian.Uint32(data[9:])+1<<20)
		return "an attempt out of order"
	case k == 8 && tag == runner.TagEnqueued && len(data) >= 21:
		binary.LittleEndian.PutUint32(data[17:], 1<<31)
		return "a target length beyond the record"
	case k == 9 && tag == runner.TagFinished && len(data) >= 15:
		data[14] = 7
		return "a bool byte that is neither 0 nor 1"
	case k == 10 && recordSizes[tag] == len(data):
		for _, t := range []uint8{runner.TagStarted, runner.TagDeferred, runner.TagCancelled, runner.TagRetried, runner.TagExpired, runner.TagReleased} {
			if recordSizes[t] != len(data) && r.Intn(2) == 0 {
				p[17] = t
				return fmt.Sprintf("tag %d retagged %d, a record of another size", tag, t)
			}
		}
	}
	return ""
}

// forge rewrites one field of one frame of image b (wholly before end) and reseals the
// frame's CRC. It returns what it did, or "" when no frame fits.
func forge(r *rand.Rand, b []byte, end int) string {
	fs := framesBefore(b, end)
	if len(fs) == 0 {
		return ""
	}
	if r.Intn(4) == 0 {
		return forgeHeader(r, b)
	}
	f := fs[r.Intn(len(fs))]
	if r.Intn(3) == 0 {
		f = fs[0] // the first frame has rules of its own (LSN 1, batch 1, the snapshot's place)
	}
	p := b[f.off+frameHdr : f.off+frameHdr+f.n]
	data := p[payloadHdr:]
	snap := f.flags&snapFlag != 0
	var what string
	k := r.Intn(11)
	forged := ""
	if k >= 6 && !snap {
		forged = forgeRecord(r, k, p)
	}
	switch {
	case forged != "":
		what = forged
	case k == 0:
		p[16] |= 0x80
		what = "an unknown frame flag set"
	case k == 1:
		binary.LittleEndian.PutUint64(p[0:], binary.LittleEndian.Uint64(p[0:])+1<<32)
		what = "its LSN moved"
	case k == 2:
		binary.LittleEndian.PutUint64(p[8:], binary.LittleEndian.Uint64(p[8:])+1<<32)
		what = "its batch number moved"
	case k == 3 && !snap:
		p[17] = 0xee
		what = "an unknown record tag"
	case k == 5 && snap && r.Intn(2) == 0:
		p[16] &^= 1 // flagEnd
		what = "the snapshot frame's end flag cleared"
	case k == 5:
		p[16] ^= snapFlag
		what = "its snapshot flag flipped"
	case k == 4 && f.off == fs[0].off && len(data) >= 1 && r.Intn(2) == 0:
		data[0] = recordVersion - 1
		what = olderFormat
	case k == 4 && len(data) >= 1:
		data[0] ^= 0x80
		what = "an unknown codec version"
	case snap && len(data) >= 21 && r.Intn(3) == 0:
		binary.LittleEndian.PutUint32(data[17:], 1<<31)
		what = "a snapshot job count its data cannot hold"
	case snap && len(data) >= 30 && binary.LittleEndian.Uint32(data[17:]) > 0 && r.Intn(2) == 0:
		data[29] = 0xee
		what = "a snapshot job in no known state"
	case len(data) >= 9 && binary.LittleEndian.Uint64(data[1:9]) != 0: // (a schedule's records have none)
		clear(data[1:9])
		what = "a zero job id"
		if snap {
			what = "a zero next id"
		}
	default:
		p[16] |= 0x80
		what = "an unknown frame flag set"
	}
	fr := b[f.off : f.off+frameHdr+f.n]
	c := crc32.Update(0, castagnoli, fr[0:4])
	binary.LittleEndian.PutUint32(fr[4:8], crc32.Update(c, castagnoli, fr[frameHdr:]))
	return fmt.Sprintf("the frame at byte %d rewritten with %s, its CRC resealed", f.off, what)
}

// forgeHeader rewrites the file header of image b (magic [8] | version u32 | flags u32 |
// CRC-32C of those u32, then the mark) and reseals its CRC: a format version of another
// release, an unknown header flag, or the snapshot flag toggled (announcing a snapshot the
// first frame is not, or hiding the one it is).
func forgeHeader(r *rand.Rand, b []byte) string {
	var what string
	switch r.Intn(3) {
	case 0:
		binary.LittleEndian.PutUint32(b[8:], binary.LittleEndian.Uint32(b[8:])+1)
		what = "a format version of another release"
	case 1:
		b[12] |= 0x80
		what = "an unknown flag"
	default:
		b[12] ^= 1
		what = "its snapshot flag toggled"
	}
	binary.LittleEndian.PutUint32(b[16:], crc32.Checksum(b[:16], castagnoli))
	return fmt.Sprintf("the file header rewritten with %s, its CRC resealed", what)
}

// forgeMark rewrites the clean-close mark of node n's journal, just closed cleanly, so that it
// disagrees with the file while its own checksum still matches (mark: size u64 | last LSN u64
// | CRC-32C of both u32): a size past the end (the file looks cut), one byte short (grown),
// or a later last LSN. Open must refuse it as corruption: a cleanly closed file is held to
// its mark. It reports whether it forged.
func (w *World) forgeMark(n *runnerNode) bool {
	b, err := readAll(n.disk, journalName)
	off := journal.MarkOffset
	if err != nil || len(b) < off+journal.MarkLen {
		return false
	}
	m := append([]byte(nil), b[off:off+journal.MarkLen]...)
	size, last := binary.LittleEndian.Uint64(m[0:]), binary.LittleEndian.Uint64(m[8:])
	if binary.LittleEndian.Uint32(m[16:]) != crc32.Checksum(m[:16], castagnoli) || size != uint64(len(b)) {
		return false // no clean-close mark to forge
	}
	var what string
	switch k := w.rForge.Intn(3); {
	case k == 0:
		size += uint64(8 * (1 + w.rForge.Intn(64)))
		what = "a size past the end of the file"
	case k == 1 && size > fileHdr:
		size--
		what = "a size one byte short of the file's"
	default:
		last++
		what = "a later last LSN"
	}
	binary.LittleEndian.PutUint64(m[0:], size)
	binary.LittleEndian.PutUint64(m[8:], last)
	binary.LittleEndian.PutUint32(m[16:], crc32.Checksum(m[:16], castagnoli))
	for i := range m {
		for d := m[i] ^ b[off+i]; d != 0; d &= d - 1 {
			n.disk.FlipBit(journalName, int64(off+i), uint(bits.TrailingZeros8(d)))
		}
	}
	n.flipped = fmt.Sprintf("the clean-close mark rewritten with %s, its CRC resealed", what)
	w.fault("forged-mark")
	w.trace(n.name, "FORGE "+n.flipped)
	return true
}

// forgeOnDisk runs forger over a copy of node n's journal (frames wholly before end), flips on
// the disk every bit the forger changed, and counts and traces it as fault. It reports
// whether the forger found something to forge.
func (w *World) forgeOnDisk(n *runnerNode, end, last int64, fault string, forger func(b []byte, end int) string) bool {
	b, err := readAll(n.disk, journalName)
	if err != nil || int64(len(b)) < end {
		return false
	}
	forged := append([]byte(nil), b...)
	what := forger(forged, int(end))
	if what == "" {
		return false
	}
	for i := range forged {
		for d := forged[i] ^ b[i]; d != 0; d &= d - 1 {
			n.disk.FlipBit(journalName, int64(i), uint(bits.TrailingZeros8(d)))
		}
	}
	n.flipped = fmt.Sprintf("%s (synced; %d later bytes of complete batches)", what, last-end)
	w.fault(fault)
	w.trace(n.name, "FORGE "+n.flipped)
	return true
}
