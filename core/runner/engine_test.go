package runner

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/sim/disk"
)

func TestConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{}, "Capacity"},
		{Config{Capacity: 1, Policy: retry.Policy{Attempts: -1, Base: 1, Cap: 1}}, "Attempts"},
		{Config{Capacity: 1, Circuit: breaker.Circuit{Threshold: 1, Window: 1, Cooldown: 1, Probes: -1}}, "Probes"},
		{Config{Capacity: 1, CompactBytes: -1}, "CompactBytes"},
		{Config{Capacity: 1, Retention: -1}, "Retention"},
		{Config{Capacity: 1, RecordMax: 10}, "RecordMax"},
		{Config{Capacity: 1, RecordMax: 4096, SnapshotMax: 2048}, "SnapshotMax"},
		{Config{Capacity: 1, Grace: -1}, "Grace"},
	} {
		_, err := tc.cfg.WithDefaults()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: err = %v, want ErrInvalidConfig naming %s", tc.cfg, err, tc.field)
		}
		if _, err := Open(disk.New(1), journalName, tc.cfg, epoch); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Open(%+v) = %v, want ErrInvalidConfig", tc.cfg, err)
		}
	}
	got, err := Config{Capacity: 3}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	type defaults struct {
		Policy       retry.Policy
		Circuit      breaker.Circuit
		CompactBytes int64
		Retention    int
		RecordMax    int
	}
	want := defaults{retry.DefaultPolicy(), breaker.DefaultCircuit(), 64 << 20, 10_000, 1 << 20}
	if diff := cmp.Diff(want, defaults{got.Policy, got.Circuit, got.CompactBytes, got.Retention, got.RecordMax}); diff != "" {
		t.Fatalf("defaults (-want +got)\n%s", diff)
	}
}

