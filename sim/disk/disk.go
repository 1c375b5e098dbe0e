package disk

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"slices"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/sim/faults"
	"github.com/sluicehq/sluice/sim/internal/lazyrand"
)

// SectorSize is the unit a torn write's garbage never crosses.
const SectorSize = 512

var (
	// ErrCrashed is returned by every File opened before a Crash, and by mutating operations
	// from the point set by CrashAfter until Crash.
	ErrCrashed = errors.New("disk: crashed")
	// ErrInjected is the error of a fault injected by faults.Disk, or by FailNext with a nil error.
	ErrInjected = errors.New("disk: injected fault")
)

// Op names a kind of operation, for FailNext.
type Op int

const (
	OpWrite Op = iota + 1
	OpSync
	OpTruncate
	OpCreate
	OpRename
	OpRemove
	OpSyncDir
	// The operations below do not mutate: Ops does not count them and CrashAfter spares them.
	OpOpen
	OpRead
	OpList
	OpStat
	OpSize
	opEnd
)

var opNames = [...]string{"", "write", "sync", "truncate", "create", "rename", "remove",
	"syncdir", "open", "read", "list", "stat", "size"}

func (o Op) String() string {
	if o <= 0 || o >= opEnd {
		return fmt.Sprintf("Op(%d)", int(o))
	}
	return opNames[o]
}

func (o Op) mutating() bool { return o >= OpWrite && o <= OpSyncDir }

// Disk is the simulated disk. The zero value is not usable; call New.
type Disk struct {
	mu     sync.Mutex
	rng    *rand.Rand
	rread  *rand.Rand // the read-side faults' own stream (faults.Disk.OpenErr ...)
	rmore  *rand.Rand // the journal families' own stream (faults.Disk.ShortWrite)
	faults faults.Disk
	// quiet turns the read-side faults off while the world inspects the disk (WithoutReadFaults).
	quiet bool

	gen     int // crash generation; a File from an older one fails with ErrCrashed
	crashes int
	ops     int // mutating operations so far
	crashAt int // 0: off; else mutating operation number ops >= crashAt fail
	failq   [opEnd][]error
	// lateq holds FailAfter's errors: the op takes effect, then reports one.
	lateq [opEnd][]error

	live    map[string]*inode
	durable map[string]*inode
	// dirLog holds the directory changes since the last successful SyncDir, in order.
	// Invariant: replaying dirLog over durable gives live.
	dirLog []dirChange
	// Invariant: dirUndecided <= len(dirLog); the prefix covered by a failed SyncDir.
	dirUndecided int
	nextIno      int
	lastCrash    []string
	scratch      []byte // checkInvariants' image buffer, reused
}

type dirKind int

const (
	dirCreate dirKind = iota
	dirRename
	dirRemove
)

type dirChange struct {
	kind     dirKind
	name, to string
	ino      *inode // dirCreate: the new inode
}

type inode struct {
	id   int
	data []byte // what reads see
	// base is the durable contents when no pending operation existed.
	base    []byte
	pending []change
}

// change is a write or a truncate not yet settled into base.
type change struct {
	truncate bool
	off      int64 // write: where it landed; truncate: the new size
	at       bool  // a WriteAt: it overwrote bytes inside the file
	data     []byte
	// synced: covered by a successful Sync, survives every crash.
	synced bool
	// undecided: covered by a failed Sync; its fate is drawn at the crash even if a later
	// Sync succeeds. Invariant: !(synced && undecided).
	undecided bool
}

var _ core.FS = (*Disk)(nil)

// New returns an empty disk whose random choices all come from seed.
func New(seed int64) *Disk {
	return &Disk{
		rng:     lazyrand.New(seed),
		rread:   lazyrand.New(seed ^ 0x7ead),
		rmore:   lazyrand.New(seed ^ 0x5407),
		live:    map[string]*inode{},
		durable: map[string]*inode{},
	}
}

// SetFaults sets the probabilities of random faults; it panics on an invalid one.
func (d *Disk) SetFaults(f faults.Disk) {
	if err := f.Validate(); err != nil {
		panic(fmt.Sprintf("disk: SetFaults: %v", err))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = f
}

// Ops returns the number of mutating operations so far (write, sync, truncate, create, rename,
// remove, syncdir), including failed ones.
func (d *Disk) Ops() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ops
}

// Crashes returns how many times Crash was called.
func (d *Disk) Crashes() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.crashes
}

