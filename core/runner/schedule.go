package runner

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Periodic jobs (docs/runner.md, "Periodic jobs"). A schedule is durable machine state: set by a
// ScheduleSet record, removed by ScheduleRemoved, and advanced by ScheduleFired. A period fires
// in Tick (while dispatching) as ONE batch: the Enqueued record of its job, then the
// ScheduleFired record that names that job and the schedule's next period. Journal batches are
// whole or absent after a crash (core/journal rule 6), so a crash can neither lose the advance
// of a journaled job (a second job for the period) nor the job of a journaled advance (a skipped
// period).
//
// Invariants (checkSchedules): at most SchedulesMax schedules; each one's spec parses; its next
// period is zero (the spec has no more) or strictly after its last handled period, so a
// period is handled at most once, also across changes and a clock that steps back; its last
// job, when not 0, has an id below the next id.

// SchedulesMax bounds the schedules one runner holds.
const SchedulesMax = 1000

// IntervalMin is the shortest interval "@every" takes (a shorter one would fill the journal).
const IntervalMin = time.Second

// Errors of the schedule commands.
var (
	ErrNoSchedule = errors.New("runner: no such schedule")
	ErrSchedule   = errors.New("runner: invalid schedule")
)

// CatchUp is what a schedule does with periods missed while the runner was down or not running
// (or its timer fired more than a period late): a period is missed when the period after it
// is due too by the time it is handled.
type CatchUp uint8

const (
	// CatchUpOne (the default): one job for the missed periods, due at the first of them;
	// then the regular schedule (the next period after now).
	CatchUpOne CatchUp = iota
	// CatchUpSkip: no job for missed periods; the regular schedule resumes at the next period
	// after now.
	CatchUpSkip
)

func (c CatchUp) String() string {
	switch c {
	case CatchUpOne:
		return "one"
	case CatchUpSkip:
		return "skip"
	}
	return fmt.Sprintf("catch-up(%d)", uint8(c))
}

// NewSchedule is what SetSchedule sets: the spec, and the job each period enqueues.
type NewSchedule struct {
	Name string
	// Spec is "@every <duration>" (periods Anchor + k·duration, k ≥ 1, duration ≥ IntervalMin)
	// or a cron expression (robfig/cron/v3: 5 fields, or 6 with seconds first, or a descriptor
	// such as "@hourly"), evaluated in UTC.
	Spec    string
	Target  string
	Payload []byte
	Opts    Opts
	CatchUp CatchUp
}

// Schedule is a read-only copy of one schedule.
type Schedule struct {
	Name    string
	Spec    string
	Target  string
	Payload []byte
	Opts    Opts
	CatchUp CatchUp
	// Anchor is when the spec was set (an interval's periods are Anchor + k·interval); a change
	// that keeps the spec keeps it, and the periods with it.
	Anchor time.Time
	Next   time.Time // the next period; zero when the spec has no more
	Last   time.Time // the last period handled (fired or skipped); zero before the first
	LastAt time.Time // when the last period was handled
	// LastJob is the job of the last period; 0 when it was skipped (catch-up or a held unique
	// key) or before the first.
	LastJob uint64
	Fired   uint64 // jobs the schedule has enqueued
}

// sched is the machine's schedule: the copy and its parsed spec.
type sched struct {
	Schedule
	next func(after time.Time) time.Time // the first period strictly after after; zero: none
}

// SetSchedule sets (adds or changes) the schedule Schedule.Name at Now: answered by an Ack once
// its ScheduleSet record is durable. A change that keeps the spec keeps the next period.
type SetSchedule struct {
	Ticket   Ticket
	Now      time.Time
	Schedule NewSchedule
}

// RemoveSchedule removes the schedule Name; answered once its ScheduleRemoved record is durable.
type RemoveSchedule struct {
	Ticket Ticket
	Name   string
}

func (SetSchedule) isEvent()    {}
func (RemoveSchedule) isEvent() {}

