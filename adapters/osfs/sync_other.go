//go:build !linux

package osfs

import "os"

// datasync falls back to fsync(2) where fdatasync is not offered; done runs after a
// successful one (rule 6).
func datasync(f *os.File, done func()) error {
	if err := f.Sync(); err != nil {
		return err
	}
	done()
	return nil
}
