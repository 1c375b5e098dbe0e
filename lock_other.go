//go:build !unix

package sluice

import (
	"fmt"
	"os"
	"runtime"
)

// errNoLock: without flock, two runners could open one directory and interleave their
// journals, so a runner refuses to open rather than run unguarded. Inspect, which takes no
// lock, still works.
var errNoLock = fmt.Errorf("sluice: cannot lock a runner's directory on %s (no flock): run the runner on a unix system; sluice.Inspect works here", runtime.GOOS)

func lockDir(path string) (*os.File, error) { return nil, errNoLock }

func unlockDir(f *os.File) error { return nil }
