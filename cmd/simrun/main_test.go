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
