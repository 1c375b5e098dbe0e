package disk

import (
	"fmt"
	"io"
	"io/fs"

	"github.com/sluicehq/sluice/core"
)

// file is an open File. It keeps working on its inode after a Remove or Rename, as on POSIX.
type file struct {
	d      *Disk
	name   string // the name it was opened by, for errors
	ino    *inode
	gen    int
	closed bool
}

var _ core.File = (*file)(nil)

func (d *Disk) newFile(name string, ino *inode) *file {
	return &file{d: d, name: name, ino: ino, gen: d.gen}
}

// check reports a closed or crashed file; the caller holds d.mu.
func (f *file) check(op string) error {
	if f.gen != f.d.gen {
		return fmt.Errorf("disk: %s %s: %w", op, f.name, ErrCrashed)
	}
	if f.closed {
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	}
	return nil
}

func (f *file) Write(p []byte) (int, error) {
	d := f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := f.check("write"); err != nil {
		return 0, err
	}
	if err := d.begin(OpWrite, f.name); err != nil {
		return 0, err
	}
	n := len(p)
	var err error
	if d.chance(d.faults.WriteErr) {
		n = 0
		if len(p) > 0 {
			n = d.rng.Intn(len(p))
		}
		err = fmt.Errorf("disk: write %s: short write of %d of %d bytes: %w", f.name, n, len(p), ErrInjected)
	} else {
		n = d.shortWrite(n) // reported without an error
	}
	if n > 0 {
		ino := f.ino
		off := int64(len(ino.data))
		ino.data = append(ino.data, p[:n]...)
		ino.pending = append(ino.pending, change{off: off, data: append([]byte(nil), p[:n]...)})
	}
	return n, err
}

// WriteAt overwrites p at off inside the file; it is a pending change like a write (rule 3),
// whose torn garbage never passes its own end.
func (f *file) WriteAt(p []byte, off int64) (int, error) {
	d := f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := f.check("write"); err != nil {
		return 0, err
	}
	ino := f.ino
	if off < 0 || off+int64(len(p)) > int64(len(ino.data)) {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrInvalid}
	}
	if err := d.begin(OpWrite, f.name); err != nil {
		return 0, err
	}
	n := len(p)
	var err error
	if d.chance(d.faults.WriteErr) {
		n = 0
		if len(p) > 0 {
			n = d.rng.Intn(len(p))
		}
		err = fmt.Errorf("disk: write %s at %d: short write of %d of %d bytes: %w", f.name, off, n, len(p), ErrInjected)
	} else {
		n = d.shortWrite(n) // reported without an error
	}
	if n > 0 {
		copy(ino.data[off:], p[:n])
		ino.pending = append(ino.pending, change{off: off, at: true, data: append([]byte(nil), p[:n]...)})
	}
	return n, err
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	d := f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	if err := d.begin(OpRead, f.name); err != nil {
		return 0, err
	}
	data := f.ino.data
	if err := d.readFault(d.faults.ReadErr, "read", f.name); err != nil {
		// EIO, half the time after part of the bytes asked for.
		n := 0
		if d.rread.Intn(2) == 0 && len(p) > 0 && off < int64(len(data)) {
			n = copy(p[:d.rread.Intn(len(p))], data[off:])
		}
		return n, err
	}
	if off >= int64(len(data)) {
		return 0, io.EOF
	}
	n := copy(p, data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Sync makes the file's writes and truncates so far durable (rule 1), except those left
// undecided by an earlier failed Sync (rule 4).
func (f *file) Sync() error {
	d := f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := f.check("sync"); err != nil {
		return err
	}
	ino := f.ino
	err := d.begin(OpSync, f.name)
	if err == nil && d.chance(d.faults.SyncErr) {
		err = fmt.Errorf("disk: sync %s: %w", f.name, ErrInjected)
	}
	if err != nil {
		// Rule 4, however the failure came (a crash point leaves them unsynced anyway).
		for i := range ino.pending {
			if !ino.pending[i].synced {
				ino.pending[i].undecided = true
			}
		}
		return err
	}
	for i := range ino.pending {
		if !ino.pending[i].undecided {
			ino.pending[i].synced = true
		}
	}
	ino.settle()
	return nil
}

func (f *file) Truncate(size int64) error {
	d := f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := f.check("truncate"); err != nil {
		return err
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: fs.ErrInvalid}
	}
	if err := d.begin(OpTruncate, f.name); err != nil {
		return err
	}
	if d.chance(d.faults.TruncateErr) {
		return fmt.Errorf("disk: truncate %s: %w", f.name, ErrInjected)
	}
	f.ino.truncate(size)
	return nil
}

func (f *file) Size() (int64, error) {
	d := f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := f.check("size"); err != nil {
		return 0, err
	}
	if err := d.begin(OpSize, f.name); err != nil {
		return 0, err
	}
	if err := d.readFault(d.faults.SizeErr, "size", f.name); err != nil {
		return 0, err
	}
	return int64(len(f.ino.data)), nil
}

// Close releases the file without syncing it.
func (f *file) Close() error {
	d := f.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := f.check("close"); err != nil {
		return err
	}
	f.closed = true
	return d.readFault(d.faults.CloseErr, "close", f.name)
}
