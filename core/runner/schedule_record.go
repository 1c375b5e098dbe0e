package runner

import (
	"fmt"
	"time"
)

// Schedule record tags (numbered apart from the job records', which may grow).
const (
	TagScheduleSet     uint8 = 20
	TagScheduleRemoved uint8 = 21
	TagScheduleFired   uint8 = 22 // a period handled: the job just enqueued (or 0) and the next period
)

// Schedule record layouts (after | ver | id |; id is 0 except a ScheduleFired's job):
//
//	ScheduleSet      | name str | spec str | catch-up u8 | target str | payload bytes | opts |
//	                 | anchor time | next time | at time |
//	ScheduleRemoved  | name str |
//	ScheduleFired    | name str | skip u8 | period time | next time (absent: none) | at time |
//
// A snapshot ends with the schedules, by name:
//
//	| count u32 | count × (name str | spec str | catch-up u8 | target str | payload bytes | opts |
//	| anchor time | next time | last time | last at time | last job u64 | fired u64) |
//
// Every time here is written as "present u8 | [time]": zero times (no next period) are absent.

// SchedRecord holds the schedule fields of a schedule record.
type SchedRecord struct {
	Name    string
	Spec    string    // Set
	CatchUp CatchUp   // Set
	Anchor  time.Time // Set
	Period  time.Time // Fired
	Next    time.Time // Set, Fired (zero: the spec has no more periods)
	// Skip says why a Fired record enqueued no job (its id is 0); replay checks the first two
	// against the state, so a forged or damaged id cannot pass for a skip.
	Skip Skip // Fired
}

// Skip is why a period enqueued no job.
type Skip uint8

const (
	NoSkip      Skip = iota // the period enqueued the job the record names
	SkipMissed              // a missed period under CatchUpSkip
	SkipHeld                // the job's unique key was held
	SkipRefused             // the job was refused (a RecordMax lowered since the schedule was set)
)

func (s Skip) String() string {
	switch s {
	case NoSkip:
		return "-"
	case SkipMissed:
		return "missed"
	case SkipHeld:
		return "unique key held"
	case SkipRefused:
		return "refused"
	}
	return fmt.Sprintf("skip(%d)", uint8(s))
}

func scheduleTag(tag uint8) bool { return tag >= TagScheduleSet && tag <= TagScheduleFired }

func (r *Record) validateSchedule() error {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: tag %d: "+f, append([]any{ErrDecode, r.Tag}, args...)...)
	}
	s := r.Sched
	if s.Name == "" || len(s.Name) > NameMax {
		return bad("schedule name of %d bytes", len(s.Name))
	}
	switch r.Tag {
	case TagScheduleSet:
		switch {
		case r.ID != 0:
			return bad("id %d", r.ID)
		case s.CatchUp > CatchUpSkip:
			return bad("catch-up %d", s.CatchUp)
		case r.Target == "":
			return bad("empty target")
		case s.Next.IsZero():
			return bad("no next period")
		}
		if err := r.Opts.validate(); err != nil {
			return bad("%v", err)
		}
	case TagScheduleRemoved:
		if r.ID != 0 {
			return bad("id %d", r.ID)
		}
	case TagScheduleFired:
		switch {
		case !s.Next.IsZero() && !s.Next.After(s.Period):
			return bad("next period %v not after %v", s.Next, s.Period)
		case s.Skip > SkipRefused || (r.ID == 0) != (s.Skip != NoSkip):
			return bad("job %d with skip %v", r.ID, s.Skip)
		}
	}
	return nil
}

// schedTime writes a time that may be zero: a presence byte, then the time if present.
func (w *writer) schedTime(t time.Time) {
	w.bool(!t.IsZero())
	if !t.IsZero() {
		w.time(t)
	}
}

func (r *reader) schedTime() time.Time {
	if r.bool() {
		return r.time()
	}
	return time.Time{}
}

