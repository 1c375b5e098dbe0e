package faultfs

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand"
	"testing"

	"github.com/sluicehq/sluice/adapters/osfs"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/fstest"
)

// onDisk wraps osfs on a fresh directory, observed (rule 2) when observed is set.
func onDisk(t testing.TB, observed bool) (*FS, string) {
	t.Helper()
	dir := t.TempDir()
	var f *FS
	o, err := osfs.NewWith(dir, osfs.Options{Synced: func(in core.File) { f.Observe(in) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	if f, err = Wrap(o, Options{Observed: observed}); err != nil {
		t.Fatal(err)
	}
	return f, dir
}

// The wrapper is a core.FS like the one it wraps.
func TestContract(t *testing.T) {
	fstest.Run(t, func(t *testing.T) core.FS { f, _ := onDisk(t, true); return f })
}

func mustWrite(t *testing.T, f core.File, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func contents(t *testing.T, fsys core.FS, name string) (string, bool) {
	t.Helper()
	b, err := core.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// Synced data and synced entries survive every cut; the rest is sometimes lost, sometimes
// kept, sometimes torn, over many draws.
func TestPowerCutKeepsWhatWasSyncedOnly(t *testing.T) {
	f, _ := onDisk(t, false)
	var lostFile, keptFile, lostTail, keptTail, tornTail int
	for seed := range int64(200) {
		a, err := f.Create("a")
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, a, "synced|")
		if err := a.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := f.SyncDir(); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, a, "unsynced")
		b, err := f.Create("b") // never in a synced directory
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, b, "b")
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := f.PowerCut(rand.New(rand.NewSource(seed))); err != nil {
			t.Fatal(err)
		}
		got, ok := contents(t, f, "a")
		switch {
		case !ok || len(got) < len("synced|") || got[:7] != "synced|":
			t.Fatalf("seed %d: synced data lost: %q, %v (%s)", seed, got, ok, f.LastCut())
		case got == "synced|":
			lostTail++
		case got == "synced|unsynced":
			keptTail++
		default:
			tornTail++
		}
		if _, ok := contents(t, f, "b"); ok {
			keptFile++
		} else {
			lostFile++
		}
		// The handles of before the cut are dead.
		if _, err := a.Write([]byte("x")); !errors.Is(err, ErrPowerCut) {
			t.Fatalf("write through a handle of before the cut: %v", err)
		}
		for _, name := range []string{"a", "b"} {
			if err := f.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
		}
		if err := f.SyncDir(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("unsynced tail: %d lost, %d kept, %d torn; unsynced entry: %d lost, %d kept", lostTail, keptTail, tornTail, lostFile, keptFile)
	if lostTail == 0 || keptTail == 0 || tornTail == 0 || lostFile == 0 || keptFile == 0 {
		t.Error("some fate never happened in 200 cuts")
	}
}

// Observed (rule 2): a Sync of a wrapped FS that does not report a real sync makes nothing
// durable. osfs with its reports wired keeps synced data; without them (a stand-in for an
// osfs whose Sync skips fdatasync) a cut loses it sometimes.
func TestObservedSyncsOnly(t *testing.T) {
	for _, wired := range []bool{true, false} {
		dir := t.TempDir()
		var f *FS
		o, err := osfs.NewWith(dir, osfs.Options{Synced: func(in core.File) {
			if wired {
				f.Observe(in)
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		if f, err = Wrap(o, Options{Observed: true}); err != nil {
			t.Fatal(err)
		}
		lost := 0
		for seed := range int64(50) {
			a, err := f.Create("a")
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, a, "data")
			if err := a.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := f.SyncDir(); err != nil {
				t.Fatal(err)
			}
			if err := f.PowerCut(rand.New(rand.NewSource(seed))); err != nil {
				t.Fatal(err)
			}
			if got, _ := contents(t, f, "a"); got != "data" {
				lost++
			}
		}
		if wired && lost != 0 || !wired && lost == 0 {
			t.Errorf("reports wired %v: synced data lost in %d of 50 cuts", wired, lost)
		}
	}
}

// A rename not followed by SyncDir may be rolled back by a cut; one followed by it is not.
func TestRenameNeedsSyncDir(t *testing.T) {
	f, _ := onDisk(t, true)
	rolledBack := 0
	for seed := range int64(100) {
		for _, sync := range []bool{false, true} {
			for _, name := range []string{"old", "new"} {
				w, err := f.Create(name)
				if err != nil {
					t.Fatal(err)
				}
				mustWrite(t, w, name)
				if err := w.Sync(); err != nil {
					t.Fatal(err)
				}
				w.Close()
			}
			if err := f.SyncDir(); err != nil {
				t.Fatal(err)
			}
			if err := f.Rename("new", "old"); err != nil {
				t.Fatal(err)
			}
			if sync {
				if err := f.SyncDir(); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.PowerCut(rand.New(rand.NewSource(seed))); err != nil {
				t.Fatal(err)
			}
			got, _ := contents(t, f, "old")
			if sync && got != "new" {
				t.Fatalf("seed %d: a synced rename was rolled back: %q (%s)", seed, got, f.LastCut())
			}
			if !sync && got == "old" {
				rolledBack++
			}
		}
	}
	if rolledBack == 0 {
		t.Error("no cut rolled back a rename without SyncDir")
	}
}

// Rules fail operations by kind and name, before or after they take effect; CutAfter stops
// every mutating operation from the n-th on.
func TestRulesAndCutAfter(t *testing.T) {
	f, _ := onDisk(t, true)
	f.Inject(Rule{Ops: OpSync, Name: "a", Nth: 2})
	f.Inject(Rule{Ops: OpRename, After: true, Nth: 1})
	a, err := f.Create("a")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(); err != nil {
		t.Fatalf("first sync: %v", err)
	}
	if err := a.Sync(); !errors.Is(err, ErrInjected) {
		t.Fatalf("second sync: %v, want ErrInjected", err)
	}
	if err := f.Rename("a", "b"); !errors.Is(err, ErrInjected) {
		t.Fatalf("rename: %v, want ErrInjected after the rename", err)
	}
	if _, ok := contents(t, f, "b"); !ok {
		t.Fatal("a Rule with After did not let the rename happen")
	}
	ops := f.Ops()
	f.CutAfter(2)
	mustWrite(t, a, "x")
	if _, err := a.Write([]byte("y")); !errors.Is(err, ErrPowerCut) {
		t.Fatalf("second write after CutAfter(2): %v, want ErrPowerCut", err)
	}
	if err := f.SyncDir(); !errors.Is(err, ErrPowerCut) {
		t.Fatalf("SyncDir after the cut: %v", err)
	}
	if f.Ops() != ops+3 {
		t.Fatalf("Ops %d, want %d", f.Ops(), ops+3)
	}
	if err := f.PowerCut(rand.New(rand.NewSource(1))); err != nil {
		t.Fatal(err)
	}
	if got, _ := contents(t, f, "b"); !bytes.Equal([]byte(got), nil) && got != "x" {
		t.Fatalf("after the cut b holds %q", got)
	}
}
