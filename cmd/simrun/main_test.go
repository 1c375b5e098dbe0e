package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sim"
)

func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestSeedOutputIsIdentical(t *testing.T) {
	c1, a, _ := runArgs("--seed", "7", "--trace")
	c2, b, _ := runArgs("--seed", "7", "--trace")
	if c1 != 0 || c2 != 0 {
		t.Fatalf("exit %d, %d; want 0", c1, c2)
	}
	if a != b {
		t.Fatal("two runs of --seed 7 --trace printed different bytes")
	}
	lines := strings.Split(strings.TrimSpace(a), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "trace sha256 ") {
		t.Fatalf("last line %q, want the trace digest", last)
	}
}

func TestExitCodes(t *testing.T) {
	cases := []struct {
		args []string
		code int
		err  string // substring of stderr
	}{
		{[]string{"--seed", "x"}, 2, "not an integer"},
		{[]string{"--seeds", "9-3"}, 2, "not a range"},
		{[]string{"--seed", "1", "--count", "2"}, 2, "exclude each other"},
		{[]string{"--profile", "nope", "--seed", "1"}, 2, "want one of"},
		{[]string{"--bogus"}, 2, "flag provided but not defined"},
		{[]string{}, 2, "give one of"},
		{[]string{"--count", "3", "--parallel", "2"}, 0, ""},
		{[]string{"--seed", "1", "--profile", "calm", "--duration", "1m"}, 0, ""},
		{[]string{"--help"}, 0, ""},
	}
	for _, c := range cases {
		code, _, stderr := runArgs(c.args...)
		if code != c.code {
			t.Errorf("simrun %v: exit %d, want %d (stderr %q)", c.args, code, c.code, stderr)
		}
		if c.err != "" && (!strings.Contains(stderr, c.err) || !strings.Contains(stderr, "usage:")) {
			t.Errorf("simrun %v: stderr %q, want %q and the usage", c.args, stderr, c.err)
		}
	}
}

func TestSweepListsFailingSeedsOK(t *testing.T) {
	code, out, _ := runArgs("--seeds", "1-4", "--parallel", "2", "--profile", "disk")
	if code != 0 || !strings.Contains(out, "swept 4 seeds") || !strings.Contains(out, "0 failed") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}

