package journal

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/sluicehq/sluice/core"
)

// LSN is a log sequence number: +1 per record, starting at 1.
type LSN uint64

// Record is one journal record. The journal does not interpret Tag or Data.
type Record struct {
	LSN      LSN
	Tag      uint8
	Snapshot bool // written by Compact; only ever the first record replayed
	// Data is valid only during the replay call (Open and Read reuse their read buffer);
	// Scan's aliases its input.
	Data []byte
}

// Config configures a Journal. Zero fields take their defaults.
type Config struct {
	RecordMax   int // largest Append data; default RecordMaxDefault
	SnapshotMax int // largest Compact snapshot; default SnapshotMaxDefault
	// JournalMax bounds the file: an Append that would grow it beyond is refused with
	// ErrFull (compaction, which shrinks it, still runs). It bounds a journal whose
	// compactions keep failing. Default: the largest of JournalMaxDefault, 2*SnapshotMax and
	// the least allowed, SnapshotMax + 2*RecordMax (plus framing), so that a compacted journal
	// takes appends.
	JournalMax int64
	// PreallocBytes is how far past the end of the last batch the file is extended with
	// zeros at a time (a Write that needs room appends them before its batch). A batch then
	// overwrites space the file already has, and its fdatasync has no file size to update:
	// on ext4 about 1.5x more syncs a second than appends. Default PreallocDefault;
	// negative: off, every batch is appended.
	PreallocBytes int64
	Logger        *slog.Logger // default: discard
}

const (
	RecordMaxDefault   = 1 << 20
	SnapshotMaxDefault = 256 << 20
	JournalMaxDefault  = 1 << 30
	PreallocDefault    = 1 << 20

	compactSuffix = ".compact"
	// bufKeepMax: Commit drops a write buffer that grew beyond this, so one huge batch does not
	// pin memory for the journal's lifetime.
	bufKeepMax = 4 << 20
)

var (
	// ErrTooLarge: a record or snapshot over its limit; nothing was written.
	ErrTooLarge = errors.New("journal: record too large")
	// ErrPoisoned: a write or sync failed earlier; reopen the journal.
	ErrPoisoned = errors.New("journal: poisoned by an earlier failure")
	// ErrUndecided: a batch failed and so did cutting it back (or Open's cut of a torn tail
	// failed to sync); the bytes are in the file with unknown durability. A reopen without a restart of the machine may replay it and a
	// later power cut may then lose it under synced batches (which Open would refuse as
	// corruption): restart, or treat the journal as damaged.
	ErrUndecided = errors.New("journal: failed batch left undecided in the file")
	// ErrClosed: the journal was closed.
	ErrClosed = errors.New("journal: closed")
	// ErrFull: an Append would grow the file beyond Config.JournalMax; nothing was buffered.
	ErrFull = errors.New("journal: full")
)

// Journal is an open journal. It is not safe for concurrent use: it has one owner.
type Journal struct {
	fs   core.FS
	name string
	cfg  Config
	f    core.File

	// buf holds the encoded frames of the records appended since the last Write.
	// Invariant: len(buf) == 0 iff buffered == 0.
	buf      []byte
	buffered int
	// lastFrame is the offset in buf of the last buffered frame, which Write marks end-of-batch.
	lastFrame int
	// durable is the highest LSN on disk and synced.
	// Invariant: next == durable + (flying's records) + buffered + 1.
	durable LSN
	next    LSN
	// flying is the batch written and not yet synced (Write to Synced); zero when none. While
	// one flies nothing else is written: batch N+1 waits for sync N.
	flying Flight
	// batch is the number of the next batch written. Invariant: batch >= 1.
	batch uint64
	// size is the journal's length: header and complete synced batches (a flying batch's
	// bytes are not counted until its sync returns). Invariant: size >= headerLen.
	size int64
	// alloc is the file's length: size, then the flying batch, then zeros (preallocated
	// space, PreallocBytes at a time), which Open takes for no batch at all.
	// Invariant: alloc >= size + flying.bytes.
	alloc int64
	// grown is the bytes of the batches after the last snapshot (or the header), read from
	// the file at open, so that restarts do not reset it. Invariant: grown <= size - headerLen.
	grown int64
	// poison is the first write, sync or compaction failure; once set, every call fails.
	poison error
	closed bool
}