func (w *writer) scheduleRecord(r Record) {
	s := r.Sched
	w.str(s.Name)
	switch r.Tag {
	case TagScheduleSet:
		w.str(s.Spec)
		w.u8(uint8(s.CatchUp))
		w.str(r.Target)
		w.bytes(r.Payload)
		w.opts(r.Opts)
		w.schedTime(s.Anchor)
		w.schedTime(s.Next)
		w.schedTime(r.At)
	case TagScheduleFired:
		w.u8(uint8(s.Skip))
		w.schedTime(s.Period)
		w.schedTime(s.Next)
		w.schedTime(r.At)
	}
}

func (rd *reader) scheduleRecord(r *Record) {
	s := &r.Sched
	s.Name = rd.str()
	switch r.Tag {
	case TagScheduleSet:
		s.Spec = rd.str()
		s.CatchUp = CatchUp(rd.u8())
		r.Target = rd.str()
		r.Payload = rd.bytes()
		r.Opts = rd.opts()
		s.Anchor = rd.schedTime()
		s.Next = rd.schedTime()
		r.At = rd.schedTime()
	case TagScheduleFired:
		s.Skip = Skip(rd.u8())
		s.Period = rd.schedTime()
		s.Next = rd.schedTime()
		r.At = rd.schedTime()
	}
}

func (w *writer) schedules(ss []Schedule) {
	w.u32(uint32(len(ss)))
	for i := range ss {
		s := &ss[i]
		w.str(s.Name)
		w.str(s.Spec)
		w.u8(uint8(s.CatchUp))
		w.str(s.Target)
		w.bytes(s.Payload)
		w.opts(s.Opts)
		w.schedTime(s.Anchor)
		w.schedTime(s.Next)
		w.schedTime(s.Last)
		w.schedTime(s.LastAt)
		w.u64(s.LastJob)
		w.u64(s.Fired)
	}
}

func (rd *reader) schedules() []Schedule {
	n := rd.u32()
	// Each schedule takes at least 61 bytes: refuse counts the data cannot hold.
	if rd.err != nil || uint64(n) > uint64(len(rd.b))/61 {
		if rd.err == nil {
			rd.err = fmt.Errorf("%w: snapshot claims %d schedules in %d bytes", ErrDecode, n, len(rd.b))
		}
		return nil
	}
	var ss []Schedule
	for range n {
		var s Schedule
		s.Name = rd.str()
		s.Spec = rd.str()
		s.CatchUp = CatchUp(rd.u8())
		s.Target = rd.str()
		s.Payload = rd.bytes()
		s.Opts = rd.opts()
		s.Anchor = rd.schedTime()
		s.Next = rd.schedTime()
		s.Last = rd.schedTime()
		s.LastAt = rd.schedTime()
		s.LastJob = rd.u64()
		s.Fired = rd.u64()
		if rd.err != nil {
			return nil
		}
		ss = append(ss, s)
	}
	return ss
}

// validateSchedules checks a snapshot's schedules: by name, within bounds, specs that parse.
func (s *Snapshot) validateSchedules() error {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: snapshot: "+f, append([]any{ErrDecode}, args...)...)
	}
	if len(s.Schedules) > SchedulesMax {
		return bad("%d schedules, at most %d", len(s.Schedules), SchedulesMax)
	}
	for i := range s.Schedules {
		sc := &s.Schedules[i]
		switch {
		case sc.Name == "" || len(sc.Name) > NameMax:
			return bad("schedule name of %d bytes", len(sc.Name))
		case i > 0 && sc.Name <= s.Schedules[i-1].Name:
			return bad("schedule %q out of order", sc.Name)
		case sc.CatchUp > CatchUpSkip || sc.Target == "":
			return bad("schedule %q: catch-up %d, target %q", sc.Name, sc.CatchUp, sc.Target)
		case !sc.Next.IsZero() && !sc.Last.IsZero() && !sc.Next.After(sc.Last):
			return bad("schedule %q: next period %v not after its last %v", sc.Name, sc.Next, sc.Last)
		case sc.LastJob >= s.NextID:
			return bad("schedule %q: last job %d, next id %d", sc.Name, sc.LastJob, s.NextID)
		}
		if err := sc.Opts.validate(); err != nil {
			return bad("schedule %q: %v", sc.Name, err)
		}
		if _, err := ParseSpec(sc.Spec, sc.Anchor); err != nil {
			return bad("%v", err)
		}
	}
	return nil
}
