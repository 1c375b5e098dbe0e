//go:build unix

package main

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// lockHeld reports whether a runner holds dir's lock, without creating the lock file or
// keeping the lock: it takes the lock and drops it at once.
func lockHeld(dir string) (bool, error) {
	f, err := os.Open(filepath.Join(dir, "LOCK"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return true, nil
	}
	return false, syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
