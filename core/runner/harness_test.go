package runner

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/sim/disk"
)

const journalName = "jobs.journal"

// copyDisk copies every file of src, as the live process sees it, onto a fresh synced disk, so
// a checker can replay it without touching the live one.
func copyDisk(src core.FS) (*disk.Disk, error) {
	dst := disk.New(1)
	names, err := src.List()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		f, err := src.Open(n)
		if err != nil {
			return nil, err
		}
		size, err := f.Size()
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size)
		if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		g, err := dst.Create(n)
		if err != nil {
			return nil, err
		}
		if _, err := g.Write(buf); err != nil {
			return nil, err
		}
		if err := g.Sync(); err != nil {
			return nil, err
		}
		if err := g.Close(); err != nil {
			return nil, err
		}
	}
	return dst, dst.SyncDir()
}

// world is one simulated process and its disk, for scenario files and the rapid machine.
type world struct {
	d      *disk.Disk
	e      *Engine
	cfg    Config
	now    time.Time
	seed   int64
	starts []Attempt // dispatched and not yet reported
	logs   *strings.Builder
}

func newWorld(seed int64, cfg Config) *world {
	return &world{d: disk.New(seed), cfg: cfg, now: epoch, seed: seed}
}

func (w *world) open() error { return w.openWith(true) }

// openWith opens the engine, dispatching or not (to register kinds first).
func (w *world) openWith(dispatch bool) error {
	cfg := w.cfg
	cfg.Rand = rand.New(rand.NewSource(w.seed))
	w.seed++
	e, err := Open(w.d, journalName, cfg, w.now)
	if err != nil {
		w.e = nil
		return err
	}
	w.e = e
	w.starts = nil
	if !dispatch {
		return nil
	}
	return e.Dispatch(w.now, true)
}

// mustMachine is New for tests, which pass valid configs.
func mustMachine(cfg MachineConfig) *Machine {
	m, err := New(cfg)
	if err != nil {
		panic(err)
	}
	if err := m.Step(Dispatch{Now: epoch, On: true}); err != nil {
		panic(err)
	}
	return m
}

// crash drops the engine without Close and crashes the disk.
func (w *world) crash() {
	w.e = nil
	w.starts = nil
	w.d.Crash()
}

func (w *world) replay() (Snapshot, error) {
	c, err := copyDisk(w.d)
	if err != nil {
		return Snapshot{}, fmt.Errorf("copying the disk: %w", err)
	}
	return Replay(c, journalName, w.cfg)
}

// digest renders every file's name, size and CRC-32 of its bytes as the live process sees them.
func (w *world) digest() string {
	names, err := w.d.List()
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, n := range names {
		f, err := w.d.Open(n)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", n, err)
			continue
		}
		size, _ := f.Size()
		buf := make([]byte, size)
		_, rerr := f.ReadAt(buf, 0)
		_ = f.Close()
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			fmt.Fprintf(&b, "%s: %v\n", n, rerr)
			continue
		}
		fmt.Fprintf(&b, "%s %d bytes crc %08x\n", n, size, crc32.ChecksumIEEE(buf))
	}
	return b.String()
}

// files renders the directory.
func (w *world) files() string {
	names, err := w.d.List()
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, n := range names {
		size, err := w.d.Stat(n)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", n, err)
			continue
		}
		fmt.Fprintf(&b, "%s %d bytes\n", n, size)
	}
	return b.String()
}

func sameBytes(a, b []byte) bool { return bytes.Equal(a, b) }
