package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adapters/sqs"
	"github.com/sluicehq/sluice/internal/fauxqs"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var signups = []string{"ada@example.com", "grace@example.com"}

// wantDone is what the downstream must see for signups, in sorted order.
var wantDone = []string{
	"thumbnail ada@example.com.png at 64 px", "thumbnail grace@example.com.png at 64 px",
	"welcome ada@example.com", "welcome grace@example.com",
}

// recorder is a downstream that records every request: what, by idempotency key.
type recorder struct {
	mu   sync.Mutex
	keys map[string]string // what → key
	n    int               // requests, repeats included
}

func (r *recorder) Do(_ context.Context, key, what string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = map[string]string{}
	}
	r.keys[what] = key
	r.n++
	return nil
}

// done returns the distinct requests seen so far, sorted, with their keys.
func (r *recorder) done() ([]string, map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var whats []string
	keys := map[string]string{}
	for w, k := range r.keys {
		whats = append(whats, w)
		keys[w] = k
	}
	slices.Sort(whats)
	return whats, keys
}

// runService runs the service on o until the downstream has seen every job of signups, then
// stops it as SIGTERM would and returns the keys by request.
func runService(t *testing.T, o options) map[string]string {
	t.Helper()
	rec := &recorder{}
	o.log, o.down = quiet, rec
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- run(ctx, o, signups) }()
	deadline := time.After(60 * time.Second)
	for {
		whats, keys := rec.done()
		if len(whats) == len(wantDone) {
			if diff := cmp.Diff(wantDone, whats); diff != "" {
				t.Fatalf("requests (-want +got):\n%s", diff)
			}
			cancel()
			select {
			case err := <-ran:
				if err != nil {
					t.Fatalf("run after the stop: %v", err)
				}
			case <-time.After(60 * time.Second):
				t.Fatal("the service did not stop within 60s of its context ending")
			}
			return keys
		}
		select {
		case err := <-ran:
			t.Fatalf("the service ended with %d of %d requests done: %v", len(whats), len(wantDone), err)
		case <-deadline:
			t.Fatalf("after 60s the downstream saw %q, want %q", whats, wantDone)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestTwoKindsOnTheLocalRunner runs the service in a directory: every job runs and succeeds,
// and each has its own idempotency key.
func TestTwoKindsOnTheLocalRunner(t *testing.T) {
	dir := t.TempDir()
	checkKeys(t, runService(t, options{dir: dir}))
	in, err := sluice.Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, j := range in.Jobs {
		if j.State != sluice.StateSucceeded {
			t.Errorf("job %d (%s) is %v, want succeeded", j.ID, j.Kind, j.State)
		}
		kinds[j.Kind]++
	}
	if want := map[string]int{"email": 2, "thumbnail": 2}; !cmp.Equal(want, kinds) {
		t.Errorf("jobs by kind %v, want %v", kinds, want)
	}
}

// TestTwoKindsOnSQS runs the same service, built by newRunner on a queue of the fauxqs SQS
// server, and sees every job done. fauxqs.Start skips it when SLUICE_NO_FAUXQS=1 says the
// server is not available.
func TestTwoKindsOnSQS(t *testing.T) {
	s := fauxqs.Start(t)
	ctx := context.Background()
	c, err := sqs.NewClient(ctx, sqs.ClientOptions{Endpoint: s.URL, Load: s.LoadOptions()})
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("twokinds%d", time.Now().UnixNano())
	queue, err := sqs.CreateQueue(ctx, c, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := sqs.CreateQueue(ctx, c, name+"-dead", nil)
	if err != nil {
		t.Fatal(err)
	}
	checkKeys(t, runService(t, options{queue: queue, dlq: dlq, endpoint: s.URL, region: fauxqs.Region}))
}

// checkKeys fails t unless every request's idempotency key is built from a non-zero job id
// and no two requests share one.
func checkKeys(t *testing.T, keys map[string]string) {
	t.Helper()
	seen := map[string]string{}
	for what, key := range keys {
		if strings.HasSuffix(key, "-0") {
			t.Errorf("%s: key %q is built from a zero job id", what, key)
		}
		if other, ok := seen[key]; ok {
			t.Errorf("%s and %s share the idempotency key %q", what, other, key)
		}
		seen[key] = what
	}
}

// TestConstructionDiffIsTheProgram: the diff README and docs/concepts.md show for moving the
// service to SQS is made of lines of newRunner's two branches, so the pages cannot drift
// from the program. A page shows it as a diff block after "<!-- diff: examples/twokinds/main.go -->".
func TestConstructionDiffIsTheProgram(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(src), "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	for _, page := range []string{"README.md", filepath.Join("docs", "concepts.md")} {
		b, err := os.ReadFile(filepath.Join("..", "..", page))
		if err != nil {
			t.Fatal(err)
		}
		blocks := diffBlocks(string(b))
		if len(blocks) == 0 {
			t.Errorf("%s shows no diff of the construction", page)
		}
		for _, block := range blocks {
			var minus, plus int
			for _, l := range block {
				switch {
				case strings.HasPrefix(l, "-"):
					minus++
				case strings.HasPrefix(l, "+"):
					plus++
				}
				if code := strings.TrimSpace(l[min(1, len(l)):]); !slices.Contains(lines, code) {
					t.Errorf("%s: diff line %q is not a line of examples/twokinds/main.go", page, l)
				}
			}
			if minus == 0 || plus == 0 {
				t.Errorf("%s: the diff removes %d lines and adds %d, want both", page, minus, plus)
			}
		}
	}
}

// diffBlocks returns the lines of each diff block that follows the twokinds marker in page.
func diffBlocks(page string) [][]string {
	var out [][]string
	lines := strings.Split(page, "\n")
	for i := 0; i+1 < len(lines); i++ {
		if lines[i] != "<!-- diff: examples/twokinds/main.go -->" || lines[i+1] != "```diff" {
			continue
		}
		var block []string
		for i += 2; i < len(lines) && lines[i] != "```"; i++ {
			block = append(block, lines[i])
		}
		out = append(out, block)
	}
	return out
}
