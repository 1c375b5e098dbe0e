//go:build unix

package sluice

import (
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive advisory lock on path, so two runners never share a journal.
// The kernel drops the lock when the process dies, also on SIGKILL.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%w: %s is held by another runner (close it first, or use Inspect to look without the lock)", ErrLocked, path)
	}
	return f, nil
}

func unlockDir(f *os.File) error { return f.Close() }
