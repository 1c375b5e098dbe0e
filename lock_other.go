//go:build !unix

package sluice

import "os"

// lockDir is a no-op where flock is unavailable: the caller must not open a directory twice.
func lockDir(path string) (*os.File, error) { return nil, nil }

func unlockDir(f *os.File) error { return nil }
