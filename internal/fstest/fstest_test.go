package fstest_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/fstest"
	"github.com/sluicehq/sluice/sim/disk"
)

// The suite must be able to fail: TestSuiteCatchesBrokenFS runs TestBrokenFS in a child
// process against file systems each broken in one way, and checks that the right subtest fails.

const childEnv = "SLUICE_FSTEST_BROKEN_CHILD"

type brokenFS struct {
	core.FS
	how string
}

type brokenFile struct {
	core.File
	how    string
	closed bool
}

func (b brokenFS) wrap(f core.File, err error) (core.File, error) {
	if err != nil {
		return nil, err
	}
	return &brokenFile{File: f, how: b.how}, nil
}

func (b brokenFS) Create(name string) (core.File, error) {
	if b.how == "create-keeps-contents" {
		if f, err := b.FS.Open(name); err == nil {
			return b.wrap(f, nil)
		}
	}
	return b.wrap(b.FS.Create(name))
}

func (b brokenFS) Open(name string) (core.File, error) {
	f, err := b.FS.Open(name)
	if b.how == "missing-not-notexist" && err != nil {
		return nil, errors.New("no such thing")
	}
	return b.wrap(f, err)
}

func (b brokenFS) List() ([]string, error) {
	names, err := b.FS.List()
	if b.how == "list-unsorted" {
		slices.Reverse(names)
	}
	return names, err
}

func (f *brokenFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	if f.how == "short-read-no-eof" && err == io.EOF {
		err = nil
	}
	return n, err
}

// WriteAt appends, as pwrite does on a file opened with O_APPEND on Linux.
func (f *brokenFile) WriteAt(p []byte, off int64) (int, error) {
	if f.how == "writeat-appends" {
		return f.File.Write(p)
	}
	return f.File.WriteAt(p, off)
}

func (f *brokenFile) Close() error {
	if f.how == "close-is-noop" {
		return nil
	}
	return f.File.Close()
}

var brokenWays = map[string]string{ // how -> a subtest that must fail
	"create-keeps-contents": "CreateTruncatesExisting",
	"missing-not-notexist":  "MissingIsNotExist",
	"list-unsorted":         "ListSorted",
	"short-read-no-eof":     "ReadAtShortIsEOF",
	"close-is-noop":         "ClosedFile",
	"writeat-appends":       "WriteAtOverwritesInPlace",
}

func TestBrokenFS(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestSuiteCatchesBrokenFS only")
	}
	for _, how := range []string{"create-keeps-contents", "missing-not-notexist", "list-unsorted", "short-read-no-eof", "close-is-noop", "writeat-appends"} {
		t.Run(how, func(t *testing.T) {
			fstest.Run(t, func(t *testing.T) core.FS { return brokenFS{FS: disk.New(1), how: how} })
		})
	}
}

func TestSuiteCatchesBrokenFS(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenFS$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed every broken FS:\n%s", out)
	}
	for how, sub := range brokenWays {
		if line := "--- FAIL: TestBrokenFS/" + how + "/" + sub; !strings.Contains(string(out), line) {
			t.Errorf("missing %q in the child's output", line)
		}
	}
	if t.Failed() {
		t.Logf("child output:\n%s", out)
	}
}