// Open opens or creates the journal name in fsys, running the recovery table of doc.go, and
// calls replay (if not nil) for every surviving record in LSN order before it returns, each
// batch's records once its end frame is validated. Record.Data is valid only during the call:
// the file is read in bounded chunks. An error from replay refuses the journal like
// corruption (a *FormatError wrapping ErrCorrupt and the error); so does every other refusal
// (reported before replay's if both), and a refusal writes nothing. A refused Open has
// replayed the complete batches before the damage: the caller must discard whatever replay
// built when Open fails.
func Open(fsys core.FS, name string, cfg Config, replay func(Record) error) (*Journal, error) {
	o := &opener{fs: fsys, name: name, cfg: cfg.withDefaults(), replayFn: replay}
	if err := o.run(); err != nil {
		return nil, err
	}
	return o.j, nil
}

// Read replays the journal name in fsys like Open, for inspection, and writes nothing: it
// never creates, truncates or clears a mark, ignores a leftover <name>.compact beside the
// journal (a lone one that may hold jobs it refuses as Open does), and reports a
// torn tail (Tail.Kind == TailTorn, Tail.Cut) instead of cutting it. A missing or empty file
// reads as TailEmpty. A journal Open would refuse is refused with the same error, after
// replay has seen the complete batches before the damage (none for a bad header); if replay
// refused one of their records, that is the error (the first damage met).
func Read(fsys core.FS, name string, cfg Config, replay func(Record) error) (Tail, error) {
	o := &opener{fs: fsys, name: name, cfg: cfg.withDefaults(), replayFn: replay, readOnly: true}
	err := o.run()
	return o.tail, err
}

func (o *opener) run() error {
	rows, err := o.look()
	for _, find := range rows {
		if err != nil {
			break
		}
		err = recoveryTable[find].act(o)
	}
	if (o.readOnly || err != nil) && o.f != nil {
		// Nothing was written through f, so closing it cannot lose anything: a failed Open
		// reports what failed it, and Read what it found.
		_ = o.f.Close()
	}
	return err
}

