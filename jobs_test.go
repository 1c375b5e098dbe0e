package sluice

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/adapters/osfs"
	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/sim/disk"
)

// TestEnqueueRefusesBadJobsNamingTheRange: an empty target, a due outside the range a record
// holds (the error states it), and options out of range are refused before anything is written.
func TestEnqueueRefusesBadJobsNamingTheRange(t *testing.T) {
	r := openOn(t, disk.New(1), Config{Capacity: 1}, succeedString)
	defer r.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		due    time.Time
		target string
		opts   []JobOption
		says   string
	}{
		{"empty target", time.Time{}, "", nil, "empty target"},
		{"due past 2262", time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), "a", nil, TimeRange},
		{"priority", time.Time{}, "a", []JobOption{WithPriority(PriorityMax + 1)}, "WithPriority(1001): must be in [-1000, 1000]"},
		{"attempts", time.Time{}, "a", []JobOption{WithAttempts(0)}, "WithAttempts(0): must be ≥ 1"},
		{"deadline", time.Time{}, "a", []JobOption{WithDeadline(-time.Second)}, "WithDeadline(-1s): must be > 0"},
	} {
		_, err := r.Enqueue(ctx, tc.due, tc.target, "x", tc.opts...)
		if !errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), tc.says) || strings.Count(err.Error(), "sluice:") != 1 {
			t.Errorf("%s: err = %v, want ErrInvalidJob saying %q with one sluice: prefix", tc.name, err, tc.says)
		}
	}
	_, err := r.EnqueueMany(ctx, []NewJob[string]{{Target: "a"}, {Target: "a", Options: []JobOption{WithAttempts(-1)}}})
	if !errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), "job 1") {
		t.Errorf("EnqueueMany with a bad job: %v, want ErrInvalidJob naming job 1", err)
	}
	_, err = r.EnqueueMany(ctx, []NewJob[string]{{Target: "a"}, {Target: ""}})
	if !errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), "job 1 of 2") {
		t.Errorf("EnqueueMany with an empty target: %v, want ErrInvalidJob naming job 1 of 2", err)
	}
	if s := readStats(t, r); s.LastID != 0 || s.Records != 0 {
		t.Fatalf("refused enqueues wrote something: %+v", s)
	}
}