func TestEnqueueTooLargeWritesNothing(t *testing.T) {
	d := disk.New(1)
	e, err := Open(d, journalName, Config{Capacity: 1, RecordMax: 1024}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	e.Dispatch(epoch, true)
	ops := d.Ops()
	if _, _, err := e.Enqueue(epoch, epoch, "a", make([]byte, 1024)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("enqueue: %v, want ErrTooLarge", err)
	}
	res, err := e.Commit(epoch)
	if err != nil || len(res.Acks) != 0 || d.Ops() != ops || e.Status().NextID != 1 {
		t.Fatalf("after a refused enqueue: res %+v err %v ops %d→%d next id %d", res, err, ops, d.Ops(), e.Status().NextID)
	}
}

// TestCancelBeforeDispatchNeverStarts drives the machine directly: an attempt admitted but not
// yet synced is dropped by a cancel, frees its unit and never appears in Starts.
func TestCancelBeforeDispatchNeverStarts(t *testing.T) {
	m := mustMachine(MachineConfig{Policy: retry.DefaultPolicy(), Circuit: breaker.DefaultCircuit(), Capacity: 1,
		RecordMax: 1 << 20, Logger: slog.New(slog.DiscardHandler), Rand: rand.New(rand.NewSource(1))})
	step := func(ev Event) {
		t.Helper()
		if err := m.Step(ev); err != nil {
			t.Fatal(err)
		}
		if err := m.checkInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	step(Enqueue{Ticket: 1, Due: epoch, Target: "a"})
	step(Enqueue{Ticket: 2, Due: epoch, Target: "a"})
	step(Tick{Now: epoch, Admit: true}) // job 1 admitted: Started appended, not synced
	step(Cancel{Ticket: 3, ID: 1})
	step(Tick{Now: epoch, Admit: true}) // the unit is free again: job 2 admitted
	rd := m.Ready()
	step(Synced{Through: rd.Appends[len(rd.Appends)-1].Seq})
	rd = m.Ready()
	var starts []Token
	for _, a := range rd.Starts {
		starts = append(starts, a.Token)
	}
	if diff := cmp.Diff([]Token{{2, 1}}, starts); diff != "" {
		t.Fatalf("starts (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff([]Ack{{Ticket: 1, ID: 1}, {Ticket: 2, ID: 2}, {Ticket: 3, ID: 1}}, rd.Acks); diff != "" {
		t.Fatalf("acks (-want +got)\n%s", diff)
	}
}

func TestStaleOutcomeIsIgnoredAndLogged(t *testing.T) {
	var log bytes.Buffer
	cfg := Config{Capacity: 1, Logger: slog.New(slog.NewTextHandler(&log, nil))}
	e, err := Open(disk.New(1), journalName, cfg, epoch)
	if err != nil {
		t.Fatal(err)
	}
	e.Dispatch(epoch, true)
	_, id, _ := e.Enqueue(epoch, epoch, "a", nil)
	res, err := e.Commit(epoch)
	if err != nil || len(res.Starts) != 1 {
		t.Fatalf("commit: %+v %v", res, err)
	}
	if _, err := e.Cancel(id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Commit(epoch); err != nil {
		t.Fatal(err)
	}
	// The cancelled job's attempt finishes: ignored, but its unit comes back.
	if err := e.AttemptDone(epoch, res.Starts[0].Token, Success()); err != nil {
		t.Fatal(err)
	}
	if err := e.AttemptDone(epoch, Token{ID: 99, Attempt: 1}, Success()); err != nil {
		t.Fatal(err)
	}
	j, _ := e.Get(id)
	if j.State != Cancelled || e.Status().InFlight != 0 {
		t.Fatalf("job %v, in flight %d", j.State, e.Status().InFlight)
	}
	for _, want := range []string{"stale outcome ignored", "outcome of an unknown attempt ignored"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}

// TestRetentionAndIdsAcrossCompaction: compaction keeps the last Retention terminal jobs (by
// the order they became terminal) and every live one; ids are never reused after compaction
// and restart, even when the highest id was pruned.
func TestRetentionAndIdsAcrossCompaction(t *testing.T) {
	w := newWorld(1, Config{Capacity: 4, Retention: 2})
	if err := w.open(); err != nil {
		t.Fatal(err)
	}
	e := w.e
	for i := 0; i < 5; i++ {
		e.Enqueue(epoch, epoch, "a", nil)
	}
	res, err := e.Commit(epoch)
	if err != nil || len(res.Starts) != 4 {
		t.Fatalf("%+v %v", res, err)
	}
	// Finish in the order 4, 1, 3: the terminal order; job 2 keeps running, job 5 waits.
	for _, id := range []uint64{4, 1, 3} {
		e.AttemptDone(epoch, Token{id, 1}, Success())
	}
	e.Cancel(5)
	if _, err := e.Flush(epoch); err != nil {
		t.Fatal(err)
	}
	if err := e.Compact(); err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, j := range e.State().Jobs {
		ids = append(ids, j.ID)
	}
	// Terminal order 4, 1, 3, 5: the last two are 3 and 5; job 2 is live.
	if diff := cmp.Diff([]uint64{2, 3, 5}, ids); diff != "" {
		t.Fatalf("kept jobs (-want +got)\n%s", diff)
	}
	w.crash()
	if err := w.open(); err != nil {
		t.Fatal(err)
	}
	_, id, err := w.e.Enqueue(w.now, epoch, "a", nil)
	if err != nil || id != 6 {
		t.Fatalf("enqueue after compaction and restart got id %d (%v), want 6", id, err)
	}
}

// TestAutoCompactionPastCompactBytes: Commit compacts once the journal grew past CompactBytes,
// and the journal then replays to the same state.
func TestAutoCompactionPastCompactBytes(t *testing.T) {
	w := newWorld(1, Config{Capacity: 1, CompactBytes: 2000})
	if err := w.open(); err != nil {
		t.Fatal(err)
	}
	compactions := 0
	for i := 0; i < 100; i++ {
		w.e.Enqueue(w.now, epoch.Add(time.Hour), "a", []byte("payload"))
		res, err := w.e.Commit(epoch)
		if err != nil || res.CompactErr != nil {
			t.Fatalf("commit %d: %v %v", i, err, res.CompactErr)
		}
		if res.Compacted {
			compactions++
		}
	}
	if compactions < 2 || w.e.Status().Grown > 2000+200 {
		t.Fatalf("%d compactions, journal grown by %d", compactions, w.e.Status().Grown)
	}
	s, err := w.replay()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(w.e.State(), s); diff != "" {
		t.Fatalf("(-live +replay)\n%s", diff)
	}
}

// TestHugeErrorTextStillFits: an outcome's error text is cut so its Finished record fits
// RecordMax; the engine is not poisoned by a long error.
func TestHugeErrorTextStillFits(t *testing.T) {
	e, err := Open(disk.New(1), journalName, Config{Capacity: 1, RecordMax: 1024}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	e.Dispatch(epoch, true)
	e.Enqueue(epoch, epoch, "a", nil)
	res, err := e.Commit(epoch)
	if err != nil || len(res.Starts) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	e.AttemptDone(epoch, res.Starts[0].Token, Failure(strings.Repeat("x", 10_000), false))
	if _, err := e.Commit(epoch); err != nil {
		t.Fatalf("commit after a long error: %v", err)
	}
	if j, _ := e.Get(1); j.State != Dead || len(j.LastErr) > 1024 {
		t.Fatalf("job %v with %d bytes of error", j.State, len(j.LastErr))
	}
}

// TestDeferredJobSpendsNoAttempt: a job held back by an open breaker is deferred to the
// breaker's until with its attempt count unchanged, however often it is deferred.
func TestDeferredJobSpendsNoAttempt(t *testing.T) {
	cfg := Config{Capacity: 2, Policy: retry.Policy{Attempts: 2, Base: time.Hour, Cap: time.Hour},
		Circuit: breaker.Circuit{Threshold: 1, Window: time.Minute, Cooldown: 10 * time.Second, Probes: 1}}
	e, err := Open(disk.New(1), journalName, cfg, epoch)
	if err != nil {
		t.Fatal(err)
	}
	e.Dispatch(epoch, true)
	e.Enqueue(epoch, epoch, "a", nil)
	res, _ := e.Commit(epoch)
	e.AttemptDone(epoch, res.Starts[0].Token, Failure("503", true)) // opens "a" until +10s
	e.Enqueue(epoch, epoch, "a", nil)
	if _, err := e.Commit(epoch); err != nil {
		t.Fatal(err)
	}
	type view struct {
		State    JobState
		Deferred bool
		Attempts int
		Due      time.Duration
	}
	get := func() view {
		j, _ := e.Get(2)
		return view{j.State, j.Deferred, j.Attempts, j.Due.Sub(epoch)}
	}
	if diff := cmp.Diff(view{Waiting, true, 0, 10 * time.Second}, get()); diff != "" {
		t.Fatalf("while open (-want +got)\n%s", diff)
	}
	// At +10s the breaker half-opens and job 2 (job 1 waits its hour of backoff) starts as the
	// probe, as attempt 1: the deferral counted nothing.
	res, err = e.Commit(epoch.Add(10 * time.Second))
	if err != nil || len(res.Starts) != 1 || res.Starts[0].Token != (Token{2, 1}) || !res.Starts[0].Probe {
		t.Fatalf("at +10s: %+v %v", res, err)
	}
}

// TestSnapshotRetainsTheLastTerminalJobs: Snapshot(retain) leaves out all but the retain
// terminal jobs that became terminal last (by terminal sequence, not by id), keeps every
// non-terminal job, and lists jobs ascending by id.
func TestSnapshotRetainsTheLastTerminalJobs(t *testing.T) {
	m := machineWith(0, 1) // job 1 running
	for range 5 {
		m.Step(Enqueue{Due: epoch.Add(time.Hour), Target: "a"}) // jobs 2..6 waiting
	}
	for _, id := range []uint64{5, 2, 4} { // terminal sequence 1, 2, 3
		if err := m.Step(Cancel{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(s Snapshot) []uint64 {
		var out []uint64
		for _, j := range s.Jobs {
			out = append(out, j.ID)
		}
		return out
	}
	for _, tc := range []struct {
		retain      int
		kept, dropt []uint64
	}{
		{10, []uint64{1, 2, 3, 4, 5, 6}, nil},
		{3, []uint64{1, 2, 3, 4, 5, 6}, nil},
		{2, []uint64{1, 2, 3, 4, 6}, []uint64{5}},
		{1, []uint64{1, 3, 4, 6}, []uint64{2, 5}},
		{0, []uint64{1, 3, 6}, []uint64{2, 4, 5}},
	} {
		s, dropped := m.Snapshot(tc.retain)
		if diff := cmp.Diff(tc.kept, ids(s)); diff != "" {
			t.Errorf("retain %d: kept (-want +got)\n%s", tc.retain, diff)
		}
		if diff := cmp.Diff(tc.dropt, dropped); diff != "" {
			t.Errorf("retain %d: dropped (-want +got)\n%s", tc.retain, diff)
		}
	}
}

// TestBreakersKeptOnlyForRecentlyFailingTargets: a target whose breaker would decide as a new
// one is forgotten, so memory is bounded by the targets that failed recently, not by every
// target ever seen.
func TestBreakersKeptOnlyForRecentlyFailingTargets(t *testing.T) {
	e, err := Open(disk.New(1), journalName, Config{Capacity: 8}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	e.Dispatch(epoch, true)
	for i := 0; i < 100; i++ {
		if _, _, err := e.Enqueue(epoch, epoch, fmt.Sprintf("t%03d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	now := epoch
	for done := 0; done < 100; {
		res, err := e.Commit(now)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range res.Starts {
			o := Success()
			if s.Target == "t007" {
				o = Failure("boom", true)
			}
			if err := e.AttemptDone(now, s.Token, o); err != nil {
				t.Fatal(err)
			}
			done++
		}
	}
	if _, err := e.Commit(now); err != nil {
		t.Fatal(err)
	}
	if got := len(e.m.breakers); got != 1 || e.m.breakers["t007"] == nil {
		t.Fatalf("breakers kept for %d targets, want only the failing t007", got)
	}
	// Once its failure is older than the Window, the next outcome forgets it too.
	later := now.Add(breaker.DefaultCircuit().Window + time.Second)
	for e.m.breakers["t007"] != nil {
		res, err := e.Commit(later)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Starts) == 0 {
			later = later.Add(time.Minute)
			continue
		}
		for _, s := range res.Starts {
			if err := e.AttemptDone(later, s.Token, Success()); err != nil {
				t.Fatal(err)
			}
		}
		if later.Sub(now) > time.Hour {
			t.Fatal("t007's breaker never forgotten")
		}
	}
}

// TestZeroDueIsNowAndUndecodablePayloadFailsPermanently: the engine, not the driver, makes a
// zero due the enqueue's now, and a payload the decode check refuses is never dispatched: the
// job is dead(permanent) and its target's breaker records nothing.
func TestZeroDueIsNowAndUndecodablePayloadFailsPermanently(t *testing.T) {
	cfg := Config{Capacity: 1, Circuit: breaker.Circuit{Threshold: 1, Window: time.Minute, Cooldown: time.Minute, Probes: 1},
		Decode: func(p []byte) (any, error) {
			if string(p) == "bad" {
				return nil, errors.New("not json")
			}
			return string(p), nil
		}}
	e, err := Open(disk.New(1), journalName, cfg, epoch)
	if err != nil {
		t.Fatal(err)
	}
	e.Dispatch(epoch, true)
	now := epoch.Add(time.Hour)
	_, bad, _ := e.Enqueue(now, time.Time{}, "a", []byte("bad"))
	_, good, _ := e.Enqueue(now, time.Time{}, "a", []byte("good"))
	if j, _ := e.Get(bad); !j.Due.Equal(now) {
		t.Fatalf("zero due became %v, want now %v", j.Due, now)
	}
	var got []string
	for range 2 { // the refused attempt's unit is free again at the next commit
		res, err := e.Commit(now)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range res.Starts {
			got = append(got, fmt.Sprintf("%v %v", s.Token, s.Value))
		}
	}
	if diff := cmp.Diff([]string{fmt.Sprintf("%d#1 good", good)}, got); diff != "" {
		t.Fatalf("starts (-want +got)\n%s", diff)
	}
	j, _ := e.Get(bad)
	if j.State != Dead || j.Reason != Permanent || !strings.Contains(j.LastErr, "not json") {
		t.Fatalf("undecodable job: %+v", j)
	}
	if s := e.m.breakerState("a"); s != breaker.Closed {
		t.Fatalf("breaker %v after a decode refusal, want closed", s)
	}
	if err := e.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestCancelEffectOnlyNamesARunningHandler: an outcome fed between a Cancel and the commit
// that makes it durable ends the attempt, so that commit names no handler to cancel (a driver
// would find none).
func TestCancelEffectOnlyNamesARunningHandler(t *testing.T) {
	e, err := Open(disk.New(1), journalName, Config{Capacity: 1}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	e.Dispatch(epoch, true)
	_, id, _ := e.Enqueue(epoch, epoch, "a", nil)
	res, err := e.Commit(epoch)
	if err != nil || len(res.Starts) != 1 {
		t.Fatalf("commit: %+v %v", res, err)
	}
	if _, err := e.Cancel(id); err != nil {
		t.Fatal(err)
	}
	if err := e.AttemptDone(epoch, res.Starts[0].Token, Success()); err != nil {
		t.Fatal(err)
	}
	res, err = e.Commit(epoch)
	if err != nil || len(res.Cancels) != 0 {
		t.Fatalf("commit after cancel and outcome: cancels %v, err %v; want none", res.Cancels, err)
	}
	if j, _ := e.Get(id); j.State != Cancelled {
		t.Fatalf("job %+v, want cancelled", j)
	}
}

// TestOpenRefusesPreviousFormatJournal writes a journal as the record format 1 wrote it (an
// Enqueued record without the per-job fields) and opens it: the open is refused with
// ErrFormat, the message names the formats and what to do, and the journal is left as it was
// (never read as format 2).
func TestOpenRefusesPreviousFormatJournal(t *testing.T) {
	for _, format := range []uint8{1, 2} {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) { refusesFormat(t, format) })
	}
}

// refusesFormat writes one Enqueued record as format wrote it and checks Open and Replay
// refuse the journal plainly, changing nothing.
func refusesFormat(t *testing.T, format uint8) {
	d := disk.New(1)
	j, err := journal.Open(d, journalName, journal.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var w writer
	w.u8(format)
	w.u64(1)
	w.time(epoch)
	w.str("a")
	w.bytes([]byte("payload"))
	if format == 2 { // priority, attempts, deadline, kind, unique; no unique window
		w.u32(0)
		w.u32(0)
		w.u64(0)
		w.str("email")
		w.str("")
	}
	if _, err := j.Append(TagEnqueued, w.b); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	ops := d.Ops()
	_, err = Open(d, journalName, Config{Capacity: 1}, epoch)
	if !errors.Is(err, ErrFormat) {
		t.Fatalf("open of a format-%d journal: %v, want ErrFormat", format, err)
	}
	t.Logf("refusal: %v", err)
	for _, want := range []string{journalName, fmt.Sprintf("format %d", format), "reads format 3", "Drain", "move the directory aside"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := Replay(d, journalName, Config{Capacity: 1}); !errors.Is(err, ErrFormat) || strings.Contains(err.Error(), "corrupt") {
		t.Errorf("read-only replay of a format-%d journal: %v, want ErrFormat (not called corrupt)", format, err)
	}
	if d.Ops() != ops {
		t.Errorf("a refused open did %d disk operations that changed something? ops %d→%d", d.Ops()-ops, ops, d.Ops())
	}
	var got [][]byte
	if _, err := journal.Read(d, journalName, journal.Config{}, func(r journal.Record) error {
		got = append(got, bytes.Clone(r.Data))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]byte{w.b}, got); diff != "" {
		t.Fatalf("journal after the refused open (-want +got)\n%s", diff)
	}
}

// lowStartsAfter runs capacity 1 under a flood: a priority -5 job due at 0, then every second
// a new priority-10 job and the running attempt's success. It returns when the low job
// started (or a zero duration if it did not within limit).
func lowStartsAfter(t *testing.T, ageMax, limit time.Duration) time.Duration {
	e, err := Open(disk.New(1), journalName, Config{Capacity: 1, AgeMax: ageMax}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	e.Dispatch(epoch, true)
	if _, _, err := e.EnqueueJob(epoch, NewJob{Target: "a", Opts: Opts{Priority: -5}}); err != nil {
		t.Fatal(err)
	}
	var running []Token
	for now := epoch; now.Sub(epoch) <= limit; now = now.Add(time.Second) {
		for _, tok := range running {
			if err := e.AttemptDone(now, tok, Success()); err != nil {
				t.Fatal(err)
			}
		}
		running = nil
		if _, _, err := e.EnqueueJob(now, NewJob{Target: "b", Opts: Opts{Priority: 10}}); err != nil {
			t.Fatal(err)
		}
		res, err := e.Commit(now)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range res.Starts {
			if s.Token.ID == 1 {
				return now.Sub(epoch)
			}
			running = append(running, s.Token)
		}
	}
	return 0
}

// TestLowPriorityStartsOnceItHasWaitedAgeMax is the starvation rule: under a steady flood of
// higher-priority jobs, a low-priority job starts as soon as it has waited AgeMax (and a unit
// frees); with a longer AgeMax the same flood holds it back for the whole run.
func TestLowPriorityStartsOnceItHasWaitedAgeMax(t *testing.T) {
	if got := lowStartsAfter(t, 30*time.Second, 5*time.Minute); got != 30*time.Second {
		t.Errorf("AgeMax 30s: the low-priority job started after %v, want 30s", got)
	}
	if got := lowStartsAfter(t, time.Hour, 5*time.Minute); got != 0 {
		t.Errorf("AgeMax 1h: the low-priority job started after %v, want not within 5m", got)
	}
}

// breakerState returns the state of target's breaker (Closed when it has none).
func (m *Machine) breakerState(target string) breaker.State {
	if b := m.breakers[target]; b != nil {
		return b.Status().State
	}
	return breaker.Closed
}

// TestSnoozeSpendsNoAttemptAndFreesTheProbe: a snoozing probe gives its probe back (the
// breaker does not judge the target: another job starts as the probe at once), its job waits
// until now+d with no attempt counted, and survives a compaction so. A snooze past the
// journal's time range is a permanent failure, never a job lost in time.
func TestSnoozeSpendsNoAttemptAndFreesTheProbe(t *testing.T) {
	cfg := Config{Capacity: 2, Policy: retry.Policy{Attempts: 2, Base: time.Hour, Cap: time.Hour},
		Circuit: breaker.Circuit{Threshold: 1, Window: time.Minute, Cooldown: 10 * time.Second, Probes: 1}}
	d := disk.New(1)
	e, err := Open(d, journalName, cfg, epoch)
	if err != nil {
		t.Fatal(err)
	}
	e.Dispatch(epoch, true)
	e.Enqueue(epoch, epoch, "a", nil)
	res, _ := e.Commit(epoch)
	e.AttemptDone(epoch, res.Starts[0].Token, Failure("503", true)) // opens "a" until +10s
	e.Enqueue(epoch, epoch, "a", nil)
	e.Commit(epoch)
	at := epoch.Add(10 * time.Second)
	res, err = e.Commit(at)
	if err != nil || len(res.Starts) != 1 || !res.Starts[0].Probe {
		t.Fatalf("at +10s: %+v %v, want job 2 as the probe", res, err)
	}
	e.AttemptDone(at, res.Starts[0].Token, Snoozed(time.Minute))
	e.Enqueue(at, at, "a", nil)
	res, err = e.Commit(at)
	if err != nil || len(res.Starts) != 1 || res.Starts[0].Token != (Token{3, 1}) || !res.Starts[0].Probe {
		t.Fatalf("after the snooze: %+v %v, want job 3 as the probe", res, err)
	}
	type view struct {
		State    JobState
		Attempts int
		Due      time.Duration
		History  string
	}
	get := func(e *Engine) view {
		j, _ := e.Get(2)
		var h []string
		for _, a := range j.History {
			h = append(h, a.Outcome.String())
		}
		return view{j.State, j.Attempts, j.Due.Sub(epoch), strings.Join(h, ",")}
	}
	want := view{Waiting, 0, 70 * time.Second, "snoozed"}
	if diff := cmp.Diff(want, get(e)); diff != "" {
		t.Fatalf("snoozed job (-want +got)\n%s", diff)
	}
	if err := e.Compact(); err != nil {
		t.Fatal(err)
	}
	e.AttemptDone(at, res.Starts[0].Token, Snoozed(math.MaxInt64))
	if _, err := e.Commit(at); err != nil {
		t.Fatal(err)
	}
	if j, _ := e.Get(3); j.State != Dead || j.Reason != Permanent || !strings.Contains(j.LastErr, "time range") {
		t.Errorf("job 3 snoozed 292 years: %v %v %q, want dead (permanent) saying why", j.State, j.Reason, j.LastErr)
	}
	ec, err := cfg.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Replay(d, journalName, ec)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range s.Jobs {
		if j.ID == 2 && (j.State != Waiting || j.Attempts != 0 || !j.Due.Equal(epoch.Add(70*time.Second))) {
			t.Errorf("replayed job 2: %v attempts %d due %v, want waiting, 0, +70s", j.State, j.Attempts, j.Due.Sub(epoch))
		}
	}
}
