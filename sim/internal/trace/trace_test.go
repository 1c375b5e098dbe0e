package trace

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// The trace keeps the last lines for violation reports and hashes every line.
func TestTraceLastAndDigest(t *testing.T) {
	var out strings.Builder
	tr := New(&out)
	for i := 0; i < LastMax+5; i++ {
		tr.Add(time.Duration(i)*time.Millisecond, "w", "event "+strconv.Itoa(i))
	}
	last := tr.Last()
	if len(last) != LastMax || last[0] != "0.005s w event 5" || last[len(last)-1] != "0.034s w event 34" {
		t.Fatalf("Last() = %q...%q (%d lines)", last[0], last[len(last)-1], len(last))
	}
	if n := strings.Count(out.String(), "\n"); n != LastMax+5 {
		t.Fatalf("wrote %d lines, want %d", n, LastMax+5)
	}
	other := New(nil)
	for i := 0; i < LastMax+5; i++ {
		other.Add(time.Duration(i)*time.Millisecond, "w", "event "+strconv.Itoa(i))
	}
	if tr.Digest() != other.Digest() {
		t.Fatal("the same lines gave different digests")
	}
	other.Add(0, "w", "one more")
	if tr.Digest() == other.Digest() {
		t.Fatal("different lines gave the same digest")
	}
}
