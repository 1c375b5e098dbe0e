package sluice

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/journal"
)

func succeed(context.Context, Job[string]) error { return nil }

func TestOpenReopenKeepsJobsAndIDs(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	cfg := Config{Logger: quiet}
	r, err := Open(dir, cfg, JSON[string](), succeed)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		id, err := r.Enqueue(ctx, time.Now().Add(time.Hour), "t", "later")
		if err != nil || id != uint64(i+1) {
			t.Fatalf("Enqueue = %d, %v; want id %d", id, err, i+1)
		}
	}
	if err := r.Cancel(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Enqueue(ctx, time.Time{}, "t", "x"); !errors.Is(err, ErrClosed) {
		t.Errorf("Enqueue after Close = %v, want ErrClosed", err)
	}
	if st, err := r.Stats(ctx); err != nil || st.LastID != 3 || st.Cancelled != 1 {
		t.Errorf("Stats after Close = %+v, %v; want the values at close (last id 3, 1 cancelled), no error", st, err)
	}
	if _, err := r.Get(ctx, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close = %v, want ErrClosed", err)
	}

	r, err = Open(dir, cfg, JSON[string](), succeed)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st := readStats(t, r)
	if st.LastID != 3 || st.Waiting != 2 || st.Cancelled != 1 {
		t.Errorf("after reopen: %+v, want last id 3, 2 waiting, 1 cancelled", st)
	}
	j, err := r.Get(context.Background(), 1)
	if err != nil || j.State != StatePending || j.Payload != "later" {
		t.Errorf("Get(1) = %+v, %v; want a pending job with payload later", j, err)
	}
	if id, err := r.Enqueue(ctx, time.Time{}, "t", "x"); err != nil || id != 4 {
		t.Errorf("Enqueue after reopen = %d, %v; want id 4 (ids are never reused)", id, err)
	}
	if err := r.Cancel(ctx, 2); !errors.Is(err, ErrTerminal) {
		t.Errorf("Cancel of a cancelled job = %v, want ErrTerminal", err)
	}
	if err := r.Cancel(ctx, 99); !errors.Is(err, ErrNotFound) {
		t.Errorf("Cancel(99) = %v, want ErrNotFound", err)
	}
	if err := r.Retry(ctx, 1); !errors.Is(err, ErrNotDead) {
		t.Errorf("Retry of a waiting job = %v, want ErrNotDead", err)
	}
}

