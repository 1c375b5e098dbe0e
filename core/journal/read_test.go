package journal

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/sim/disk"
)

// TestReadWritesNothing: for every kind of file Open would act on (create, cut, remove a
// .compact, clear a mark) or refuse, Read makes no mutating disk operation, leaves every byte
// and the listing as they were, and replays what Open would (or, refused, the batches before
// the damage).
func TestReadWritesNothing(t *testing.T) {
	two := newFile().batchOf(true, "a", "b").batchOf(true, "c")
	tests := []struct {
		name    string
		files   map[string][]byte
		want    []rec
		kind    TailKind
		closed  bool
		wantErr string
	}{
		{name: "no journal", kind: TailEmpty},
		{name: "leftover compact only", files: map[string][]byte{"j.compact": {1, 2}}, kind: TailEmpty},
		{name: "clean", files: map[string][]byte{"j": two.bytes()}, want: recs("a b c"), kind: TailClean},
		{name: "closed cleanly", files: map[string][]byte{"j": markClosed(two.bytes())}, want: recs("a b c"),
			kind: TailClean, closed: true},
		{name: "torn, with a leftover compact", kind: TailTorn, want: recs("a b"),
			files: map[string][]byte{"j": two.bytes()[:len(two.b)-2], "j.compact": {1}}},
		{name: "corrupt: the batches before the damage", want: recs("a b"), wantErr: "later batch",
			files: map[string][]byte{"j": flipByte(newFile().batchOf(true, "a", "b").batchOf(true, "c").batchOf(true, "d").bytes(), two.offs[2]+frameMin)}},
		{name: "bad header", files: map[string][]byte{"j": flipByte(two.bytes(), 1)}, wantErr: "wrong magic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := disk.New(1)
			for _, name := range []string{"j", "j.compact"} {
				if b, ok := tt.files[name]; ok {
					writeFile(t, d, name, b)
				}
			}
			names, _ := d.List()
			ops := d.Ops()
			var got []rec
			tail, err := Read(d, "j", Config{}, collect(&got))
			if d.Ops() != ops {
				t.Errorf("Read made %d mutating disk operations", d.Ops()-ops)
			}
			after, _ := d.List()
			if diff := cmp.Diff(names, after); diff != "" {
				t.Errorf("listing (-before +after):\n%s", diff)
			}
			for name, b := range tt.files {
				if diff := cmp.Diff(b, readFile(t, d, name)); diff != "" {
					t.Errorf("%s changed (-before +after):\n%s", name, diff)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("replay (-want +got):\n%s", diff)
			}
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Read = %v, want ErrCorrupt containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || tail.Kind != tt.kind || tail.Closed != tt.closed {
				t.Errorf("Read = %+v, %v; want kind %v closed %v", tail, err, tt.kind, tt.closed)
			}
		})
	}
}

// TestJournalMaxRefusesAppends: an Append that would grow the file past JournalMax is refused
// with ErrFull, nothing buffered, the journal still usable; a compaction makes room again.
func TestJournalMaxRefusesAppends(t *testing.T) {
	d := disk.New(1)
	cfg := Config{RecordMax: 1 << 10, SnapshotMax: 1 << 10}
	cfg.JournalMax = journalMaxLeast(cfg.withDefaults())
	j, _ := mustOpen(t, d, cfg)
	data := strings.Repeat("x", 100)
	var full error
	for i := 0; i < 1000 && full == nil; i++ {
		if _, full = j.Append(1, []byte(data)); full == nil {
			if _, err := j.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !errors.Is(full, ErrFull) || !strings.Contains(full.Error(), "JournalMax") {
		t.Fatalf("Append past JournalMax = %v, want ErrFull naming JournalMax", full)
	}
	if j.Buffered() != 0 || j.Size() > cfg.JournalMax {
		t.Fatalf("after ErrFull: %d buffered, size %d over %d", j.Buffered(), j.Size(), cfg.JournalMax)
	}
	check(t, j)
	if err := j.Compact(9, []byte("state")); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(1, []byte(data)); err != nil {
		t.Fatalf("Append after compaction: %v", err)
	}
}

// TestCloseMarks: Close marks a healthy journal and syncs the mark; a poisoned one closes
// without the mark, so the crash rows judge its file.
func TestCloseMarks(t *testing.T) {
	for _, poisoned := range []bool{false, true} {
		t.Run(fmt.Sprintf("poisoned=%v", poisoned), func(t *testing.T) {
			d := disk.New(1)
			j, _ := mustOpen(t, d, Config{})
			commitBatch(t, j, "a")
			if poisoned {
				d.FailNext(disk.OpSync, nil)
				j.Append(1, []byte("b"))
				if _, err := j.Commit(); !errors.Is(err, ErrPoisoned) {
					t.Fatalf("Commit with a failing sync: %v", err)
				}
			}
			j.Close()
			d.Crash() // only what was synced counts
			h, _ := decodeHeader(readFile(t, d, "j"))
			if got := h.marked == markSet; got == poisoned {
				t.Fatalf("mark set %v after Close of a journal poisoned %v", got, poisoned)
			}
		})
	}
}

// TestJournalMaxDefault: the default leaves room for a snapshot and two records whatever the
// other limits, and an explicit value below that is a programmer error.
func TestJournalMaxDefault(t *testing.T) {
	for _, c := range []Config{{}, {RecordMax: 1 << 30, SnapshotMax: 1 << 30}, {SnapshotMax: 1 << 30}} {
		got := c.withDefaults()
		if got.JournalMax < journalMaxLeast(got) || got.JournalMax < JournalMaxDefault {
			t.Errorf("%+v: JournalMax %d", c, got.JournalMax)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("JournalMax below its least did not panic")
		}
	}()
	Config{JournalMax: 1 << 20}.withDefaults()
}
