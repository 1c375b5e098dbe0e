package journal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/sluicehq/sluice/core"
)

// finding is what Open finds on disk: one row of the recovery table.
type finding uint8

const (
	findLeftoverCompact finding = iota
	findNoJournal
	findClean
	findTorn
	findCorrupt
	findBadHeader
	findLoneCompact
)

// rule is one row of the recovery table (the same table is in doc.go).
type rule struct {
	finds finding
	name  string
	what  string // what open finds
	does  string // what it does
	// act performs the row; it runs only after look has read, classified and replayed
	// everything, so a refusal has written nothing.
	act func(o *opener) error
}

// recoveryTable is indexed by finding. The row for jobs running at the crash belongs to the
// runner, which sees them in the replayed records.
var recoveryTable = [...]rule{
	findLeftoverCompact: {findLeftoverCompact, "leftover-compact",
		"a leftover <name>.compact beside the journal, or alone holding no record (at most a sector: a create cut short)",
		"the rename did not happen: remove it, sync the directory, then the journal's own row",
		(*opener).removeCompact},
	findNoJournal: {findNoJournal, "no-journal",
		"no journal, or an empty file",
		"create it with its header (written to <name>.compact, synced, renamed, directory synced)",
		(*opener).create},
	findClean: {findClean, "clean",
		"a valid header and complete batches to the end (and, with a clean-close mark, exactly the length and last LSN it records)",
		"replay; clear the mark (write, sync) if there is one; sync the directory",
		(*opener).settle},
	findTorn: {findTorn, "torn",
		"no clean-close mark, and a short or bad frame, or a last batch without its end flag, with no valid frame of a later batch after it",
		"replay the complete batches; truncate to the end of the last one, clear a torn mark, sync, log at Warn with the offset and bytes dropped, sync the directory",
		(*opener).cut},
	findCorrupt: {findCorrupt, "corrupt",
		"a bad frame followed by a valid frame of a later batch; valid frames that do not follow on; a clean-close mark the file does not match; a record the replay refuses",
		"refuse, changing nothing: an error naming the file, the offset and the LSNs around it",
		(*opener).refuse},
	findBadHeader: {findBadHeader, "bad-header",
		"a bad header (or another format version) in a non-empty file",
		"refuse, changing nothing",
		(*opener).refuse},
	findLoneCompact: {findLoneCompact, "lone-compact",
		"a <name>.compact that may hold records, and no journal (or an empty one) beside it",
		"refuse, changing nothing: an error (ErrLoneCompact) saying what the .compact holds and what to do",
		(*opener).refuse},
}

// ErrLoneCompact: <name>.compact may hold records and there is no journal beside it. A
// compaction never leaves that (it renames the file over the journal); an operator moving
// files can. Open refuses rather than delete the jobs it may hold. It wraps ErrCorrupt too.
var ErrLoneCompact = errors.New("journal: a compaction file without its journal")

// leftoverMax is the most a create cut short can leave in <name>.compact: its header, torn
// with garbage up to the end of a sector. A lone .compact no longer than this holding no
// record is that leftover.
const leftoverMax = 512

// opener carries one Open or Read through the recovery table.
type opener struct {
	fs       core.FS
	name     string
	cfg      Config
	replayFn func(Record) error
	readOnly bool
	// noJournal: the leftover .compact being removed is a create's, with no journal beside it.
	noJournal bool

	f    core.File // the journal, open while classifying
	tail Tail
	ferr error    // the refusal
	j    *Journal // the result of Open
}

func (o *opener) compactName() string { return o.name + compactSuffix }