func (c Config) withDefaults() Config {
	if c.RecordMax < 0 || c.SnapshotMax < 0 || c.RecordMax > dataFormatMax || c.SnapshotMax > dataFormatMax {
		panic(fmt.Sprintf("journal: Config limits out of range: RecordMax %d, SnapshotMax %d (max %d)",
			c.RecordMax, c.SnapshotMax, dataFormatMax))
	}
	if c.RecordMax == 0 {
		c.RecordMax = RecordMaxDefault
	}
	if c.SnapshotMax == 0 {
		c.SnapshotMax = SnapshotMaxDefault
	}
	if c.JournalMax == 0 {
		c.JournalMax = max(JournalMaxDefault, 2*int64(c.SnapshotMax), journalMaxLeast(c))
	}
	if least := journalMaxLeast(c); c.JournalMax < least {
		panic(fmt.Sprintf("journal: Config.JournalMax %d is below %d (SnapshotMax + 2*RecordMax with framing)",
			c.JournalMax, least))
	}
	if c.PreallocBytes == 0 {
		c.PreallocBytes = PreallocDefault
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// journalMaxLeast is the smallest JournalMax c allows: a compacted file and two records.
func journalMaxLeast(c Config) int64 {
	return headerLen + int64(c.SnapshotMax) + 2*int64(c.RecordMax) + 3*frameMin
}

func newJournal(o *opener, f core.File) *Journal {
	return &Journal{
		fs:      o.fs,
		name:    o.name,
		cfg:     o.cfg,
		f:       f,
		durable: o.tail.Last,
		next:    o.tail.Last + 1,
		batch:   o.tail.LastBatch + 1,
		size:    o.tail.Cut,
		alloc:   o.tail.Cut + o.tail.Spare,
		grown:   o.tail.Cut - o.tail.Base,
	}
}

// usable returns the error every call returns on a closed or poisoned journal.
func (j *Journal) usable() error {
	if j.closed {
		return ErrClosed
	}
	if j.poison != nil {
		return fmt.Errorf("journal %q: %w; reopen it (first failure: %w)", j.name, ErrPoisoned, j.poison)
	}
	return nil
}

// Append buffers one record and returns its LSN. Nothing reaches the file before Write (or
// Commit). It may be called while a batch is in flight: the record goes into the next batch.
func (j *Journal) Append(tag uint8, data []byte) (LSN, error) {
	if err := j.usable(); err != nil {
		return 0, err
	}
	if len(data) > j.cfg.RecordMax {
		return 0, fmt.Errorf("%w: %d bytes, RecordMax is %d", ErrTooLarge, len(data), j.cfg.RecordMax)
	}
	if grown := j.size + j.flying.bytes + int64(len(j.buf)+frameMin+len(data)); grown > j.cfg.JournalMax {
		return 0, fmt.Errorf("%w: %q would grow to %d bytes, over JournalMax (%d): it grows until a "+
			"compaction shrinks it, and compactions have not (see the errors logged for them); fix "+
			"their cause and compact, or raise JournalMax", ErrFull, j.name, grown, j.cfg.JournalMax)
	}
	lsn := j.next
	j.lastFrame = len(j.buf)
	j.buf = appendFrame(j.buf, lsn, j.batch, 0, tag, data)
	j.next++
	j.buffered++
	return lsn, nil
}

// Flight is a batch written by Write and not yet synced. Its Sync touches only the file, so a
// driver may run it on another goroutine while the journal's owner keeps appending (the next
// batch); the owner then hands the result to Synced before anything else is written.
type Flight struct {
	f       core.File
	through LSN    // the batch's last LSN
	batch   uint64 // its number
	bytes   int64  // its length in the file
}

// Empty reports that Write wrote nothing (nothing was buffered): there is nothing to sync.
func (fl Flight) Empty() bool { return fl.f == nil }

// Through is the batch's last LSN (zero when Empty).
func (fl Flight) Through() LSN { return fl.through }

// Sync fsyncs the batch's file; nil for an empty Flight. It is the one call that may run off the
// owner's goroutine; it is called once per Flight (fsync is never retried).
func (fl Flight) Sync() error {
	if fl.f == nil {
		return nil
	}
	return fl.f.Sync()
}

// Commit writes everything buffered as one batch with one Write, syncs it with one Sync and
// returns the highest durable LSN: Write, Flight.Sync and Synced in one call. It is a no-op
// when nothing is buffered. A failure poisons the journal: the batch is not acknowledged and
// fsync is never retried.
func (j *Journal) Commit() (LSN, error) {
	fl, err := j.Write()
	if err != nil || fl.Empty() {
		return j.durable, err
	}
	return j.Synced(fl, fl.Sync())
}

// Write writes everything buffered as one batch with one Write and returns it in flight: it is
// acknowledged only when Synced reports its Sync returned nil. Nothing is written (an empty
// Flight) when nothing is buffered. Writing while a batch is in flight is misuse and panics:
// batch N+1 is never written before sync N returned. A failed write poisons the journal.
func (j *Journal) Write() (Flight, error) {
	if err := j.usable(); err != nil {
		return Flight{}, err
	}
	if !j.flying.Empty() {
		panic(fmt.Sprintf("journal: Write with batch %d in flight; Synced first", j.flying.batch))
	}
	if j.buffered == 0 {
		return Flight{}, nil
	}
	last := j.buf[j.lastFrame:]
	last[frameHdrLen+16] |= flagEnd
	sealFrame(last)
	if err := j.writeBatch(); err != nil {
		return Flight{}, j.fail(fmt.Errorf("writing batch %d (LSN %d to %d): %w", j.batch, j.durable+1, j.next-1, err))
	}
	j.flying = Flight{f: j.f, through: j.next - 1, batch: j.batch, bytes: int64(len(j.buf))}
	j.batch++
	j.buffered = 0
	if cap(j.buf) > bufKeepMax {
		j.buf = nil
	} else {
		j.buf = j.buf[:0]
	}
	return j.flying, nil
}

// writeBatch puts the buffered batch at the journal's end: over spare zeros when the file
// has room, after extending it with zeros when it has not (PreallocBytes past the batch), or,
// with preallocation off and no spare, appended.
func (j *Journal) writeBatch() error {
	end := j.size + int64(len(j.buf))
	if end > j.alloc {
		to := end
		if j.cfg.PreallocBytes > 0 {
			// Never past JournalMax for the spare alone: the bound is on the file.
			to = max(end, min(end+j.cfg.PreallocBytes, j.cfg.JournalMax))
		}
		if j.alloc == j.size && to == end {
			if err := writeFull(j.f, j.buf); err != nil {
				return err
			}
			j.alloc = end
			return nil
		}
		if err := writeFull(j.f, make([]byte, to-j.alloc)); err != nil {
			return fmt.Errorf("extending the file to %d bytes: %w", to, err)
		}
		j.alloc = to
	}
	return writeAtFull(j.f, j.buf, j.size)
}

// writeFull is File.Write that counts a short write reported without an error as one.
func writeFull(f core.File, b []byte) error {
	n, err := f.Write(b)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	return err
}

// Synced ends fl, the batch in flight, with its Sync's result, and returns the highest durable
// LSN: fl's last one when syncErr is nil. A failed sync poisons the journal (the batch is not
// acknowledged; records appended since are dropped with it). Misuse panics: fl is not the
// batch in flight.
func (j *Journal) Synced(fl Flight, syncErr error) (LSN, error) {
	if fl.Empty() || j.flying.Empty() || fl.batch != j.flying.batch {
		panic(fmt.Sprintf("journal: Synced for batch %d, but batch %d is in flight", fl.batch, j.flying.batch))
	}
	j.flying = Flight{}
	if err := j.usable(); err != nil {
		return j.durable, err
	}
	if syncErr != nil {
		// The batch is cut back by fail; records appended during the flight were never
		// written and are dropped with it (nothing is written once poisoned).
		j.buf, j.buffered, j.next = j.buf[:0], 0, j.durable+1
		return j.durable, j.fail(fmt.Errorf("syncing batch %d (LSN %d to %d): %w", fl.batch, j.durable+1, fl.through, syncErr))
	}
	j.size += fl.bytes
	j.grown += fl.bytes
	j.durable = fl.through
	return j.durable, nil
}

// Flying reports whether a batch is in flight (written, its sync not yet reported).
func (j *Journal) Flying() bool { return !j.flying.Empty() }

// fail poisons the journal with the first failure of a batch, then cuts the file back to its
// last complete batch and syncs that cut. This is not a retry of the failed fsync: the bytes
// of the failed batch are undecided (the kernel may have dropped them, a later fsync may report
// success without writing them), so they must not be left where a reopen in this same process
// would replay them and later batches would be synced after them. A failure of the cut is
// joined to the poison; the next Open then sees the failed batch as a tail.
func (j *Journal) fail(first error) error {
	j.poison = first
	if err := j.f.Truncate(j.size); err != nil {
		j.poison = errors.Join(first, fmt.Errorf("%w: cutting %q back to %d bytes: %w", ErrUndecided, j.name, j.size, err))
		return j.usable()
	}
	j.alloc = j.size
	if err := j.f.Sync(); err != nil {
		j.poison = errors.Join(first, fmt.Errorf("%w: syncing the cut of %q back to %d bytes: %w", ErrUndecided, j.name, j.size, err))
	}
	return j.usable()
}

// Durable returns the highest LSN synced to disk.
func (j *Journal) Durable() LSN { return j.durable }

// Size returns the journal's length: the header and the synced batches. The file may be
// longer by its preallocated spare.
func (j *Journal) Size() int64 { return j.size }

// GrownBytes returns the bytes of the batches after the last snapshot (or after the header
// when the file has none): what a compaction would take out, wherever the batches were
// written. It is read from the file at open, so a journal reopened often still reaches a
// compaction threshold.
func (j *Journal) GrownBytes() int64 { return j.grown }

// Compact replaces the journal with a file holding one snapshot record (LSN = Durable()) that
// must stand for every record so far. Nothing may be buffered. Outcomes (docs/journal.md):
//   - kept: it failed before the rename; the old journal stands and stays usable; an error is
//     returned;
//   - lost: it failed after the rename; the journal is poisoned until reopened, and a reopen
//     finds either the old or the new file, which replay to the same state.
func (j *Journal) Compact(tag uint8, snapshot []byte) error {
	if err := j.usable(); err != nil {
		return err
	}
	if j.buffered != 0 || !j.flying.Empty() {
		panic(fmt.Sprintf("journal: Compact with %d records buffered, batch in flight %v; Commit first", j.buffered, !j.flying.Empty()))
	}
	if len(snapshot) > j.cfg.SnapshotMax {
		return fmt.Errorf("journal: compacting %q: %w: snapshot of %d bytes, SnapshotMax is %d",
			j.name, ErrTooLarge, len(snapshot), j.cfg.SnapshotMax)
	}
	data := appendHeader(make([]byte, 0, headerLen+frameMin+len(snapshot)), headerFlagSnapshot)
	data = appendFrame(data, j.durable, j.batch, flagEnd|flagSnapshot, tag, snapshot)
	renamed, err := swap(j.fs, j.name, data)
	if err != nil {
		err = fmt.Errorf("journal: compacting %q: %w", j.name, err)
		if renamed {
			j.poison = err
			return j.usable()
		}
		return err
	}
	// The old file is unlinked; closing it cannot lose anything acknowledged.
	if cerr := j.f.Close(); cerr != nil {
		j.cfg.Logger.Warn("journal: closing the journal replaced by compaction", "file", j.name, "err", cerr)
	}
	f, err := j.fs.Open(j.name)
	if err != nil {
		j.f = nil
		j.poison = fmt.Errorf("journal: opening %q after compaction: %w", j.name, err)
		return j.usable()
	}
	j.f = f
	j.size = int64(len(data))
	j.alloc = j.size
	j.grown = 0
	j.batch++
	return nil
}

// Close writes the clean-close mark (the file's length and last LSN) into the header, syncs
// it and closes the file. Records still buffered are dropped: they were never acknowledged.
// A poisoned journal is closed without the mark: its file may hold undecided bytes, which the
// next Open judges by the crash rows of the recovery table. So is one closed with a batch in
// flight (never acknowledged; the driver must not run its Sync any more). A failure to write
// or sync the mark leaves at worst a torn mark, which Open treats as none.
func (j *Journal) Close() error {
	if j.closed {
		return ErrClosed
	}
	j.closed = true
	undecided := !j.flying.Empty()
	j.buf, j.buffered, j.flying = nil, 0, Flight{}
	j.next = j.durable + 1
	if j.f == nil {
		return nil
	}
	var err error
	if j.poison == nil && !undecided {
		// The spare goes first, so a cleanly closed file is exactly its batches (a crash
		// before the cut is synced leaves zeros past the mark's length, which Open allows).
		if j.alloc > j.size {
			err = j.f.Truncate(j.size)
		}
		if err != nil {
			err = fmt.Errorf("journal: cutting the preallocated space of %q at %d bytes: %w", j.name, j.size, err)
		} else if err = writeAtFull(j.f, encodeMark(mark{size: j.size, last: j.durable}), markOff); err != nil {
			err = fmt.Errorf("journal: writing the clean-close mark of %q: %w", j.name, err)
		} else if err = j.f.Sync(); err != nil {
			err = fmt.Errorf("journal: syncing the clean-close mark of %q: %w", j.name, err)
		}
	}
	if cerr := j.f.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("journal: closing %q: %w", j.name, cerr))
	}
	return err
}
