package disk

import (
	"fmt"
	"strings"
)

// Crash turns the disk into what a restarted process would find (rules 2 to 5): directory
// changes not made durable are rolled back, each unsynced write is lost, kept, torn or
// scattered by the seeded stream, and every File opened before fails with ErrCrashed.
// Faults queued by FailNext stay queued; a CrashAfter point is cleared.
func (d *Disk) Crash() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.crashes++
	d.gen++
	d.crashAt = 0
	var report []string

	// The directory: an in-order prefix of the unsynced changes survives, empty unless a
	// failed SyncDir left some undecided or DirPersist says so.
	limit := d.dirUndecided
	if len(d.dirLog) > 0 && d.chance(d.faults.DirPersist) {
		limit = len(d.dirLog)
	}
	keep := 0
	if limit > 0 {
		keep = d.rng.Intn(limit + 1)
	}
	dir := make(map[string]*inode, len(d.durable))
	for name, ino := range d.durable { // order-free: copying a map
		dir[name] = ino
	}
	for _, c := range d.dirLog[:keep] {
		switch c.kind {
		case dirCreate:
			dir[c.name] = c.ino
		case dirRename:
			if ino := dir[c.name]; ino != nil {
				dir[c.to] = ino
				delete(dir, c.name)
			}
		case dirRemove:
			delete(dir, c.name)
		}
	}
	if len(d.dirLog) > 0 {
		report = append(report, fmt.Sprintf("dir: %d of %d unsynced changes kept", keep, len(d.dirLog)))
	}

	// The files, in name order so that the draws do not depend on map order.
	seen := map[*inode]bool{}
	for _, name := range sortedNames(dir) {
		ino := dir[name]
		if seen[ino] {
			continue
		}
		seen[ino] = true
		img := d.crashImage(name, ino, &report)
		if synced := min(len(ino.base), len(img)); synced > 0 && d.chance(d.faults.BitFlip) {
			off, bit := d.rng.Intn(synced), d.rng.Intn(8)
			img[off] ^= 1 << bit
			report = append(report, fmt.Sprintf("%s: bit %d of byte %d flipped", name, bit, off))
		}
		ino.base = img
		ino.data = append(ino.data[:0], img...) // the old buffer: nothing else holds it
		ino.pending = nil
	}
	d.live = dir
	d.durable = make(map[string]*inode, len(dir))
	for name, ino := range dir { // order-free: copying a map
		d.durable[name] = ino
	}
	d.dirLog = nil
	d.dirUndecided = 0
	d.lastCrash = report
}

// LastCrash describes the choices the last Crash made, one line each, in a fixed order.
func (d *Disk) LastCrash() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.lastCrash, "\n")
}

// crashImage draws the fate of each unsynced change of ino (rule 3) and returns the contents
// that persist.
func (d *Disk) crashImage(name string, ino *inode, report *[]string) []byte {
	// Built over base itself: base is replaced by the image, and no other slice holds its
	// bytes (pending changes own copies of theirs).
	img := ino.base
	// A synced change made the file's size durable, so garbage of an earlier torn write must
	// not grow the file past its own end.
	lastSynced := -1
	for i, c := range ino.pending {
		if c.synced {
			lastSynced = i
		}
	}
	for i, c := range ino.pending {
		if c.synced {
			img = c.apply(img)
			continue
		}
		if c.truncate {
			fate := "lost"
			if d.rng.Intn(2) == 0 {
				img = c.apply(img)
				fate = "kept"
			}
			*report = append(*report, fmt.Sprintf("%s: truncate to %d %s", name, c.off, fate))
			continue
		}
		end := c.off + int64(len(c.data))
		n := 4
		if c.off/SectorSize != (end-1)/SectorSize {
			n = 5 // spans sectors: may scatter
		}
		var fate string
		switch d.rng.Intn(n) {
		case 0:
			fate = "lost"
		case 1:
			img = put(img, c.off, c.data)
			fate = "kept"
		case 2:
			k := int64(d.rng.Intn(len(c.data)))
			cut := c.off + k
			bound := (cut/SectorSize + 1) * SectorSize
			if i < lastSynced || c.at {
				bound = min(bound, end)
			}
			var garbage []byte
			if d.rng.Intn(2) == 0 { // "possibly followed by garbage"
				garbage = make([]byte, 1+d.rng.Int63n(bound-cut))
			}
			for i := range garbage {
				garbage[i] = byte(d.rng.Intn(256))
			}
			img = put(img, c.off, c.data[:k])
			img = put(img, cut, garbage)
			fate = fmt.Sprintf("torn after %d bytes, %d garbage", k, len(garbage))
		case 3:
			img = put(img, c.off, make([]byte, len(c.data)))
			fate = "zeroed"
		case 4:
			var pieces []byte
			for off := c.off; off < end; {
				next := min((off/SectorSize+1)*SectorSize, end)
				if d.rng.Intn(2) == 0 {
					img = put(img, off, c.data[off-c.off:next-c.off])
					pieces = append(pieces, 'k')
				} else {
					pieces = append(pieces, '-')
				}
				off = next
			}
			fate = "scattered " + string(pieces)
		}
		*report = append(*report, fmt.Sprintf("%s: write %d+%d %s", name, c.off, len(c.data), fate))
	}
	return img
}
