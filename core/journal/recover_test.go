package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/sim/disk"
)

func flipByte(b []byte, off int) []byte { b[off] ^= 0x10; return b }

func zeroRange(b []byte, from, to int) []byte {
	for i := from; i < to; i++ {
		b[i] = 0
	}
	return b
}

// TestRecoveryTable runs every row of the recovery table (doc.go, recoveryTable).
func TestRecoveryTable(t *testing.T) {
	type outcome struct {
		Find    string
		Records []rec
		Err     string // "" or the sentinel's message
		Size    int64  // the journal's size after Open
		Names   []string
	}
	two := newFile().batchOf(true, "a", "b").batchOf(true, "c")
	batch2 := int64(two.offs[2])
	tests := []struct {
		name    string
		files   map[string][]byte
		want    outcome
		wantLog string // substring of the log; "" means nothing logged
		wantMsg string // substring of the error
		refuse  LSN    // the replay function refuses this record
	}{
		{name: "no journal", want: outcome{Find: "no-journal", Size: headerLen, Names: []string{"j"}}},
		{name: "empty file is no journal", files: map[string][]byte{"j": {}},
			want: outcome{Find: "no-journal", Size: headerLen, Names: []string{"j"}}},
		{name: "clean", files: map[string][]byte{"j": two.bytes()},
			want: outcome{Find: "clean", Records: recs("a b c"), Size: int64(len(two.b)), Names: []string{"j"}}},
		{name: "torn: short last frame", files: map[string][]byte{"j": two.bytes()[:len(two.b)-3]},
			want:    outcome{Find: "torn", Records: recs("a b"), Size: batch2, Names: []string{"j"}},
			wantLog: fmt.Sprintf("offset=%d dropped=%d", batch2, len(two.b)-3-int(batch2))},
		{name: "torn: last batch without its end flag",
			files: map[string][]byte{"j": newFile().batchOf(true, "a", "b").batchOf(false, "c", "d").bytes()},
			want:  outcome{Find: "torn", Records: recs("a b"), Size: batch2, Names: []string{"j"}}, wantLog: "no end flag"},
		{name: "torn out of order: an earlier sector lost, a later one persisted",
			files: func() map[string][]byte {
				fb := newFile().batchOf(true, "a", "b").batchOf(true, "c", "d", "e")
				return map[string][]byte{"j": zeroRange(fb.bytes(), fb.offs[3], fb.offs[4])}
			}(),
			want:    outcome{Find: "torn", Records: recs("a b"), Size: batch2, Names: []string{"j"}},
			wantLog: "batch 2 has a bad or short frame"},
		{name: "torn: a bit flip in the last batch cannot be told from a torn write",
			files: map[string][]byte{"j": flipByte(two.bytes(), len(two.b)-1)},
			want:  outcome{Find: "torn", Records: recs("a b"), Size: batch2, Names: []string{"j"}}, wantLog: "dropped="},
		{name: "torn: garbage after the last complete batch",
			files:   map[string][]byte{"j": append(two.bytes(), "garbage garbage garbage garbage"...)},
			want:    outcome{Find: "torn", Records: recs("a b c"), Size: int64(len(two.b)), Names: []string{"j"}},
			wantLog: fmt.Sprintf("offset=%d dropped=31", len(two.b))},
		{name: "corrupt: a bad frame followed by a complete later batch",
			files:   map[string][]byte{"j": flipByte(two.bytes(), two.offs[0]+frameMin)},
			want:    outcome{Find: "corrupt", Err: ErrCorrupt.Error(), Size: int64(len(two.b)), Names: []string{"j"}},
			wantMsg: fmt.Sprintf(`file "j" at offset %d (LSN before 0, after 3)`, headerLen)},
		{name: "corrupt: a zeroed frame inside a batch, a later batch after it",
			files: func() map[string][]byte {
				fb := newFile().batchOf(true, "a").batchOf(true, "b", "c").batchOf(true, "d")
				return map[string][]byte{"j": zeroRange(fb.bytes(), fb.offs[1], fb.offs[2])}
			}(),
			want: outcome{Find: "corrupt", Records: recs("a"), Err: ErrCorrupt.Error(),
				Size: int64(len(newFile().batchOf(true, "a").batchOf(true, "b", "c").batchOf(true, "d").b)), Names: []string{"j"}},
			wantMsg: "(LSN before 1, after 4)"},
		{name: "corrupt: an LSN gap between valid frames",
			files:   map[string][]byte{"j": newFile().batchOf(true, "a").frame(3, 2, flagEnd, "c").bytes()},
			want:    outcome{Find: "corrupt", Records: recs("a"), Err: ErrCorrupt.Error(), Size: int64(len(newFile().batchOf(true, "a").frame(3, 2, flagEnd, "c").b)), Names: []string{"j"}},
			wantMsg: "LSN 3 follows LSN 1"},
		{name: "corrupt: a batch number out of order",
			files:   map[string][]byte{"j": newFile().batchOf(true, "a").frame(2, 3, flagEnd, "b").bytes()},
			want:    outcome{Find: "corrupt", Records: recs("a"), Err: ErrCorrupt.Error(), Size: int64(len(newFile().batchOf(true, "a").frame(2, 3, flagEnd, "b").b)), Names: []string{"j"}},
			wantMsg: "batch 3 where batch 2 was due"},
		{name: "corrupt: a damaged snapshot",
			files:   map[string][]byte{"j": flipByte(newSnapshotFile(5, 3, "state").batchOf(true, "x").bytes(), headerLen+frameMin)},
			want:    outcome{Find: "corrupt", Err: ErrCorrupt.Error(), Size: int64(len(newSnapshotFile(5, 3, "state").batchOf(true, "x").b)), Names: []string{"j"}},
			wantMsg: "bad snapshot frame"},
		{name: "bad header", files: map[string][]byte{"j": flipByte(two.bytes(), 3)},
			want:    outcome{Find: "bad-header", Err: ErrBadHeader.Error(), Size: int64(len(two.b)), Names: []string{"j"}},
			wantMsg: "wrong magic"},
		{name: "bad header: shorter than a header", files: map[string][]byte{"j": two.bytes()[:7]},
			want: outcome{Find: "bad-header", Err: ErrBadHeader.Error(), Size: 7, Names: []string{"j"}}},
		{name: "leftover compact: removed, the old journal replayed",
			files:   map[string][]byte{"j": two.bytes(), "j.compact": newSnapshotFile(3, 3, "state").bytes()},
			want:    outcome{Find: "leftover-compact+clean", Records: recs("a b c"), Size: int64(len(two.b)), Names: []string{"j"}},
			wantLog: "removed leftover compaction file"},
		{name: "leftover compact without a journal: removed, then created",
			files: map[string][]byte{"j.compact": {1, 2, 3}},
			want:  outcome{Find: "leftover-compact+no-journal", Size: headerLen, Names: []string{"j"}}, wantLog: "removed the leftover of creating"},
		{name: "the header of a create cut short, alone: removed, then created",
			files: map[string][]byte{"j.compact": newFile().bytes()},
			want:  outcome{Find: "leftover-compact+no-journal", Size: headerLen, Names: []string{"j"}}, wantLog: "removed the leftover of creating"},
		{name: "a lone compact holding a snapshot: refused, kept",
			files:   map[string][]byte{"j.compact": newSnapshotFile(3, 3, "state").batchOf(true, "x").bytes()},
			want:    outcome{Find: "lone-compact", Err: ErrLoneCompact.Error(), Names: []string{"j.compact"}},
			wantMsg: `a snapshot standing for LSN 1-3 and 1 records after it) and no "j" beside it`},
		{name: "a journal moved to .compact: refused, kept",
			files:   map[string][]byte{"j.compact": two.bytes()},
			want:    outcome{Find: "lone-compact", Err: ErrLoneCompact.Error(), Names: []string{"j.compact"}},
			wantMsg: `holding 3 records (LSN 1-3)) and no "j" beside it`},
		{name: "a lone compact beside an empty journal: refused, both kept",
			files:   map[string][]byte{"j": {}, "j.compact": two.bytes()},
			want:    outcome{Find: "lone-compact", Err: ErrLoneCompact.Error(), Names: []string{"j", "j.compact"}},
			wantMsg: `and an empty "j" beside it`},
		{name: "a lone compact of more than a sector that reads as nothing: refused, kept",
			files:   map[string][]byte{"j.compact": make([]byte, 600)},
			want:    outcome{Find: "lone-compact", Err: ErrLoneCompact.Error(), Names: []string{"j.compact"}},
			wantMsg: `holding no record a scan can read, then damage`},
		{name: "leftover compact beside a corrupt journal: both left as they are",
			files:   map[string][]byte{"j": flipByte(two.bytes(), two.offs[0]+frameMin), "j.compact": {1, 2, 3}},
			want:    outcome{Find: "corrupt", Err: ErrCorrupt.Error(), Size: int64(len(two.b)), Names: []string{"j", "j.compact"}},
			wantMsg: "Restore the file from a backup"},
		{name: "closed cleanly: replayed, the mark cleared",
			files: map[string][]byte{"j": markClosed(two.bytes())},
			want:  outcome{Find: "clean", Records: recs("a b c"), Size: int64(len(two.b)), Names: []string{"j"}}},
		{name: "closed cleanly, then a bit flip in the last batch: refused, not cut",
			files:   map[string][]byte{"j": flipByte(markClosed(two.bytes()), len(two.b)-1)},
			want:    outcome{Find: "corrupt", Records: recs("a b"), Err: ErrCorrupt.Error(), Size: int64(len(two.b)), Names: []string{"j"}},
			wantMsg: fmt.Sprintf("closed cleanly at %d bytes (last LSN 3), but it no longer matches: bad or short frame at offset %d", len(two.b), two.offs[2])},
		{name: "closed cleanly, then cut at a batch boundary: refused",
			files:   map[string][]byte{"j": markClosed(two.bytes())[:batch2]},
			want:    outcome{Find: "corrupt", Records: recs("a b"), Err: ErrCorrupt.Error(), Size: batch2, Names: []string{"j"}},
			wantMsg: fmt.Sprintf("but the file was cut to %d bytes", batch2)},
		{name: "closed cleanly, then grown by a complete batch: refused",
			files: map[string][]byte{"j": func() []byte {
				fb := newFile().batchOf(true, "a", "b")
				b := markClosed(fb.bytes())
				return appendFrame(b, 3, 2, flagEnd, 1, []byte("c"))
			}()},
			want:    outcome{Find: "corrupt", Records: recs("a b c"), Err: ErrCorrupt.Error(), Size: int64(len(two.b)), Names: []string{"j"}},
			wantMsg: "has grown to"},
		{name: "a torn mark counts as none: the crash rows apply",
			files: map[string][]byte{"j": func() []byte {
				b := markClosed(two.bytes())
				b[markOff+3] ^= 1
				return b[:len(b)-2]
			}()},
			want:    outcome{Find: "torn", Records: recs("a b"), Size: batch2, Names: []string{"j"}},
			wantLog: "cut a torn tail"},
		{name: "a record the replay refuses, and a torn tail: refused, nothing cut",
			files:   map[string][]byte{"j": two.bytes()[:len(two.b)-3]},
			refuse:  2,
			want:    outcome{Find: "corrupt", Records: recs("a"), Err: ErrCorrupt.Error(), Size: int64(len(two.b) - 3), Names: []string{"j"}},
			wantMsg: fmt.Sprintf("at offset %d (LSN before 1, after 2): record LSN 2 (tag 1, 1 bytes) does not replay: refused by the test", two.offs[1])},
		{name: "bad header: an older format version",
			files: map[string][]byte{"j": func() []byte {
				b := two.bytes()
				binary.LittleEndian.PutUint32(b[8:12], 1)
				binary.LittleEndian.PutUint32(b[headerCRCOff:], crc32.Checksum(b[:headerCRCOff], castagnoli))
				return b[:20]
			}()},
			want:    outcome{Find: "bad-header", Err: ErrBadHeader.Error(), Size: 20, Names: []string{"j"}},
			wantMsg: "format version 1, but this build reads only version 2"},
		{name: "clean after a compaction: the snapshot first",
			files: map[string][]byte{"j": newSnapshotFile(5, 3, "state").batchOf(true, "x").bytes()},
			want: outcome{Find: "clean", Records: []rec{{5, 9, true, "state"}, {6, 1, false, "x"}},
				Size: int64(len(newSnapshotFile(5, 3, "state").batchOf(true, "x").b)), Names: []string{"j"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := disk.New(1)
			for _, name := range []string{"j", "j.compact"} {
				if b, ok := tt.files[name]; ok {
					writeFile(t, d, name, b)
				}
			}
			before := map[string][]byte{}
			for name := range tt.files {
				before[name] = readFile(t, d, name)
			}
			log, logs := logBuffer()
			replayer := func(out *[]rec) func(Record) error {
				all := collect(out)
				return func(r Record) error {
					if r.LSN == tt.refuse {
						return errors.New("refused by the test")
					}
					return all(r)
				}
			}
			var looked []rec
			o := &opener{fs: d, name: "j", cfg: Config{Logger: log}.withDefaults(), replayFn: replayer(&looked)}
			rows, err := o.look()
			if err != nil {
				t.Fatalf("look: %v", err)
			}
			if o.f != nil {
				o.f.Close()
			}
			var got outcome
			for i, find := range rows {
				if i > 0 {
					got.Find += "+"
				}
				got.Find += find.String()
			}
			j, err := Open(d, "j", Config{Logger: log}, replayer(&got.Records))
			if errors.Is(err, ErrLoneCompact) {
				got.Err = ErrLoneCompact.Error()
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `rename it to "j"`) {
					t.Errorf("refusal %q does not wrap ErrCorrupt or does not say what to do", err)
				}
				if !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("error %q does not contain %q", err, tt.wantMsg)
				}
			} else if err != nil {
				var fe *FormatError
				if !errors.As(err, &fe) {
					t.Fatalf("Open: %v is not a *FormatError", err)
				}
				got.Err = fe.Err.Error()
				if !errors.Is(err, ErrCorrupt) || !strings.HasSuffix(err.Error(), advice) {
					t.Errorf("refusal %q does not wrap ErrCorrupt or does not end with the advice", err)
				}
				if !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("error %q does not contain %q", err, tt.wantMsg)
				}
			} else {
				check(t, j)
				if tt.wantMsg != "" {
					t.Errorf("Open succeeded, want an error containing %q", tt.wantMsg)
				}
			}
			if err != nil {
				// Nothing is truncated or removed on a refusal.
				for name, b := range before {
					if diff := cmp.Diff(b, readFile(t, d, name)); diff != "" {
						t.Errorf("%s changed by a refused Open (-before +after):\n%s", name, diff)
					}
				}
				// Read refuses what Open refuses, with the same error.
				if _, rerr := Read(d, "j", Config{}, replayer(new([]rec))); rerr == nil || rerr.Error() != err.Error() {
					t.Errorf("Read: %v; want Open's refusal %v", rerr, err)
				}
			}
			got.Size, _ = d.Stat("j")
			got.Names, _ = d.List()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if tt.wantLog == "" && logs.Len() > 0 {
				t.Errorf("unexpected log: %s", logs)
			}
			if !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("log %q does not contain %q", logs, tt.wantLog)
			}
			if tt.wantLog != "" && !strings.Contains(logs.String(), "level=WARN") {
				t.Errorf("log %q is not at Warn", logs)
			}
			if j != nil {
				// A journal opened after recovery appends and reopens cleanly.
				commitBatch(t, j, "z")
				if err := j.Close(); err != nil {
					t.Fatal(err)
				}
				var again []rec
				if _, err := Open(d, "j", Config{}, collect(&again)); err != nil {
					t.Fatalf("reopen: %v", err)
				}
				want := append(append([]rec(nil), got.Records...), rec{LSN: j.Durable(), Tag: 1, Data: "z"})
				if diff := cmp.Diff(want, again); diff != "" {
					t.Errorf("reopen (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestRecoveryTableIsIndexedByFinding: look's finding selects its own row.
func TestRecoveryTableIsIndexedByFinding(t *testing.T) {
	for i, r := range recoveryTable {
		if r.finds != finding(i) || r.act == nil || r.name == "" || r.what == "" || r.does == "" {
			t.Errorf("row %d: %+v", i, r)
		}
	}
}
