package journal

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adapters/osfs"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/faultfs"
)

// The crash-point enumeration again, on the real disk: adapters/osfs wrapped in faultfs,
// which holds osfs to the syncs it really made (faultfs rule 2) and the journal to the
// core.FS contract (rule 1). For every script and every k, power is cut at the k-th mutating
// operation (of commits, compactions, creates, opens and closes), faultfs rewrites the real
// files to what the disk may have kept, and the journal reopens: nothing acknowledged lost,
// every open a replay or a cut (no synced data is damaged, so never a refusal).
//
// SLUICE_POWER_SCRIPTS sets how many scripts run (default 24); docs/journal.md has the
// figures of a longer sweep.
func TestPowerCutsOnTheRealDisk(t *testing.T) {
	scripts := int64(24)
	if n, err := strconv.Atoi(os.Getenv("SLUICE_POWER_SCRIPTS")); err == nil && n > 0 {
		scripts = int64(n)
	}
	start := time.Now()
	dir := t.TempDir()
	st, err := powerSweep(t, dir, scripts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d scripts, %d power cuts on %s (%d torn tails cut, %d inside compaction) in %v",
		scripts, st.points, dir, st.cuts, st.compacting, time.Since(start).Round(time.Millisecond))
	if st.cuts == 0 || st.compacting == 0 {
		t.Errorf("no cut left a torn tail (%d) or landed inside a compaction (%d)", st.cuts, st.compacting)
	}
}

// The sweep fails on the defects it is for, planted under faultfs through wrappers of osfs:
// a directory fsync that does nothing, and a file Sync that skips its fdatasync (the
// journal's own rename without a directory sync was planted by hand; see the commit).
func TestPowerCutsCatchPlantedDefects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(core.FS) core.FS
	}{
		{"directory fsync a no-op", func(in core.FS) core.FS { return noDirSync{in} }},
		{"file sync without fdatasync", func(in core.FS) core.FS { return noFileSync{in} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := powerSweep(t, t.TempDir(), 24, tc.plant); err == nil {
				t.Fatalf("24 scripts of power cuts with %s planted: nothing caught", tc.name)
			} else {
				t.Logf("caught: %.300s", err)
			}
		})
	}
}

type sweepStats struct{ points, cuts, compacting int }

// powerSweep runs the enumeration for scripts 0..scripts-1 in dir, with plant (if not nil)
// between osfs and faultfs, and returns the first broken promise.
func powerSweep(t *testing.T, dir string, scripts int64, plant func(core.FS) core.FS) (sweepStats, error) {
	var st sweepStats
	for seed := range scripts {
		s := genScript(seed)
		full, done := powerFS(t, dir, plant)
		m := runScript(full, s)
		total := full.Ops()
		done()
		if m.err != nil {
			return st, fmt.Errorf("%v: run without a cut: %w", s, m.err)
		}
		for k := 1; k <= total; k++ {
			f, done := powerFS(t, dir, plant)
			f.CutAfter(k)
			m := runScript(f, s)
			if !errors.Is(m.err, faultfs.ErrPowerCut) {
				return st, fmt.Errorf("%v: cut at op %d of %d: the run ended with %v, want the power cut", s, k, total, m.err)
			}
			if err := f.PowerCut(rand.New(rand.NewSource(seed*1_000_003 + int64(k)))); err != nil {
				t.Fatal(err)
			}
			r, err := checkRecovery(f, s, m)
			done()
			if err != nil {
				return st, fmt.Errorf("%v: power cut at op %d of %d (cut seed %d): %w\ncut: %s",
					s, k, total, seed*1_000_003+int64(k), err, f.LastCut())
			}
			st.points++
			if r.cut {
				st.cuts++
			}
			if m.compacting {
				st.compacting++
			}
		}
	}
	return st, nil
}

// noDirSync is a planted defect: SyncDir returns nil and syncs nothing.
type noDirSync struct{ core.FS }

func (noDirSync) SyncDir() error { return nil }

// noFileSync is a planted defect: File.Sync returns nil and syncs nothing.
type noFileSync struct{ core.FS }

func (p noFileSync) Create(name string) (core.File, error) { return noSyncFile(p.FS.Create(name)) }
func (p noFileSync) Open(name string) (core.File, error)   { return noSyncFile(p.FS.Open(name)) }

type noSync struct{ core.File }

func (noSync) Sync() error { return nil }

func noSyncFile(f core.File, err error) (core.File, error) {
	if err != nil {
		return nil, err
	}
	return noSync{f}, nil
}

// powerFS empties dir and returns osfs on it (under plant, if not nil) wrapped in faultfs,
// observed, and what closes them (a long sweep would run out of descriptors otherwise).
func powerFS(t *testing.T, dir string, plant func(core.FS) core.FS) (*faultfs.FS, func()) {
	t.Helper()
	var f *faultfs.FS
	o, err := osfs.NewWith(dir, osfs.Options{Synced: func(in core.File) {
		if f != nil { // not while the directory is emptied
			f.Observe(in)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	names, err := o.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if err := o.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	var inner core.FS = o
	if plant != nil {
		inner = plant(o)
	}
	if f, err = faultfs.Wrap(inner, faultfs.Options{Observed: true}); err != nil {
		t.Fatal(err)
	}
	return f, func() {
		// Files a run left open (a journal it abandoned at the cut) close with the cut.
		f.Exit()
		o.Close()
	}
}
