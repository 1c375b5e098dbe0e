package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testjournal"
)

// snapshotDir is every file's bytes and modification time in dir.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := e.Info()
		out[e.Name()] = fi.ModTime().String() + "\n" + string(b)
	}
	return out
}

type result struct {
	code           int
	stdout, stderr string
}

func runArgs(args ...string) result {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// check holds r to want: the exit code and substrings of stdout and stderr.
func check(t *testing.T, name string, r result, code int, stdout, stderr []string) {
	t.Helper()
	if r.code != code {
		t.Errorf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", name, r.code, code, r.stdout, r.stderr)
	}
	for _, s := range stdout {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("%s: stdout lacks %q:\n%s", name, s, r.stdout)
		}
	}
	for _, s := range stderr {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("%s: stderr lacks %q:\n%s", name, s, r.stderr)
		}
	}
}

// cmdCase is one command line and what it must give: the exit code and substrings of stdout
// and stderr.
type cmdCase struct {
	args           []string
	code           int
	stdout, stderr []string
}

// runCases runs the cases in order (a later one may see what an earlier one wrote) and checks each.
func runCases(t *testing.T, cases []cmdCase) {
	t.Helper()
	for _, tc := range cases {
		check(t, strings.Join(tc.args, " "), runArgs(tc.args...), tc.code, tc.stdout, tc.stderr)
	}
}

func TestUsage(t *testing.T) {
	dir := testjournal.Closed(t)
	runCases(t, []cmdCase{
		{[]string{"--help"}, 0, []string{"usage:", "exit status:"}, nil},
		{[]string{"jobs", "-h"}, 0, []string{"sluice jobs"}, nil},
		{[]string{"help"}, 0, []string{"usage:"}, nil},
		{[]string{"jobs", "--dir", dir, "--target", "help"}, 0, []string{"ID  STATE"}, nil},
		{nil, 2, nil, []string{"sluice: give a command", "usage:"}},
		{[]string{"list"}, 2, nil, []string{`sluice: unknown command "list"`}},
		{[]string{"stats"}, 2, nil, []string{"sluice: stats: --dir is required"}},
		{[]string{"jobs", "--dir", dir, "--state", "lost"}, 2, nil, []string{`sluice: --state: state "lost"`}},
		{[]string{"jobs", "--dir", dir, "--limit", "0"}, 2, nil, []string{"sluice: --limit 0"}},
		{[]string{"jobs", "--dir", dir, "--limit", "5", "--all"}, 2, nil, []string{"--all and --limit"}},
		{[]string{"jobs", "--dir", dir, "--bogus"}, 2, nil, []string{"sluice: flag provided but not defined: -bogus"}},
		{[]string{"stats", "--dir", dir, "--state", "dead"}, 2, nil, []string{"sluice: stats does not take --state"}},
		{[]string{"show", "--dir", dir}, 2, nil, []string{"sluice: show takes one job id, got 0"}},
		{[]string{"show", "--dir", dir, "x"}, 2, nil, []string{`sluice: job id "x"`}},
		{[]string{"stats", "--dir", dir, "extra"}, 2, nil, []string{`sluice: stats takes no argument, got "extra"`}},
		{[]string{"stats", "--dir", filepath.Join(dir, "nope")}, 1, nil, []string{"sluice: runner directory", "nope", "check --dir"}},
	})
}

