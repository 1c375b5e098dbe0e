package faultfs

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/core"
)

// ErrPowerCut is what every mutating operation returns once the armed power cut came, and
// every File opened before a PowerCut returns afterwards.
var ErrPowerCut = errors.New("faultfs: power cut")

// ErrInjected is the default error of a Rule.
var ErrInjected = errors.New("faultfs: injected failure")

// Op is a set of operation kinds.
type Op uint32

const (
	OpCreate Op = 1 << iota
	OpOpen
	OpRename
	OpRemove
	OpSyncDir
	OpList
	OpStat
	OpWrite // File.Write and File.WriteAt
	OpSync
	OpTruncate
	OpRead // File.ReadAt and File.Size
	OpClose

	// OpMutating are the operations Ops counts and a power cut stops.
	OpMutating = OpCreate | OpRename | OpRemove | OpSyncDir | OpWrite | OpSync | OpTruncate
	OpAll      = OpMutating | OpOpen | OpList | OpStat | OpRead | OpClose
)

var opNames = [...]string{"create", "open", "rename", "remove", "syncdir", "list", "stat", "write",
	"sync", "truncate", "read", "close"}

func (o Op) String() string {
	for i, n := range opNames {
		if o == 1<<i {
			return n
		}
	}
	return fmt.Sprintf("Op(%#x)", uint32(o))
}

// Rule injects failures (rule 5 of the package doc).
type Rule struct {
	Ops  Op     // the kinds it matches
	Name string // the file name it matches ("" any; a Rename matches either name)
	// Nth fails the Nth matching operation from Inject (1: the next) and no other. With Nth
	// 0, each matching operation fails with probability Prob, drawn from a stream seeded Seed.
	Nth  int
	Prob float64
	Seed int64
	// After lets the operation take effect before it reports the error.
	After bool
	Err   error // default ErrInjected
}

type rule struct {
	Rule
	seen int
	rng  *rand.Rand
}

// Options configure Wrap.
type Options struct {
	// Observed: only syncs the wrapped FS reports (Observe, ObserveDir) during a Sync or
	// SyncDir count as durable (rule 2).
	Observed bool
}

// FS is a core.FS over another with faults. Create it with Wrap.
type FS struct {
	inner core.FS
	opts  Options

	mu    sync.Mutex
	st    state
	rules []*rule
	ops   int // mutating operations so far
	cutAt int // the op that cuts power (0: none armed)
	cut   bool
	gen   int // PowerCuts so far: a File of an older generation is dead
	open  []*file
	last  string // what the last PowerCut did

	obsMu   sync.Mutex
	seen    map[core.File]bool
	seenDir bool
}

var _ core.FS = (*FS)(nil)

// Wrap wraps inner, taking everything it holds now as durable.
func Wrap(inner core.FS, o Options) (*FS, error) {
	f := &FS{inner: inner, opts: o, seen: map[core.File]bool{}}
	if err := f.adopt(); err != nil {
		return nil, err
	}
	return f, nil
}

// Observe reports that the wrapped FS synced in, one of its files (osfs's Options.Synced).
func (f *FS) Observe(in core.File) {
	f.obsMu.Lock()
	defer f.obsMu.Unlock()
	if in == nil {
		f.seenDir = true
		return
	}
	f.seen[in] = true
}

// ObserveDir reports that the wrapped FS synced the directory.
func (f *FS) ObserveDir() { f.Observe(nil) }

// observed takes the report for in (nil: the directory), clearing it.
func (f *FS) observed(in core.File) bool {
	f.obsMu.Lock()
	defer f.obsMu.Unlock()
	if in == nil {
		ok := f.seenDir
		f.seenDir = false
		return ok
	}
	ok := f.seen[in]
	delete(f.seen, in)
	return ok
}

// Inject adds r.
func (f *FS) Inject(r Rule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Err == nil {
		r.Err = ErrInjected
	}
	f.rules = append(f.rules, &rule{Rule: r, rng: rand.New(rand.NewSource(r.Seed))})
}

// ClearRules removes every Rule.
func (f *FS) ClearRules() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// Ops is the number of mutating operations so far (rule 3).
func (f *FS) Ops() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops
}

