package journal

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/sim/disk"
)

// logBuffer is a slog text handler into a buffer, without times, for deterministic output.
func logBuffer() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	h := slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})
	return slog.New(h), &buf
}

// rec is a replayed record in comparable form.
type rec struct {
	LSN  LSN
	Tag  uint8
	Snap bool
	Data string
}

func (r rec) String() string {
	s := fmt.Sprintf("%d:%d:%s", r.LSN, r.Tag, r.Data)
	if r.Snap {
		s += " (snapshot)"
	}
	return s
}

// collect returns a replay function appending copies to *out.
func collect(out *[]rec) func(Record) error {
	return func(r Record) error {
		*out = append(*out, rec{LSN: r.LSN, Tag: r.Tag, Snap: r.Snapshot, Data: string(r.Data)})
		return nil
	}
}

func mustOpen(t testing.TB, fsys core.FS, cfg Config) (*Journal, []rec) {
	t.Helper()
	var got []rec
	j, err := Open(fsys, "j", cfg, collect(&got))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	check(t, j)
	return j, got
}

func check(t testing.TB, j *Journal) {
	t.Helper()
	if err := j.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

// commitBatch appends each datum and commits them as one batch.
func commitBatch(t testing.TB, j *Journal, data ...string) LSN {
	t.Helper()
	for _, d := range data {
		if _, err := j.Append(1, []byte(d)); err != nil {
			t.Fatalf("Append(%q): %v", d, err)
		}
	}
	lsn, err := j.Commit()
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	check(t, j)
	return lsn
}

// readFile returns the bytes reads see of name.
func readFile(t testing.TB, fsys core.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatalf("open %q: %v", name, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); n != len(b) {
		t.Fatalf("read %q: %d of %d bytes: %v", name, n, size, err)
	}
	return b
}

// writeFile makes name hold b, durably.
func writeFile(t testing.TB, fsys core.FS, name string, b []byte) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(); err != nil {
		t.Fatal(err)
	}
}

// fileBuilder writes journal bytes by hand, for shapes the Journal never writes itself.
type fileBuilder struct {
	b     []byte
	lsn   LSN
	batch uint64
	// offs are the offsets of the frames, in order.
	offs []int
}

func newFile() *fileBuilder {
	return &fileBuilder{b: appendHeader(nil, 0), lsn: 1, batch: 1}
}

func newSnapshotFile(lsn LSN, batch uint64, snap string) *fileBuilder {
	fb := &fileBuilder{b: appendHeader(nil, headerFlagSnapshot), lsn: lsn, batch: batch}
	fb.offs = append(fb.offs, len(fb.b))
	fb.b = appendFrame(fb.b, lsn, batch, flagEnd|flagSnapshot, 9, []byte(snap))
	fb.lsn++
	fb.batch++
	return fb
}

// batch appends one batch of frames; end=false leaves the end flag off the last frame.
func (fb *fileBuilder) batchOf(end bool, data ...string) *fileBuilder {
	for i, d := range data {
		var flags uint8
		if end && i == len(data)-1 {
			flags = flagEnd
		}
		fb.offs = append(fb.offs, len(fb.b))
		fb.b = appendFrame(fb.b, fb.lsn, fb.batch, flags, 1, []byte(d))
		fb.lsn++
	}
	fb.batch++
	return fb
}

// frame appends one frame with explicit fields.
func (fb *fileBuilder) frame(lsn LSN, batch uint64, flags uint8, data string) *fileBuilder {
	fb.offs = append(fb.offs, len(fb.b))
	fb.b = appendFrame(fb.b, lsn, batch, flags, 1, []byte(data))
	return fb
}

func (fb *fileBuilder) bytes() []byte { return append([]byte(nil), fb.b...) }

func newDisk() *disk.Disk { return disk.New(1) }

func recs(s string) []rec {
	if s == "" {
		return nil
	}
	var out []rec
	for i, d := range strings.Fields(s) {
		out = append(out, rec{LSN: LSN(i + 1), Tag: 1, Data: d})
	}
	return out
}

// markClosed writes into b, a clean journal, the clean-close mark Close would write.
func markClosed(b []byte) []byte {
	t, err := Scan(b, nil)
	if err != nil || t.Kind != TailClean {
		panic(fmt.Sprintf("markClosed: %+v, %v", t, err))
	}
	copy(b[markOff:], encodeMark(mark{size: t.Size, last: t.Last}))
	return b
}

// Buffered returns the number of records appended and not yet committed (tests only).
func (j *Journal) Buffered() int { return j.buffered }

// String names a finding by its recovery table row; only tests print findings.
func (f finding) String() string {
	if int(f) < len(recoveryTable) {
		return recoveryTable[f].name
	}
	return fmt.Sprintf("finding(%d)", uint8(f))
}
