package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testjournal"
)

// terminalSafe says what in out could act on a terminal: a control byte other than newline,
// DEL, a C1 control or a bidirectional format character, or invalid UTF-8.
func terminalSafe(out string) error {
	if !utf8.ValidString(out) {
		return fmt.Errorf("invalid UTF-8")
	}
	for i, r := range out {
		if r < ' ' && r != '\n' || r == 0x7f || r >= 0x80 && r < 0xa0 || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
			return fmt.Errorf("%U at byte %d: %q", r, i, out[max(0, i-20):min(len(out), i+20)])
		}
	}
	return nil
}

// TestHostileStringsReachNoTerminal: targets, kinds, unique keys, payloads, errors and
// schedule names holding escape sequences, newlines, bidi overrides, C1 controls and invalid
// UTF-8 print as visible escapes in every text command (one `jobs --all` printed 53,376 ESC
// bytes, and newlines forged rows); --json keeps them exact.
func TestHostileStringsReachNoTerminal(t *testing.T) {
	r, dir := testjournal.OpenHostile(t)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	n := len(testjournal.Hostile)
	cmds := [][]string{{"jobs", "--dir", dir, "--all"}, {"stats", "--dir", dir}, {"schedules", "--dir", dir},
		{"jobs", "--dir", dir, "--limit", "1", "--state", "dead,pending"}}
	for id := 1; id <= n; id++ {
		cmds = append(cmds, []string{"show", "--dir", dir, fmt.Sprint(id)})
	}
	for _, args := range cmds {
		res := runArgs(args...)
		if res.code != 0 {
			t.Errorf("%v: exit %d: %s", args, res.code, res.stderr)
		}
		for name, out := range map[string]string{"stdout": res.stdout, "stderr": res.stderr} {
			if err := terminalSafe(out); err != nil {
				t.Errorf("%v %s: %v", args, name, err)
			}
		}
	}
	res := runArgs("jobs", "--dir", dir, "--all")
	if got := strings.Count(res.stdout, "\n"); got != n+1 {
		t.Errorf("jobs --all printed %d lines for %d jobs and a header: a string forged rows\n%s", got, n, res.stdout)
	}
	if !strings.Contains(res.stdout, `\x1b[2J\x1b]0;pwned\x07`) || !strings.Contains(res.stdout, `forged\n999`) ||
		!strings.Contains(res.stdout, `\u202e`) || !strings.Contains(res.stdout, `\xff\xfe\xc3`) {
		t.Errorf("jobs --all does not show the escapes:\n%s", res.stdout)
	}
	if res := runArgs("schedules", "--dir", dir); strings.Count(res.stdout, "\n") != n+1 || !strings.Contains(res.stdout, "@every 1h") {
		t.Errorf("schedules printed:\n%s", res.stdout)
	}

	var page pageOut
	if err := json.Unmarshal([]byte(runArgs("jobs", "--dir", dir, "--all", "--json").stdout), &page); err != nil {
		t.Fatal(err)
	}
	for i, j := range page.Jobs {
		// JSON carries strings as UTF-8: each invalid byte becomes U+FFFD, the rest is exact.
		want := string([]rune(testjournal.Hostile[i]))
		if j.Target != want || j.Unique != want {
			t.Errorf("--json job %d: target %q unique %q, want %q", j.ID, j.Target, j.Unique, want)
		}
	}
}

// TestKindsFromADirectory: a directory's jobs keep their kinds (they were dropped: --kind X
// matched nothing and the KIND column said -).
func TestKindsFromADirectory(t *testing.T) {
	r, dir := testjournal.OpenHostile(t)
	_ = r.Close()
	kind := testjournal.HostileKinds()[2] // "javascript:…"
	res := runArgs("jobs", "--dir", dir, "--kind", kind)
	if ids := jobIDs(res.stdout); len(ids) != 1 || ids[0] != "3" || !strings.Contains(res.stdout, "javascript:window") {
		t.Errorf("jobs --kind %q = %v:\n%s", kind, ids, res.stdout)
	}
	check(t, "show kind", runArgs("show", "--dir", dir, "3"), 0, []string{"kind       javascript:window.__pwned=3"}, nil)
}

