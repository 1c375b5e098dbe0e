package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
)

// TestReadmeSnippetsAreTheExamplePrograms: every Go block in README.md (also one indented in
// a list item) follows a "<!-- snippet: PATH -->" or "<!-- snippet: PATH#NAME -->" line and
// is, byte for byte, the region between the README:begin and README:end lines of PATH (or
// NAME:begin and NAME:end), less the region's indentation. So every Go block README shows is
// code that `go test ./...` builds; a Go block without a marker fails the test.
func TestReadmeSnippetsAreTheExamplePrograms(t *testing.T) {
	if n := checkSnippets(t, "README.md"); n < 1 {
		t.Errorf("checked %d snippets, want at least README's quick start", n)
	}
}

// TestDocsSnippetsAreCompiledCode holds every page of docs/ to README's rule. A page may also
// mark a block "<!-- declared in: PATH -->": each of its lines is then a line of PATH (the
// API's own declarations, shown as they are).
func TestDocsSnippetsAreCompiledCode(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pages {
		n += checkSnippets(t, filepath.Join("docs", filepath.Base(p)))
	}
	if n < 10 {
		t.Errorf("checked %d Go blocks in docs/, want at least the 10 there are", n)
	}
}

// checkSnippets checks the Go blocks of page (a path from the repository root) and returns
// how many it checked.
func checkSnippets(t *testing.T, page string) int {
	t.Helper()
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(readme), "\n")
	checked := 0
	for i := 0; i < len(lines); i++ {
		indent, ok := strings.CutSuffix(lines[i], "```go")
		if !ok || strings.TrimLeft(indent, " ") != "" {
			continue
		}
		at := i + 1
		end := i + 1
		for end < len(lines) && lines[end] != indent+"```" {
			end++
		}
		var body []string
		for _, l := range lines[i+1 : end] {
			body = append(body, strings.TrimPrefix(l, indent))
		}
		block := strings.Join(body, "\n")
		marker := ""
		if i > 0 {
			marker = strings.TrimPrefix(lines[i-1], indent)
		}
		i = end
		checked++
		if decl, ok := strings.CutPrefix(marker, "<!-- declared in: "); ok {
			path := filepath.Join(root, strings.TrimSuffix(decl, " -->"))
			src, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s line %d: %v", page, at, err)
				continue
			}
			for _, l := range body {
				if l != "" && !slices.Contains(strings.Split(string(src), "\n"), l) {
					t.Errorf("%s line %d: %q is not a line of %s", page, at, l, path)
				}
			}
			continue
		}
		spec, ok := strings.CutPrefix(marker, "<!-- snippet: ")
		if !ok {
			t.Errorf("%s line %d: a Go block without a snippet marker on the line before", page, at)
			continue
		}
		path, name, found := strings.Cut(strings.TrimSuffix(spec, " -->"), "#")
		if !found {
			name = "README"
		}
		region, err := markedRegion(filepath.Join(root, path), name)
		if err != nil {
			t.Errorf("%s line %d: %v", page, at, err)
		} else if diff := cmp.Diff(region, block); diff != "" {
			t.Errorf("%s line %d differs from %s's %s region (-program +page):\n%s", page, at, path, name, diff)
		}
	}
	return checked
}

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
	body := strings.TrimRight(s[i+len(begin):strings.LastIndex(s[:j], "\n")+1], "\n") // gofmt may leave a blank line before the end
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