// look reads, classifies and replays the journal, and returns the rows to run, in order. It
// writes nothing, so every refusal is decided before anything changes. Read ignores a
// leftover .compact.
func (o *opener) look() ([]finding, error) {
	var rows []finding
	compact, err := o.fs.Stat(o.compactName())
	hasCompact := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("journal: stat %q: %w", o.compactName(), err)
	}
	size, err := o.fs.Stat(o.name)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && size == 0) {
		if hasCompact {
			lone, err := o.loneCompact(compact, err == nil)
			if err != nil || lone {
				return []finding{findLoneCompact}, err
			}
			if !o.readOnly {
				o.noJournal = true
				rows = append(rows, findLeftoverCompact)
			}
		}
		return append(rows, findNoJournal), nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: stat %q: %w", o.name, err)
	}
	if hasCompact && !o.readOnly {
		rows = append(rows, findLeftoverCompact)
	}
	f, err := o.fs.Open(o.name)
	if err != nil {
		return nil, fmt.Errorf("journal: open %q: %w", o.name, err)
	}
	o.f = f
	if size, err = f.Size(); err != nil {
		return nil, fmt.Errorf("journal: size of %q: %w", o.name, err)
	}
	src := &fileSource{f: f, n: size}
	o.tail, err = classify(src, o.replayFn, o.readOnly)
	var fe *FormatError
	switch {
	case errors.As(err, &fe):
		fe.File = o.name
		o.ferr = fe
		if errors.Is(fe, ErrBadHeader) {
			return []finding{findBadHeader}, nil
		}
		return []finding{findCorrupt}, nil
	case err != nil:
		return nil, fmt.Errorf("journal: reading %q: %w", o.name, err)
	case o.tail.Kind == TailTorn:
		return append(rows, findTorn), nil
	}
	return append(rows, findClean), nil
}

// loneCompact decides a <name>.compact of size bytes found without a journal (or beside an
// empty one): the leftover of a create cut short (false), or a file that may hold jobs (true,
// with the refusal in o.ferr).
func (o *opener) loneCompact(size int64, empty bool) (bool, error) {
	f, err := o.fs.Open(o.compactName())
	if err != nil {
		return false, fmt.Errorf("journal: open %q: %w", o.compactName(), err)
	}
	defer f.Close() // read only
	t, cerr := classify(&fileSource{f: f, n: size}, nil, false)
	if t.Records == 0 && size <= leftoverMax {
		return false, nil
	}
	holds := fmt.Sprintf("%d records (LSN %d-%d)", t.Records, t.First, t.Last)
	switch {
	case t.Records == 0:
		holds = "no record a scan can read"
	case t.Snapshot:
		holds = fmt.Sprintf("a snapshot standing for LSN 1-%d and %d records after it", t.First, t.Records-1)
	}
	if cerr != nil {
		holds += fmt.Sprintf(", then damage (%v)", cerr)
	}
	journal := "no " + fmt.Sprintf("%q", o.name)
	if empty {
		journal = fmt.Sprintf("an empty %q", o.name)
	}
	o.ferr = fmt.Errorf("%w (%w): found %q (%d bytes, holding %s) and %s beside it; a compaction never "+
		"leaves this, so the journal was probably moved or deleted. Nothing was changed. If %q is the "+
		"journal, rename it to %q; to start with an empty journal, move it out of the directory (its jobs "+
		"are then lost)", ErrLoneCompact, ErrCorrupt, o.compactName(), size, holds, journal, o.compactName(), o.name)
	return true, nil
}

func (o *opener) removeCompact() error {
	if err := o.fs.Remove(o.compactName()); err != nil {
		return fmt.Errorf("journal: removing leftover %q: %w", o.compactName(), err)
	}
	if err := o.fs.SyncDir(); err != nil {
		return fmt.Errorf("journal: syncing the directory after removing %q: %w", o.compactName(), err)
	}
	if o.noJournal {
		o.cfg.Logger.Warn("journal: removed the leftover of creating the journal (a header at most); creating it",
			"file", o.compactName())
		return nil
	}
	o.cfg.Logger.Warn("journal: removed leftover compaction file; replaying the old journal",
		"file", o.compactName())
	return nil
}

func (o *opener) create() error {
	if o.readOnly {
		o.tail = Tail{}
		return nil
	}
	if _, err := swap(o.fs, o.name, appendHeader(nil, 0)); err != nil {
		return fmt.Errorf("journal: creating %q: %w", o.name, err)
	}
	f, err := o.fs.Open(o.name)
	if err != nil {
		return fmt.Errorf("journal: opening %q after creating it: %w", o.name, err)
	}
	o.f = f
	o.tail = Tail{Kind: TailClean, Size: headerLen, Cut: headerLen, Base: headerLen}
	o.j = newJournal(o, f)
	return nil
}

