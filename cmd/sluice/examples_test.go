package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestOnAJournalTheExampleWrote runs examples/runner (a real process: 40 jobs, some retried,
// some dead by a permanent failure or a panic), then inspects its directory with every read
// command, serves it and retries a dead job.
func TestOnAJournalTheExampleWrote(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs examples/runner")
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "runner")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/runner").CombinedOutput(); err != nil {
		t.Fatalf("building examples/runner: %v\n%s", err, out)
	}
	dir := filepath.Join(tmp, "jobs")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, "-dir", dir, "-n", "40").CombinedOutput(); err != nil {
		t.Fatalf("examples/runner: %v\n%s", err, out)
	}
	// examples/runner: id%11 fails permanently, id%13 panics; both die on their first attempt.
	dead := []string{"11", "13", "22", "26", "33", "39"}
	before := snapshotDir(t, dir)
	check(t, "verify", runArgs("verify", "--dir", dir), 0, []string{"closed cleanly", "every record replays: 40 jobs", "\nok\n"}, nil)
	check(t, "stats", runArgs("stats", "--dir", dir), 0, []string{"(last id 40)", "dead       6", "succeeded  34"}, nil)
	r := runArgs("jobs", "--dir", dir, "--state", "dead")
	check(t, "jobs dead", r, 0, []string{"panic", "permanent"}, nil)
	if got := strings.Join(jobIDs(r.stdout), " "); got != strings.Join(dead, " ") {
		t.Errorf("dead jobs = %s, want %s", got, strings.Join(dead, " "))
	}
	// id%5 fails retryably twice: three attempts in its history.
	check(t, "show 10", runArgs("show", "--dir", dir, "10"), 0, []string{"attempts   3", "failed", "succeeded", "retryable failure on purpose"}, nil)

	// serve, read-only, until its context ends.
	sctx, stop := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- runContext(sctx, []string{"serve", "--dir", dir, "--addr", "127.0.0.1:0"}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	m := regexp.MustCompile(`http://\S+/`).FindString(line)
	if m == "" {
		t.Fatalf("serve printed %q, want its address", line)
	}
	resp, err := http.Get(m + "jobs?state=dead")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, id := range dead {
		if !strings.Contains(string(body), `<tr data-id="`+id+`" data-state="dead">`) {
			t.Errorf("served jobs page lacks dead job %s:\n%s", id, body)
		}
	}
	if resp, err := http.Post(m+"jobs/11/retry", "application/x-www-form-urlencoded", nil); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST retry to serve = %v, %v; want 403 (read-only)", resp, err)
	}
	stop()
	if code := <-done; code != 0 {
		t.Errorf("serve exited %d, want 0", code)
	}
	if diff := snapshotDiff(before, snapshotDir(t, dir)); diff != "" {
		t.Fatalf("read commands changed the directory: %s", diff)
	}

	check(t, "retry 11", runArgs("retry", "--dir", dir, "11"), 0, []string{"job 11 is pending again"}, nil)
	check(t, "show 11", runArgs("show", "--dir", dir, "11"), 0, []string{"state       pending", "permanent failure on purpose"}, nil)
	check(t, "verify after retry", runArgs("verify", "--dir", dir), 0, []string{"closed cleanly", "ok"}, nil)
}

// snapshotDiff names the files that differ.
func snapshotDiff(a, b map[string]string) string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k+" (new)")
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
