package journal

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/sluicehq/sluice/sim/disk"
)

// TestScenarios runs corpus/journal/*.txt. Commands:
//
//	open [refuse=LSN] [record-max=N snapshot-max=N journal-max=N prealloc=N]
//	                          open the journal "j", print what replayed and what was logged;
//	                          prealloc: Config.PreallocBytes, off (-1) unless given;
//	                          after a refusal, whether every file is byte for byte unchanged.
//	                          refuse: the replay refuses that record (an undecodable record)
//	read [refuse=LSN]         journal.Read: the same, read-only; always checks the files
//	                          (bytes and listing) are unchanged
//	append [tag=N]            append each input line as one record
//	commit                    commit the buffered records
//	compact [tag=N]           compact with the input as the snapshot
//	close                     close the journal
//	crash                     power cut: sim/disk Crash; the journal is dropped unclosed
//	crash-after n=K           the K-th mutating disk op from now and all later ones fail
//	fail op=OP                the next disk op of kind OP fails (write, sync, rename, syncdir, ...)
//	dump [file=j]             the file frame by frame (Describe) and the directory
//	chop bytes=N [file=j]     durably cut the last N bytes of a file
//	grow bytes=N [file=j]     durably append N zero bytes to a file
//	zero from=A to=B [file=j] durably zero bytes [A, B) of a file
//	flip off=N [bit=B] [file=j] flip a bit of synced data
//	write-file name=F         durably create F holding the input
//
// Every scenario runs on sim/disk with seed 1; no scenario leaves unsynced writes at a crash,
// so the output does not depend on the disk's random choices.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "corpus", "journal", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			s := &scenario{d: disk.New(1)}
			datadriven.RunTest(t, path, s.run)
		})
	}
}

type scenario struct {
	d *disk.Disk
	j *Journal
}

