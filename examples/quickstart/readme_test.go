package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
)

// TestReadmeSnippetsAreTheExamplePrograms: every Go block in README.md that a
// "<!-- snippet: PATH -->" line introduces is, byte for byte, the region between the
// README:begin and README:end lines of PATH (less the region's indentation), and the quick
// start section has no Go block without one. So README's quick start is code that `go test
// ./...` builds.
func TestReadmeSnippetsAreTheExamplePrograms(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(readme), "\n")
	checked, inQuickStart := 0, false
	for i := 0; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "## ") {
			inQuickStart = lines[i] == "## Quick start"
		}
		if lines[i] != "```go" {
			continue
		}
		end := i + 1
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		block := strings.Join(lines[i+1:end], "\n")
		marker := ""
		if i > 0 {
			marker = lines[i-1]
		}
		path, ok := strings.CutPrefix(marker, "<!-- snippet: ")
		if !ok {
			if inQuickStart {
				t.Errorf("README line %d: a Go block in the quick start without a snippet marker", i+1)
			}
			i = end
			continue
		}
		path = strings.TrimSuffix(path, " -->")
		region, err := regionOf(filepath.Join(root, path))
		if err != nil {
			t.Errorf("README line %d: %v", i, err)
		} else if diff := cmp.Diff(region, block); diff != "" {
			t.Errorf("README line %d differs from %s's README region (-program +readme):\n%s", i+1, path, diff)
		}
		checked++
		i = end
	}
	if checked < 2 {
		t.Errorf("checked %d snippets, want at least the runner's and the SQS client's", checked)
	}
}

// regionOf returns the lines between "// README:begin" and "// README:end" in path, less the
// begin line's indentation.
func regionOf(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := string(b)
	i := strings.Index(s, "// README:begin\n")
	j := strings.Index(s, "// README:end")
	if i < 0 || j < i {
		return "", os.ErrNotExist
	}
	indent := s[strings.LastIndex(s[:i], "\n")+1 : i]
	body := strings.TrimSuffix(s[i+len("// README:begin\n"):strings.LastIndex(s[:j], "\n")+1], "\n")
	var out []string
	for _, l := range strings.Split(body, "\n") {
		out = append(out, strings.TrimPrefix(l, indent))
	}
	return strings.Join(out, "\n"), nil
}

// TestQuickStartRuns runs the quick start in a temporary directory: the job is durable and
// succeeded.
func TestQuickStartRuns(t *testing.T) {
	dir := t.TempDir()
	if err := run(dir); err != nil {
		t.Fatal(err)
	}
	in, err := sluice.Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Jobs) != 1 || in.Jobs[0].State != sluice.StateSucceeded {
		t.Errorf("jobs %+v, want one succeeded", in.Jobs)
	}
}
