package osfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/fstest"
)

func newFS(t *testing.T) core.FS {
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestFSContract(t *testing.T) {
	fstest.Run(t, newFS)
}

func TestNewCreatesNestedDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	s, err := New(dir)
	if err != nil {
		t.Fatalf("New(%q): %v", dir, err)
	}
	defer s.Close()
	f, err := s.Create("journal")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("x", string(got)); diff != "" {
		t.Errorf("file on disk (-want +got):\n%s", diff)
	}
}

func TestNewOnAFileFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(path); err == nil {
		t.Fatal("New over a regular file succeeded, want an error")
	}
}

func TestErrorsNamePathAndKeepSentinels(t *testing.T) {
	s := newFS(t)
	_, err := s.Open("nope")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Open missing: %v; want fs.ErrNotExist naming the file", err)
	}
	_, err = s.Create("a/b")
	if !errors.Is(err, fs.ErrInvalid) || !strings.Contains(err.Error(), "a/b") {
		t.Errorf("Create(a/b): %v; want fs.ErrInvalid naming the name", err)
	}
}

// Options.Synced hears of every fsync and fdatasync that osfs makes, and of nothing else.
func TestSyncedReportsEachSystemCall(t *testing.T) {
	var files, dirs int
	var last core.File
	s, err := NewWith(t.TempDir(), Options{Synced: func(f core.File) {
		if f == nil {
			dirs++
			return
		}
		files++
		last = f
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, err := s.Create("a") // one directory fsync
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if files != 0 || dirs != 1 {
		t.Fatalf("after Create and Write: %d file syncs, %d directory syncs reported; want 0 and 1", files, dirs)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if files != 1 || last != f {
		t.Fatalf("after Sync: %d file syncs reported (of %v), want 1 of the synced file", files, last)
	}
	if err := s.Rename("a", "b"); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncDir(); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("b"); err != nil {
		t.Fatal(err)
	}
	if dirs != 4 {
		t.Fatalf("%d directory syncs reported, want 4 (create, rename, SyncDir, remove)", dirs)
	}
	f.Close()
	if err := f.Sync(); err == nil || files != 1 {
		t.Fatalf("Sync of a closed file: %v, %d reports; want an error and no report", err, files)
	}
}
