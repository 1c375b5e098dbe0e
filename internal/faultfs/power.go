package faultfs

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/core"
)

// sectorLen is the unit a disk writes atomically: a torn write's garbage stays inside one.
const sectorLen = 512

// change is a write (data at off) or a truncate (to size) not yet durable.
type change struct {
	truncate bool
	off      int64
	data     []byte
	size     int64
}

// node is a file (an inode): what is durable, and the changes since, in order.
// Invariant: applying pending to durable gives the file's live contents, size bytes long.
type node struct {
	durable []byte
	pending []change
	size    int64
}

func (n *node) write(off int64, p []byte) {
	n.pending = append(n.pending, change{off: off, data: append([]byte(nil), p...)})
	n.size = max(n.size, off+int64(len(p)))
}

func (n *node) truncate(size int64) {
	n.pending = append(n.pending, change{truncate: true, size: size})
	n.size = size
}

func (n *node) sync() {
	for _, c := range n.pending {
		n.durable = apply(n.durable, c)
	}
	n.pending = nil
}

// apply returns b with c applied.
func apply(b []byte, c change) []byte {
	if c.truncate {
		if c.size <= int64(len(b)) {
			return b[:c.size]
		}
		return append(b, make([]byte, c.size-int64(len(b)))...)
	}
	if end := c.off + int64(len(c.data)); end > int64(len(b)) {
		b = append(b, make([]byte, end-int64(len(b)))...)
	}
	copy(b[c.off:], c.data)
	return b
}

// dirChange is a create, rename or remove not yet durable.
type dirChange struct {
	op       Op
	name, to string
	n        *node // the created file
}

// state is the directory: live and durable entries, and the changes in between.
// Invariant: replaying log over durable gives dir.
type state struct {
	dir     map[string]*node
	durable map[string]*node
	log     []dirChange
}

func (s *state) create(name string) *node {
	if n := s.dir[name]; n != nil {
		n.truncate(0) // Create of an existing name truncates the same file
		return n
	}
	n := &node{}
	s.dir[name] = n
	s.log = append(s.log, dirChange{op: OpCreate, name: name, n: n})
	return n
}

func (s *state) rename(from, to string) {
	s.dir[to] = s.dir[from]
	delete(s.dir, from)
	s.log = append(s.log, dirChange{op: OpRename, name: from, to: to})
}

func (s *state) remove(name string) {
	delete(s.dir, name)
	s.log = append(s.log, dirChange{op: OpRemove, name: name})
}

func (s *state) syncDir() {
	s.durable = maps.Clone(s.dir)
	s.log = nil
}

// replay applies the first k directory changes to the durable entries.
func (s *state) replay(k int) map[string]*node {
	d := maps.Clone(s.durable)
	for _, c := range s.log[:k] {
		switch c.op {
		case OpCreate:
			d[c.name] = c.n
		case OpRename:
			if n, ok := d[c.name]; ok {
				d[c.to] = n
				delete(d, c.name)
			}
		case OpRemove:
			delete(d, c.name)
		}
	}
	return d
}

// adopt takes everything the wrapped FS holds as durable.
func (f *FS) adopt() error {
	names, err := f.inner.List()
	if err != nil {
		return fmt.Errorf("faultfs: listing the wrapped FS: %w", err)
	}
	f.st = state{dir: map[string]*node{}}
	for _, name := range names {
		b, err := core.ReadFile(f.inner, name)
		if err != nil {
			return fmt.Errorf("faultfs: adopting %q: %w", name, err)
		}
		f.st.dir[name] = &node{durable: b, size: int64(len(b))}
	}
	f.st.syncDir()
	return nil
}

