// Package fstest is the contract suite of the core.FS port: the behaviour adapters/osfs,
// sim/disk and internal/faultfs share. Durability after a crash is not covered here: sim/disk
// tests its own, and internal/faultfs cuts power under osfs on the real disk (the journal's
// and the runner's power-cut tests).
//
// Rules checked, each a subtest of Run:
//
//  1. Create makes an empty file, open for reading and appending; Create of an existing name
//     truncates it.
//  2. Write appends; ReadAt reads at any offset and returns io.EOF when fewer bytes are there.
//  3. Truncate cuts the file, and later writes append from the new end.
//  4. Size and Stat report the size including unsynced writes; Sync succeeds on a live file.
//  5. Rename moves a file and replaces an existing target; Remove deletes it.
//  6. List returns the names, sorted.
//  7. Open, Stat, Rename and Remove of a missing file fail with fs.ErrNotExist.
//  8. A closed File fails every call with fs.ErrClosed.
//  9. A name with a separator fails.
package fstest

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/core"
)

// Run runs the suite; newFS returns an empty file system for each subtest.
func Run(t *testing.T, newFS func(t *testing.T) core.FS) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, fsys core.FS)
	}{
		{"CreateIsEmpty", testCreateIsEmpty},
		{"WriteAppendsReadAt", testWriteAppendsReadAt},
		{"WriteAtOverwritesInPlace", testWriteAtOverwritesInPlace},
		{"ReadAtShortIsEOF", testReadAtShortIsEOF},
		{"SyncKeepsContents", testSyncKeepsContents},
		{"TruncateThenAppend", testTruncateThenAppend},
		{"SizeAndStat", testSizeAndStat},
		{"OpenSeesWritesOfAnotherFile", testOpenSeesWrites},
		{"CreateTruncatesExisting", testCreateTruncatesExisting},
		{"RenameMoves", testRenameMoves},
		{"RenameReplaces", testRenameReplaces},
		{"Remove", testRemove},
		{"ListSorted", testListSorted},
		{"MissingIsNotExist", testMissingIsNotExist},
		{"ClosedFile", testClosedFile},
		{"NamesWithSeparators", testNamesWithSeparators},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newFS(t)) })
	}
}

