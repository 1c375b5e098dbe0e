package sluice

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/sim/disk"
)

// Every job option acts the same through Enqueue and through a batch of one: the id, the
// error, the WasDuplicate flag, the job Get returns and the records journaled.
func TestEnqueueManyHonoursEveryOptionAsEnqueue(t *testing.T) {
	type outcome struct {
		ID                  uint64
		Invalid, Duplicate  bool
		Dup                 bool
		Job                 JobInfo[string]
		Records             []string
		Holder, HolderAfter uint64
	}
	key := []JobOption{WithUnique("k")}
	cases := []struct {
		name   string
		holder []JobOption // a job enqueued first, when not nil
		opts   func(dup *bool) []JobOption
	}{
		{"none", nil, func(*bool) []JobOption { return nil }},
		{"priority", nil, func(*bool) []JobOption { return []JobOption{WithPriority(7)} }},
		{"priority out of range", nil, func(*bool) []JobOption { return []JobOption{WithPriority(PriorityMax + 1)} }},
		{"attempts", nil, func(*bool) []JobOption { return []JobOption{WithAttempts(3)} }},
		{"attempts out of range", nil, func(*bool) []JobOption { return []JobOption{WithAttempts(0)} }},
		{"deadline", nil, func(*bool) []JobOption { return []JobOption{WithDeadline(time.Hour)} }},
		{"deadline out of range", nil, func(*bool) []JobOption { return []JobOption{WithDeadline(-time.Second)} }},
		{"unique, free", nil, func(*bool) []JobOption { return key }},
		{"unique, held", key, func(*bool) []JobOption { return key }},
		{"unique, empty key", nil, func(*bool) []JobOption { return []JobOption{WithUnique("")} }},
		{"unique window", nil, func(*bool) []JobOption { return []JobOption{WithUnique("k"), WithUniqueWindow(time.Hour)} }},
		{"unique window without a key", nil, func(*bool) []JobOption { return []JobOption{WithUniqueWindow(time.Hour)} }},
		{"WasDuplicate, free", nil, func(d *bool) []JobOption { return []JobOption{WithUnique("k"), WasDuplicate(d)} }},
		{"WasDuplicate, held", key, func(d *bool) []JobOption { return []JobOption{WithUnique("k"), WasDuplicate(d)} }},
		{"WasDuplicate, another key held", key, func(d *bool) []JobOption { return []JobOption{WithUnique("j"), WasDuplicate(d)} }},
		{"FailOnDuplicate, free", nil, func(*bool) []JobOption { return []JobOption{WithUnique("k"), FailOnDuplicate()} }},
		{"FailOnDuplicate, held", key, func(*bool) []JobOption { return []JobOption{WithUnique("k"), FailOnDuplicate()} }},
		{"both flags, held", key, func(d *bool) []JobOption {
			return []JobOption{WithUnique("k"), WasDuplicate(d), FailOnDuplicate()}
		}},
		{"every option, held", []JobOption{WithUnique("k"), WithPriority(3)}, func(d *bool) []JobOption {
			return []JobOption{WithPriority(-5), WithAttempts(2), WithDeadline(time.Minute), WithUnique("k"),
				WithUniqueWindow(time.Hour), WasDuplicate(d), FailOnDuplicate()}
		}},
	}
	due := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	run := func(t *testing.T, holder []JobOption, opts func(*bool) []JobOption, many bool) outcome {
		d := disk.New(1)
		r := openOn(t, d, Config{Capacity: 1}, succeedString)
		ctx := context.Background()
		var o outcome
		if holder != nil {
			var err error
			if o.Holder, err = r.Enqueue(ctx, due, "t", "holder", holder...); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		if many {
			var ids []uint64
			ids, err = r.EnqueueMany(ctx, []NewJob[string]{{Due: due, Target: "t", Payload: "p", Options: opts(&o.Dup)}})
			if len(ids) > 0 {
				o.ID = ids[0]
			}
		} else {
			o.ID, err = r.Enqueue(ctx, due, "t", "p", opts(&o.Dup)...)
		}
		o.Invalid, o.Duplicate = errors.Is(err, ErrInvalidJob), errors.Is(err, ErrDuplicate)
		if err != nil && !o.Invalid && !o.Duplicate {
			t.Fatalf("unexpected error: %v", err)
		}
		if err != nil && strings.Count(err.Error(), "sluice:") != 1 {
			t.Errorf("error %q: want one sluice: prefix", err)
		}
		if o.ID != 0 {
			if o.Job, err = r.Get(context.Background(), o.ID); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := journal.Read(d, journalName, journal.Config{}, func(rec journal.Record) error {
			o.Records = append(o.Records, fmt.Sprintf("tag %d: %x", rec.Tag, rec.Data))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return o
	}
	dups := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			one := run(t, tc.holder, tc.opts, false)
			batch := run(t, tc.holder, tc.opts, true)
			if diff := cmp.Diff(one, batch); diff != "" {
				t.Errorf("Enqueue (-) and EnqueueMany (+) differ:\n%s", diff)
			}
			if one.Dup {
				dups++
			}
		})
	}
	if dups == 0 {
		t.Error("no case was a duplicate: the comparison of WasDuplicate proved nothing")
	}
}

// In a batch, FailOnDuplicate names each duplicate job and holder; the other jobs are
// enqueued all the same, and every WasDuplicate flag is set for its own job.
func TestEnqueueManyReportsEachDuplicate(t *testing.T) {
	r := openOn(t, disk.New(1), Config{Capacity: 1}, succeedString)
	defer r.Close()
	ctx := context.Background()
	holder, err := r.Enqueue(ctx, time.Time{}, "t", "h", WithUnique("a"))
	if err != nil {
		t.Fatal(err)
	}
	var dup [4]bool
	ids, err := r.EnqueueMany(ctx, []NewJob[string]{
		{Target: "t", Options: []JobOption{WithUnique("a"), WasDuplicate(&dup[0]), FailOnDuplicate()}},
		{Target: "t", Options: []JobOption{WithUnique("b"), WasDuplicate(&dup[1])}},
		{Target: "t", Options: []JobOption{WithUnique("b"), WasDuplicate(&dup[2]), FailOnDuplicate()}},
		{Target: "t", Options: []JobOption{WithUnique("a"), WasDuplicate(&dup[3])}},
	})
	if !errors.Is(err, ErrDuplicate) {
		t.Fatalf("EnqueueMany = %v, %v; want ErrDuplicate", ids, err)
	}
	for _, s := range []string{fmt.Sprintf("job 0 of 4: job %d holds unique key \"a\"", holder),
		fmt.Sprintf("job 2 of 4: job %d holds unique key \"b\"", holder+1), "other jobs were enqueued"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if want := []uint64{holder, holder + 1, holder + 1, holder}; !cmp.Equal(want, ids) {
		t.Errorf("ids %v, want %v", ids, want)
	}
	if want := [4]bool{true, false, true, true}; dup != want {
		t.Errorf("WasDuplicate flags %v, want %v", dup, want)
	}
	if j, err := r.Get(context.Background(), holder+1); err != nil || j.Unique != "b" {
		t.Errorf("the batch's own job: %+v, %v", j, err)
	}
}
