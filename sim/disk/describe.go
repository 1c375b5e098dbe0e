package disk

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
)

// Dump renders the disk deterministically, one line per name (live or durable, sorted):
// its size, how much of it is settled on disk, pending changes, whether the entry is durable,
// and an FNV-64a checksum of what reads see. For traces and determinism tests.
func (d *Disk) Dump() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "disk ops=%d crashes=%d dirlog=%d\n", d.ops, d.crashes, len(d.dirLog))
	names := sortedNames(d.live)
	for _, name := range sortedNames(d.durable) {
		if d.live[name] == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		ino, dur := d.live[name], d.durable[name]
		entry := "durable"
		switch {
		case ino == nil:
			fmt.Fprintf(&b, "%s: removed, not durable (ino %d)\n", name, dur.id)
			continue
		case dur == nil:
			entry = "new"
		case dur != ino:
			entry = fmt.Sprintf("replaces ino %d", dur.id)
		}
		h := fnv.New64a()
		h.Write(ino.data)
		fmt.Fprintf(&b, "%s: ino %d %s size=%d settled=%d pending=%d fnv=%016x\n",
			name, ino.id, entry, len(ino.data), len(ino.base), len(ino.pending), h.Sum64())
	}
	return b.String()
}

// CheckInvariants states the package doc's invariants in code. It costs O(bytes on the disk).
func (d *Disk) CheckInvariants() error { return d.checkInvariants() }

// checkInvariants states the package doc's invariants in code.
func (d *Disk) checkInvariants() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dirUndecided > len(d.dirLog) {
		return fmt.Errorf("disk: dirUndecided %d > len(dirLog) %d", d.dirUndecided, len(d.dirLog))
	}
	names := sortedNames(d.live)
	for _, name := range sortedNames(d.durable) {
		if d.live[name] == nil {
			names = append(names, name)
		}
	}
	for _, name := range names {
		ino := d.live[name]
		if ino == nil {
			ino = d.durable[name]
		}
		img := append(d.scratch[:0], ino.base...)
		for _, c := range ino.pending {
			if c.synced && c.undecided {
				return fmt.Errorf("disk: %s: a change both synced and undecided", name)
			}
			img = c.apply(img)
		}
		d.scratch = img
		if string(img) != string(ino.data) {
			return fmt.Errorf("disk: %s: durable contents plus pending changes differ from what reads see", name)
		}
	}
	// Replaying dirLog over durable gives live.
	dir := map[string]*inode{}
	for name, ino := range d.durable { // order-free: copying a map
		dir[name] = ino
	}
	for _, c := range d.dirLog {
		switch c.kind {
		case dirCreate:
			dir[c.name] = c.ino
		case dirRename:
			dir[c.to] = dir[c.name]
			delete(dir, c.name)
		case dirRemove:
			delete(dir, c.name)
		}
	}
	if !slices.Equal(sortedNames(dir), sortedNames(d.live)) {
		return fmt.Errorf("disk: replaying the directory log gives %v, live is %v", sortedNames(dir), sortedNames(d.live))
	}
	for _, name := range sortedNames(dir) {
		if d.live[name] != dir[name] {
			return fmt.Errorf("disk: replaying the directory log puts another file at %s", name)
		}
	}
	return nil
}
