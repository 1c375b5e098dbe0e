package forge

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand"

	"github.com/sluicehq/sluice/core/runner"
)

// Aimed is what Aim did to an image: What it broke (empty: nothing fits), the offset the
// refusal must name (At), and, for a damage inside the header, the length to cut the file to
// (Cut; the image itself is then unchanged).
type Aimed struct {
	What string
	At   int64
	Cut  int
}

// Aim damages image b before end (where its last complete batch starts) so that one of the
// journal's frame rules, or its header's, must refuse it: a first frame that is not LSN 1 of
// batch 1, a snapshot flag where none may be or an end flag missing from one, a batch number
// 0, a later frame out of LSN or batch order, a file cut inside its header. A rewritten
// frame is resealed (its CRC matches), so only the rule can see it.
func Aim(r *rand.Rand, b []byte, end int) Aimed {
	snapFile := b[12]&1 != 0
	k := r.Intn(11)
	if k == 0 {
		size := 1 + r.Intn(FileHdr-1)
		if snapFile && r.Intn(2) == 0 {
			size = FileHdr // the header alone: the snapshot it announces is gone
		}
		a := Aimed{What: "a cut inside the header", Cut: size}
		if size == FileHdr {
			a.At = FileHdr
		}
		return a
	}
	fs := Frames(b, end)
	if len(fs) == 0 || k >= 6 && k < 10 && len(fs) < 2 {
		return Aimed{}
	}
	f := fs[0]
	if k >= 6 && k < 10 {
		f = fs[1+r.Intn(len(fs)-1)]
	}
	p := b[f.Off+FrameHdr : f.Off+FrameHdr+f.N]
	lsn, batch := binary.LittleEndian.Uint64(p[0:]), binary.LittleEndian.Uint64(p[8:])
	var what string
	switch {
	case k == 1 && !snapFile:
		lsn = 2 + uint64(r.Intn(1000))
		what = "the first frame's LSN moved off 1"
	case k == 2 && !snapFile:
		batch = 2 + uint64(r.Intn(1000))
		what = "the first frame's batch moved off 1"
	case k == 3 && !snapFile:
		p[16] |= SnapFlag
		what = "a snapshot flag on the first frame of a plain file"
	case k == 3:
		p[16] &^= SnapFlag
		what = "the snapshot flag cleared on the first frame of a compacted file"
	case k <= 4 && snapFile:
		batch = 0
		what = "the snapshot frame's batch set to 0"
	case k <= 5 && snapFile:
		p[16] &^= 1 // flagEnd
		what = "the snapshot frame's end flag cleared"
	case k <= 5:
		lsn = 0
		what = "the first frame's LSN set to 0"
	case k == 6:
		p[16] |= SnapFlag
		what = "a snapshot flag on a later frame"
	case k == 7:
		lsn += 1 + uint64(r.Intn(5))
		what = "a later frame's LSN moved forward"
	case k == 8:
		batch++
		what = "a later frame's batch moved forward"
	case k == 10:
		p[16] |= 0x40
		what = "an unknown frame flag"
	default:
		lsn--
		what = "a later frame's LSN repeated"
	}
	binary.LittleEndian.PutUint64(p[0:], lsn)
	binary.LittleEndian.PutUint64(p[8:], batch)
	fr := b[f.Off : f.Off+FrameHdr+f.N]
	binary.LittleEndian.PutUint32(fr[4:8], crc32.Update(crc32.Update(0, castagnoli, fr[0:4]), castagnoli, fr[FrameHdr:]))
	return Aimed{What: what, At: int64(f.Off)}
}

// FlagEnd marks the last frame of a journal batch.
const FlagEnd = 1

// WithoutLastFired is image b with its last batch's ScheduleFired frames dropped (an
// engine that journaled them in a batch of their own and crashed before it): the frames
// kept renumbered from the batch's first LSN, the last of them ending the batch, CRCs resealed.
func WithoutLastFired(b []byte) ([]byte, bool) {
	fs := Frames(b, len(b))
	if len(fs) == 0 {
		return nil, false
	}
	if end := fs[len(fs)-1].Off + FrameHdr + fs[len(fs)-1].N; !Spare(b[end:]) {
		return nil, false // anything but the journal's preallocated zeros after its last frame
	}
	le := binary.LittleEndian
	batchOf := func(f Frame) uint64 { return le.Uint64(b[f.Off+FrameHdr+8:]) }
	first := len(fs) - 1
	for first > 0 && batchOf(fs[first-1]) == batchOf(fs[len(fs)-1]) {
		first--
	}
	var keep []Frame
	fired := false
	for _, f := range fs[first:] {
		if f.Flags&SnapFlag != 0 {
			return nil, false
		}
		if b[f.Off+FrameHdr+17] == runner.TagScheduleFired {
			fired = true
			continue
		}
		keep = append(keep, f)
	}
	if !fired || len(keep) == 0 {
		return nil, false
	}
	img := append([]byte(nil), b[:fs[first].Off]...)
	lsn := le.Uint64(b[fs[first].Off+FrameHdr:])
	for i, f := range keep {
		at := len(img)
		img = append(img, b[f.Off:f.Off+FrameHdr+f.N]...)
		fr := img[at:]
		le.PutUint64(fr[FrameHdr:], lsn+uint64(i))
		fr[FrameHdr+16] &^= FlagEnd
		if i == len(keep)-1 {
			fr[FrameHdr+16] |= FlagEnd
		}
		c := crc32.Update(0, castagnoli, fr[0:4])
		le.PutUint32(fr[4:8], crc32.Update(c, castagnoli, fr[FrameHdr:]))
	}
	return img, true
}