// TestEnqueueManyIsOneBatchOneSync: EnqueueMany of 100 jobs costs the fsyncs of one Enqueue
// (one commit), and the ids come back in order.
func TestEnqueueManyIsOneBatchOneSync(t *testing.T) {
	r := openOn(t, disk.New(1), Config{Capacity: 1}, succeedString)
	defer r.Close()
	ctx := context.Background()
	s0 := readStats(t, r)
	if _, err := r.Enqueue(ctx, time.Time{}, "a", "one"); err != nil {
		t.Fatal(err)
	}
	s1 := readStats(t, r)
	jobs := make([]NewJob[string], 100)
	for i := range jobs {
		jobs[i] = NewJob[string]{Target: "a", Payload: "many", Options: []JobOption{WithPriority(i % 3)}}
	}
	ids, err := r.EnqueueMany(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	s2 := readStats(t, r)
	if ids[0] != 2 || ids[99] != 101 || len(ids) != 100 {
		t.Fatalf("ids %v, want 2..101", ids)
	}
	if s2.Commits-s1.Commits != 1 || s2.Syncs-s1.Syncs != s1.Syncs-s0.Syncs || s2.Records-s1.Records != 100 {
		t.Fatalf("EnqueueMany: %d commits, %d syncs, %d records; one Enqueue: %d syncs",
			s2.Commits-s1.Commits, s2.Syncs-s1.Syncs, s2.Records-s1.Records, s1.Syncs-s0.Syncs)
	}
	j, err := r.Get(context.Background(), ids[5])
	if err != nil || j.Priority != 2 {
		t.Fatalf("job %d: %+v %v, want priority 2", ids[5], j, err)
	}
}

// TestOpenRefusesAPreviousFormatJournal: a journal written in record format 1 or 2 is refused
// with ErrFormat and a message naming the directory, the file, the format and what to do, and
// it is left as it was.
func TestOpenRefusesAPreviousFormatJournal(t *testing.T) {
	for _, tc := range []struct {
		format int
		rec    []byte // an Enqueued record as that format wrote it
	}{
		// Format 1: version, id, due, target, payload.
		{1, []byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 'a', 0, 0, 0, 0}},
		// Format 2: format 1's fields, then priority, attempts, deadline, kind, unique key.
		{2, []byte{2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 'a', 0, 0, 0, 0,
			0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
	} {
		t.Run(fmt.Sprintf("format %d", tc.format), func(t *testing.T) {
			dir := t.TempDir()
			fsys, err := osfs.New(dir)
			if err != nil {
				t.Fatal(err)
			}
			j, err := journal.Open(fsys, journalName, journal.Config{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := j.Append(1, tc.rec); err != nil {
				t.Fatal(err)
			}
			if _, err := j.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Close(); err != nil {
				t.Fatal(err)
			}
			before, err := os.ReadFile(filepath.Join(dir, journalName))
			if err != nil {
				t.Fatal(err)
			}
			_, err = New(dir, Config{Logger: quiet})
			t.Logf("refusal: %v", err)
			if !errors.Is(err, ErrFormat) || strings.Count(err.Error(), "sluice:") != 1 {
				t.Fatalf("open of a format-%d journal: %v, want ErrFormat with one sluice: prefix", tc.format, err)
			}
			for _, want := range []string{dir, journalName, fmt.Sprintf("format %d", tc.format), "reads format 3", "Drain", "move the directory aside"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal does not say %q", want)
				}
			}
			after, err := os.ReadFile(filepath.Join(dir, journalName))
			if err != nil || !bytes.Equal(before, after) {
				t.Fatalf("a refused open changed the journal (%v)", err)
			}
		})
	}
}

// TestUniqueKeyAdmitsOneLiveJob: a second Enqueue with a held key returns the holder's id with
// no error and says so (WasDuplicate), or ErrDuplicate with FailOnDuplicate; nothing is
// journaled for it; once the holder ends, the key is free; the index survives a reopen.
func TestUniqueKeyAdmitsOneLiveJob(t *testing.T) {
	d := disk.New(1)
	r := openOn(t, d, Config{Capacity: 1}, succeedString)
	ctx := context.Background()
	later := time.Now().Add(time.Hour)
	first, err := r.Enqueue(ctx, later, "a", "x", WithUnique("order-7"))
	if err != nil {
		t.Fatal(err)
	}
	records := readStats(t, r).Records
	var dup bool
	id, err := r.Enqueue(ctx, later, "a", "y", WithUnique("order-7"), WasDuplicate(&dup))
	if err != nil || id != first || !dup {
		t.Fatalf("duplicate: id %d dup %v err %v, want id %d dup true no error", id, dup, err, first)
	}
	id, err = r.Enqueue(ctx, later, "a", "y", WithUnique("order-7"), FailOnDuplicate())
	if !errors.Is(err, ErrDuplicate) || id != first {
		t.Fatalf("FailOnDuplicate: id %d err %v, want id %d and ErrDuplicate", id, err, first)
	}
	if got := readStats(t, r).Records; got != records {
		t.Fatalf("duplicates journaled %d records", got-records)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = openOn(t, d, Config{Capacity: 1}, succeedString)
	defer r.Close()
	if id, err := r.Enqueue(ctx, later, "a", "z", WithUnique("order-7"), WasDuplicate(&dup)); err != nil || id != first || !dup {
		t.Fatalf("after reopen: id %d dup %v err %v, want the holder %d", id, dup, err, first)
	}
	if err := r.Cancel(ctx, first); err != nil {
		t.Fatal(err)
	}
	if id, err := r.Enqueue(ctx, later, "a", "z", WithUnique("order-7"), WasDuplicate(&dup)); err != nil || id == first || dup {
		t.Fatalf("after the holder ended: id %d dup %v err %v, want a new job", id, dup, err)
	}
	if j, err := r.Get(context.Background(), first); err != nil || j.Unique != "order-7" {
		t.Fatalf("Get(%d) = %+v, %v", first, j, err)
	}
}

// TestListFiltersAndPaginates: List filters by state, target, priority and ids, and a cursor
// walk returns every matching job once, in id order.
func TestListFiltersAndPaginates(t *testing.T) {
	r := openOn(t, disk.New(1), Config{Capacity: 1}, succeedString)
	defer r.Close()
	ctx := context.Background()
	later := time.Now().Add(time.Hour)
	var want []uint64
	for i := range 25 {
		target := "a"
		if i%2 == 1 {
			target = "b"
		}
		id, err := r.Enqueue(ctx, later, target, "x", WithPriority(i%5))
		if err != nil {
			t.Fatal(err)
		}
		if target == "b" && i%5 >= 3 {
			want = append(want, id)
		}
	}
	if err := r.Cancel(ctx, want[0]); err != nil {
		t.Fatal(err)
	}
	want = want[1:]
	three := 3
	var got []uint64
	f := ListFilter{States: []State{StatePending}, Target: "b", PriorityMin: &three, Limit: 2}
	for pages := 0; ; pages++ {
		if pages > 25 {
			t.Fatal("List never ended")
		}
		p, err := r.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range p.Jobs {
			got = append(got, j.ID)
		}
		if !p.More {
			break
		}
		f.After = p.Next
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("listed ids (-want +got)\n%s", diff)
	}
	p, err := r.List(ctx, ListFilter{IDMin: 3, IDMax: 5})
	if err != nil || len(p.Jobs) != 3 || p.Jobs[0].ID != 3 || p.More {
		t.Fatalf("ids [3, 5]: %+v %v", p, err)
	}
	if _, err := r.List(ctx, ListFilter{Limit: 1001}); !errors.Is(err, ErrInvalidJob) {
		t.Fatalf("Limit 1001: %v", err)
	}
}

// TestDrainDueWorksWhatIsDueAndReturns: DrainDue runs the job due now, does not wait for the
// job due in an hour nor for the retry whose backoff ends later, and returns.
func TestDrainDueWorksWhatIsDueAndReturns(t *testing.T) {
	var ran []string
	var mu sync.Mutex
	h := func(_ context.Context, j Job[string]) error {
		mu.Lock()
		ran = append(ran, j.Payload)
		mu.Unlock()
		if j.Payload == "flaky" {
			return errors.New("try later")
		}
		return nil
	}
	r := openOn(t, disk.New(1), Config{Capacity: 2, Policy: Policy{Base: time.Hour, Cap: time.Hour}}, h)
	defer r.Close()
	ctx := context.Background()
	now, err := r.Enqueue(ctx, time.Time{}, "a", "now")
	if err != nil {
		t.Fatal(err)
	}
	later, _ := r.Enqueue(ctx, time.Now().Add(time.Hour), "a", "later")
	flaky, _ := r.Enqueue(ctx, time.Time{}, "b", "flaky")
	if err := r.DrainDue(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[uint64]State{now: StateSucceeded, later: StatePending, flaky: StateWaiting} {
		if j, err := r.Get(context.Background(), id); err != nil || j.State != want {
			t.Errorf("job %d: %v %v, want %v", id, j.State, err, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 2 {
		t.Fatalf("handlers ran %v, want now and flaky once each", ran)
	}
}

// TestRetryKeepsTheAttemptHistory: a dead job retried by hand keeps its history; the new
// attempt is added after the old ones, numbered from 1 again.
func TestRetryKeepsTheAttemptHistory(t *testing.T) {
	var calls sync.Map
	h := func(_ context.Context, j Job[string]) error {
		if _, again := calls.LoadOrStore(j.ID, true); !again {
			return Permanent(errors.New("bad gateway"))
		}
		return nil
	}
	r := openOn(t, disk.New(1), Config{Capacity: 1}, h)
	defer r.Close()
	ctx := context.Background()
	id, err := r.Enqueue(ctx, time.Time{}, "a", "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Retry(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	j, err := r.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range j.History {
		if a.Start.IsZero() || a.End.Before(a.Start) {
			t.Errorf("attempt %+v: bad times", a)
		}
		got = append(got, fmt.Sprintf("%d %s %s", a.Number, a.Outcome, a.Err))
	}
	if diff := cmp.Diff([]string{"1 failed bad gateway", "1 succeeded "}, got); diff != "" {
		t.Fatalf("history (-want +got)\n%s", diff)
	}
}
