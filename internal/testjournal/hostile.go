package testjournal

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Hostile strings: each names what it would do if shown raw. Every one is a valid name
// (no NUL, at most sluice.NameMax bytes), so Enqueue, Register and Schedule accept it.
var Hostile = []string{
	"<script>window.__pwned=1</script>",
	`"><img src=x onerror="window.__pwned=2">`,
	"javascript:window.__pwned=3",
	"\x1b[2J\x1b]0;pwned\x07\x1b[31mred",               // clear screen, set the title, colour
	"forged\n999  dead  fake  row",                     // a newline forging a table row
	"tab\there\rcarriage",                              // column breaks
	"bidi \u202egnp.exe\u202c and \u2066isolate\u2069", // right-to-left override
	"c1 \u009b31m csi and \u0085 nel",                  // C1 controls as UTF-8
	"bad utf8 \xff\xfe\xc3",                            // invalid UTF-8
	"{{.Secret}} ${jndi:x} %s%n",
	strings.Repeat("w", sluice.NameMax), // the longest name
}

// HostileKinds names the kinds of OpenHostile's jobs: one per hostile string but the last.
func HostileKinds() []string { return Hostile[:len(Hostile)-1] }

// OpenHostile opens a runner in a new directory holding one job per hostile string: its
// kind (a registered kind of that name), target, unique key, payload and error are all
// hostile; jobs with an even id are dead (their handler fails with the job's payload as the
// error), the others pending in an hour. It also sets one schedule per hostile string.
func OpenHostile(t testing.TB) (*sluice.Runner, string) {
	t.Helper()
	dir := t.TempDir()
	r, err := sluice.New(dir, sluice.Config{Capacity: 2, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	ctx := context.Background()
	fail := func(_ context.Context, j sluice.Job[string]) error {
		return sluice.Permanent(errors.New("handler says: " + j.Payload))
	}
	var kinds []*sluice.Kind[string]
	for _, name := range HostileKinds() {
		k, err := sluice.Register(r, name, sluice.JSON[string](), fail)
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, k)
	}
	for i, s := range Hostile {
		k := kinds[i%len(kinds)]
		due := time.Now().Add(time.Hour)
		if i%2 == 1 {
			due = time.Time{}
		}
		if _, err := k.Enqueue(ctx, due, s, s, sluice.WithUnique(s)); err != nil {
			t.Fatal(err)
		}
		if err := k.Schedule(ctx, s, "@every 1h", s, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.DrainDue(ctx); err != nil {
		t.Fatal(err)
	}
	return r, dir
}