func create(t *testing.T, fsys core.FS, name string) core.File {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatalf("Create(%q): %v", name, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func open(t *testing.T, fsys core.FS, name string) core.File {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatalf("Open(%q): %v", name, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func write(t *testing.T, f core.File, s string) {
	t.Helper()
	n, err := f.Write([]byte(s))
	if err != nil || n != len(s) {
		t.Fatalf("Write(%q) = %d, %v; want %d, nil", s, n, err, len(s))
	}
}

// all reads the whole file through Size and ReadAt.
func all(t *testing.T, f core.File) string {
	t.Helper()
	size, err := f.Size()
	if err != nil {
		t.Fatalf("Size: %v", err)
	}
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if n != len(b) || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt(%d bytes, 0) = %d, %v", len(b), n, err)
	}
	return string(b)
}

func fileOf(t *testing.T, fsys core.FS, name string) string {
	t.Helper()
	return all(t, open(t, fsys, name))
}

func list(t *testing.T, fsys core.FS) []string {
	t.Helper()
	names, err := fsys.List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if names == nil {
		names = []string{}
	}
	return names
}

func testCreateIsEmpty(t *testing.T, fsys core.FS) {
	f := create(t, fsys, "a")
	if size, err := f.Size(); err != nil || size != 0 {
		t.Errorf("Size of a new file = %d, %v; want 0, nil", size, err)
	}
	if diff := cmp.Diff([]string{"a"}, list(t, fsys)); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

func testWriteAppendsReadAt(t *testing.T, fsys core.FS) {
	f := create(t, fsys, "a")
	write(t, f, "hello ")
	write(t, f, "world")
	if diff := cmp.Diff("hello world", all(t, f)); diff != "" {
		t.Errorf("contents (-want +got):\n%s", diff)
	}
	b := make([]byte, 3)
	if n, err := f.ReadAt(b, 6); n != 3 || err != nil || string(b) != "wor" {
		t.Errorf("ReadAt(3 bytes, 6) = %d, %v, %q; want 3, nil, \"wor\"", n, err, b)
	}
	// Reading an exact tail is not short: nil or io.EOF are both allowed by io.ReaderAt.
	if n, err := f.ReadAt(b, 8); n != 3 || (err != nil && err != io.EOF) || string(b) != "rld" {
		t.Errorf("ReadAt(3 bytes, 8) = %d, %v, %q; want 3, nil|EOF, \"rld\"", n, err, b)
	}
}

// testWriteAtOverwritesInPlace: WriteAt replaces bytes inside the file without changing its
// size, a later Write still appends at the end, both survive a reopen after Sync, and a
// WriteAt past the end is refused, also after a reopen and a truncate.
func testWriteAtOverwritesInPlace(t *testing.T, fsys core.FS) {
	f := create(t, fsys, "a")
	write(t, f, "hello world")
	if n, err := f.WriteAt([]byte("HELLO"), 0); n != 5 || err != nil {
		t.Fatalf("WriteAt(5 bytes, 0) = %d, %v", n, err)
	}
	write(t, f, "!")
	if n, err := f.WriteAt([]byte("W"), 6); n != 1 || err != nil {
		t.Fatalf("WriteAt(1 byte, 6) = %d, %v", n, err)
	}
	if diff := cmp.Diff("HELLO World!", all(t, f)); diff != "" {
		t.Errorf("contents (-want +got):\n%s", diff)
	}
	if n, err := f.WriteAt([]byte("xy"), 11); err == nil {
		t.Errorf("WriteAt(2 bytes, 11) past the end of 12 = %d, nil; want an error", n)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if diff := cmp.Diff("HELLO World!", fileOf(t, fsys, "a")); diff != "" {
		t.Errorf("after reopen (-want +got):\n%s", diff)
	}
	// The bound follows the file through a reopen and a truncate.
	g, err := fsys.Open("a")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if n, err := g.WriteAt([]byte("!?"), 10); n != 2 || err != nil {
		t.Fatalf("WriteAt(2 bytes, 10) of a reopened file of 12 = %d, %v", n, err)
	}
	if err := g.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if n, err := g.WriteAt([]byte("xy"), 4); err == nil {
		t.Errorf("WriteAt(2 bytes, 4) past the end of 5 after a truncate = %d, nil; want an error", n)
	}
}

func testReadAtShortIsEOF(t *testing.T, fsys core.FS) {
	f := create(t, fsys, "a")
	write(t, f, "abcde")
	b := make([]byte, 4)
	n, err := f.ReadAt(b, 3)
	if n != 2 || err != io.EOF || string(b[:n]) != "de" {
		t.Errorf("ReadAt(4 bytes, 3) of 5 = %d, %v, %q; want 2, io.EOF, \"de\"", n, err, b[:n])
	}
	n, err = f.ReadAt(b, 5)
	if n != 0 || err != io.EOF {
		t.Errorf("ReadAt at the end = %d, %v; want 0, io.EOF", n, err)
	}
	n, err = f.ReadAt(b, 100)
	if n != 0 || err != io.EOF {
		t.Errorf("ReadAt past the end = %d, %v; want 0, io.EOF", n, err)
	}
}

func testSyncKeepsContents(t *testing.T, fsys core.FS) {
	f := create(t, fsys, "a")
	write(t, f, "one")
	if err := f.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	write(t, f, "two")
	if err := f.Sync(); err != nil {
		t.Fatalf("second Sync: %v", err)
	}
	if err := fsys.SyncDir(); err != nil {
		t.Fatalf("SyncDir: %v", err)
	}
	if diff := cmp.Diff("onetwo", all(t, f)); diff != "" {
		t.Errorf("contents (-want +got):\n%s", diff)
	}
}

func testTruncateThenAppend(t *testing.T, fsys core.FS) {
	f := create(t, fsys, "a")
	write(t, f, "abcdef")
	if err := f.Truncate(2); err != nil {
		t.Fatalf("Truncate(2): %v", err)
	}
	if size, err := f.Size(); err != nil || size != 2 {
		t.Errorf("Size after Truncate(2) = %d, %v; want 2, nil", size, err)
	}
	write(t, f, "XY")
	if diff := cmp.Diff("abXY", all(t, f)); diff != "" {
		t.Errorf("contents after truncate and append (-want +got):\n%s", diff)
	}
	if err := f.Truncate(0); err != nil {
		t.Fatalf("Truncate(0): %v", err)
	}
	write(t, f, "z")
	if err := f.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if diff := cmp.Diff("z", fileOf(t, fsys, "a")); diff != "" {
		t.Errorf("contents after Truncate(0) (-want +got):\n%s", diff)
	}
}

func testSizeAndStat(t *testing.T, fsys core.FS) {
	f := create(t, fsys, "a")
	write(t, f, "12345")
	if size, err := f.Size(); err != nil || size != 5 {
		t.Errorf("Size = %d, %v; want 5, nil", size, err)
	}
	if size, err := fsys.Stat("a"); err != nil || size != 5 {
		t.Errorf("Stat = %d, %v; want 5, nil", size, err)
	}
}

func testOpenSeesWrites(t *testing.T, fsys core.FS) {
	f := create(t, fsys, "a")
	write(t, f, "from f")
	g := open(t, fsys, "a")
	if diff := cmp.Diff("from f", all(t, g)); diff != "" {
		t.Errorf("a second File (-want +got):\n%s", diff)
	}
	write(t, g, "+g")
	if diff := cmp.Diff("from f+g", all(t, f)); diff != "" {
		t.Errorf("writes through the second File seen by the first (-want +got):\n%s", diff)
	}
}

func testCreateTruncatesExisting(t *testing.T, fsys core.FS) {
	f := create(t, fsys, "a")
	write(t, f, "old contents")
	if err := f.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	g := create(t, fsys, "a")
	if size, err := g.Size(); err != nil || size != 0 {
		t.Errorf("Size after re-Create = %d, %v; want 0, nil", size, err)
	}
	write(t, g, "new")
	if diff := cmp.Diff("new", fileOf(t, fsys, "a")); diff != "" {
		t.Errorf("contents (-want +got):\n%s", diff)
	}
}

func testRenameMoves(t *testing.T, fsys core.FS) {
	f := create(t, fsys, "a")
	write(t, f, "data")
	if err := fsys.Rename("a", "b"); err != nil {
		t.Fatalf("Rename: %v", err)
	}
	if diff := cmp.Diff([]string{"b"}, list(t, fsys)); diff != "" {
		t.Errorf("List after Rename (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("data", fileOf(t, fsys, "b")); diff != "" {
		t.Errorf("renamed contents (-want +got):\n%s", diff)
	}
	if _, err := fsys.Open("a"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of the old name: %v, want fs.ErrNotExist", err)
	}
}

func testRenameReplaces(t *testing.T, fsys core.FS) {
	write(t, create(t, fsys, "log"), "old journal")
	write(t, create(t, fsys, "log.compact"), "snapshot")
	if err := fsys.Rename("log.compact", "log"); err != nil {
		t.Fatalf("Rename over an existing file: %v", err)
	}
	if err := fsys.SyncDir(); err != nil {
		t.Fatalf("SyncDir: %v", err)
	}
	if diff := cmp.Diff([]string{"log"}, list(t, fsys)); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("snapshot", fileOf(t, fsys, "log")); diff != "" {
		t.Errorf("contents (-want +got):\n%s", diff)
	}
}

func testRemove(t *testing.T, fsys core.FS) {
	create(t, fsys, "a")
	create(t, fsys, "b")
	if err := fsys.Remove("a"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if err := fsys.SyncDir(); err != nil {
		t.Fatalf("SyncDir: %v", err)
	}
	if diff := cmp.Diff([]string{"b"}, list(t, fsys)); diff != "" {
		t.Errorf("List after Remove (-want +got):\n%s", diff)
	}
	if _, err := fsys.Stat("a"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat of a removed file: %v, want fs.ErrNotExist", err)
	}
}

func testListSorted(t *testing.T, fsys core.FS) {
	if diff := cmp.Diff([]string{}, list(t, fsys)); diff != "" {
		t.Errorf("List of an empty FS (-want +got):\n%s", diff)
	}
	for _, name := range []string{"m", "b.2", "z", "a", "b.10"} {
		create(t, fsys, name)
	}
	if diff := cmp.Diff([]string{"a", "b.10", "b.2", "m", "z"}, list(t, fsys)); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

func testMissingIsNotExist(t *testing.T, fsys core.FS) {
	create(t, fsys, "present")
	for _, tc := range []struct {
		call string
		err  error
	}{
		{"Open", func() error { _, err := fsys.Open("missing"); return err }()},
		{"Stat", func() error { _, err := fsys.Stat("missing"); return err }()},
		{"Remove", fsys.Remove("missing")},
		{"Rename", fsys.Rename("missing", "other")},
	} {
		if !errors.Is(tc.err, fs.ErrNotExist) {
			t.Errorf("%s of a missing file: %v, want fs.ErrNotExist", tc.call, tc.err)
		} else if !bytes.Contains([]byte(tc.err.Error()), []byte("missing")) {
			t.Errorf("%s of a missing file: %q does not name the file", tc.call, tc.err)
		}
	}
	if _, err := fsys.Stat("other"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed Rename created its target: Stat = %v", err)
	}
}

func testClosedFile(t *testing.T, fsys core.FS) {
	f := create(t, fsys, "a")
	write(t, f, "abc")
	if err := f.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"Write", func() error { _, err := f.Write([]byte("x")); return err }},
		{"ReadAt", func() error { _, err := f.ReadAt(make([]byte, 1), 0); return err }},
		{"Sync", f.Sync},
		{"Truncate", func() error { return f.Truncate(0) }},
		{"Size", func() error { _, err := f.Size(); return err }},
		{"Close", f.Close},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, fs.ErrClosed) {
			t.Errorf("%s on a closed File: %v, want fs.ErrClosed", c.name, err)
		}
	}
	// Closing did not lose or change anything.
	if diff := cmp.Diff("abc", fileOf(t, fsys, "a")); diff != "" {
		t.Errorf("contents after Close (-want +got):\n%s", diff)
	}
}

func testNamesWithSeparators(t *testing.T, fsys core.FS) {
	create(t, fsys, "a")
	for _, name := range []string{"x/y", "../escape", "/abs", ""} {
		if f, err := fsys.Create(name); err == nil {
			f.Close()
			t.Errorf("Create(%q) succeeded, want an error", name)
		}
		if _, err := fsys.Open(name); err == nil {
			t.Errorf("Open(%q) succeeded, want an error", name)
		}
		if err := fsys.Rename("a", name); err == nil {
			t.Errorf("Rename(a, %q) succeeded, want an error", name)
		}
	}
	if diff := cmp.Diff([]string{"a"}, list(t, fsys)); diff != "" {
		t.Errorf("List after refused names (-want +got):\n%s", diff)
	}
}
