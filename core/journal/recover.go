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
)

func (f finding) String() string {
	if int(f) < len(recoveryTable) {
		return recoveryTable[f].name
	}
	return fmt.Sprintf("finding(%d)", uint8(f))
}

// rule is one row of the recovery table of SPEC 2.6 (the same table is in doc.go).
type rule struct {
	finds finding
	name  string
	what  string // what open finds
	does  string // what it does
	// act performs the row; done=false sends Open back to look again.
	act func(o *opener) (done bool, err error)
}

// recoveryTable is indexed by finding. The row for jobs running at the crash belongs to the
// runner, which sees them in the replayed records.
var recoveryTable = [...]rule{
	findLeftoverCompact: {findLeftoverCompact, "leftover-compact",
		"a leftover <name>.compact",
		"the rename did not happen: remove it, sync the directory, look again",
		(*opener).removeCompact},
	findNoJournal: {findNoJournal, "no-journal",
		"no journal, or an empty file",
		"create it with its header (written to <name>.compact, synced, renamed, directory synced)",
		(*opener).create},
	findClean: {findClean, "clean",
		"a valid header and complete batches to the end",
		"sync the directory, replay",
		(*opener).replay},
	findTorn: {findTorn, "torn",
		"a short or bad frame, or a last batch without its end flag, with no valid frame of a later batch after it",
		"truncate to the end of the last complete batch, sync, log at Warn with the offset and bytes dropped, sync the directory, replay",
		(*opener).cut},
	findCorrupt: {findCorrupt, "corrupt",
		"a bad frame followed by a valid frame of a later batch, or valid frames that do not follow on",
		"refuse: an error naming the file, the offset and the LSNs around it; truncate nothing",
		(*opener).refuse},
	findBadHeader: {findBadHeader, "bad-header",
		"a bad header in a non-empty file",
		"refuse",
		(*opener).refuse},
}

// lookMax bounds Open's look-act loop: a leftover .compact is removed once, then one
// terminal row runs.
const lookMax = 3

// opener carries one Open through the recovery table.
type opener struct {
	fs       core.FS
	name     string
	cfg      Config
	replayFn func(Record) error

	f    core.File // the journal, open while classifying
	data []byte    // its bytes
	tail Tail
	ferr *FormatError
	j    *Journal // the result of a terminal row
}

func (o *opener) compactName() string { return o.name + compactSuffix }

// look decides which row applies. Side effects: opens and reads the journal.
func (o *opener) look() (finding, error) {
	if _, err := o.fs.Stat(o.compactName()); err == nil {
		return findLeftoverCompact, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("journal: stat %q: %w", o.compactName(), err)
	}
	size, err := o.fs.Stat(o.name)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && size == 0) {
		return findNoJournal, nil
	}
	if err != nil {
		return 0, fmt.Errorf("journal: stat %q: %w", o.name, err)
	}
	f, err := o.fs.Open(o.name)
	if err != nil {
		return 0, fmt.Errorf("journal: open %q: %w", o.name, err)
	}
	o.f = f
	if size, err = f.Size(); err != nil {
		return 0, fmt.Errorf("journal: size of %q: %w", o.name, err)
	}
	o.data = make([]byte, size)
	if n, err := f.ReadAt(o.data, 0); n != len(o.data) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, fmt.Errorf("journal: read %q (%d of %d bytes): %w", o.name, n, size, err)
	}
	o.tail, err = classify(o.data)
	var fe *FormatError
	switch {
	case errors.As(err, &fe):
		fe.File = o.name
		o.ferr = fe
		if errors.Is(fe, ErrBadHeader) {
			return findBadHeader, nil
		}
		return findCorrupt, nil
	case err != nil:
		return 0, err
	case o.tail.Kind == TailTorn:
		return findTorn, nil
	}
	return findClean, nil
}

func (o *opener) removeCompact() (bool, error) {
	if err := o.fs.Remove(o.compactName()); err != nil {
		return false, fmt.Errorf("journal: removing leftover %q: %w", o.compactName(), err)
	}
	if err := o.fs.SyncDir(); err != nil {
		return false, fmt.Errorf("journal: syncing the directory after removing %q: %w", o.compactName(), err)
	}
	o.cfg.Logger.Warn("journal: removed leftover compaction file; replaying the old journal",
		"file", o.compactName())
	return false, nil
}

func (o *opener) create() (bool, error) {
	if _, err := swap(o.fs, o.name, appendHeader(nil, 0)); err != nil {
		return true, fmt.Errorf("journal: creating %q: %w", o.name, err)
	}
	f, err := o.fs.Open(o.name)
	if err != nil {
		return true, fmt.Errorf("journal: opening %q after creating it: %w", o.name, err)
	}
	o.f = f
	o.tail = Tail{Kind: TailClean, Size: headerLen, Cut: headerLen}
	o.j = newJournal(o, f)
	return true, nil
}

func (o *opener) cut() (bool, error) {
	t := o.tail
	if err := o.f.Truncate(t.Cut); err != nil {
		return true, fmt.Errorf("journal: cutting the torn tail of %q at offset %d: %w", o.name, t.Cut, err)
	}
	if err := o.f.Sync(); err != nil {
		// The cut is undecided now, like a failed batch (see Journal.fail).
		return true, fmt.Errorf("journal: %w: syncing %q after cutting its torn tail: %w", ErrUndecided, o.name, err)
	}
	o.cfg.Logger.Warn("journal: cut a torn tail", "file", o.name, "offset", t.Cut,
		"dropped", t.Dropped(), "reason", t.Reason, "last_lsn", uint64(t.Last))
	return o.replay()
}

func (o *opener) replay() (bool, error) {
	// A SyncDir that failed before this Open (while creating or compacting) left the
	// journal's directory entry undecided; a successful one now settles it.
	if err := o.fs.SyncDir(); err != nil {
		return true, fmt.Errorf("journal: syncing the directory of %q: %w", o.name, err)
	}
	if err := replayPrefix(o.data, o.tail, o.replayFn); err != nil {
		return true, fmt.Errorf("journal: opening %q: %w", o.name, err)
	}
	o.j = newJournal(o, o.f)
	return true, nil
}

func (o *opener) refuse() (bool, error) {
	return true, o.ferr
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