// jobIDs are the ids in the first column of `sluice jobs` text output.
func jobIDs(out string) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`(?m)^(\d+)\s`).FindAllStringSubmatch(out, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// TestReadCommandsWriteNothing runs every read command on a stopped directory and checks its
// output and that the directory's files are byte for byte (and mtime) unchanged.
func TestReadCommandsWriteNothing(t *testing.T) {
	dir := testjournal.Closed(t)
	before := snapshotDir(t, dir)
	for _, tc := range []struct {
		args   []string
		code   int
		stdout []string
		stderr []string
		ids    []string // for jobs in text
	}{
		{[]string{"stats", "--dir", dir}, 0, []string{"jobs", "(last id 5)", "succeeded", "dead"}, nil, nil},
		{[]string{"stats", "--dir", dir, "--json"}, 0, []string{`"dead": 2`, `"pending": 1`, `"succeeded": 2`, `"last_id": 5`}, nil, nil},
		{[]string{"jobs", "--dir", dir}, 0, []string{"ID", "STATE", "permanent", "smtp 550"}, nil, []string{"1", "2", "3", "4", "5"}},
		{[]string{"jobs", "--dir", dir, "--state", "dead"}, 0, nil, nil, []string{"2", "5"}},
		{[]string{"jobs", "--dir", dir, "--state", "dead,pending", "--target", "a.example"}, 0, nil, nil, []string{"2", "4"}},
		{[]string{"jobs", "--dir", dir, "--kind", "email"}, 0, nil, nil, nil},
		{[]string{"jobs", "--dir", dir, "--limit", "2"}, 0, nil, []string{"more: sluice jobs --dir " + dir + " --limit 2 --after 2"}, []string{"1", "2"}},
		{[]string{"jobs", "--dir", dir, "--limit", "2", "--after", "4"}, 0, nil, nil, []string{"5"}},
		{[]string{"jobs", "--dir", dir, "--all", "--state", "succeeded"}, 0, nil, nil, []string{"1", "3"}},
		{[]string{"jobs", "--dir", dir, "--json", "--state", "dead"}, 0, []string{`"id": 2`, `"id": 5`, `"reason": "permanent"`, `"payload": "\"bad-1\""`, `"more": false`}, nil, nil},
		{[]string{"show", "--dir", dir, "2"}, 0, []string{"state       dead", "reason      permanent", "attempts (the last 10", "failed", "smtp 550"}, nil, nil},
		{[]string{"show", "2", "--dir", dir, "--json"}, 0, []string{`"outcome": "failed"`, `"error": "smtp 550: mailbox unavailable"`}, nil, nil},
		{[]string{"show", "--dir", dir, "4"}, 0, []string{"state      pending", "none yet"}, nil, nil},
		{[]string{"show", "--dir", dir, "99"}, 1, nil, []string{"sluice: job 99", "not found", "sluice jobs --dir"}, nil},
		{[]string{"verify", "--dir", dir}, 0, []string{"closed cleanly", "tail     clean", "every record replays: 5 jobs", "\nok\n"}, nil, nil},
	} {
		name := strings.Join(tc.args, " ")
		r := runArgs(tc.args...)
		check(t, name, r, tc.code, tc.stdout, tc.stderr)
		if tc.ids != nil || (len(tc.args) > 0 && tc.args[0] == "jobs" && !strings.Contains(name, "--json")) {
			if diff := cmp.Diff(tc.ids, jobIDs(r.stdout)); diff != "" {
				t.Errorf("%s: ids (-want +got):\n%s", name, diff)
			}
		}
		if diff := cmp.Diff(before, snapshotDir(t, dir)); diff != "" {
			t.Fatalf("%s changed the directory (-before +after):\n%.2000s", name, diff)
		}
	}
}

func TestVerifyReportsDamage(t *testing.T) {
	dir := testjournal.Closed(t)
	path := filepath.Join(dir, "jobs.journal")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := len(b) / 2
	b[off] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshotDir(t, dir)
	r := runArgs("verify", "--dir", dir)
	check(t, "verify damaged", r, 1, []string{"damage   at offset", "intact", "what to do: nothing was changed", "backup"},
		[]string{"sluice: verify: " + path + " is damaged at offset"})
	if diff := cmp.Diff(before, snapshotDir(t, dir)); diff != "" {
		t.Errorf("verify changed a damaged directory (-before +after):\n%.2000s", diff)
	}
	// The other read commands refuse it too, naming the damage.
	check(t, "stats damaged", runArgs("stats", "--dir", dir), 1, nil, []string{"sluice: inspecting", "offset"})
	check(t, "verify missing", runArgs("verify", "--dir", filepath.Join(dir, "nope")), 1, nil, []string{"sluice: --dir"})
	empty := t.TempDir()
	check(t, "verify empty", runArgs("verify", "--dir", empty), 0, []string{"no journal yet", "ok"}, nil)
}

func TestRetryAndCancel(t *testing.T) {
	dir := testjournal.Closed(t)
	runCases(t, []cmdCase{
		{[]string{"retry", "--dir", dir, "2"}, 0, []string{"job 2 is pending again"}, nil},
		{[]string{"retry", "--dir", dir, "2"}, 1, nil, []string{"sluice: retry 2: only a dead job"}},
		{[]string{"retry", "--dir", dir, "99"}, 1, nil, []string{"sluice: retry 99", "not found"}},
		{[]string{"cancel", "--dir", dir, "4"}, 0, []string{"job 4 is cancelled"}, nil},
		{[]string{"cancel", "--dir", dir, "1"}, 1, nil, []string{"sluice: cancel 1: the job is already terminal"}},
		{[]string{"cancel", "--dir", t.TempDir(), "1"}, 1, nil, []string{"holds no runner journal"}},
	})
	in, err := sluice.Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]sluice.State{}
	for _, j := range in.Jobs {
		got[j.ID] = j.State
	}
	want := map[uint64]sluice.State{1: sluice.StateSucceeded, 2: sluice.StatePending, 3: sluice.StateSucceeded,
		4: sluice.StateCancelled, 5: sluice.StateDead}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("states after retry 2 and cancel 4 (-want +got):\n%s", diff)
	}
}