// --replay runs a corpus file's entries and compares each outcome and digest: a matching entry
// passes (exit 0), a wrong digest fails (exit 1).
func TestReplay(t *testing.T) {
	res, err := sim.Run(sim.Options{Seed: 3, Profile: "disk"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	entry := func(digest string) string {
		return "# what this file proves\nrun seed=3 profile=disk\nnote a test entry\n----\nok\ndigest " + digest + "\n"
	}
	good := filepath.Join(dir, "good.txt")
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(good, []byte(entry(res.Digest)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(entry(strings.Repeat("0", 64))), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runArgs("--replay", good); code != 0 || !strings.Contains(out, "ok (a test entry)") {
		t.Errorf("replay of a matching entry: exit %d, output:\n%s", code, out)
	}
	if code, out, _ := runArgs("--replay", bad); code != 1 || !strings.Contains(out, "FAIL") {
		t.Errorf("replay of a wrong digest: exit %d, output:\n%s", code, out)
	}
	if code, _, _ := runArgs("--replay", filepath.Join(dir, "missing.txt")); code != 2 {
		t.Errorf("replay of a missing file: exit %d, want 2", code)
	}
}

// Each verdict has its own exit status; 2 stays the usage error.
func TestVerdictExitCodes(t *testing.T) {
	if code, out, _ := runArgs("--seed", "1", "--steps", "50"); code != exitIncomplete || !strings.Contains(out, "INCOMPLETE") {
		t.Errorf("--steps 50: exit %d, want %d; output:\n%s", code, exitIncomplete, out)
	}
	if code, out, _ := runArgs("--count", "2", "--steps", "50", "--parallel", "1"); code != exitIncomplete || !strings.Contains(out, "incomplete (2):") {
		t.Errorf("sweep with --steps 50: exit %d, want %d; output:\n%s", code, exitIncomplete, out)
	}
	for _, c := range []struct {
		res  *sim.Result
		code int
	}{
		{&sim.Result{Fault: "panic: x"}, exitFault},
		{&sim.Result{Violation: &sim.Violation{Invariant: sim.InvNoLostAck}}, exitViolation},
		{&sim.Result{Stopped: "steps max"}, exitIncomplete},
		{&sim.Result{}, exitOK},
	} {
		if got := exitCode(c.res); got != c.code {
			t.Errorf("exitCode(%+v) = %d, want %d", c.res, got, c.code)
		}
	}
	if worse(exitViolation, exitFault) != exitFault || worse(exitNondeterminism, exitViolation) != exitNondeterminism || worse(exitIncomplete, exitOK) != exitIncomplete {
		t.Error("worse does not rank fault > nondeterminism > violation > incomplete > ok")
	}
}

func TestCheckDeterminismSweep(t *testing.T) {
	code, out, _ := runArgs("--count", "3", "--parallel", "2", "--check-determinism")
	if code != 0 || !strings.Contains(out, "each seed twice (determinism check)") || !strings.Contains(out, "0 failed") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}

// Failing seeds are grouped by what they broke, shortest first within a group.
func TestRankGroupsShortestFirst(t *testing.T) {
	v := func(inv string) *sim.Violation { return &sim.Violation{Invariant: inv} }
	failed := []outcome{
		{seed: 1, res: &sim.Result{Steps: 900, Violation: v("no-lost-ack")}},
		{seed: 2, res: &sim.Result{Steps: 50, Violation: v("single-run")}},
		{seed: 3, res: &sim.Result{Steps: 40, Violation: v("no-lost-ack")}},
		{seed: 4, res: &sim.Result{Steps: 10, Stopped: "steps max"}},
	}
	var b bytes.Buffer
	rank(failed, &b)
	var got []string
	for _, l := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			got = append(got, strings.Join(f[:2], " "))
		}
	}
	want := "failing seeds,, incomplete (1):, seed 4:, no-lost-ack (2):, seed 3:, seed 1:, single-run (1):, seed 2:"
	if strings.Join(got, ", ") != want {
		t.Errorf("rank order:\n%s\nwant %s", b.String(), want)
	}
}

func TestTimelineAndShrinkFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.html")
	code, out, _ := runArgs("--seed", "2", "--timeline", path)
	if code != 0 || !strings.Contains(out, "timeline written to "+path) {
		t.Fatalf("--timeline: exit %d, output:\n%s", code, out)
	}
	page, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(page, []byte("<!DOCTYPE html>")) || bytes.Contains(page, []byte("<script")) {
		t.Errorf("timeline file: %v, starts %q", err, page[:min(40, len(page))])
	}
	if code, _, stderr := runArgs("--seed", "2", "--shrink"); code != exitUsage || !strings.Contains(stderr, "nothing to shrink") {
		t.Errorf("--shrink of a passing seed: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runArgs("--count", "2", "--shrink"); code != exitUsage || !strings.Contains(stderr, "use them with --seed") {
		t.Errorf("--shrink with a sweep: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runArgs("--seed", "2", "--shrunk", "off=nope"); code != exitUsage || !strings.Contains(stderr, "unknown fault kind") {
		t.Errorf("--shrunk with a bad token: exit %d, stderr %q", code, stderr)
	}
	if code, out, _ := runArgs("--seed", "2", "--shrunk", "jobs=3,safety-ms=30000"); code != 0 || !strings.Contains(out, "safety phase 30s") {
		t.Errorf("--shrunk replay: exit %d, output:\n%s", code, out)
	}
}

// A sweep prints the distribution of settle time over bound, and a seed's summary its own.
func TestSweepPrintsSettleDistribution(t *testing.T) {
	code, out, _ := runArgs("--seeds", "1-4", "--parallel", "2", "--profile", "disk")
	if code != 0 || !strings.Contains(out, "liveness settle time / bound over 4 passing seeds: median ") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	code, out, _ = runArgs("--seed", "4", "--profile", "disk")
	if code != 0 || !strings.Contains(out, "liveness       settled in ") || !strings.Contains(out, "(runner ") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}

// The distribution is over the seeds' ratios in order: median, 90th percentile, maximum.
func TestSettleSummaryOrdersRatios(t *testing.T) {
	got := settleSummary([]ratio{{1, 0.5}, {2, 0.1}, {3, 0.9}, {4, 0.2}, {5, 0.3}})
	want := "liveness settle time / bound over 5 passing seeds: median 0.3000, p90 0.5000, max 0.9000 (seed 3)"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}
