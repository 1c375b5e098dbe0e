package core

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Rules 1 and 2 of the package doc, held by walking the syntax of every non-test .go file
// under core/. Without type information it resolves package names through each file's
// imports, so an aliased import is still caught. Port definitions (the files of package core
// itself, not a machine's package) may import context: port methods that do I/O take one,
// machines never do.

// forbiddenImports are refused as exact paths; a trailing "/" also refuses everything below.
var forbiddenImports = []string{
	"os", "os/", "net", "net/", "sync", "sync/", "context", "crypto/rand", "hash/maphash",
	"github.com/aws/", "github.com/benbjohnson/clock", "github.com/benbjohnson/clock/",
}

// forbiddenTime are the wall-clock reads, sleeps and timers of package time.
var forbiddenTime = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true,
}

// allowedRand are the names of math/rand and math/rand/v2 that build a seeded generator; every
// other package-level name (Intn, Int63, Float64, Shuffle, Seed...) uses the global source.
var allowedRand = map[string]bool{
	"New": true, "NewSource": true, "Rand": true, "Source": true, "Source64": true,
	"NewZipf": true, "Zipf": true, "NewPCG": true, "PCG": true, "NewChaCha8": true, "ChaCha8": true,
}

// portAllowed are the imports a port definition may have that a machine may not.
var portAllowed = map[string]bool{"context": true}

func importForbidden(path string, port bool) bool {
	if port && portAllowed[path] {
		return false
	}
	for _, f := range forbiddenImports {
		if path == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(path, f)) {
			return true
		}
	}
	return false
}

// impurities returns one "file:line: what" per violation in f; port says f defines ports
// (it sits in core/ itself) rather than a machine.
func impurities(fset *token.FileSet, f *ast.File, port bool) []string {
	var out []string
	report := func(n ast.Node, format string, args ...any) {
		p := fset.Position(n.Pos())
		out = append(out, fmt.Sprintf("%s:%d: %s", p.Filename, p.Line, fmt.Sprintf(format, args...)))
	}
	pkgs := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			report(imp, "unreadable import %s", imp.Path.Value)
			continue
		}
		if importForbidden(path, port) {
			report(imp, "import of %q", path)
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if path == "math/rand/v2" {
			name = "rand"
		}
		if imp.Name != nil {
			name = imp.Name.Name
		}
		pkgs[name] = path
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			report(n, "go statement")
		case *ast.SelectStmt:
			report(n, "select statement")
		case *ast.ChanType:
			report(n, "channel type")
		case *ast.SendStmt:
			report(n, "channel send")
		case *ast.UnaryExpr:
			if n.Op == token.ARROW {
				report(n, "channel receive")
			}
		case *ast.SelectorExpr:
			id, ok := n.X.(*ast.Ident)
			if !ok || id.Obj != nil { // id.Obj set: a local variable, not a package
				return true
			}
			switch pkgs[id.Name] {
			case "time":
				if forbiddenTime[n.Sel.Name] {
					report(n, "use of time.%s", n.Sel.Name)
				}
			case "math/rand", "math/rand/v2":
				if !allowedRand[n.Sel.Name] {
					report(n, "use of the global %s.%s (use a seeded *rand.Rand)", pkgs[id.Name], n.Sel.Name)
				}
			}
		}
		return true
	})
	return out
}

