package sim

import (
	"errors"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim/disk"
	"github.com/sluicehq/sluice/sim/forge"
)

// scheduleJournal builds a journal with schedules set, changed, removed and fired, compacted
// once (so it opens with a snapshot holding schedules) and then written on: the forger's input.
func scheduleJournal(t *testing.T) []byte {
	t.Helper()
	d := disk.New(1)
	cfg := runner.Config{RecordMax: recordMax, Capacity: 4}
	at := func(s int) time.Time { return Epoch.Add(time.Duration(s) * time.Second) }
	e, err := runner.Open(d, journalName, cfg, at(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Dispatch(at(0), true); err != nil {
		t.Fatal(err)
	}
	set := func(now int, name, spec string, o runner.Opts) {
		t.Helper()
		if _, err := e.SetSchedule(at(now), runner.NewSchedule{Name: name, Spec: spec, Target: "t1", Payload: []byte("p-" + name), Opts: o}); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(now int) {
		t.Helper()
		if _, err := e.Commit(at(now)); err != nil {
			t.Fatal(err)
		}
	}
	set(0, "s1", "@every 10s", runner.Opts{})
	set(0, "s2", "*/15 * * * * *", runner.Opts{Kind: "mail"})
	set(0, "s3", "@every 25s", runner.Opts{})
	commit(0)
	for s := 5; s <= 60; s += 5 {
		commit(s)
	}
	if err := e.Compact(); err != nil {
		t.Fatal(err)
	}
	for s := 65; s <= 120; s += 5 {
		if s == 80 {
			if _, err := e.RemoveSchedule("s3"); err != nil {
				t.Fatal(err)
			}
		}
		if s == 90 {
			set(s, "s1", "@every 20s", runner.Opts{}) // a changed spec, after periods were handled
		}
		commit(s)
	}
	b, err := readAll(d, journalName)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every schedule forgery is refused as corruption by runner.Replay, and the forger produces
// each kind of forgery it knows (records of the three tags and a snapshot's schedules).
func TestForgedSchedulesAreRefusedAsCorruption(t *testing.T) {
	img := scheduleJournal(t)
	if _, err := runner.Replay(replayDisk(t, img), journalName, runner.Config{RecordMax: recordMax, Capacity: 4}); err != nil {
		t.Fatalf("the unforged journal does not replay: %v", err)
	}
	seen := map[string]bool{}
	for seed := int64(1); seed <= 600; seed++ {
		b := append([]byte(nil), img...)
		what := forge.Schedule(rand.New(rand.NewSource(seed)), b, len(b))
		if what == "" {
			t.Fatalf("seed %d: nothing forged in a journal with schedule records", seed)
		}
		_, err := runner.Replay(replayDisk(t, b), journalName, runner.Config{RecordMax: recordMax, Capacity: 4})
		if !errors.Is(err, journal.ErrCorrupt) {
			t.Fatalf("seed %d: a journal with %s replayed with %v, want a refusal wrapping journal.ErrCorrupt", seed, what, err)
		}
		_, kind, _ := strings.Cut(what, "rewritten with ")
		kind, _, _ = strings.Cut(kind, ", its CRC")
		kind, _, _ = strings.Cut(kind, ", skipped as")
		seen[kind] = true
	}
	for _, want := range []string{
		"a schedule set with a job id", "a schedule set with a catch-up out of range", "a schedule set with a spec that does not parse",
		"a schedule set again with a next period before its last", "a schedule set with job options out of range",
		"a schedule removal with a job id", "the removal of a schedule never set",
		"a period of a schedule never set", "a period other than the schedule's next", "a period naming a job not just enqueued",
		"a next period equal to the period", "a period's job dropped", "a period with a skip that contradicts its job",
		"a snapshot schedule count its data cannot hold", "a snapshot's schedules out of order", "a snapshot schedule with a catch-up out of range",
		"a snapshot schedule whose next period is its last", "a snapshot schedule whose last job is past the next id",
		"a snapshot schedule with a spec that does not parse", "a snapshot schedule with job options out of range",
		"a snapshot schedule count one more than the schedules it holds",
	} {
		if !seen[want] {
			t.Errorf("600 forgeries never made %q (made %v)", want, seen)
		}
	}
}

// Forgeries that leave a field out (the copy's rewrite can change a frame's length) are
// refused as corruption too.
func TestResizedScheduleForgeriesAreRefused(t *testing.T) {
	img := scheduleJournal(t)
	seen := map[string]bool{}
	for seed := int64(1); seed <= 100; seed++ {
		b, what := forge.ScheduleResized(rand.New(rand.NewSource(seed)), img, len(img))
		if b == nil {
			t.Fatalf("seed %d: nothing forged", seed)
		}
		_, err := runner.Replay(replayDisk(t, b), journalName, runner.Config{RecordMax: recordMax, Capacity: 4})
		if !errors.Is(err, journal.ErrCorrupt) {
			t.Fatalf("seed %d: a journal with %s replayed with %v, want a refusal wrapping journal.ErrCorrupt", seed, what, err)
		}
		_, kind, _ := strings.Cut(what, "rewritten with ")
		kind, _, _ = strings.Cut(kind, ", ")
		seen[kind] = true
	}
	for _, want := range []string{"a schedule record with an empty name", "a schedule set with an empty target", "a schedule set without a next period"} {
		if !seen[want] {
			t.Errorf("100 forgeries never made %q (made %v)", want, seen)
		}
	}
}

func replayDisk(t *testing.T, img []byte) *disk.Disk {
	t.Helper()
	d := disk.New(1)
	if err := writeSynced(d, journalName, img); err != nil {
		t.Fatal(err)
	}
	return d
}

// The planted split-firing defect's image: the last batch loses its ScheduleFired frames, the
// rest replays, and the schedule's advance is gone while its job stays.
func TestWithoutLastFiredKeepsTheJobDropsTheAdvance(t *testing.T) {
	img := scheduleJournal(t)
	cfg := runner.Config{RecordMax: recordMax, Capacity: 4}
	whole, err := runner.Replay(replayDisk(t, img), journalName, cfg)
	if err != nil {
		t.Fatal(err)
	}
	split, ok := forge.WithoutLastFired(img)
	if !ok {
		t.Fatal("the last commit handled periods, but nothing was split")
	}
	got, err := runner.Replay(replayDisk(t, split), journalName, cfg)
	if err != nil {
		t.Fatalf("the split journal does not replay: %v", err)
	}
	if len(got.Jobs) != len(whole.Jobs) || got.NextID != whole.NextID {
		t.Fatalf("split: %d jobs, next id %d; whole: %d jobs, next id %d", len(got.Jobs), got.NextID, len(whole.Jobs), whole.NextID)
	}
	if sameSchedules(scheduleViewsOf(got.Schedules), scheduleViewsOf(whole.Schedules)) {
		t.Fatalf("the split journal kept every schedule's advance: %v", scheduleViewsOf(got.Schedules))
	}
}