// CrashAfter makes the n-th mutating operation from now, and all later ones, fail with
// ErrCrashed until Crash. n=1 is the next one.
func (d *Disk) CrashAfter(n int) {
	if n < 1 {
		panic(fmt.Sprintf("disk: CrashAfter(%d): n must be at least 1", n))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.crashAt = d.ops + n
}

// FailNext makes the next operation of kind op fail with err (ErrInjected when nil), without
// effect. Calls queue up: two FailNext(OpWrite, ...) fail the next two writes.
func (d *Disk) FailNext(op Op, err error) {
	if op <= 0 || op >= opEnd {
		panic(fmt.Sprintf("disk: FailNext(%v): unknown op", op))
	}
	if err == nil {
		err = ErrInjected
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failq[op] = append(d.failq[op], err)
}

// FailAfter makes the next Create, Rename or Remove (op) take effect and then return err
// (ErrInjected when nil), as adapters/osfs does when the directory fsync that follows the
// change fails: the caller sees an error although the entry changed (durable, as any entry,
// only after a SyncDir). Create then returns no File. Calls queue up like FailNext's.
func (d *Disk) FailAfter(op Op, err error) {
	if op != OpCreate && op != OpRename && op != OpRemove {
		panic(fmt.Sprintf("disk: FailAfter(%v): only create, rename and remove", op))
	}
	if err == nil {
		err = ErrInjected
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lateq[op] = append(d.lateq[op], err)
}

// late pops the error FailAfter queued for op, if any, for an op that just took effect.
func (d *Disk) late(op Op, what string) error {
	q := d.lateq[op]
	if len(q) == 0 {
		return nil
	}
	d.lateq[op] = q[1:]
	return fmt.Errorf("disk: %s %s: after the change: %w", op, what, q[0])
}

// FlipBit flips bit (0..7) of the byte at off of the named file, in its durable contents and
// in what reads see. It panics unless the file exists and off lies in its durable contents.
func (d *Disk) FlipBit(name string, off int64, bit uint) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ino := d.live[name]
	if ino == nil {
		ino = d.durable[name]
	}
	if ino == nil || bit > 7 || off < 0 || off >= int64(len(ino.base)) {
		panic(fmt.Sprintf("disk: FlipBit(%q, %d, %d): no such synced byte", name, off, bit))
	}
	ino.base[off] ^= 1 << bit
	for i := range ino.pending {
		c := &ino.pending[i]
		if !c.truncate && off >= c.off && off < c.off+int64(len(c.data)) {
			return // overwritten since; reads see the newer bytes
		}
	}
	if off < int64(len(ino.data)) {
		ino.data[off] ^= 1 << bit
	}
}

// Cut shortens the named file's durable contents, and what reads see, to size: synced data
// lost at the end of a file (a damaged medium, a bad copy), as FlipBit damages it in place. It
// panics unless the file exists with nothing pending (as right after a Crash) and size is at
// most its length.
func (d *Disk) Cut(name string, size int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ino := d.live[name]
	if ino == nil || len(ino.pending) > 0 || size < 0 || size > int64(len(ino.base)) {
		panic(fmt.Sprintf("disk: Cut(%q, %d): no such settled file, or not that long", name, size))
	}
	ino.base = ino.base[:size:size]
	ino.data = append([]byte(nil), ino.base...)
}

// begin accounts for one operation and returns the deterministic fault it meets, if any.
func (d *Disk) begin(op Op, what string) error {
	if op.mutating() {
		d.ops++
		if d.crashAt > 0 && d.ops >= d.crashAt {
			return fmt.Errorf("disk: %s %s: %w", op, what, ErrCrashed)
		}
	}
	if q := d.failq[op]; len(q) > 0 {
		err := q[0]
		d.failq[op] = q[1:]
		return fmt.Errorf("disk: %s %s: %w", op, what, err)
	}
	return nil
}

// chance draws from the stream only when p > 0, so faults that are off shift nothing.
func (d *Disk) chance(p float64) bool {
	return p > 0 && d.rng.Float64() < p
}

// shortWrite draws the silent short write of a write of n bytes (faults.Disk.ShortWrite) from
// the disk's third stream: the strict prefix it keeps, or n when it does not strike.
func (d *Disk) shortWrite(n int) int {
	if p := d.faults.ShortWrite; p > 0 && n > 0 && d.rmore.Float64() < p {
		return d.rmore.Intn(n)
	}
	return n
}

// readFault draws a read-side fault of probability p from the read stream (only when p > 0
// and the disk is not being inspected, so it shifts nothing otherwise).
func (d *Disk) readFault(p float64, op, what string) error {
	if p > 0 && !d.quiet && d.rread.Float64() < p {
		return fmt.Errorf("disk: %s %s: %w", op, what, ErrInjected)
	}
	return nil
}

// WithoutReadFaults runs fn with the read-side faults off: the world's own inspections of the
// disk (copies, renderings, checks) read it as it is.
func (d *Disk) WithoutReadFaults(fn func()) {
	d.mu.Lock()
	d.quiet = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.quiet = false
		d.mu.Unlock()
	}()
	fn()
}

func checkName(op Op, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return &fs.PathError{Op: op.String(), Path: name, Err: fs.ErrInvalid}
	}
	return nil
}