func TestRetryRefusesWhileARunnerHoldsTheDirectory(t *testing.T) {
	dir := testjournal.Closed(t)
	r := testjournal.Reopen(t, dir)
	before := snapshotDir(t, dir)
	for _, cmd := range []string{"retry", "cancel"} {
		check(t, cmd+" locked", runArgs(cmd, "--dir", dir, "2"), 3, nil,
			[]string{"sluice: " + cmd + ": a running runner holds " + dir + ", so nothing was written"})
	}
	// Reads still work beside it, and verify says a runner holds the directory.
	check(t, "verify beside a runner", runArgs("verify", "--dir", dir), 0, []string{"a running runner holds the directory", "ok"}, nil)
	check(t, "stats beside a runner", runArgs("stats", "--dir", dir), 0, []string{"a running runner holds the directory", "(last id 5)"}, nil)
	if diff := cmp.Diff(before, snapshotDir(t, dir)); diff != "" {
		t.Errorf("a refused retry changed the directory (-before +after):\n%.2000s", diff)
	}
	if j, err := r.Get(context.Background(), 2); err != nil || j.State != sluice.StateDead {
		t.Errorf("job 2 = %v, %v; want dead", j.State, err)
	}
}

// TestVerifyTornTailIsNotDamage: a journal copied while its runner is open has no clean-close
// mark; half a batch appended after it is a torn tail (a crash mid-write), which the next
// Open cuts: verify explains it and exits 0. The same bytes after a clean close are damage.
func TestVerifyTornTailIsNotDamage(t *testing.T) {
	live := testjournal.Closed(t)
	testjournal.Reopen(t, live)
	b, err := os.ReadFile(filepath.Join(live, "jobs.journal"))
	if err != nil {
		t.Fatal(err)
	}
	torn := t.TempDir()
	if err := os.WriteFile(filepath.Join(torn, "jobs.journal"), append(b, 40, 0, 0, 0, 1, 2, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	check(t, "verify torn", runArgs("verify", "--dir", torn), 0,
		[]string{"no clean-close mark", "tail     torn:", "the 7 bytes after offset", "the next Open cuts them", "\nok\n"}, nil)

	closed := testjournal.Closed(t)
	path := filepath.Join(closed, "jobs.journal")
	b, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, 40, 0, 0, 0, 1, 2, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	check(t, "verify grown after close", runArgs("verify", "--dir", closed), 1,
		[]string{"damage", "closed cleanly at", "no longer matches"}, []string{"is damaged at offset"})
}

// TestChangeErrorsSaySluiceOnce: a refused retry or cancel prints the API's reason under the
// command's one "sluice:" prefix, not a second one inside the line.
func TestChangeErrorsSaySluiceOnce(t *testing.T) {
	dir := testjournal.Closed(t)
	for _, args := range [][]string{
		{"retry", "--dir", dir, "99"}, {"retry", "--dir", dir, "1"}, {"cancel", "--dir", dir, "1"},
	} {
		r := runArgs(args...)
		if n := strings.Count(r.stderr, "sluice:"); n != 1 {
			t.Errorf("%v: stderr says sluice: %d times:\n%s", args, n, r.stderr)
		}
	}
}