func TestCoreIsPure(t *testing.T) {
	fset := token.NewFileSet()
	var files int
	var violations []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		files++
		violations = append(violations, impurities(fset, src, filepath.Dir(path) == ".")...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 2 {
		t.Fatalf("walked %d .go files under core/, want at least fs.go and transport.go", files)
	}
	for _, v := range violations {
		t.Errorf("core/%s", v)
	}
}

func TestImpuritiesRulesFire(t *testing.T) {
	for _, tc := range []struct {
		name string
		port bool
		src  string
		want []string
	}{
		{"a port definition may import context", true, `package p
import ("context"; "time")
type T interface{ Receive(ctx context.Context, wait time.Duration) error }`, nil},
		{"a port definition is pure otherwise", true, `package p
import ("context"; "os"; "time")
func f(context.Context) { _ = time.Now(); go f(nil); _ = os.Args }`,
			[]string{`s.go:2: import of "os"`, "s.go:3: use of time.Now", "s.go:3: go statement"}},
		{"a machine may not import context", false, `package p
import "context"
func f(context.Context) {}`, []string{`s.go:2: import of "context"`}},
		{"clean", false, `package p
import ("time"; "math/rand")
func f(now time.Time, r *rand.Rand) time.Duration { _ = rand.New(rand.NewSource(1)); return time.Duration(r.Intn(3)) + now.Sub(now) }`, nil},
		{"time calls", false, `package p
import "time"
func f() { _ = time.Now(); time.Sleep(1); _ = time.Since(time.Time{}); _ = time.Until(time.Time{}) }`,
			[]string{"s.go:3: use of time.Now", "s.go:3: use of time.Sleep", "s.go:3: use of time.Since", "s.go:3: use of time.Until"}},
		{"timers", false, `package p
import "time"
func f() { time.AfterFunc(1, nil); time.NewTimer(1); time.NewTicker(1); time.Tick(1) }`,
			[]string{"s.go:3: use of time.AfterFunc", "s.go:3: use of time.NewTimer", "s.go:3: use of time.NewTicker", "s.go:3: use of time.Tick"}},
		{"aliased time, and a reference without a call", false, `package p
import t "time"
var now = t.Now`, []string{"s.go:3: use of time.Now"}},
		{"time.After is a channel too", false, `package p
import "time"
func f() { <-time.After(1) }`, []string{"s.go:3: channel receive", "s.go:3: use of time.After"}},
		{"a local named time is not the package", false, `package p
type clock struct{}
func (clock) Now() int { return 0 }
func f() int { time := clock{}; return time.Now() }`, nil},
		{"go statement", false, `package p
func f() { go f() }`, []string{"s.go:2: go statement"}},
		{"select and channels", false, `package p
func f(c chan int) { select { case c <- 1: default: }; <-c }`,
			[]string{"s.go:2: channel type", "s.go:2: select statement", "s.go:2: channel send", "s.go:2: channel receive"}},
		{"imports", false, `package p
import (
	"os"
	"os/exec"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"context"
	"crypto/rand"
	"hash/maphash"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/benbjohnson/clock"
	"osprey"
	"network"
)`, []string{
			`s.go:3: import of "os"`, `s.go:4: import of "os/exec"`, `s.go:5: import of "net"`,
			`s.go:6: import of "net/http"`, `s.go:7: import of "sync"`, `s.go:8: import of "sync/atomic"`,
			`s.go:9: import of "context"`, `s.go:10: import of "crypto/rand"`, `s.go:11: import of "hash/maphash"`,
			`s.go:12: import of "github.com/aws/aws-sdk-go-v2/service/sqs"`,
			`s.go:13: import of "github.com/benbjohnson/clock"`}},
		{"global math/rand", false, `package p
import "math/rand"
func f() { _ = rand.Intn(3); _ = rand.Int63(); rand.Shuffle(0, nil); _ = rand.New(rand.NewSource(1)).Intn(2) }`,
			[]string{"s.go:3: use of the global math/rand.Intn (use a seeded *rand.Rand)",
				"s.go:3: use of the global math/rand.Int63 (use a seeded *rand.Rand)",
				"s.go:3: use of the global math/rand.Shuffle (use a seeded *rand.Rand)"}},
		{"global math/rand/v2", false, `package p
import "math/rand/v2"
func f(r *rand.Rand) int { return rand.IntN(3) + r.IntN(2) }`,
			[]string{"s.go:3: use of the global math/rand/v2.IntN (use a seeded *rand.Rand)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "s.go", tc.src, 0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, impurities(fset, f, tc.port)); diff != "" {
				t.Errorf("impurities (-want +got):\n%s", diff)
			}
		})
	}
}
