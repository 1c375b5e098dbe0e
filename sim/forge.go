package sim

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand"
)

// Forged damage: synced bytes rewritten so that every checksum still matches, as a buggy
// writer, a wrong copy or a bad restore would leave them. The journal's CRCs cannot see it;
// its frame rules (LSN and batch order, flags) or the runner's record decoding must, and the
// corruption-refused rule checks that open refuses the file naming corruption. The forger
// knows the journal's frame layout (length u32 | crc u32 | lsn u64 | batch u64 | flags u8 |
// tag u8 | data, CRC-32C over the length and everything after the crc) and the runner's
// codec only as far as its first fields (version u8, then id u64; a snapshot's version u8,
// next id u64, term seq u64, job count u32, then jobs starting id u64, state u8).

const (
	frameHdr   = 8  // length u32 | crc u32
	payloadHdr = 18 // lsn u64 | batch u64 | flags u8 | tag u8
	fileHdr    = 40 // the journal's header, clean-close mark included
	snapFlag   = 1 << 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// forgedFrame is one frame of a journal image, as the forger reads it.
type forgedFrame struct {
	off   int
	n     int // payload length
	flags byte
}

// framesBefore lists the frames that lie wholly before end, in order; nil if the image does
// not parse that far (the forger then leaves the damage to a bit flip).
func framesBefore(b []byte, end int) []forgedFrame {
	var fs []forgedFrame
	for off := fileHdr; off+frameHdr+payloadHdr <= end; {
		n := int(binary.LittleEndian.Uint32(b[off:]))
		if n < payloadHdr || off+frameHdr+n > end {
			return nil
		}
		fs = append(fs, forgedFrame{off: off, n: n, flags: b[off+frameHdr+16]})
		off += frameHdr + n
	}
	return fs
}

// forge rewrites one field of one frame of image b (wholly before end) and reseals the
// frame's CRC. It returns what it did, or "" when no frame fits.
func forge(r *rand.Rand, b []byte, end int) string {
	fs := framesBefore(b, end)
	if len(fs) == 0 {
		return ""
	}
	f := fs[r.Intn(len(fs))]
	p := b[f.off+frameHdr : f.off+frameHdr+f.n]
	data := p[payloadHdr:]
	snap := f.flags&snapFlag != 0
	var what string
	switch k := r.Intn(6); {
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
	case k == 4 && len(data) >= 1:
		data[0] ^= 0x80
		what = "an unknown codec version"
	case snap && len(data) >= 21 && r.Intn(3) == 0:
		binary.LittleEndian.PutUint32(data[17:], 1<<31)
		what = "a snapshot job count its data cannot hold"
	case snap && len(data) >= 30 && binary.LittleEndian.Uint32(data[17:]) > 0 && r.Intn(2) == 0:
		data[29] = 0xee
		what = "a snapshot job in no known state"
	case len(data) >= 9:
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
