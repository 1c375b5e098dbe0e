package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/journal"
)

// journalName is the runner's journal file in its directory (the root package's journalName).
const journalName = "jobs.journal"

// verify scans the journal twice: frame by frame (journal.Read over a file system that cannot
// write), then record by record (sluice.Inspect, which replays every record as the runner
// does). Damage is a refusal of either, and so is a .compact without its journal; a torn tail
// is not: the next Open cuts it, which verify says only once the records replay too.
func verify(o options, stdout io.Writer) (int, error) {
	if fi, err := os.Stat(o.dir); err != nil || !fi.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return exitFinding, fmt.Errorf("--dir %s: %w", o.dir, err)
	}
	path := filepath.Join(o.dir, journalName)
	fmt.Fprintf(stdout, "journal  %s\n", path)
	if held, err := lockHeld(o.dir); err == nil && held {
		fmt.Fprintln(stdout, "note     a running runner holds the directory: this scan sees the journal as of its last sync")
	}
	tail, err := journal.Read(roFS{o.dir}, journalName, journal.Config{}, nil)
	if errors.Is(err, journal.ErrLoneCompact) {
		fmt.Fprintf(stdout, "refused  %v\n", err)
		return exitFinding, fmt.Errorf("verify: %s.compact has no journal beside it; the runner's Open refuses the directory", path)
	}
	var fe *journal.FormatError
	if errors.As(err, &fe) {
		fmt.Fprintf(stdout, "damage   at offset %d of %s (LSN before %d, after %d): %s\n", fe.Offset, path, fe.Before, fe.After, fe.Reason)
		fmt.Fprintf(stdout, "intact   %d records (LSN %d-%d, complete up to batch %d) before offset %d\n",
			tail.Records, tail.First, tail.Last, tail.LastBatch, tail.Cut)
		fmt.Fprintf(stdout, "what to do: nothing was changed; the runner's Open refuses this journal until it is replaced. "+
			"Restore %s from a backup, or move it aside to start with an empty journal (its jobs are then lost).\n", path)
		return exitFinding, fmt.Errorf("verify: %s is damaged at offset %d", path, fe.Offset)
	}
	if err != nil {
		return exitFinding, fmt.Errorf("verify: reading %s: %w", path, err)
	}
	if _, err := os.Stat(path + ".compact"); err == nil {
		// Read refused a .compact that may hold jobs without a journal: this one is beside
		// the journal, or the few bytes of a create cut short.
		holds := "the journal holds every job"
		if tail.Kind == journal.TailEmpty {
			holds = "it holds no record: a create cut short"
		}
		fmt.Fprintf(stdout, "note     %s.compact is left from a compaction or a create that a crash interrupted before its rename: "+
			"the next Open removes it (%s)\n", path, holds)
	}
	if tail.Kind == journal.TailEmpty {
		fmt.Fprintln(stdout, "empty    no journal yet: the directory holds no jobs")
		fmt.Fprintln(stdout, "ok")
		return exitOK, nil
	}
	printTail(stdout, tail)
	in, err := sluice.Inspect(o.dir)
	if err != nil {
		fmt.Fprintf(stdout, "records  %v\n", err)
		fmt.Fprintln(stdout, "what to do: nothing was changed; the runner's Open refuses this journal (the frames are sound, a record is not)")
		if errors.As(err, &fe) {
			return exitFinding, fmt.Errorf("verify: a record of %s at offset %d does not replay", path, fe.Offset)
		}
		return exitFinding, fmt.Errorf("verify: %s does not replay: %w", path, err)
	}
	if tail.Kind == journal.TailTorn {
		fmt.Fprintf(stdout, "cut      the %d bytes after offset %d were never acknowledged: the next Open cuts them\n", tail.Dropped(), tail.Cut)
	}
	fmt.Fprintf(stdout, "records  every record replays: %d jobs, last id %d", len(in.Jobs), in.LastID)
	if len(in.Interrupted) > 0 {
		fmt.Fprintf(stdout, ", %d interrupted (the next Open records each as a failed attempt)", len(in.Interrupted))
	}
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "ok")
	return exitOK, nil
}

// printTail reports what the frame scan found: size, snapshot, batches, close and tail.
func printTail(stdout io.Writer, tail journal.Tail) {
	fmt.Fprintf(stdout, "size     %d bytes\n", tail.Size)
	snap := "no (written from the start)"
	if tail.Snapshot {
		snap = "yes (a compaction wrote it: the first record holds every job)"
	}
	fmt.Fprintf(stdout, "snapshot %s\n", snap)
	fmt.Fprintf(stdout, "batches  complete up to batch %d: %d records, LSN %d-%d, each frame's CRC and sequence checked\n", tail.LastBatch, tail.Records, tail.First, tail.Last)
	switch {
	case tail.Closed:
		fmt.Fprintln(stdout, "close    closed cleanly: the clean-close mark matches the file's length and last LSN")
	case tail.Marked:
		fmt.Fprintln(stdout, "close    a torn clean-close mark (a crash while it was written or cleared): counts as none")
	default:
		fmt.Fprintln(stdout, "close    no clean-close mark: the runner crashed, or is running")
	}
	switch {
	case tail.Kind == journal.TailTorn:
		fmt.Fprintf(stdout, "tail     torn: %s; the %d bytes after offset %d are an unfinished batch a crash left, not damage\n",
			tail.Reason, tail.Dropped(), tail.Cut)
	case tail.Spare > 0:
		fmt.Fprintf(stdout, "tail     clean: complete batches to offset %d, then %d bytes of zeros the journal preallocated for its next batches\n", tail.Cut, tail.Spare)
	default:
		fmt.Fprintln(stdout, "tail     clean: complete batches to the end")
	}
}

// roFS is a core.FS that can only read: every write is refused, so verify cannot change a byte.
type roFS struct{ dir string }

var errReadOnly = errors.New("sluice verify reads only")

func (r roFS) path(name string) string { return filepath.Join(r.dir, name) }

func (r roFS) Create(string) (core.File, error) { return nil, errReadOnly }
func (r roFS) Rename(string, string) error      { return errReadOnly }
func (r roFS) Remove(string) error              { return errReadOnly }
func (r roFS) SyncDir() error                   { return errReadOnly }

func (r roFS) Open(name string) (core.File, error) {
	f, err := os.Open(r.path(name))
	if err != nil {
		return nil, err
	}
	return roFile{f}, nil
}

func (r roFS) List() ([]string, error) {
	es, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name()
	}
	return names, nil
}

func (r roFS) Stat(name string) (int64, error) {
	fi, err := os.Stat(r.path(name))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

type roFile struct{ f *os.File }

func (f roFile) Write([]byte) (int, error)          { return 0, errReadOnly }
func (f roFile) WriteAt([]byte, int64) (int, error) { return 0, errReadOnly }
func (f roFile) Sync() error                        { return errReadOnly }
func (f roFile) Truncate(int64) error               { return errReadOnly }
func (f roFile) ReadAt(p []byte, off int64) (int, error) {
	return f.f.ReadAt(p, off)
}
func (f roFile) Size() (int64, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
func (f roFile) Close() error { return f.f.Close() }