func notExist(op Op, name string) error {
	return &fs.PathError{Op: op.String(), Path: name, Err: fs.ErrNotExist}
}

// Create creates or truncates the named file. Rule 2: the new entry is durable only after
// SyncDir; rule 1: truncating an existing file is durable only after File.Sync.
func (d *Disk) Create(name string) (core.File, error) {
	if err := checkName(OpCreate, name); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(OpCreate, name); err != nil {
		return nil, err
	}
	if d.chance(d.faults.CreateErr) {
		return nil, fmt.Errorf("disk: create %s: %w", name, ErrInjected)
	}
	if ino := d.live[name]; ino != nil {
		ino.truncate(0)
		if err := d.late(OpCreate, name); err != nil {
			return nil, err
		}
		return d.newFile(name, ino), nil
	}
	d.nextIno++
	ino := &inode{id: d.nextIno}
	d.live[name] = ino
	d.dirLog = append(d.dirLog, dirChange{kind: dirCreate, name: name, ino: ino})
	if err := d.late(OpCreate, name); err != nil {
		return nil, err
	}
	return d.newFile(name, ino), nil
}

// Open opens an existing file.
func (d *Disk) Open(name string) (core.File, error) {
	if err := checkName(OpOpen, name); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(OpOpen, name); err != nil {
		return nil, err
	}
	if err := d.readFault(d.faults.OpenErr, "open", name); err != nil {
		return nil, err
	}
	ino := d.live[name]
	if ino == nil {
		return nil, notExist(OpOpen, name)
	}
	return d.newFile(name, ino), nil
}

// Rename replaces to with from; durable only after SyncDir.
func (d *Disk) Rename(from, to string) error {
	if err := checkName(OpRename, from); err != nil {
		return err
	}
	if err := checkName(OpRename, to); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	what := from + " " + to
	if err := d.begin(OpRename, what); err != nil {
		return err
	}
	if d.chance(d.faults.RenameErr) {
		return fmt.Errorf("disk: rename %s: %w", what, ErrInjected)
	}
	ino := d.live[from]
	if ino == nil {
		return notExist(OpRename, from)
	}
	if from == to {
		return nil
	}
	d.live[to] = ino
	delete(d.live, from)
	d.dirLog = append(d.dirLog, dirChange{kind: dirRename, name: from, to: to})
	return d.late(OpRename, what)
}

// Remove deletes the named file; durable only after SyncDir. Open Files keep working.
func (d *Disk) Remove(name string) error {
	if err := checkName(OpRemove, name); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(OpRemove, name); err != nil {
		return err
	}
	if d.chance(d.faults.RemoveErr) {
		return fmt.Errorf("disk: remove %s: %w", name, ErrInjected)
	}
	if d.live[name] == nil {
		return notExist(OpRemove, name)
	}
	delete(d.live, name)
	d.dirLog = append(d.dirLog, dirChange{kind: dirRemove, name: name})
	return d.late(OpRemove, name)
}

// SyncDir makes every create, rename and remove so far durable.
func (d *Disk) SyncDir() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.begin(OpSyncDir, ".")
	if err == nil && d.chance(d.faults.SyncDirErr) {
		err = fmt.Errorf("disk: syncdir: %w", ErrInjected)
	}
	if err != nil {
		if !errors.Is(err, ErrCrashed) { // past a crash point the changes stay unsynced
			d.dirUndecided = len(d.dirLog)
		}
		return err
	}
	d.settleDir()
	return nil
}