// cronParser takes 5 fields, 6 with seconds first, and descriptors. Of robfig/cron only the
// parser and SpecSchedule.Next are used: pure functions of their arguments (no clock, no
// goroutine; time zones are refused, so no zone database is read).
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSpec parses spec with anchor (an interval's origin) into its next-period function: the
// first period strictly after a time, in UTC, or zero when there is none in the range a record
// holds. The same spec and anchor always give the same periods (replay re-parses them).
func ParseSpec(spec string, anchor time.Time) (func(after time.Time) time.Time, error) {
	anchor = norm(anchor)
	if rest, ok := strings.CutPrefix(spec, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, fmt.Errorf("%w: spec %q: %v", ErrSchedule, spec, err)
		}
		if d < IntervalMin {
			return nil, fmt.Errorf("%w: spec %q: the interval must be at least %v", ErrSchedule, spec, IntervalMin)
		}
		return func(after time.Time) time.Time {
			after = norm(after)
			k := int64(1)
			if after.Sub(anchor) >= d {
				k = int64(after.Sub(anchor)/d) + 1
			}
			t := anchor.Add(time.Duration(k) * d)
			if !t.After(after) || !inRange(t) || t.Sub(anchor) != time.Duration(k)*d {
				return time.Time{}
			}
			return t
		}, nil
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, fmt.Errorf("%w: spec %q: time zones are not supported, cron expressions are evaluated in UTC", ErrSchedule, spec)
	}
	if strings.HasPrefix(spec, "@every") {
		return nil, fmt.Errorf("%w: spec %q: want \"@every <duration>\", such as \"@every 5m\"", ErrSchedule, spec)
	}
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: spec %q: %v", ErrSchedule, spec, err)
	}
	return func(after time.Time) time.Time {
		t := s.Next(norm(after))
		if t.IsZero() || !inRange(t) {
			return time.Time{}
		}
		return norm(t)
	}, nil
}

func (m *Machine) setSchedule(ev SetSchedule) error {
	m.at(ev.Now)
	ns := ev.Schedule
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: schedule %q: "+f, append([]any{ErrSchedule, ns.Name}, args...)...)
	}
	if err := CheckName("schedule name", ns.Name, true); err != nil {
		return fmt.Errorf("%w: %w", ErrSchedule, err)
	}
	old := m.scheds[ns.Name]
	switch {
	case ns.CatchUp > CatchUpSkip:
		return bad("catch-up %v", ns.CatchUp)
	case old == nil && len(m.scheds) >= SchedulesMax:
		return bad("a runner holds at most %d schedules: remove one first", SchedulesMax)
	}
	// A change that keeps the spec keeps its grid and its next period.
	anchor := m.now
	keep := old != nil && old.Spec == ns.Spec && !old.Next.IsZero()
	if keep {
		anchor = old.Anchor
	}
	next, err := ParseSpec(ns.Spec, anchor)
	if err != nil {
		return fmt.Errorf("%w (schedule %q)", err, ns.Name)
	}
	var due time.Time
	if keep {
		due = old.Next
	} else {
		after := m.now
		if old != nil && old.Last.After(after) {
			after = old.Last // never a period handled already
		}
		if due = next(after); due.IsZero() {
			return bad("spec %q has no period after %v", ns.Spec, after)
		}
	}
	// Each period's job must be one Enqueue would accept.
	if _, _, err := m.enqueueRecord(m.nextID, due, NewJob{Due: due, Target: ns.Target, Payload: ns.Payload, Opts: ns.Opts}); err != nil {
		return fmt.Errorf("%w (schedule %q)", err, ns.Name)
	}
	r := Record{Tag: TagScheduleSet, Target: ns.Target, Payload: ns.Payload, Opts: ns.Opts, At: m.now,
		Sched: SchedRecord{Name: ns.Name, Spec: ns.Spec, CatchUp: ns.CatchUp, Anchor: anchor, Next: due}}
	data := EncodeRecord(r)
	if len(data) > m.cfg.RecordMax {
		return fmt.Errorf("%w: schedule record of %d bytes exceeds RecordMax %d", ErrTooLarge, len(data), m.cfg.RecordMax)
	}
	m.applyAndAppend(r, data)
	m.acking = append(m.acking, pending{m.seq, Ack{Ticket: ev.Ticket}})
	return nil
}

