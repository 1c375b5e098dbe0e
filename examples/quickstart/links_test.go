package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// mdLink matches a Markdown link or image: [text](target) or ![alt](target), the target up to
// the first space or closing parenthesis.
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// TestLinksResolve: every relative link in README.md, CONTRIBUTING.md, CHANGELOG.md and docs/
// names a file or folder of the repository, and a link to a Markdown heading (#anchor) names a
// heading that page has (GitHub's anchors: lower case, spaces to hyphens, punctuation dropped).
// Links inside code (fenced blocks and `spans`) are not links.
func TestLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	pages := []string{"README.md", "CONTRIBUTING.md", "CHANGELOG.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		pages = append(pages, filepath.Join("docs", filepath.Base(d)))
	}
	checked := 0
	for _, page := range pages {
		for _, l := range pageLinks(t, filepath.Join(root, page)) {
			checked++
			if msg := brokenLink(root, page, l.target); msg != "" {
				t.Errorf("%s line %d: link %q: %s", page, l.line, l.target, msg)
			}
		}
	}
	if checked < 30 {
		t.Errorf("checked %d links, want at least the 30 README and docs/ have", checked)
	}
}

// TestBrokenLinkFindsMissingTargets holds brokenLink to its word on planted bad links.
func TestBrokenLinkFindsMissingTargets(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, bad := range []string{"docs/nope.md", "nope/", "docs/runner.md#no-such-heading", "#no-heading-here"} {
		if brokenLink(root, "README.md", bad) == "" {
			t.Errorf("brokenLink(%q) found nothing wrong", bad)
		}
	}
	for _, good := range []string{"docs/runner.md", "examples/quickstart/main.go", "https://example.com/x", "docs/"} {
		if msg := brokenLink(root, "README.md", good); msg != "" {
			t.Errorf("brokenLink(%q) = %q, want it resolved", good, msg)
		}
	}
}

type link struct {
	line   int
	target string
}

// pageLinks returns the links of a Markdown page outside fenced blocks and code spans.
func pageLinks(t *testing.T, path string) []link {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []link
	fenced := false
	for i, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " \t"), "```") {
			fenced = !fenced
			continue
		}
		if fenced || strings.HasPrefix(l, "    ") && !strings.HasPrefix(strings.TrimLeft(l, " "), "|") && !strings.HasPrefix(strings.TrimLeft(l, " "), "-") {
			continue // a fence or an indented code block
		}
		for _, m := range mdLink.FindAllStringSubmatch(stripCodeSpans(l), -1) {
			out = append(out, link{line: i + 1, target: m[1]})
		}
	}
	return out
}

// stripCodeSpans blanks `code spans`, whose brackets are not links.
func stripCodeSpans(l string) string {
	parts := strings.Split(l, "`")
	for i := 1; i < len(parts); i += 2 {
		parts[i] = ""
	}
	return strings.Join(parts, "`")
}

// brokenLink says what is wrong with target as linked from page (a path from root), or "".
func brokenLink(root, page, target string) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	path, anchor, _ := strings.Cut(target, "#")
	file := filepath.Join(root, page)
	if path != "" {
		file = filepath.Join(root, filepath.Dir(page), path)
		if _, err := os.Stat(file); err != nil {
			return "no such file or folder in the repository"
		}
	}
	if anchor == "" || !strings.HasSuffix(file, ".md") {
		return ""
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	if !slices.Contains(headingAnchors(string(b)), anchor) {
		return "no heading with that anchor in " + filepath.Base(file)
	}
	return ""
}

// headingAnchors lists the anchors GitHub gives a page's headings.
func headingAnchors(md string) []string {
	var out []string
	fenced := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}
