// Package scenariotest holds the test-only helpers that the datadriven scenario tests of
// core/lease and core/worker share: parsing times and arguments, a log capture without
// timestamps, the output of one step, and a TestMain that raises rapid's effort.
//
// Rules:
//
//  1. Only _test.go files import it; it may use os and flag (core's purity rules cover
//     non-test files only).
//  2. A malformed scenario line fails the test (t.Fatalf), never panics.
package scenariotest

import (
	"bytes"
	"flag"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// Secs parses s, in seconds (fractions allowed), as a time after epoch.
func Secs(t testing.TB, epoch time.Time, s string) time.Time {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("bad time %q: %v", s, err)
	}
	return epoch.Add(time.Duration(f * float64(time.Second)))
}

// Arg returns the first value of key; def when it is absent, and a failed test when it is
// absent and def is "" (the argument is required).
func Arg(t testing.TB, d *datadriven.TestData, key, def string) string {
	t.Helper()
	a, ok := d.Arg(key)
	if !ok {
		if def == "" {
			t.Fatalf("%s: %s needs %s=", d.Pos, d.Cmd, key)
		}
		return def
	}
	return a.Vals[0]
}

// Logger writes text logs at level and above to w, without the time (outputs stay stable).
func Logger(w *bytes.Buffer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// TakeLogs returns the lines logged into logs, each as "log <line>\n", and empties it.
func TakeLogs(logs *bytes.Buffer) string {
	if logs.Len() == 0 {
		return ""
	}
	var s string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		s += "log " + l + "\n"
	}
	logs.Reset()
	return s
}

// Output is what a step prints: its description, the lines it logged, and an INVARIANT line
// when the machine's check failed; "ok" when all three are empty.
func Output(described string, logs *bytes.Buffer, invariants error) string {
	s := described + TakeLogs(logs)
	if invariants != nil {
		s += "INVARIANT: " + invariants.Error() + "\n"
	}
	if s == "" {
		return "ok\n"
	}
	return s
}

// Main runs a package's tests (call it from TestMain). With SLUICE_LONG set it raises
// rapid's checks from 100 to 5,000 and steps from 30 to 300, unless flags set them already.
func Main(m *testing.M) {
	flag.Parse()
	if os.Getenv("SLUICE_LONG") != "" {
		if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == "100" {
			_ = f.Value.Set("5000")
		}
		if f := flag.Lookup("rapid.steps"); f != nil && f.Value.String() == "30" {
			_ = f.Value.Set("300")
		}
	}
	os.Exit(m.Run())
}