func (m *Machine) removeSchedule(ev RemoveSchedule) error {
	if m.scheds[ev.Name] == nil {
		return fmt.Errorf("%w: %q", ErrNoSchedule, ev.Name)
	}
	m.record(Record{Tag: TagScheduleRemoved, Sched: SchedRecord{Name: ev.Name}})
	m.acking = append(m.acking, pending{m.seq, Ack{Ticket: ev.Ticket}})
	return nil
}

// dueSchedules returns the names of the schedules whose next period is at or before t, sorted.
func (m *Machine) dueSchedules(t time.Time) []string {
	if m.schedWake.IsZero() || m.schedWake.After(t) {
		return nil
	}
	var names []string
	for name, s := range m.scheds {
		if !s.Next.IsZero() && !s.Next.After(t) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// scheduleWake is the earliest next period of any schedule; zero when there is none.
func (m *Machine) scheduleWake() time.Time { return m.schedWake }

// scheduleWakeScan computes scheduleWake (after every change to a schedule).
func (m *Machine) scheduleWakeScan() time.Time {
	var w time.Time
	for _, s := range m.scheds {
		if !s.Next.IsZero() && (w.IsZero() || s.Next.Before(w)) {
			w = s.Next
		}
	}
	return w
}

// fireSchedules handles every due period at now, in name order, each schedule's as one batch
// of records: its job's Enqueued, then ScheduleFired with the next period after now. A missed
// period (the one after it is due too) follows the schedule's CatchUp; a job whose unique key
// is held is not enqueued (the period is skipped, as a duplicate Enqueue would be).
func (m *Machine) fireSchedules(now time.Time) {
	for _, name := range m.dueSchedules(now) {
		s := m.scheds[name]
		period := s.Next
		next := s.next(now)
		var id uint64
		skip := SkipMissed
		if missed := !s.next(period).After(now); !missed || s.CatchUp != CatchUpSkip {
			nj := NewJob{Due: period, Target: s.Target, Payload: s.Payload, Opts: s.Opts}
			r, data, err := m.enqueueRecord(m.nextID, now, nj)
			switch held := m.heldAt(uniqueKey(&nj.Opts), now); {
			case err != nil:
				// SetSchedule checked the same job: only a RecordMax lowered since can refuse it.
				skip = SkipRefused
				m.cfg.Logger.Error("runner: a schedule's job is refused; the period is skipped", "schedule", name, "err", err)
			case held:
				skip = SkipHeld
				m.cfg.Logger.Info("runner: a schedule's unique key is held; the period is skipped", "schedule", name, "key", nj.Opts.Unique)
			default:
				m.applyAndAppend(r, data)
				id, skip = r.ID, NoSkip
			}
		}
		m.record(Record{Tag: TagScheduleFired, ID: id, At: now, Sched: SchedRecord{Name: name, Period: period, Next: next, Skip: skip}})
	}
}

// applySchedule applies a schedule record, live and in replay; it changes nothing on error.
func (m *Machine) applySchedule(r Record) error {
	if err := m.applyScheduleRecord(r); err != nil {
		return err
	}
	m.schedWake = m.scheduleWakeScan()
	return nil
}

func (m *Machine) applyScheduleRecord(r Record) error {
	sr := r.Sched
	s := m.scheds[sr.Name]
	switch r.Tag {
	case TagScheduleSet:
		next, err := ParseSpec(sr.Spec, sr.Anchor)
		if err != nil {
			return err
		}
		if s != nil && !s.Last.IsZero() && !sr.Next.After(s.Last) {
			return fmt.Errorf("schedule %q set with next %v, not after its last period %v", sr.Name, sr.Next, s.Last)
		}
		if s == nil {
			if len(m.scheds) >= SchedulesMax {
				return fmt.Errorf("schedule %q beyond %d schedules", sr.Name, SchedulesMax)
			}
			s = &sched{Schedule: Schedule{Name: sr.Name}}
			m.scheds[sr.Name] = s
		}
		s.next = next
		s.Spec, s.Target, s.Payload, s.Opts, s.CatchUp = sr.Spec, r.Target, append([]byte(nil), r.Payload...), r.Opts, sr.CatchUp
		s.Anchor, s.Next = sr.Anchor, sr.Next
	case TagScheduleRemoved:
		if s == nil {
			return fmt.Errorf("removal of unknown schedule %q", sr.Name)
		}
		delete(m.scheds, sr.Name)
	default: // TagScheduleFired: apply routes only the schedule tags here (scheduleTag)
		if s == nil {
			return fmt.Errorf("period of unknown schedule %q", sr.Name)
		}
		if !sr.Period.Equal(s.Next) {
			return fmt.Errorf("schedule %q: period %v handled, its next period is %v", sr.Name, sr.Period, s.Next)
		}
		if r.ID != 0 {
			// The period's job is the Enqueued record right before, in the same batch.
			if j := m.job(r.ID); j == nil || r.ID != m.nextID-1 || !j.firstDue().Equal(sr.Period) {
				return fmt.Errorf("schedule %q: period %v names job %d, not the job just enqueued for it", sr.Name, sr.Period, r.ID)
			}
			s.Fired++
		}
		switch held := m.heldAt(uniqueKey(&s.Opts), r.At); {
		case sr.Skip == SkipMissed && (s.CatchUp != CatchUpSkip || s.next(sr.Period).After(r.At)):
			return fmt.Errorf("schedule %q: period %v skipped as missed at %v, but it was not (catch-up %v)", sr.Name, sr.Period, r.At, s.CatchUp)
		case sr.Skip == SkipHeld && !held:
			return fmt.Errorf("schedule %q: period %v skipped for a unique key no job holds", sr.Name, sr.Period)
		}
		s.Last, s.LastAt, s.LastJob, s.Next = sr.Period, r.At, r.ID, sr.Next
	}
	return nil
}

// heldAt reports whether unique key k is held at t: by a non-terminal job, or by a succeeded
// one whose window has not ended (holder, at a time given rather than the machine's now, so
// replay can check a record against the time it carries).
func (m *Machine) heldAt(k string, t time.Time) bool {
	if k == "" {
		return false
	}
	if _, ok := m.unique[k]; ok {
		return true
	}
	w, ok := m.windows[k]
	return ok && t.Before(w.until)
}

// loadSchedules installs a snapshot's schedules, parsing their specs again.
func (m *Machine) loadSchedules(ss []Schedule) error {
	for i := range ss {
		next, err := ParseSpec(ss[i].Spec, ss[i].Anchor)
		if err != nil {
			return err
		}
		m.scheds[ss[i].Name] = &sched{Schedule: ss[i], next: next}
	}
	m.schedWake = m.scheduleWakeScan()
	return nil
}

// Schedules returns copies of the schedules, by name.
func (m *Machine) Schedules() []Schedule {
	names := make([]string, 0, len(m.scheds))
	for name := range m.scheds {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]Schedule, len(names))
	for i, name := range names {
		out[i] = m.scheds[name].Schedule
		out[i].Payload = append([]byte(nil), out[i].Payload...)
	}
	return out
}

// checkSchedules states the invariants of the package comment above.
func (m *Machine) checkSchedules() error {
	if len(m.scheds) > SchedulesMax {
		return fmt.Errorf("runner: %d schedules, at most %d", len(m.scheds), SchedulesMax)
	}
	if w := m.scheduleWakeScan(); !w.Equal(m.schedWake) {
		return fmt.Errorf("runner: earliest next period %v cached as %v", w, m.schedWake)
	}
	names := make([]string, 0, len(m.scheds))
	for name := range m.scheds {
		names = append(names, name)
	}
	slices.Sort(names) // the first violation reported is always the same
	for _, name := range names {
		s := m.scheds[name]
		switch {
		case s.Name != name || s.next == nil:
			return fmt.Errorf("runner: schedule %q filed under %q (parsed %v)", s.Name, name, s.next != nil)
		case !s.Next.IsZero() && !s.Last.IsZero() && !s.Next.After(s.Last):
			return fmt.Errorf("runner: schedule %q: next period %v not after its last %v", name, s.Next, s.Last)
		case s.LastJob >= m.nextID:
			return fmt.Errorf("runner: schedule %q: last job %d, next id %d", name, s.LastJob, m.nextID)
		}
	}
	return nil
}
