package core

import (
	"fmt"
	"io"
)

// FS is the file-system port: one flat directory of files. Names are plain file names
// (no separators). Every call can fail, and callers handle each failure.
//
// Durability rules, the same for the real disk (adapters/osfs) and the simulated one (sim/disk):
//   - data written to a File is durable only after File.Sync returns nil;
//   - a Create, Rename or Remove is durable only after SyncDir returns nil;
//   - a missing file is reported with an error for which errors.Is(err, fs.ErrNotExist) holds.
type FS interface {
	// Create and Remove may likewise fail after taking effect.
	// Create creates the named file, truncating it if it exists, open for reading and appending.
	Create(name string) (File, error)
	// Open opens an existing file for reading and appending.
	Open(name string) (File, error)
	// Rename atomically replaces to with from. An error does not prove the rename did not
	// happen (osfs renames, then fsyncs the directory): callers check what is on disk.
	Rename(from, to string) error
	// Remove deletes the named file.
	Remove(name string) error
	// SyncDir makes the directory's entries (creates, renames, removes) durable.
	SyncDir() error
	// List returns the names in the directory, sorted.
	List() ([]string, error)
	// Stat returns the size of the named file.
	Stat(name string) (int64, error)
}

// File is an open file of an FS. Writes go to the end of the file, except WriteAt's.
type File interface {
	// Write appends p at the end of the file.
	Write(p []byte) (int, error)
	// WriteAt overwrites len(p) bytes at off, which must lie within the file: it never
	// changes the size (the journal rewrites its header's clean-close mark with it). Like
	// Write, it is durable only after Sync, and a crash may tear it.
	WriteAt(p []byte, off int64) (int, error)
	// ReadAt reads len(p) bytes at off; it returns io.EOF when fewer are there.
	ReadAt(p []byte, off int64) (int, error)
	// Sync makes everything written so far durable (fsync or fdatasync). After a failed
	// Sync the file's durable contents are unknown: callers must not retry it.
	Sync() error
	// Truncate cuts the file to size bytes; later writes append from there.
	Truncate(size int64) error
	// Size returns the current size, including unsynced writes.
	Size() (int64, error)
	// Close releases the file; it does not sync.
	Close() error
}

// ReadFile reads the whole of name from fsys: the inspections, fault layers and checkers that
// need a file's bytes share it.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); err != nil && !(err == io.EOF && int64(n) == size) {
		return nil, fmt.Errorf("core: reading %q: %w", name, err)
	}
	return b, nil
}
