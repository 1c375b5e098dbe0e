package forge

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand"
	"slices"

	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/core/runner"
)

// The journal's layout, as far as a forger reads it.
const (
	FrameHdr   = 8      // length u32 | crc u32
	PayloadHdr = 18     // lsn u64 | batch u64 | flags u8 | tag u8
	FileHdr    = 40     // the journal's header, clean-close mark included
	SnapFlag   = 1 << 1 // a frame flag: the frame holds (part of) a snapshot
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordVersion is the runner codec's version byte, read from an encoded record (a constant
// here fell behind the codec once); one less is the format of an earlier sluice, which open
// refuses as ErrFormat (not as corruption) when it is the first record.
var recordVersion = runner.EncodeRecord(runner.Record{Tag: runner.TagCancelled, ID: 1})[0]

// OlderFormat names that forgery: the refusal it must meet is runner.ErrFormat.
const OlderFormat = "the first record in an older format"

// Frame is one frame of a journal image: its offset, payload length and flags.
type Frame struct {
	Off   int
	N     int // payload length
	Flags byte
}

// Spare reports whether b is all zeros: the journal's preallocated space after its frames.
func Spare(b []byte) bool { return !slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) }

// Frames lists the frames of image b that lie wholly before end, in order; nil if the image
// does not parse that far (a forger then leaves the damage to a bit flip).
func Frames(b []byte, end int) []Frame {
	var fs []Frame
	for off := FileHdr; off+FrameHdr+PayloadHdr <= end; {
		n := int(binary.LittleEndian.Uint32(b[off:]))
		if n == 0 && Spare(b[off:end]) {
			return fs // the journal's preallocated zeros
		}
		if n < PayloadHdr || off+FrameHdr+n > end {
			return nil
		}
		fs = append(fs, Frame{Off: off, N: n, Flags: b[off+FrameHdr+16]})
		off += FrameHdr + n
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
	tag, data := p[17], p[PayloadHdr:]
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

// Synced rewrites one field of one frame of image b (wholly before end) and reseals the
// frame's CRC. It returns what it did, or "" when no frame fits.
func Synced(r *rand.Rand, b []byte, end int) string {
	fs := Frames(b, end)
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
	p := b[f.Off+FrameHdr : f.Off+FrameHdr+f.N]
	data := p[PayloadHdr:]
	snap := f.Flags&SnapFlag != 0
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
		p[16] ^= SnapFlag
		what = "its snapshot flag flipped"
	case k == 4 && f.Off == fs[0].Off && len(data) >= 1 && r.Intn(2) == 0:
		data[0] = recordVersion - 1
		what = OlderFormat
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
	fr := b[f.Off : f.Off+FrameHdr+f.N]
	c := crc32.Update(0, castagnoli, fr[0:4])
	binary.LittleEndian.PutUint32(fr[4:8], crc32.Update(c, castagnoli, fr[FrameHdr:]))
	return fmt.Sprintf("the frame at byte %d rewritten with %s, its CRC resealed", f.Off, what)
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

// Mark rewrites the clean-close mark of image b (a journal just closed cleanly) so that it
// disagrees with the file while its own checksum still matches (mark: size u64 | last LSN u64
// | CRC-32C of both u32): a size past the end (the file looks cut), one byte short (grown),
// or a later last LSN. Open must refuse it as corruption: a cleanly closed file is held to
// its mark. It returns what it did, or "" when b holds no clean-close mark.
func Mark(r *rand.Rand, b []byte) string {
	off := journal.MarkOffset
	if len(b) < off+journal.MarkLen {
		return ""
	}
	m := b[off : off+journal.MarkLen]
	size, last := binary.LittleEndian.Uint64(m[0:]), binary.LittleEndian.Uint64(m[8:])
	if binary.LittleEndian.Uint32(m[16:]) != crc32.Checksum(m[:16], castagnoli) || size != uint64(len(b)) {
		return "" // no clean-close mark to forge
	}
	var what string
	switch k := r.Intn(3); {
	case k == 0:
		size += uint64(8 * (1 + r.Intn(64)))
		what = "a size past the end of the file"
	case k == 1 && size > FileHdr:
		size--
		what = "a size one byte short of the file's"
	default:
		last++
		what = "a later last LSN"
	}
	binary.LittleEndian.PutUint64(m[0:], size)
	binary.LittleEndian.PutUint64(m[8:], last)
	binary.LittleEndian.PutUint32(m[16:], crc32.Checksum(m[:16], castagnoli))
	return fmt.Sprintf("the clean-close mark rewritten with %s, its CRC resealed", what)
}