// TestMoreHintQuotesItsArguments: the next page's command is one a shell runs as printed.
func TestMoreHintQuotesItsArguments(t *testing.T) {
	dir := testjournal.Closed(t)
	check(t, "more", runArgs("jobs", "--dir", dir, "--limit", "1", "--state", "dead, pending"), 0, nil,
		[]string{"more: sluice jobs --dir " + dir + " --state 'dead, pending' --limit 1 --after 2"})
}

// TestBesideABusyRunner: while an attempt runs, retry and cancel exit 3 (the runner holds the
// directory; they said "interrupted by a crash" and exited 1), and stats keeps its table
// narrow (its note made the interrupted row about 100 columns wide, padded with spaces).
func TestBesideABusyRunner(t *testing.T) {
	dir := t.TempDir()
	started, release := make(chan struct{}), make(chan struct{})
	r, err := sluice.Open(dir, sluice.Config{Capacity: 1}, sluice.JSON[string](), func(ctx context.Context, _ sluice.Job[string]) error {
		close(started)
		<-release
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	id, err := r.Enqueue(ctx, time.Time{}, "a.example", "x")
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- r.Run(ctx) }()
	<-started
	defer func() {
		close(release)
		stop()
		<-done
	}()
	for _, cmd := range []string{"retry", "cancel"} {
		check(t, cmd+" beside a busy runner", runArgs(cmd, "--dir", dir, fmt.Sprint(id)), 3, nil,
			[]string{"a running runner holds " + dir + ", so nothing was written"})
	}
	res := runArgs("stats", "--dir", dir)
	check(t, "stats beside a busy runner", res, 0, []string{"interrupted  1", "a running runner holds the directory"}, nil)
	for _, l := range strings.Split(strings.TrimRight(res.stdout, "\n"), "\n") {
		if strings.HasSuffix(l, " ") || strings.Contains(l, "\t") || (strings.Count(l, "  ") > 0 && len(l) > 40) {
			t.Errorf("stats line %q: padded or wide", l)
		}
	}
}

// TestSucceededJobHidesItsEarlierError: a job that succeeded after an interrupted or failed
// attempt does not show "last error": its history keeps the attempt's error.
func TestSucceededJobHidesItsEarlierError(t *testing.T) {
	dir := t.TempDir()
	tries := 0
	r, err := sluice.Open(dir, sluice.Config{Capacity: 1, Policy: sluice.Policy{Base: time.Millisecond, Cap: time.Millisecond}},
		sluice.JSON[string](), func(context.Context, sluice.Job[string]) error {
			if tries++; tries == 1 {
				return fmt.Errorf("interrupted")
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, _ := r.Enqueue(ctx, time.Time{}, "a.example", "x")
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	res := runArgs("show", "--dir", dir, fmt.Sprint(id))
	if strings.Contains(res.stdout, "last error") || !strings.Contains(res.stdout, "succeeded") || !strings.Contains(res.stdout, "interrupted") {
		t.Errorf("show of a succeeded job:\n%s", res.stdout)
	}
	if res := runArgs("jobs", "--dir", dir); strings.Contains(res.stdout, "interrupted") {
		t.Errorf("jobs shows a succeeded job's earlier error:\n%s", res.stdout)
	}
}

// TestServeStaysLocalUnlessAllowed: serve refuses an address other hosts can reach without
// --allow-remote (it served every payload to the network without a word), and warns with it.
func TestServeStaysLocalUnlessAllowed(t *testing.T) {
	dir := testjournal.Closed(t)
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		// Bounded: were the address accepted, serve would run until its context ends.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var out, errb bytes.Buffer
		code := runContext(ctx, []string{"serve", "--dir", dir, "--addr", addr}, &out, &errb)
		cancel()
		check(t, "serve "+addr, result{code, out.String(), errb.String()}, 2, nil,
			[]string{"is not a loopback address", "--allow-remote"})
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuf
	done := make(chan int, 1)
	go func() {
		done <- runContext(ctx, []string{"serve", "--dir", dir, "--addr", "0.0.0.0:0", "--allow-remote"}, &out, &errb)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "serving") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 || !strings.Contains(out.String(), "warning: ") || !strings.Contains(out.String(), "without authentication") {
		t.Errorf("serve --allow-remote: exit %d, stdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
}

// syncBuf is a bytes.Buffer safe for a writer and a reader on two goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