// PowerCut cuts power (rule 3): it closes every File, draws from rng what the disk kept of
// everything not durable, rewrites the wrapped FS to exactly that and syncs it, then takes
// calls again as a restarted machine would (rule 4). An armed CutAfter is disarmed.
func (f *FS) PowerCut(rng *rand.Rand) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closeAll()
	f.cut, f.cutAt = false, 0
	var report strings.Builder
	k := rng.Intn(len(f.st.log) + 1)
	fmt.Fprintf(&report, "directory: %d of %d changes kept;", k, len(f.st.log))
	dir := f.st.replay(k)
	contents := map[string][]byte{}
	for _, name := range slices.Sorted(maps.Keys(dir)) {
		contents[name] = dir[name].afterCut(rng, name, &report)
	}
	f.last = report.String()
	if err := f.rewrite(contents); err != nil {
		return fmt.Errorf("faultfs: power cut: rewriting the wrapped FS: %w", err)
	}
	f.st = state{dir: map[string]*node{}}
	for name, b := range contents {
		f.st.dir[name] = &node{durable: b, size: int64(len(b))}
	}
	f.st.syncDir()
	return nil
}

// Exit closes every File still open, as the exit of the process that held them would (they
// fail with ErrPowerCut afterwards); what is on disk stays as it is.
func (f *FS) Exit() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closeAll()
}

func (f *FS) closeAll() {
	for _, fl := range f.open {
		_ = fl.in.Close() // nothing written through it afterwards may count
	}
	f.open = nil
	f.gen++
}

// afterCut draws what the disk kept of n: its durable contents and each pending change's
// fate, in order.
func (n *node) afterCut(rng *rand.Rand, name string, report *strings.Builder) []byte {
	b := append([]byte(nil), n.durable...)
	fmt.Fprintf(report, " %s:", name)
	if len(n.pending) == 0 {
		report.WriteString(" durable")
	}
	for _, c := range n.pending {
		if c.truncate {
			if rng.Intn(2) == 0 {
				b = apply(b, c)
				fmt.Fprintf(report, " truncate(%d)", c.size)
			} else {
				fmt.Fprintf(report, " truncate(%d) lost", c.size)
			}
			continue
		}
		var fate string
		b, fate = torn(rng, b, c)
		fmt.Fprintf(report, " write(%d+%d) %s", c.off, len(c.data), fate)
	}
	return b
}

// torn applies write c to b as the disk may have kept it, and says how.
func torn(rng *rand.Rand, b []byte, c change) ([]byte, string) {
	end := c.off + int64(len(c.data))
	fates := 5
	if c.off/sectorLen != (end-1)/sectorLen {
		fates = 6 // spans sectors: may scatter
	}
	switch rng.Intn(fates) {
	case 0:
		return b, "lost"
	case 1, 2:
		return apply(b, c), "kept"
	case 3:
		k := rng.Int63n(int64(len(c.data)))
		b = apply(b, change{off: c.off, data: c.data[:k]})
		bound := min(end, (c.off+k)/sectorLen*sectorLen+sectorLen) - (c.off + k)
		garbage := make([]byte, rng.Int63n(bound+1))
		for i := range garbage {
			garbage[i] = byte(rng.Intn(256))
		}
		return apply(b, change{off: c.off + k, data: garbage}), fmt.Sprintf("torn after %d bytes, %d garbage", k, len(garbage))
	case 4:
		return apply(b, change{off: c.off, data: make([]byte, len(c.data))}), "zeroed"
	}
	kept := 0
	for s := c.off; s < end; s = (s/sectorLen + 1) * sectorLen {
		e := min(end, (s/sectorLen+1)*sectorLen)
		if rng.Intn(2) == 0 { // a lost sector reads as zeros if a later one extended the file
			b = apply(b, change{off: s, data: c.data[s-c.off : e-c.off]})
			kept++
		}
	}
	return b, fmt.Sprintf("scattered (%d sectors kept)", kept)
}

// rewrite makes the wrapped FS hold exactly contents, durably.
func (f *FS) rewrite(contents map[string][]byte) error {
	names, err := f.inner.List()
	if err != nil {
		return err
	}
	for _, name := range names {
		if _, ok := contents[name]; !ok {
			if err := f.inner.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(contents)) {
		w, err := f.inner.Create(name)
		if err != nil {
			return err
		}
		if _, err := w.Write(contents[name]); err != nil {
			w.Close()
			return err
		}
		if err := w.Sync(); err != nil {
			w.Close()
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
	return f.inner.SyncDir()
}