// settleDir makes the live directory durable (a successful SyncDir); the caller holds d.mu.
func (d *Disk) settleDir() {
	d.durable = make(map[string]*inode, len(d.live))
	for name, ino := range d.live { // order-free: copying a map
		d.durable[name] = ino
	}
	d.dirLog = nil
	d.dirUndecided = 0
}

// List returns the names in the directory, sorted.
func (d *Disk) List() ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(OpList, "."); err != nil {
		return nil, err
	}
	return sortedNames(d.live), nil
}

// Stat returns the size of the named file, including unsynced writes.
func (d *Disk) Stat(name string) (int64, error) {
	if err := checkName(OpStat, name); err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin(OpStat, name); err != nil {
		return 0, err
	}
	if err := d.readFault(d.faults.StatErr, "stat", name); err != nil {
		return 0, err
	}
	ino := d.live[name]
	if ino == nil {
		return 0, notExist(OpStat, name)
	}
	return int64(len(ino.data)), nil
}

func sortedNames(m map[string]*inode) []string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// truncate cuts or extends (with zeros) the file to size; a pending change.
func (ino *inode) truncate(size int64) {
	ino.data = resize(ino.data, size)
	ino.pending = append(ino.pending, change{truncate: true, off: size})
}

func resize(b []byte, size int64) []byte {
	if size <= int64(len(b)) {
		return b[:size]
	}
	return append(b, make([]byte, size-int64(len(b)))...)
}

// put writes p at off, extending b with zeros up to off if needed.
func put(b []byte, off int64, p []byte) []byte {
	if off == int64(len(b)) {
		return append(b, p...) // an append: no zeros to write first
	}
	if end := off + int64(len(p)); end > int64(len(b)) {
		b = resize(b, end)
	}
	copy(b[off:], p)
	return b
}

// settle folds the pending changes into base when every one of them is synced.
func (ino *inode) settle() {
	for _, c := range ino.pending {
		if !c.synced {
			return
		}
	}
	for i, c := range ino.pending {
		if i == 0 && len(ino.base) == 0 && !c.truncate && c.off == 0 && !c.at {
			// The first write of an empty file: its private copy becomes base (nothing else
			// holds it once pending is dropped), sparing a copy of what may be a 1 MiB
			// preallocation.
			ino.base = c.data
			continue
		}
		ino.base = c.apply(ino.base)
	}
	ino.pending = nil
}

func (c change) apply(b []byte) []byte {
	if c.truncate {
		return resize(b, c.off)
	}
	return put(b, c.off, c.data)
}

// Queued returns how many failures FailNext has queued for op and no operation has met yet.
func (d *Disk) Queued(op Op) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.failq[op])
}

// Unfail drops the failures FailNext queued for op.
func (d *Disk) Unfail(op Op) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failq[op] = nil
}

// EntryDurable reports whether a crash now would leave the named file under its name: the
// directory's durable entry for name is the file reads see under it (its create or rename was
// covered by a successful SyncDir). A missing name is not durable.
func (d *Disk) EntryDurable(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	ino := d.live[name]
	return ino != nil && d.durable[name] == ino
}

// SettledLen returns the length of the named file's durable contents when no change of it is
// pending (every write synced and settled), else -1: the bytes FlipBit and Cut can damage.
func (d *Disk) SettledLen(name string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	ino := d.live[name]
	if ino == nil || len(ino.pending) > 0 {
		return -1
	}
	return int64(len(ino.base))
}

// AdoptSynced leaves the disk as Create, Write, Sync, Close and SyncDir of name with data
// would, with one copy of data fewer, and reports true; the disk keeps data, which the caller
// must not touch again. It does nothing and reports false (the caller makes the calls) on a
// disk where those calls could fail or draw: faults set, failures queued, a crash point armed.
func (d *Disk) AdoptSynced(name string, data []byte) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if checkName(OpCreate, name) != nil || d.faults != (faults.Disk{}) || d.crashAt != 0 {
		return false
	}
	for op := range d.failq {
		if len(d.failq[op]) > 0 || len(d.lateq[op]) > 0 {
			return false
		}
	}
	d.ops += 4 // create, write, sync, syncdir
	ino := d.live[name]
	if ino == nil {
		d.nextIno++
		ino = &inode{id: d.nextIno}
		d.live[name] = ino
	}
	// Reads see a copy in the inode's buffer, as a Create over it and a Write leave it.
	ino.data = append(ino.data[:0], data...)
	ino.base, ino.pending = data, nil
	d.settleDir()
	return true
}
