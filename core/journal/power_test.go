package journal

import (
	"errors"
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
	var points, cuts, compacting int
	dir := t.TempDir()
	for seed := range scripts {
		s := genScript(seed)
		full := powerFS(t, dir)
		if m := runScript(full, s); m.err != nil {
			t.Fatalf("%v: run without a cut: %v", s, m.err)
		}
		total := full.Ops()
		for k := 1; k <= total; k++ {
			f := powerFS(t, dir)
			f.CutAfter(k)
			m := runScript(f, s)
			if !errors.Is(m.err, faultfs.ErrPowerCut) {
				t.Fatalf("%v: cut at op %d of %d: the run ended with %v, want the power cut", s, k, total, m.err)
			}
			if err := f.PowerCut(rand.New(rand.NewSource(seed*1_000_003 + int64(k)))); err != nil {
				t.Fatal(err)
			}
			r, err := checkRecovery(f, s, m)
			if err != nil {
				t.Fatalf("%v: power cut at op %d of %d (cut seed %d): %v\ncut: %s",
					s, k, total, seed*1_000_003+int64(k), err, f.LastCut())
			}
			points++
			if r.cut {
				cuts++
			}
			if m.compacting {
				compacting++
			}
		}
	}
	t.Logf("%d scripts, %d power cuts on %s (%d torn tails cut, %d inside compaction) in %v",
		scripts, points, dir, cuts, compacting, time.Since(start).Round(time.Millisecond))
	if cuts == 0 || compacting == 0 {
		t.Errorf("no cut left a torn tail (%d) or landed inside a compaction (%d)", cuts, compacting)
	}
}

// powerFS empties dir and returns osfs on it wrapped in faultfs, observed.
func powerFS(t *testing.T, dir string) *faultfs.FS {
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
	t.Cleanup(func() { o.Close() })
	names, err := o.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if err := o.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	if f, err = faultfs.Wrap(o, faultfs.Options{Observed: true}); err != nil {
		t.Fatal(err)
	}
	return f
}
