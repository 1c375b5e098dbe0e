package runner

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func genSchedRecord(t *rapid.T) Record {
	r := Record{Tag: rapid.SampledFrom([]uint8{TagScheduleSet, TagScheduleRemoved, TagScheduleFired}).Draw(t, "tag")}
	r.Sched.Name = rapid.StringN(1, 20, NameMax).Draw(t, "name")
	switch r.Tag {
	case TagScheduleSet:
		r.Sched.Spec = rapid.String().Draw(t, "spec")
		r.Sched.CatchUp = rapid.SampledFrom([]CatchUp{CatchUpOne, CatchUpSkip}).Draw(t, "catchup")
		r.Target = rapid.StringN(1, 10, -1).Draw(t, "target")
		if p := rapid.SliceOf(rapid.Byte()).Draw(t, "payload"); len(p) > 0 {
			r.Payload = p
		}
		r.Opts = genOpts(t)
		r.Sched.Anchor, r.Sched.Next, r.At = genTime(t, "anchor"), genTime(t, "next"), genTime(t, "at")
	case TagScheduleFired:
		r.ID = rapid.Uint64().Draw(t, "job")
		if r.ID == 0 {
			r.Sched.Skip = rapid.SampledFrom([]Skip{SkipMissed, SkipHeld, SkipRefused}).Draw(t, "skip")
		}
		r.Sched.Period, r.At = genTime(t, "period"), genTime(t, "at")
		if rapid.Bool().Draw(t, "more") {
			r.Sched.Next = r.Sched.Period.Add(time.Duration(rapid.Int64Range(1, 1e15).Draw(t, "gap")))
		}
	}
	return r
}

func TestScheduleRecordRoundTripDecodesWhatEncodeWrote(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := genSchedRecord(t)
		data := EncodeRecord(r)
		got, err := DecodeRecord(r.Tag, data)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Fatalf("(-want +got)\n%s", diff)
		}
		n := rapid.IntRange(0, len(data)-1).Draw(t, "cut")
		if _, err := DecodeRecord(r.Tag, data[:n]); !errors.Is(err, ErrDecode) {
			t.Fatalf("prefix of %d bytes decoded: %v", n, err)
		}
		if _, err := DecodeRecord(r.Tag, append(bytes.Clone(data), 0)); !errors.Is(err, ErrDecode) {
			t.Fatalf("trailing byte decoded: %v", err)
		}
	})
}

func TestSnapshotWithSchedulesRoundTrips(t *testing.T) {
	specs := []string{"@every 5m", "@every 1s", "*/20 * * * * *", "0 9 * * 1-5", "@hourly"}
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		names := rapid.SliceOfNDistinct(rapid.StringN(1, 8, NameMax), 0, 5, func(s string) string { return s }).Draw(t, "names")
		slices.Sort(names)
		for _, name := range names {
			sc := Schedule{Name: name, Spec: rapid.SampledFrom(specs).Draw(t, "spec"), Target: "t",
				CatchUp: rapid.SampledFrom([]CatchUp{CatchUpOne, CatchUpSkip}).Draw(t, "catchup"),
				Opts:    genOpts(t), Anchor: genTime(t, "anchor"), Fired: rapid.Uint64().Draw(t, "fired")}
			if rapid.Bool().Draw(t, "fired once") {
				sc.Last, sc.LastAt = genTime(t, "last"), genTime(t, "lastAt")
				sc.LastJob = rapid.Uint64Range(0, s.NextID-1).Draw(t, "lastJob")
			}
			if rapid.Bool().Draw(t, "has next") {
				sc.Next = sc.Last.Add(time.Duration(rapid.Int64Range(1, 1e15).Draw(t, "gap")))
				if sc.Last.IsZero() {
					sc.Next = genTime(t, "next")
				}
			}
			s.Schedules = append(s.Schedules, sc)
		}
		data := EncodeSnapshot(s)
		if len(data) != cap(data) {
			t.Fatalf("encoded %d bytes into a buffer of %d: the size was not computed exactly", len(data), cap(data))
		}
		got, err := DecodeSnapshot(data)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if diff := cmp.Diff(s, got); diff != "" {
			t.Fatalf("(-want +got)\n%s", diff)
		}
		n := rapid.IntRange(0, len(data)-1).Draw(t, "cut")
		if _, err := DecodeSnapshot(data[:n]); !errors.Is(err, ErrDecode) {
			t.Fatalf("prefix of %d bytes decoded: %v", n, err)
		}
	})
}