// cut truncates the torn tail the replay stopped before, and clears a torn mark, under one
// sync. Read only reports it (Tail.Kind == TailTorn).
func (o *opener) cut() error {
	if o.readOnly {
		return nil
	}
	t := o.tail
	if err := o.f.Truncate(t.Cut); err != nil {
		return fmt.Errorf("journal: cutting the torn tail of %q at offset %d: %w", o.name, t.Cut, err)
	}
	if t.Marked {
		if err := o.writeMark(noMark[:]); err != nil {
			return err
		}
	}
	if err := o.f.Sync(); err != nil {
		// The cut is undecided now, like a failed batch (see Journal.fail).
		return fmt.Errorf("journal: %w: syncing %q after cutting its torn tail: %w", ErrUndecided, o.name, err)
	}
	o.cfg.Logger.Warn("journal: cut a torn tail", "file", o.name, "offset", t.Cut,
		"dropped", t.Dropped(), "reason", t.Reason, "last_lsn", uint64(t.Last))
	o.tail.Marked = false
	return o.settle()
}

// settle clears a clean-close mark durably, then syncs the directory, before the journal
// takes any append.
func (o *opener) settle() error {
	if o.readOnly {
		return nil
	}
	if o.tail.Marked {
		if err := o.writeMark(noMark[:]); err != nil {
			return err
		}
		if err := o.f.Sync(); err != nil {
			// The clear is undecided: a reopen in this process would see no mark (the page
			// cache) and append, while the disk may keep the mark under the new batches.
			return fmt.Errorf("journal: %w: syncing %q after clearing its clean-close mark: %w", ErrUndecided, o.name, err)
		}
		o.tail.Marked = false
	}
	// A SyncDir that failed before this Open (while creating or compacting) left the
	// journal's directory entry undecided; a successful one now settles it.
	if err := o.fs.SyncDir(); err != nil {
		return fmt.Errorf("journal: syncing the directory of %q: %w", o.name, err)
	}
	o.j = newJournal(o, o.f)
	return nil
}

func (o *opener) writeMark(b []byte) error {
	// A short count without an error may have left the mark whole: appending under it would
	// make the next Open refuse the journal.
	if err := writeAtFull(o.f, b, markOff); err != nil {
		return fmt.Errorf("journal: clearing the clean-close mark of %q: %w", o.name, err)
	}
	return nil
}

// writeAtFull is File.WriteAt that counts a short write reported without an error as one.
func writeAtFull(f core.File, b []byte, off int64) error {
	n, err := f.WriteAt(b, off)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	return err
}

func (o *opener) refuse() error {
	return o.ferr
}

// swap atomically makes name hold exactly data: write <name>.compact, sync it, close it,
// rename it over name, sync the directory. renamed reports that name may have been replaced
// (the rename returned nil, or returned an error with the .compact gone): a failure before
// the rename leaves name as it was (and maybe a leftover .compact, which the next Open
// removes); a failure after it leaves either file on disk after a crash.
func swap(fsys core.FS, name string, data []byte) (renamed bool, err error) {
	tmp := name + compactSuffix
	if err := writeSynced(fsys, tmp, data); err != nil {
		if rerr := fsys.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("removing %q: %w", tmp, rerr))
		}
		return false, err
	}
	if err := fsys.Rename(tmp, name); err != nil {
		err = fmt.Errorf("renaming %q over %q: %w", tmp, name, err)
		// A port may fail after the rename took place (osfs: the directory fsync that follows
		// it). Only a .compact still in place proves name was not replaced; otherwise the
		// old file may be unlinked and must not take more appends: count it as renamed.
		if _, serr := fsys.Stat(tmp); serr != nil {
			if !errors.Is(serr, fs.ErrNotExist) {
				err = errors.Join(err, fmt.Errorf("stat %q: %w", tmp, serr))
			}
			return true, err
		}
		if rerr := fsys.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("removing %q: %w", tmp, rerr))
		}
		return false, err
	}
	if err := fsys.SyncDir(); err != nil {
		return true, fmt.Errorf("syncing the directory after renaming %q over %q: %w", tmp, name, err)
	}
	return true, nil
}

// writeSynced creates name with data and syncs and closes it.
func writeSynced(fsys core.FS, name string, data []byte) error {
	f, err := fsys.Create(name)
	if err != nil {
		return fmt.Errorf("creating %q: %w", name, err)
	}
	n, err := f.Write(data)
	if err == nil && n != len(data) {
		err = io.ErrShortWrite
	}
	if err != nil {
		err = fmt.Errorf("writing %q: %w", name, err)
	} else if err = f.Sync(); err != nil {
		err = fmt.Errorf("syncing %q: %w", name, err)
	}
	if cerr := f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("closing %q: %w", name, cerr)
	}
	return err
}
