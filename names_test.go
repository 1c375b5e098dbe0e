package sluice

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/sim/disk"
)

// TestNamesShareOneRule: the kind, the target, the unique key and the schedule name are held
// to one rule (no NUL byte, at most NameMax bytes) at Register, Enqueue, EnqueueMany and
// Schedule; each refusal is ErrInvalidJob or ErrInvalidSchedule, names the field, quotes a
// long name cut to its start, and writes nothing.
func TestNamesShareOneRule(t *testing.T) {
	r := newOn(t, disk.New(1), Config{})
	defer r.Close()
	ok := func(context.Context, Job[string]) error { return nil }
	long := strings.Repeat("k", NameMax+1)
	for _, name := range []string{long, strings.Repeat("k", 1<<20), "bad\x00kind", ""} {
		if _, err := Register(r, name, JSON[string](), ok); err == nil || len(err.Error()) > 300 {
			t.Errorf("Register(%d bytes) = %.300v; want a short refusal", len(name), err)
		}
	}
	k := mustRegister(t, r, strings.Repeat("k", NameMax), JSON[string](), ok)
	ctx := context.Background()
	at := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		target string
		opts   []JobOption
		says   string
	}{
		{"nul\x00target", nil, `target "nul\x00target" holds a NUL byte`},
		{long, nil, "target \"kkkk"},
		{"t", []JobOption{WithUnique("u\x00")}, `unique key "u\x00" holds a NUL byte`},
		{"t", []JobOption{WithUnique(long)}, "bytes: at most 1024"},
	} {
		_, err := k.Enqueue(ctx, at, tc.target, "x", tc.opts...)
		if !errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), tc.says) || len(err.Error()) > 300 {
			t.Errorf("Enqueue(target of %d bytes) = %v; want ErrInvalidJob saying %q, short", len(tc.target), err, tc.says)
		}
		_, err = k.EnqueueMany(ctx, []NewJob[string]{{Due: at, Target: "fine"}, {Due: at, Target: tc.target, Options: tc.opts}})
		if !errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("EnqueueMany(target of %d bytes) = %v; want ErrInvalidJob saying %q", len(tc.target), err, tc.says)
		}
	}
	for _, name := range []string{"nul\x00name", long} {
		err := k.Schedule(ctx, name, "@every 1m", "t", "x")
		if !errors.Is(err, ErrInvalidSchedule) || !strings.Contains(err.Error(), "schedule name") {
			t.Errorf("Schedule(name of %d bytes) = %v; want ErrInvalidSchedule naming the schedule name", len(name), err)
		}
	}
	if err := k.Schedule(ctx, "nightly", "@every 1m", "nul\x00target", "x"); !errors.Is(err, ErrInvalidJob) {
		t.Errorf("Schedule with a NUL target = %v; want ErrInvalidJob", err)
	}
	if st := readStats(t, r); st.LastID != 0 {
		t.Errorf("refused names wrote %d jobs", st.LastID)
	}
	if _, err := k.Enqueue(ctx, at, strings.Repeat("t", NameMax), "x", WithUnique(strings.Repeat("u", NameMax))); err != nil {
		t.Errorf("names of NameMax bytes refused: %v", err)
	}
}

// TestLongHandlerErrorIsCutOnARuneBoundary: an error longer than the journal keeps is cut
// to 4,096 bytes at most, and stays valid UTF-8 (it was cut mid-character before).
func TestLongHandlerErrorIsCutOnARuneBoundary(t *testing.T) {
	msg := "x" + strings.Repeat("é", 3000) // 6,001 bytes: a byte cut at 4,096 falls inside an é
	k := openOn(t, disk.New(1), Config{}, func(context.Context, Job[string]) error {
		return Permanent(errors.New(msg))
	})
	defer k.Close()
	ctx := context.Background()
	id, err := k.Enqueue(ctx, time.Time{}, "t", "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := k.DrainDue(ctx); err != nil {
		t.Fatal(err)
	}
	j, err := k.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.ValidString(j.LastErr) || len(j.LastErr) > 4096 || len(j.LastErr) < 4090 || !strings.HasPrefix(msg, j.LastErr) {
		t.Errorf("last error of %d bytes, valid UTF-8 %v; want a prefix of the error, at most 4,096 bytes, valid",
			len(j.LastErr), utf8.ValidString(j.LastErr))
	}
}