func TestDecodeRejectsBadScheduleRecords(t *testing.T) {
	fired := EncodeRecord(Record{Tag: TagScheduleFired, ID: 3, At: epoch, Sched: SchedRecord{Name: "n", Period: epoch, Next: epoch.Add(time.Second)}})
	removed := EncodeRecord(Record{Tag: TagScheduleRemoved, Sched: SchedRecord{Name: "n"}})
	set := func(b []byte, i int, v byte) []byte { c := bytes.Clone(b); c[i] = v; return c }
	// Fired: ver(1) id(8) name(4+1) skip(1) period(1+8) next(1+8) at(1+8); byte 32 is the top of next.
	for _, tc := range []struct {
		name string
		tag  uint8
		data []byte
	}{
		{"next before the period", TagScheduleFired, set(fired, 32, 0x80)},
		{"a zero job id without a skip", TagScheduleFired, set(fired, 1, 0)},
		{"a skip with a job", TagScheduleFired, set(fired, 14, byte(SkipMissed))},
		{"removal naming a job", TagScheduleRemoved, set(removed, 1, 1)},
		{"empty name", TagScheduleRemoved, set(set(removed, 9, 0), 13, 0)[:13]},
		{"older version", TagScheduleRemoved, set(removed, 0, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRecord(tc.tag, tc.data)
			if !errors.Is(err, ErrDecode) && !errors.Is(err, ErrFormat) {
				t.Fatalf("decoded %x: %v", tc.data, err)
			}
			t.Log(err)
		})
	}
}

func TestParseSpecGivesNextPeriods(t *testing.T) {
	at := func(d time.Duration) time.Time { return epoch.Add(d) }
	for _, tc := range []struct {
		spec   string
		anchor time.Time
		after  []time.Time
		want   []time.Time
	}{
		// An interval counts from its anchor, whatever time it is asked after.
		{"@every 10s", at(3 * time.Second), []time.Time{at(0), at(3 * time.Second), at(12 * time.Second), at(13 * time.Second), at(-time.Hour)},
			[]time.Time{at(13 * time.Second), at(13 * time.Second), at(13 * time.Second), at(23 * time.Second), at(13 * time.Second)}},
		{"@every 1h30m", epoch, []time.Time{at(4 * time.Hour)}, []time.Time{at(4*time.Hour + 30*time.Minute)}},
		// Cron: 5 fields (minute first) or 6 (seconds first), in UTC; descriptors.
		{"*/15 * * * *", epoch, []time.Time{at(0), at(14*time.Minute + 59*time.Second)}, []time.Time{at(15 * time.Minute), at(15 * time.Minute)}},
		{"*/20 * * * * *", epoch, []time.Time{at(time.Second), at(40 * time.Second)}, []time.Time{at(20 * time.Second), at(time.Minute)}},
		{"@daily", epoch, []time.Time{at(time.Nanosecond)}, []time.Time{at(24 * time.Hour)}},
		// 1 January 2026 is a Thursday: the next weekday 09:00 is the same day.
		{"0 9 * * 1-5", epoch, []time.Time{at(0), at(9 * time.Hour)}, []time.Time{at(9 * time.Hour), at(33 * time.Hour)}},
		// Never: no period (February 30th).
		{"0 0 30 2 *", epoch, []time.Time{at(0)}, []time.Time{{}}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			next, err := ParseSpec(tc.spec, tc.anchor)
			if err != nil {
				t.Fatal(err)
			}
			var got []time.Time
			for _, a := range tc.after {
				got = append(got, next(a))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want +got)\n%s", diff)
			}
		})
	}
	for _, bad := range []string{"", "@every", "@every 0s", "@every 999ms", "@every x", "* * *", "61 * * * *", "TZ=UTC * * * * *", "@yearlyish"} {
		if _, err := ParseSpec(bad, epoch); !errors.Is(err, ErrSchedule) {
			t.Errorf("ParseSpec(%q) = %v, want ErrSchedule", bad, err)
		}
	}
}

