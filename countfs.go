package sluice

import (
	"sync/atomic"

	"github.com/sluicehq/sluice/core"
)

// counter counts fsyncs for Stats.Syncs.
type counter struct{ n atomic.Int64 }

func (c *counter) add()        { c.n.Add(1) }
func (c *counter) load() int64 { return c.n.Load() }

// countFS wraps an FS and counts fsyncs, so Stats and the benchmarks can report fsyncs per
// job whatever the engine does: File.Sync and SyncDir, plus the directory fsync that osfs
// performs inside each successful Create, Rename and Remove.
type countFS struct {
	core.FS
	syncs *counter
}

func (f countFS) Create(name string) (core.File, error) {
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	f.syncs.add()
	return countFile{file, f.syncs}, nil
}

func (f countFS) Rename(from, to string) error {
	err := f.FS.Rename(from, to)
	if err == nil {
		f.syncs.add()
	}
	return err
}

func (f countFS) Remove(name string) error {
	err := f.FS.Remove(name)
	if err == nil {
		f.syncs.add()
	}
	return err
}

func (f countFS) Open(name string) (core.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return countFile{file, f.syncs}, nil
}

func (f countFS) SyncDir() error {
	f.syncs.add()
	return f.FS.SyncDir()
}

type countFile struct {
	core.File
	syncs *counter
}

func (f countFile) Sync() error {
	f.syncs.add()
	return f.File.Sync()
}
