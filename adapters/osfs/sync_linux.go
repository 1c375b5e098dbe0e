package osfs

import (
	"os"
	"syscall"
)

// datasync is fdatasync(2): it flushes the data and the metadata needed to read it (the size),
// not the timestamps. done runs right after a call that returned 0 (rule 6).
func datasync(f *os.File, done func()) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err // already an *fs.PathError (a closed file gives fs.ErrClosed)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Fdatasync(int(fd)) }); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	done()
	return nil
}
