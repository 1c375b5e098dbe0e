package disk

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/fstest"
)

// mustCreate and friends keep the crash tests short; each fails the test on error.
func mustCreate(t *testing.T, fsys core.FS, name string) core.File {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatalf("Create(%q): %v", name, err)
	}
	return f
}

func mustWrite(t *testing.T, f core.File, p []byte) {
	t.Helper()
	if n, err := f.Write(p); err != nil || n != len(p) {
		t.Fatalf("Write(%d bytes) = %d, %v", len(p), n, err)
	}
}

func mustSync(t *testing.T, f core.File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

func mustSyncDir(t *testing.T, fsys core.FS) {
	t.Helper()
	if err := fsys.SyncDir(); err != nil {
		t.Fatalf("SyncDir: %v", err)
	}
}

// contents reads the whole named file, or returns nil, false when it does not exist.
func contents(t *testing.T, fsys core.FS, name string) ([]byte, bool) {
	t.Helper()
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("Open(%q): %v", name, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		t.Fatalf("Size(%q): %v", name, err)
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); n != len(b) || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt(%q): %d, %v", name, n, err)
	}
	return b, true
}

func check(t *testing.T, d *Disk) {
	t.Helper()
	if err := d.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestSyncedDataAndEntriesSurviveCrash(t *testing.T) {
	d := New(1)
	f := mustCreate(t, d, "a")
	mustWrite(t, f, []byte("hello"))
	mustSync(t, f)
	mustSyncDir(t, d)
	check(t, d)
	d.Crash()
	check(t, d)
	got, ok := contents(t, d, "a")
	if !ok {
		t.Fatal("synced, dir-synced file vanished")
	}
	if diff := cmp.Diff("hello", string(got)); diff != "" {
		t.Errorf("contents (-want +got):\n%s", diff)
	}
	if _, err := f.Write([]byte("x")); !errors.Is(err, ErrCrashed) {
		t.Errorf("Write on a File from before the crash: %v, want ErrCrashed", err)
	}
}

func TestFSContract(t *testing.T) {
	var seed int64
	fstest.Run(t, func(t *testing.T) core.FS {
		seed++
		d := New(seed)
		t.Cleanup(func() { check(t, d) })
		return d
	})
}

func fnvOf(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// TestDump: one line per live or durable name, in name order, saying whether the entry is
// durable and how much of the file is settled.
func TestDump(t *testing.T) {
	d := New(1)
	a := mustCreate(t, d, "a") // ino 1
	mustWrite(t, a, []byte("abc"))
	mustSync(t, a)
	mustCreate(t, d, "gone") // ino 2
	mustSyncDir(t, d)        // ops so far: create, write, sync, create, syncdir
	mustWrite(t, a, []byte("d"))
	b := mustCreate(t, d, "b") // ino 3
	mustWrite(t, b, []byte("x"))
	if err := d.Remove("gone"); err != nil {
		t.Fatal(err)
	}
	want := "disk ops=9 crashes=0 dirlog=2\n" +
		fmt.Sprintf("a: ino 1 durable size=4 settled=3 pending=1 fnv=%016x\n", fnvOf("abcd")) +
		fmt.Sprintf("b: ino 3 new size=1 settled=0 pending=1 fnv=%016x\n", fnvOf("x")) +
		"gone: removed, not durable (ino 2)\n"
	if diff := cmp.Diff(want, d.Dump()); diff != "" {
		t.Errorf("Dump (-want +got):\n%s", diff)
	}
	if got := d.Crashes(); got != 0 {
		t.Errorf("Crashes = %d, want 0", got)
	}
}
