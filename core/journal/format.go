package journal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The on-disk format, version 2. See the diagram in doc.go.
const (
	formatVersion = 2

	headerLen    = 40 // fixed part (magic[8] | version u32 | flags u32 | crc u32) | mark
	headerCRCOff = 16 // the header CRC covers bytes [0, headerCRCOff)
	// The clean-close mark: length u64 | last LSN u64 | crc u32 over the 16 bytes before it.
	// All zero: no mark (open, or crashed). Only this part of a file is ever overwritten.
	markOff       = 20
	markLen       = 20
	markCRCOff    = markOff + 16
	frameHdrLen   = 8  // length u32 | crc u32
	payloadHdrLen = 18 // lsn u64 | batch u64 | flags u8 | tag u8
	frameMin      = frameHdrLen + payloadHdrLen

	// dataFormatMax bounds RecordMax and SnapshotMax: the length field is a u32.
	dataFormatMax = 1<<31 - payloadHdrLen

	flagEnd      = 1 << 0 // last frame of its sync batch
	flagSnapshot = 1 << 1 // the record is a snapshot; only as the file's first frame
	flagsKnown   = flagEnd | flagSnapshot

	headerFlagSnapshot = 1 << 0 // the file was written by Compact and starts with a snapshot
	headerFlagsKnown   = headerFlagSnapshot
)

var magic = [8]byte{'s', 'l', 'u', 'i', 'c', 'e', 'J', 0}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendHeader appends a file header without a clean-close mark to b.
func appendHeader(b []byte, flags uint32) []byte {
	start := len(b)
	b = append(b, magic[:]...)
	b = binary.LittleEndian.AppendUint32(b, formatVersion)
	b = binary.LittleEndian.AppendUint32(b, flags)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
	return append(b, make([]byte, markLen)...)
}

// MarkOffset and MarkLen locate the clean-close mark in the header: the only bytes of a
// journal that are overwritten. A bit flipped there reads as a mark a crash tore (the crash
// rows of the recovery table apply), so a fault injector that must be refused avoids them.
const (
	MarkOffset = markOff
	MarkLen    = markLen
)

// mark is a clean-close mark: the file's length and last LSN when Close wrote it.
type mark struct {
	size int64
	last LSN
}

// encodeMark returns the bytes of m, to be written at markOff.
func encodeMark(m mark) []byte {
	b := binary.LittleEndian.AppendUint64(make([]byte, 0, markLen), uint64(m.size))
	b = binary.LittleEndian.AppendUint64(b, uint64(m.last))
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// noMark is what Open writes over a mark to clear it.
var noMark [markLen]byte

// markState says what the mark bytes of a header hold.
type markState uint8

const (
	markNone markState = iota // all zero
	markSet                   // a valid mark
	markTorn                  // neither: a Close or an Open crashed while writing it
)

// decodeMark reads the mark of a header at least headerLen long.
func decodeMark(b []byte) (mark, markState) {
	p := b[markOff : markOff+markLen]
	if [markLen]byte(p) == noMark {
		return mark{}, markNone
	}
	if binary.LittleEndian.Uint32(p[16:20]) != crc32.Checksum(p[:16], castagnoli) {
		return mark{}, markTorn
	}
	m := mark{size: int64(binary.LittleEndian.Uint64(p[0:8])), last: LSN(binary.LittleEndian.Uint64(p[8:16]))}
	if m.size < headerLen {
		return mark{}, markTorn
	}
	return m, markSet
}

// appendFrame appends one frame to b and returns the extended slice.
func appendFrame(b []byte, lsn LSN, batch uint64, flags, tag uint8, data []byte) []byte {
	start := len(b)
	n := payloadHdrLen + len(data)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = append(b, 0, 0, 0, 0) // crc, filled below
	b = binary.LittleEndian.AppendUint64(b, uint64(lsn))
	b = binary.LittleEndian.AppendUint64(b, batch)
	b = append(b, flags, tag)
	b = append(b, data...)
	sealFrame(b[start:])
	return b
}

// sealFrame computes and stores the CRC of the frame that starts at f[0].
func sealFrame(f []byte) {
	binary.LittleEndian.PutUint32(f[4:8], frameCRC(f))
}

// frameCRC is the CRC-32C over the length field and the payload of the frame at f[0].
// f must hold the whole frame.
func frameCRC(f []byte) uint32 {
	n := binary.LittleEndian.Uint32(f[0:4])
	c := crc32.Update(0, castagnoli, f[0:4])
	return crc32.Update(c, castagnoli, f[frameHdrLen:frameHdrLen+int(n)])
}

// frame is a decoded frame. Data aliases the scanned bytes.
type frame struct {
	lsn   LSN
	batch uint64
	flags uint8
	tag   uint8
	data  []byte
	next  int // offset just past the frame
}

// decodeFrame decodes the frame at b[off:] and reports whether it is whole and its CRC matches.
// It never panics, whatever b holds.
func decodeFrame(b []byte, off int) (frame, bool) {
	if off < 0 || len(b)-off < frameMin {
		return frame{}, false
	}
	n := int(binary.LittleEndian.Uint32(b[off : off+4]))
	if n < payloadHdrLen || n > len(b)-off-frameHdrLen {
		return frame{}, false
	}
	f := b[off : off+frameHdrLen+n]
	if binary.LittleEndian.Uint32(f[4:8]) != frameCRC(f) {
		return frame{}, false
	}
	return decodeTrusted(b, off), true
}

// decodeTrusted decodes a frame already validated by decodeFrame.
func decodeTrusted(b []byte, off int) frame {
	n := int(binary.LittleEndian.Uint32(b[off : off+4]))
	p := b[off+frameHdrLen : off+frameHdrLen+n]
	return frame{
		lsn:   LSN(binary.LittleEndian.Uint64(p[0:8])),
		batch: binary.LittleEndian.Uint64(p[8:16]),
		flags: p[16],
		tag:   p[17],
		data:  p[payloadHdrLen:n:n],
		next:  off + frameHdrLen + n,
	}
}

// header is a decoded file header.
type header struct {
	version uint32
	flags   uint32
	mark    mark
	marked  markState
}

// decodeHeader checks the header at b[0:] and returns it, or a reason it is bad. b may be
// longer than the header. The version is checked before the length, so that a file of an
// older format is refused as such, never misread.
func decodeHeader(b []byte) (header, string) {
	const fixedLen = headerCRCOff + 4
	if len(b) < fixedLen {
		return header{}, "file shorter than the header"
	}
	if [8]byte(b[0:8]) != magic {
		return header{}, "wrong magic bytes"
	}
	if binary.LittleEndian.Uint32(b[headerCRCOff:fixedLen]) != crc32.Checksum(b[:headerCRCOff], castagnoli) {
		return header{}, "header checksum mismatch"
	}
	h := header{
		version: binary.LittleEndian.Uint32(b[8:12]),
		flags:   binary.LittleEndian.Uint32(b[12:16]),
	}
	if h.version != formatVersion {
		return header{}, fmt.Sprintf("format version %d, but this build reads only version %d (a different sluice "+
			"release wrote it: open it with that release)", h.version, formatVersion)
	}
	if len(b) < headerLen {
		return header{}, "file shorter than the header"
	}
	if h.flags&^headerFlagsKnown != 0 {
		return header{}, "unknown header flags"
	}
	h.mark, h.marked = decodeMark(b)
	return h, ""
}