// CutAfter arms a power cut at the n-th mutating operation from now (n >= 1).
func (f *FS) CutAfter(n int) {
	if n < 1 {
		panic(fmt.Sprintf("faultfs: CutAfter(%d): n must be at least 1", n))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cutAt = f.ops + n
}

// LastCut describes what the last PowerCut kept and dropped.
func (f *FS) LastCut() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// check is called, with mu held, before an operation of kind op on name (and to, for a
// Rename): it counts mutating operations, stops them after the cut, and applies the rules.
// after reports an error to return once the operation took effect.
func (f *FS) check(op Op, name, to string) (before, after error) {
	if op&OpMutating != 0 {
		f.ops++
		if f.cutAt != 0 && f.ops >= f.cutAt {
			f.cut = true
		}
		if f.cut {
			return fmt.Errorf("%s %q: %w", op, name, ErrPowerCut), nil
		}
	}
	for _, r := range f.rules {
		if r.Ops&op == 0 || r.Name != "" && r.Name != name && r.Name != to {
			continue
		}
		r.seen++
		hit := r.Nth == r.seen || r.Nth == 0 && r.rng.Float64() < r.Prob
		if !hit {
			continue
		}
		err := fmt.Errorf("%s %q: %w", op, name, r.Err)
		if r.After {
			return nil, err
		}
		return err, nil
	}
	return nil, nil
}

// Create creates or truncates name.
func (f *FS) Create(name string) (core.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	before, after := f.check(OpCreate, name, "")
	if before != nil {
		return nil, before
	}
	in, err := f.inner.Create(name)
	if err != nil {
		return nil, err
	}
	n := f.st.create(name)
	fl := &file{fs: f, in: in, n: n, name: name, gen: f.gen}
	if after != nil {
		_ = in.Close()
		return nil, after
	}
	f.open = append(f.open, fl)
	return fl, nil
}

// Open opens an existing file.
func (f *FS) Open(name string) (core.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if before, _ := f.check(OpOpen, name, ""); before != nil {
		return nil, before
	}
	in, err := f.inner.Open(name)
	if err != nil {
		return nil, err
	}
	n := f.st.dir[name]
	if n == nil {
		_ = in.Close()
		return nil, fmt.Errorf("faultfs: open %q: the wrapped FS holds a file faultfs never saw created", name)
	}
	fl := &file{fs: f, in: in, n: n, name: name, gen: f.gen}
	f.open = append(f.open, fl)
	return fl, nil
}

// Rename replaces to with from.
func (f *FS) Rename(from, to string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	before, after := f.check(OpRename, from, to)
	if before != nil {
		return before
	}
	if err := f.inner.Rename(from, to); err != nil {
		// osfs renames, then syncs the directory: an error does not prove nothing moved.
		if _, serr := f.inner.Stat(from); serr != nil && f.st.dir[from] != nil {
			f.st.rename(from, to)
		}
		return err
	}
	f.st.rename(from, to)
	return after
}

// Remove deletes name.
func (f *FS) Remove(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	before, after := f.check(OpRemove, name, "")
	if before != nil {
		return before
	}
	if err := f.inner.Remove(name); err != nil {
		if _, serr := f.inner.Stat(name); serr != nil && f.st.dir[name] != nil {
			f.st.remove(name)
		}
		return err
	}
	f.st.remove(name)
	return after
}

// SyncDir makes the directory's changes durable (rules 1 and 2).
func (f *FS) SyncDir() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	before, after := f.check(OpSyncDir, "", "")
	if before != nil {
		return before
	}
	f.observed(nil)
	if err := f.inner.SyncDir(); err != nil {
		return err
	}
	if after != nil {
		return after
	}
	if !f.opts.Observed || f.observed(nil) {
		f.st.syncDir()
	}
	return nil
}

// List returns the names in the directory.
func (f *FS) List() ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if before, _ := f.check(OpList, "", ""); before != nil {
		return nil, before
	}
	return f.inner.List()
}

// Stat returns the size of name.
func (f *FS) Stat(name string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if before, _ := f.check(OpStat, name, ""); before != nil {
		return 0, before
	}
	return f.inner.Stat(name)
}

// file is a File of the FS.
type file struct {
	fs     *FS
	in     core.File
	n      *node
	name   string // the name it was opened by (what rules match)
	gen    int
	closed bool
}

// enter locks the FS and checks the file is alive and the operation allowed.
func (fl *file) enter(op Op) (before, after error) {
	fl.fs.mu.Lock()
	if fl.gen != fl.fs.gen {
		return fmt.Errorf("%s %q: %w (a file opened before it)", op, fl.name, ErrPowerCut), nil
	}
	return fl.fs.check(op, fl.name, "")
}

func (fl *file) Write(p []byte) (int, error) {
	before, after := fl.enter(OpWrite)
	defer fl.fs.mu.Unlock()
	if before != nil {
		return 0, before
	}
	n, err := fl.in.Write(p)
	if n > 0 && !fl.closed {
		fl.n.write(fl.n.size, p[:n])
	}
	if err == nil {
		err = after
	}
	return n, err
}

func (fl *file) WriteAt(p []byte, off int64) (int, error) {
	before, after := fl.enter(OpWrite)
	defer fl.fs.mu.Unlock()
	if before != nil {
		return 0, before
	}
	n, err := fl.in.WriteAt(p, off)
	if n > 0 && !fl.closed {
		fl.n.write(off, p[:n])
	}
	if err == nil {
		err = after
	}
	return n, err
}

func (fl *file) ReadAt(p []byte, off int64) (int, error) {
	before, _ := fl.enter(OpRead)
	defer fl.fs.mu.Unlock()
	if before != nil {
		return 0, before
	}
	return fl.in.ReadAt(p, off)
}

// Sync makes the file's changes durable (rules 1 and 2).
func (fl *file) Sync() error {
	before, after := fl.enter(OpSync)
	defer fl.fs.mu.Unlock()
	if before != nil {
		return before
	}
	fl.fs.observed(fl.in)
	if err := fl.in.Sync(); err != nil {
		return err
	}
	if after != nil {
		return after
	}
	if !fl.fs.opts.Observed || fl.fs.observed(fl.in) {
		fl.n.sync()
	}
	return nil
}

func (fl *file) Truncate(size int64) error {
	before, after := fl.enter(OpTruncate)
	defer fl.fs.mu.Unlock()
	if before != nil {
		return before
	}
	if err := fl.in.Truncate(size); err != nil {
		return err
	}
	fl.n.truncate(size)
	return after
}

func (fl *file) Size() (int64, error) {
	before, _ := fl.enter(OpRead)
	defer fl.fs.mu.Unlock()
	if before != nil {
		return 0, before
	}
	return fl.in.Size()
}

func (fl *file) Close() error {
	before, _ := fl.enter(OpClose)
	defer fl.fs.mu.Unlock()
	if before != nil {
		return before
	}
	fl.closed = true
	fl.fs.open = slices.DeleteFunc(fl.fs.open, func(o *file) bool { return o == fl })
	return fl.in.Close()
}
