package sim

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/sluicehq/sluice/core/runner"
)

// The planted defect mutSplitFiring: an engine that journals the ScheduleFired records of a
// commit in a batch of their own, after the batch holding their jobs, and crashes between the
// two (the defect the one-batch rule of periodic jobs exists to prevent). The world plants it
// as the state such an engine leaves on disk: after a commit that handled a period, the
// node's journal is rewritten with the commit's batch minus its ScheduleFired frames (the
// first batch, durable), and the node crashes before the driver reads the commit's result.
// Production code carries no trace of it.

// flagEnd marks the last frame of a journal batch (core/journal's frame flags).
const flagEnd = 1

// splitFired rewrites node n's journal as the defective engine would have left it after its
// last commit, if that commit's batch holds ScheduleFired frames and other frames; it reports
// whether it did.
func (n *runnerNode) splitFired() bool {
	b, err := readAll(n.disk, journalName)
	if err != nil {
		return false
	}
	img, ok := withoutLastFired(b)
	if !ok {
		return false
	}
	return writeSynced(n.disk, journalName, img) == nil
}

// withoutLastFired is image b with its last batch's ScheduleFired frames dropped: the frames
// kept renumbered from the batch's first LSN, the last of them ending the batch, CRCs resealed.
func withoutLastFired(b []byte) ([]byte, bool) {
	fs := framesBefore(b, len(b))
	if len(fs) == 0 {
		return nil, false
	}
	if end := fs[len(fs)-1].off + frameHdr + fs[len(fs)-1].n; !spare(b[end:]) {
		return nil, false // anything but the journal's preallocated zeros after its last frame
	}
	le := binary.LittleEndian
	batchOf := func(f forgedFrame) uint64 { return le.Uint64(b[f.off+frameHdr+8:]) }
	first := len(fs) - 1
	for first > 0 && batchOf(fs[first-1]) == batchOf(fs[len(fs)-1]) {
		first--
	}
	var keep []forgedFrame
	fired := false
	for _, f := range fs[first:] {
		if f.flags&snapFlag != 0 {
			return nil, false
		}
		if b[f.off+frameHdr+17] == runner.TagScheduleFired {
			fired = true
			continue
		}
		keep = append(keep, f)
	}
	if !fired || len(keep) == 0 {
		return nil, false
	}
	img := append([]byte(nil), b[:fs[first].off]...)
	lsn := le.Uint64(b[fs[first].off+frameHdr:])
	for i, f := range keep {
		at := len(img)
		img = append(img, b[f.off:f.off+frameHdr+f.n]...)
		fr := img[at:]
		le.PutUint64(fr[frameHdr:], lsn+uint64(i))
		fr[frameHdr+16] &^= flagEnd
		if i == len(keep)-1 {
			fr[frameHdr+16] |= flagEnd
		}
		c := crc32.Update(0, castagnoli, fr[0:4])
		le.PutUint32(fr[4:8], crc32.Update(c, castagnoli, fr[frameHdr:]))
	}
	return img, true
}