func TestOpenRefusesALockedDirectory(t *testing.T) {
	dir := t.TempDir()
	r, err := Open(dir, Config{Logger: quiet}, JSON[string](), succeed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Config{Logger: quiet}, JSON[string](), succeed); !errors.Is(err, ErrLocked) || strings.Count(err.Error(), "sluice:") != 1 {
		t.Errorf("second Open = %v, want ErrLocked with one sluice: prefix", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r, err = Open(dir, Config{Logger: quiet}, JSON[string](), succeed)
	if err != nil {
		t.Fatalf("Open after Close = %v, want the lock released", err)
	}
	_ = r.Close()
}

func TestOpenValidatesConfig(t *testing.T) {
	_, err := Open(t.TempDir(), Config{Circuit: Circuit{Probes: -1}}, JSON[string](), succeed)
	if err == nil || !strings.Contains(err.Error(), "Circuit.Probes") {
		t.Errorf("Open with Probes -1 = %v, want an error naming Circuit.Probes", err)
	}
}

// TestEnqueueRefusesTooLargePayloadBeforeJournaling: an oversize payload is refused with
// ErrTooLarge before anything is written (the journal keeps its size) and spends no id, whether
// the driver refuses it (payload > RecordMax) or the engine does (payload ≤ RecordMax, but the
// record with its target and framing > RecordMax).
func TestEnqueueRefusesTooLargePayloadBeforeJournaling(t *testing.T) {
	dir := t.TempDir()
	r, err := Open(dir, Config{Logger: quiet, RecordMax: 1024}, Bytes(), func(context.Context, Job[[]byte]) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	path := filepath.Join(dir, journalName)
	file0, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2048, 1024, 1000} {
		if _, err := r.Enqueue(ctx, time.Time{}, "t", make([]byte, n)); !errors.Is(err, ErrTooLarge) {
			t.Errorf("Enqueue of %d bytes with RecordMax 1024 = %v, want ErrTooLarge", n, err)
		}
		if file, err := os.ReadFile(path); err != nil || !bytes.Equal(file, file0) {
			t.Errorf("after refusing %d bytes the journal changed from %d to %d bytes (%v)", n, len(file0), len(file), err)
		}
	}
	if id, err := r.Enqueue(ctx, time.Time{}, "t", []byte("small")); err != nil || id != 1 {
		t.Errorf("Enqueue after the refusals = %d, %v; want id 1 (a refusal spends no id)", id, err)
	}
	if st := readStats(t, r); st.Records != 1 {
		t.Errorf("journal records after the refusals and one enqueue = %d, want 1", st.Records)
	}
}

// journalSize is the length of dir's journal up to its last complete batch: the file may be
// longer by the zeros the journal preallocates.
func journalSize(t *testing.T, dir string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, journalName))
	if err != nil {
		t.Fatal(err)
	}
	tail, err := journal.Scan(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tail.Cut
}

// TestOpenRefusesACorruptJournalNamingFileAndOffset: damage in a batch followed by a complete
// later batch is corruption of synced data; the public Open refuses it with an error that
// names the journal file and the offset (errors.Is ErrCorrupt), truncates nothing, and refuses
// again on the next try.
func TestOpenRefusesACorruptJournalNamingFileAndOffset(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	r, err := Open(dir, Config{Logger: quiet}, JSON[string](), succeed)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64 // the journal's size after each batch
	sizes = append(sizes, journalSize(t, dir))
	for range 3 {
		if _, err := r.Enqueue(ctx, time.Now().Add(time.Hour), "t", "payload"); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, journalSize(t, dir))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, journalName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Flip a byte inside the second batch's payload; the third batch stays whole after it.
	bad := sizes[1] // where the second batch's frame starts
	b[sizes[2]-2] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for try := range 2 {
		_, err := Open(dir, Config{Logger: quiet}, JSON[string](), succeed)
		if err == nil {
			t.Fatalf("try %d: Open of a corrupt journal succeeded", try)
		}
		msg := err.Error()
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(msg, journalName) ||
			!strings.Contains(msg, fmt.Sprintf("offset %d", bad)) || !strings.Contains(msg, dir) {
			t.Errorf("try %d: Open = %v; want ErrCorrupt naming %s in %s at offset %d", try, err, journalName, dir, bad)
		}
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(after, b) {
			t.Fatalf("try %d: the refused journal changed (%d bytes, was %d)", try, len(after), len(b))
		}
	}
}

func TestRetryRevivesADeadJob(t *testing.T) {
	fail := true
	r, err := Open(t.TempDir(), Config{Logger: quiet, Capacity: 1}, JSON[string](), func(context.Context, Job[string]) error {
		if fail {
			return Permanent(errors.New("bad input"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	id, _ := r.Enqueue(ctx, time.Time{}, "t", "x")
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	j, _ := r.Get(context.Background(), id)
	if j.State != StateDead || j.Reason != "permanent" || j.LastErr != "bad input" {
		t.Fatalf("job = %+v, want dead (permanent, bad input)", j)
	}
	fail = false // the handler does not run between Drain calls: no race
	if err := r.Retry(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if j, _ := r.Get(context.Background(), id); j.State != StateSucceeded {
		t.Errorf("after Retry: %+v, want succeeded", j)
	}
}

func TestCompactOnCloseShrinksTheJournal(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	cfg := Config{Logger: quiet, CompactOnClose: true, Retention: 10}
	r, err := Open(dir, cfg, JSON[string](), succeed)
	if err != nil {
		t.Fatal(err)
	}
	for range 200 {
		if _, err := r.Enqueue(ctx, time.Time{}, "t", "some payload to make the journal grow"); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(filepath.Join(dir, journalName))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(filepath.Join(dir, journalName))
	if after.Size() >= before.Size()/4 {
		t.Errorf("journal %d bytes before close, %d after: want a snapshot of 10 retained jobs, much smaller", before.Size(), after.Size())
	}
	r, err = Open(dir, cfg, JSON[string](), succeed)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if st := readStats(t, r); st.LastID != 200 || st.Succeeded != 10 {
		t.Errorf("after reopen: %+v, want last id 200 and the 10 retained succeeded jobs", st)
	}
}

// TestInspectBesideALiveRunner: Inspect reads the directory of an open runner without taking
// its lock (the runner keeps it: a second Open is still refused) and without writing a byte; a
// directory without a journal holds no jobs and stays without one.
func TestInspectBesideALiveRunner(t *testing.T) {
	dir := t.TempDir()
	r, err := Open(dir, Config{Logger: quiet}, JSON[string](), succeed)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Enqueue(context.Background(), time.Now().Add(time.Hour), "t", "x"); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(dir, journalName))
	if err != nil {
		t.Fatal(err)
	}
	in, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Jobs) != 1 || in.Jobs[0].State != StatePending || in.LastID != 1 {
		t.Errorf("Inspect = %+v, want the one pending job", in)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, journalName)); !bytes.Equal(before, after) {
		t.Error("Inspect changed the journal")
	}
	if _, err := Open(dir, Config{Logger: quiet}, JSON[string](), succeed); !errors.Is(err, ErrLocked) {
		t.Errorf("Open beside the live runner after Inspect = %v, want ErrLocked", err)
	}
	empty := t.TempDir()
	if in, err := Inspect(empty); err != nil || len(in.Jobs) != 0 {
		t.Errorf("Inspect of an empty directory = %+v, %v; want no jobs", in, err)
	}
	if names, _ := os.ReadDir(empty); len(names) != 0 {
		t.Errorf("Inspect created %d files in an empty directory", len(names))
	}
}