func (s *scenario) run(t *testing.T, td *datadriven.TestData) string {
	file := "j"
	td.MaybeScanArgs(t, "file", &file)
	lines := func() []string {
		if td.Input == "" {
			return nil
		}
		return strings.Split(td.Input, "\n")
	}
	var out strings.Builder
	switch td.Cmd {
	case "open":
		log, logs := logBuffer()
		var got []rec
		before := s.files(t)
		// Off unless a scenario asks (prealloc.txt): the others show the append layout.
		cfg := Config{Logger: log, PreallocBytes: -1}
		td.MaybeScanArgs(t, "prealloc", &cfg.PreallocBytes)
		td.MaybeScanArgs(t, "record-max", &cfg.RecordMax)
		td.MaybeScanArgs(t, "snapshot-max", &cfg.SnapshotMax)
		td.MaybeScanArgs(t, "journal-max", &cfg.JournalMax)
		j, err := Open(s.d, "j", cfg, refusing(t, td, collect(&got)))
		for _, r := range got {
			fmt.Fprintf(&out, "replay %v\n", r)
		}
		out.WriteString(logs.String())
		if err != nil {
			fmt.Fprintf(&out, "error: %v\n", err)
			out.WriteString(s.compare(t, before))
			break
		}
		s.j = j
		fmt.Fprintf(&out, "durable %d\n", j.Durable())
	case "read":
		log, logs := logBuffer()
		var got []rec
		before := s.files(t)
		tail, err := Read(s.d, "j", Config{Logger: log}, refusing(t, td, collect(&got)))
		for _, r := range got {
			fmt.Fprintf(&out, "replay %v\n", r)
		}
		out.WriteString(logs.String())
		if err != nil {
			fmt.Fprintf(&out, "error: %v\n", err)
		} else {
			fmt.Fprintf(&out, "tail %v: size %d, cut %d, records %d, closed %v\n",
				tail.Kind, tail.Size, tail.Cut, tail.Records, tail.Closed)
			if tail.Spare > 0 {
				fmt.Fprintf(&out, "spare: %d preallocated zero bytes\n", tail.Spare)
			}
			if tail.Kind == TailTorn {
				fmt.Fprintf(&out, "torn: %s (%d bytes would be cut)\n", tail.Reason, tail.Dropped())
			}
		}
		out.WriteString(s.compare(t, before))
	case "append":
		tag := 1
		td.MaybeScanArgs(t, "tag", &tag)
		for _, l := range lines() {
			lsn, err := s.journal(t).Append(uint8(tag), []byte(l))
			if err != nil {
				fmt.Fprintf(&out, "error: %v\n", err)
				continue
			}
			fmt.Fprintf(&out, "lsn %d\n", lsn)
		}
	case "commit":
		lsn, err := s.journal(t).Commit()
		if err != nil {
			fmt.Fprintf(&out, "error: %v\n", err)
		}
		fmt.Fprintf(&out, "durable %d\n", lsn)
	case "compact":
		tag := 9
		td.MaybeScanArgs(t, "tag", &tag)
		if err := s.journal(t).Compact(uint8(tag), []byte(td.Input)); err != nil {
			fmt.Fprintf(&out, "error: %v\n", err)
		} else {
			out.WriteString("ok\n")
		}
	case "close":
		if err := s.journal(t).Close(); err != nil {
			fmt.Fprintf(&out, "error: %v\n", err)
		}
		s.j = nil
	case "crash":
		s.d.Crash()
		s.j = nil
		if c := s.d.LastCrash(); c != "" {
			out.WriteString(c + "\n")
		}
	case "crash-after":
		var n int
		td.ScanArgs(t, "n", &n)
		s.d.CrashAfter(n)
	case "fail":
		var op string
		td.ScanArgs(t, "op", &op)
		s.d.FailNext(parseOp(t, op), nil)
	case "dump":
		if _, err := s.d.Stat(file); err == nil {
			out.WriteString(Describe(readFile(t, s.d, file)))
		}
		names, _ := s.d.List()
		fmt.Fprintf(&out, "files %v\n", names)
	case "chop":
		var n int
		td.ScanArgs(t, "bytes", &n)
		b := readFile(t, s.d, file)
		s.rewrite(t, file, b[:len(b)-n])
	case "grow":
		var n int
		td.ScanArgs(t, "bytes", &n)
		b := readFile(t, s.d, file)
		s.rewrite(t, file, append(b, make([]byte, n)...))
	case "zero":
		var from, to int
		td.ScanArgs(t, "from", &from)
		td.ScanArgs(t, "to", &to)
		b := readFile(t, s.d, file)
		s.rewrite(t, file, zeroRange(b, from, to))
	case "flip":
		var off, bit int
		td.ScanArgs(t, "off", &off)
		td.MaybeScanArgs(t, "bit", &bit)
		s.d.FlipBit(file, int64(off), uint(bit))
	case "write-file":
		var name string
		td.ScanArgs(t, "name", &name)
		writeFile(t, s.d, name, []byte(td.Input))
	default:
		t.Fatalf("unknown command %q", td.Cmd)
	}
	if s.j != nil {
		if err := s.j.checkInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	if out.Len() == 0 {
		return "ok\n"
	}
	return out.String()
}

// refusing makes replay refuse the record with the LSN of the command's refuse argument, as
// the runner refuses a record it cannot decode.
func refusing(t *testing.T, td *datadriven.TestData, replay func(Record) error) func(Record) error {
	var lsn int
	if !td.MaybeScanArgs(t, "refuse", &lsn) {
		return replay
	}
	return func(r Record) error {
		if r.LSN == LSN(lsn) {
			return errors.New("runner: record does not decode (the scenario refuses it)")
		}
		return replay(r)
	}
}

// files returns the directory listing and every file's bytes, what must not change.
func (s *scenario) files(t *testing.T) map[string]string {
	names, err := s.d.List()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, name := range names {
		m[name] = string(readFile(t, s.d, name))
	}
	return m
}

// compare says whether the files are as they were, byte for byte.
func (s *scenario) compare(t *testing.T, before map[string]string) string {
	after := s.files(t)
	names := slices.Sorted(maps.Keys(before))
	if !maps.Equal(before, after) {
		return fmt.Sprintf("files CHANGED: %v, now %v\n", names, slices.Sorted(maps.Keys(after)))
	}
	return fmt.Sprintf("files unchanged: %v\n", names)
}

func (s *scenario) journal(t *testing.T) *Journal {
	if s.j == nil {
		t.Fatal("no open journal")
	}
	return s.j
}

// rewrite makes name hold b durably, through a fresh file: the test's own hand, not the
// journal's.
func (s *scenario) rewrite(t *testing.T, name string, b []byte) {
	writeFile(t, s.d, name, bytes.Clone(b))
}

func parseOp(t *testing.T, name string) disk.Op {
	for op := disk.OpWrite; op <= disk.OpSize; op++ {
		if op.String() == name {
			return op
		}
	}
	t.Fatalf("unknown disk op %q", name)
	return 0
}
