package main

import (
	"fmt"
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
func regionOf(path string) (string, error) { return markedRegion(path, "README") }

// markedRegion returns the lines between "// NAME:begin" and "// NAME:end" in path, less the
// begin line's indentation.
func markedRegion(path, name string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := string(b)
	begin := "// " + name + ":begin\n"
	i := strings.Index(s, begin)
	j := strings.Index(s, "// "+name+":end")
	if i < 0 || j < i {
		return "", fmt.Errorf("%s: no %s:begin and %s:end lines", path, name, name)
	}
	indent := s[strings.LastIndex(s[:i], "\n")+1 : i]
	body := strings.TrimSuffix(s[i+len(begin):strings.LastIndex(s[:j], "\n")+1], "\n")
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

// TestDocProgramIsTheSmallestExample: the program doc.go shows is, line for line, the marked
// region of examples/quickstart/smallest, which `go test ./...` builds.
func TestDocProgramIsTheSmallestExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "doc.go"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	start := -1
	for i, l := range lines {
		if l == "// The smallest program:" {
			start = i + 2 // after the blank comment line
		}
	}
	if start < 0 {
		t.Fatal("doc.go has no line \"// The smallest program:\"")
	}
	var prog []string
	for _, l := range lines[start:] {
		if code, ok := strings.CutPrefix(l, "//\t"); ok {
			prog = append(prog, code)
			continue
		}
		if l == "//" {
			prog = append(prog, "")
			continue
		}
		break
	}
	got := strings.TrimRight(strings.Join(prog, "\n"), "\n")
	want, err := markedRegion(filepath.Join("smallest", "main.go"), "doc.go")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.TrimRight(want, "\n"), got); diff != "" {
		t.Errorf("doc.go's program differs from examples/quickstart/smallest (-example +doc.go):\n%s", diff)
	}
}
