package journal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The on-disk format, version 1. See the diagram in doc.go.
const (
	formatVersion = 1

	headerLen     = 20 // magic[8] | version u32 | flags u32 | crc u32
	headerCRCOff  = 16 // the header CRC covers bytes [0, headerCRCOff)
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

// appendHeader appends a file header to b.
func appendHeader(b []byte, flags uint32) []byte {
	start := len(b)
	b = append(b, magic[:]...)
	b = binary.LittleEndian.AppendUint32(b, formatVersion)
	b = binary.LittleEndian.AppendUint32(b, flags)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
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
}

// decodeHeader checks the header at b[0:] and returns it, or a reason it is bad.
func decodeHeader(b []byte) (header, string) {
	if len(b) < headerLen {
		return header{}, "file shorter than the header"
	}
	if [8]byte(b[0:8]) != magic {
		return header{}, "wrong magic bytes"
	}
	if binary.LittleEndian.Uint32(b[headerCRCOff:headerLen]) != crc32.Checksum(b[:headerCRCOff], castagnoli) {
		return header{}, "header checksum mismatch"
	}
	h := header{
		version: binary.LittleEndian.Uint32(b[8:12]),
		flags:   binary.LittleEndian.Uint32(b[12:16]),
	}
	if h.version != formatVersion {
		return header{}, fmt.Sprintf("unsupported format version %d", h.version)
	}
	if h.flags&^headerFlagsKnown != 0 {
		return header{}, "unknown header flags"
	}
	return h, ""
}
