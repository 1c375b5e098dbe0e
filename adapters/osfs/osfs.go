// Package osfs implements the core.FS port over one real directory.
//
// Rules:
//
//  1. File.Sync is fdatasync(2) on Linux (it flushes the data and the size, which is all a
//     reader needs), fsync(2) elsewhere. A failed Sync is returned, never retried.
//  2. Create, Rename and Remove each fsync the directory themselves before returning, so on
//     osfs they are durable when they return nil (docs/worker.md). SyncDir fsyncs the directory again.
//     Code written against core.FS must still call SyncDir after them: sim/disk does not sync
//     the directory on its own, and the core.FS contract promises durability only after SyncDir.
//  3. If the directory fsync after Create, Rename or Remove fails, the call returns the error
//     (the change may or may not be durable; the file system is the truth at the next open).
//  4. Names are plain file names: empty, ".", "..", or a name holding '/' or '\' is refused with
//     fs.ErrInvalid. A missing file gives an error for which errors.Is(err, fs.ErrNotExist) holds.
//  5. Every error names the path and the operation (an *fs.PathError, possibly wrapped).
//  6. Options.Synced, when set, hears of every fsync or fdatasync system call that returned
//     nil, right where it is made: a fault file system (internal/faultfs) holds osfs to the
//     syncs it really made, so that a Sync or SyncDir that skips its system call is caught
//     by a power cut.
package osfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluicehq/sluice/core"
)

// FS is a core.FS over one directory. Its methods are safe for concurrent use, as the os
// package's are; a File is not meant to be shared without the caller's own locking.
type FS struct {
	dir    string
	d      *os.File // the directory, open for SyncDir
	synced func(core.File)
}

var _ core.FS = (*FS)(nil)

// Options are New's seams; the zero Options is New.
type Options struct {
	// Synced, when set, is called after each fsync or fdatasync system call that returned
	// nil, with the File it synced, or nil for the directory (rule 6). It must not call
	// back into the FS.
	Synced func(f core.File)
}

// New creates dir if needed (with its parents) and opens it.
func New(dir string) (*FS, error) { return NewWith(dir, Options{}) }

// NewWith is New with options.
func NewWith(dir string, o Options) (*FS, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("osfs: create directory %s: %w", dir, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("osfs: open directory %s: %w", dir, err)
	}
	synced := o.Synced
	if synced == nil {
		synced = func(core.File) {}
	}
	return &FS{dir: dir, d: d, synced: synced}, nil
}

// fsyncDir is the directory's fsync(2); the one place osfs makes directory entries durable.
func (s *FS) fsyncDir() error {
	if err := s.d.Sync(); err != nil {
		return err
	}
	s.synced(nil)
	return nil
}

// Dir returns the directory.
func (s *FS) Dir() string { return s.dir }

// Close closes the directory handle; Files stay open.
func (s *FS) Close() error {
	if err := s.d.Close(); err != nil {
		return fmt.Errorf("osfs: close directory %s: %w", s.dir, err)
	}
	return nil
}

func (s *FS) path(op, name string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return filepath.Join(s.dir, name), nil
}

// wrap makes err an *fs.PathError naming op and path, unless the os package already did.
func wrap(op, path string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	if err == nil || err == io.EOF || errors.As(err, &pe) || errors.As(err, &le) {
		return err
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}

func (s *FS) syncDir(op, path string) error {
	if err := s.fsyncDir(); err != nil {
		return fmt.Errorf("osfs: %s %s: sync directory: %w", op, path, err)
	}
	return nil
}

// Create creates or truncates name and fsyncs the directory (rule 2).
func (s *FS) Create(name string) (core.File, error) {
	path, err := s.path("create", name)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, wrap("create", path, err)
	}
	if err := s.syncDir("create", path); err != nil {
		f.Close()
		return nil, err
	}
	return &file{f: f, path: path, synced: s.synced}, nil // size 0: just truncated
}

// Open opens an existing file for reading and appending.
func (s *FS) Open(name string) (core.File, error) {
	path, err := s.path("open", name)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, wrap("open", path, err)
	}
	fl := &file{f: f, path: path, synced: s.synced}
	if _, err := fl.Size(); err != nil {
		f.Close()
		return nil, err
	}
	return fl, nil
}

// Rename atomically replaces to with from and fsyncs the directory (rule 2).
func (s *FS) Rename(from, to string) error {
	fromPath, err := s.path("rename", from)
	if err != nil {
		return err
	}
	toPath, err := s.path("rename", to)
	if err != nil {
		return err
	}
	if err := os.Rename(fromPath, toPath); err != nil {
		return wrap("rename", fromPath, err)
	}
	return s.syncDir("rename", fromPath)
}

// Remove deletes name and fsyncs the directory (rule 2).
func (s *FS) Remove(name string) error {
	path, err := s.path("remove", name)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		return wrap("remove", path, err)
	}
	return s.syncDir("remove", path)
}

// SyncDir fsyncs the directory.
func (s *FS) SyncDir() error {
	if err := s.fsyncDir(); err != nil {
		return fmt.Errorf("osfs: sync directory %s: %w", s.dir, err)
	}
	return nil
}

// List returns the names in the directory, sorted.
func (s *FS) List() ([]string, error) {
	entries, err := os.ReadDir(s.dir) // sorted by name
	if err != nil {
		return nil, wrap("list", s.dir, err)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

// Stat returns the size of name.
func (s *FS) Stat(name string) (int64, error) {
	path, err := s.path("stat", name)
	if err != nil {
		return 0, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0, wrap("stat", path, err)
	}
	return fi.Size(), nil
}

// file is a core.File over an *os.File. It is not opened with O_APPEND, which would make
// WriteAt append too (pwrite on Linux): Write seeks to the end first.
type file struct {
	f      *os.File
	path   string
	closed bool // datasync's raw descriptor access reports a closed file in its own words
	// size is the file's length as this handle last saw it (at open, after its own writes,
	// truncates and Size calls): WriteAt's bound, checked without a system call. An fstat
	// before each overwrite made the fdatasync after it about 50 µs slower on ext4 here,
	// which is most of what writing over preallocated space saves.
	size   int64
	synced func(core.File) // Options.Synced
}

func (f *file) Write(p []byte) (int, error) {
	end, err := f.f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, wrap("write", f.path, err)
	}
	n, err := f.f.Write(p)
	f.size = end + int64(n)
	return n, wrap("write", f.path, err)
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > f.size {
		return 0, wrap("write", f.path, fmt.Errorf("WriteAt of %d bytes at %d beyond the end (%d): %w", len(p), off, f.size, fs.ErrInvalid))
	}
	n, err := f.f.WriteAt(p, off)
	return n, wrap("write", f.path, err)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.f.ReadAt(p, off)
	return n, wrap("read", f.path, err)
}

// Sync is fdatasync where available (rule 1).
func (f *file) Sync() error {
	if f.closed {
		return &fs.PathError{Op: "sync", Path: f.path, Err: fs.ErrClosed}
	}
	return wrap("sync", f.path, datasync(f.f, func() { f.synced(f) }))
}

func (f *file) Truncate(size int64) error {
	if err := f.f.Truncate(size); err != nil {
		return wrap("truncate", f.path, err)
	}
	f.size = size
	return nil
}

func (f *file) Size() (int64, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return 0, wrap("size", f.path, err)
	}
	f.size = fi.Size()
	return f.size, nil
}

func (f *file) Close() error {
	f.closed = true
	return wrap("close", f.path, f.f.Close())
}
