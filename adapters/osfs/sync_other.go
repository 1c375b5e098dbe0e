//go:build !linux

package osfs

import "os"

// datasync falls back to fsync(2) where fdatasync is not offered.
func datasync(f *os.File) error { return f.Sync() }
