package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/adapters/osfs"
	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/internal/testjournal"
)

// A journal moved to jobs.journal.compact, alone: Open refuses it (it used to delete it with
// every job), and verify says so, changing nothing.
func TestVerifyRefusesALoneCompact(t *testing.T) {
	dir := testjournal.Closed(t)
	path := filepath.Join(dir, "jobs.journal")
	if err := os.Rename(path, path+".compact"); err != nil {
		t.Fatal(err)
	}
	before := snapshotDir(t, dir)
	check(t, "verify lone compact", runArgs("verify", "--dir", dir), 1,
		[]string{"refused", "and no \"jobs.journal\" beside it", `rename it to "jobs.journal"`},
		[]string{"has no journal beside it; the runner's Open refuses the directory"})
	if diff := cmp.Diff(before, snapshotDir(t, dir)); diff != "" {
		t.Errorf("verify changed the directory (-before +after):\n%.2000s", diff)
	}
	check(t, "stats lone compact", runArgs("stats", "--dir", dir), 1, nil, []string{"rename it to"})
	if diff := cmp.Diff(before, snapshotDir(t, dir)); diff != "" {
		t.Errorf("stats changed the directory (-before +after):\n%.2000s", diff)
	}
}

// A torn tail after a record the runner cannot replay: Open refuses the journal, so verify
// must not promise that the next Open cuts the tail.
func TestVerifyTornTailBehindABadRecord(t *testing.T) {
	dir := t.TempDir()
	fsys, err := osfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	j, err := journal.Open(fsys, "jobs.journal", journal.Config{PreallocBytes: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(99, []byte("no runner record has tag 99")); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Commit(); err != nil {
		t.Fatal(err)
	}
	// No Close: a crash, then half a batch.
	f, err := os.OpenFile(filepath.Join(dir, "jobs.journal"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{40, 0, 0, 0, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r := runArgs("verify", "--dir", dir)
	check(t, "verify bad record", r, 1, []string{"tail     torn:", "records ", "Open refuses this journal"}, []string{"does not replay"})
	if strings.Contains(r.stdout, "cuts them") {
		t.Errorf("verify promises a cut of a journal Open refuses:\n%s", r.stdout)
	}
}