// A period fires exactly once whatever disk operation a crash cuts: crash at the k-th mutating
// operation of the commit that fires it (for every k), reopen, commit again; then exactly one
// job exists for the period and the schedule has moved past it.
func TestPeriodFiresOnceAtEveryCrashPoint(t *testing.T) {
	for k := 1; k <= 8; k++ {
		for seed := int64(1); seed <= 8; seed++ {
			t.Run(fmt.Sprintf("k=%d/seed=%d", k, seed), func(t *testing.T) {
				w := newWorld(seed, Config{Capacity: 1, CompactBytes: 300})
				if err := w.open(); err != nil {
					t.Fatal(err)
				}
				if _, err := w.e.SetSchedule(w.now, NewSchedule{Name: "s", Spec: "@every 10s", Target: "a", Payload: []byte("p")}); err != nil {
					t.Fatal(err)
				}
				if _, err := w.e.Commit(w.now); err != nil {
					t.Fatal(err)
				}
				w.now = w.now.Add(10 * time.Second)
				w.d.CrashAfter(k)
				_, _ = w.e.Commit(w.now) // fails or not, depending on k
				w.crash()
				w.now = w.now.Add(time.Second)
				if err := w.open(); err != nil {
					t.Fatal(err)
				}
				if _, err := w.e.Commit(w.now); err != nil {
					t.Fatal(err)
				}
				st := w.e.State()
				var jobs []uint64
				for _, j := range st.Jobs {
					if j.FirstDue.Equal(epoch.Add(10 * time.Second)) {
						jobs = append(jobs, j.ID)
					}
				}
				if len(jobs) != 1 || len(st.Schedules) != 1 || !st.Schedules[0].Next.Equal(epoch.Add(20*time.Second)) || st.Schedules[0].LastJob != jobs[0] {
					t.Fatalf("jobs for the period: %v; state:\n%s", jobs, Describe(st, epoch))
				}
			})
		}
	}
}

// BenchmarkCommitWithSchedules: an idle Commit (nothing due) with 0 and SchedulesMax schedules,
// and one that fires one period of one schedule among SchedulesMax (one batch of two records).
func BenchmarkCommitWithSchedules(b *testing.B) {
	setup := func(b *testing.B, n int) *world {
		w := newWorld(1, Config{Capacity: 1, CompactBytes: 1 << 40})
		if err := w.open(); err != nil {
			b.Fatal(err)
		}
		for i := range n {
			if _, err := w.e.SetSchedule(w.now, NewSchedule{Name: fmt.Sprint("s", i), Spec: "@every 100000h", Target: "a"}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.e.Commit(w.now); err != nil {
			b.Fatal(err)
		}
		return w
	}
	for _, n := range []int{0, SchedulesMax} {
		b.Run(fmt.Sprintf("idle/schedules=%d", n), func(b *testing.B) {
			w := setup(b, n)
			for b.Loop() {
				w.now = w.now.Add(time.Millisecond)
				if _, err := w.e.Commit(w.now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, n := range []int{1, SchedulesMax} {
		b.Run(fmt.Sprintf("fire-one/schedules=%d", n), func(b *testing.B) { fireOne(b, setup(b, n-1)) })
	}
}

func fireOne(b *testing.B, w *world) {
	{
		if _, err := w.e.SetSchedule(w.now, NewSchedule{Name: "tick", Spec: "@every 1s", Target: "a"}); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			w.now = w.now.Add(time.Second)
			res, err := w.e.Commit(w.now)
			if err != nil {
				b.Fatal(err)
			}
			for _, s := range res.Starts {
				if err := w.e.AttemptDone(w.now, s.Token, Success()); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}
