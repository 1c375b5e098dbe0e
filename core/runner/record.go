package runner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// Record tags in the journal.
const (
	TagEnqueued  uint8 = 1
	TagStarted   uint8 = 2
	TagFinished  uint8 = 3
	TagDeferred  uint8 = 4
	TagCancelled uint8 = 5
	TagRetried   uint8 = 6
	TagExpired   uint8 = 7 // dead at admission (late or spent), no attempt ran
	TagSnapshot  uint8 = 8
	TagReleased  uint8 = 9  // a graceful stop gave the running attempt back: not counted
	TagSnoozed   uint8 = 10 // the handler snoozed: not counted, the job waits until a new due
	TagPaused    uint8 = 11 // a kind (Record.Target) paused: its jobs do not start
	TagResumed   uint8 = 12 // a paused kind resumed
)

// codecVersion is the first byte of every record and snapshot payload. Version 2 added the
// per-job fields (priority, attempts, deadline, kind, unique key) to Enqueued and to the
// snapshot's jobs; version 3 the unique window (UniqueFor) to them and the open windows to the
// snapshot, and the kind now chooses the handler; the schedule records and the snapshot's
// schedules came with it (schedule_record.go). An older payload is refused with ErrFormat,
// never read as version 3.
const codecVersion = 3

// ErrDecode is wrapped by every decode error.
var ErrDecode = errors.New("runner: bad record")

// ErrFormat is wrapped when a record or snapshot was written by a different record format
// (a journal of an older sluice): it is refused whole, never misread.
var ErrFormat = errors.New("runner: journal record format not supported")

// versionError is a payload of another record format; it wraps ErrFormat.
type versionError struct {
	v   uint8
	msg string
}

func (e *versionError) Error() string { return e.msg }
func (e *versionError) Unwrap() error { return ErrFormat }

// older reports whether err is a payload of an older record format (a journal of an earlier
// sluice, when it is the journal's first record).
func older(err error) bool {
	var ve *versionError
	return errors.As(err, &ve) && ve.v < codecVersion
}

// formatError names the version found and what the user can do.
func formatError(what string, v uint8) error {
	if v < codecVersion {
		return &versionError{v, fmt.Sprintf("%v: %s has format %d, this version reads format %d: finish its jobs with the sluice that wrote it (Drain until empty) or move the directory aside, then open again", ErrFormat, what, v, codecVersion)}
	}
	return &versionError{v, fmt.Sprintf("%v: %s has format %d, newer than this version's %d: open it with the newer sluice", ErrFormat, what, v, codecVersion)}
}

// Payload layouts (little-endian; str and bytes are a u32 length then the bytes; time is
// UnixNano as u64; every payload starts with version u8 = 3 and id u64):
//
//	Enqueued   | ver | id | due time | target str | payload bytes | priority i32 | attempts u32 |
//	           | deadline i64 ns | kind str | unique str | unique window i64 ns |
//	Started    | ver | id | attempt u32 | at time |
//	Finished   | ver | id | attempt u32 | kind u8 | retryable u8 | err str | next u8 | reason u8 | [due time if next=waiting] | at time |
//	Deferred   | ver | id | due time |
//	Cancelled  | ver | id |
//	Retried    | ver | id | due time |
//	Expired    | ver | id | reason u8 |
//	Released   | ver | id | attempt u32 | at time |
//	Snoozed    | ver | id | attempt u32 | at time | due time |
//	Snapshot   | ver | next id u64 | terminal seq u64 | count u32 | count × job |
//	  job      | id u64 | state u8 | reason u8 | deferred u8 | attempts u32 | first due | due |
//	           | terminal seq u64 | target str | payload bytes | last err str | priority i32 |
//	           | attempts max u32 | deadline i64 ns | kind str | unique str | unique window i64 ns |
//	           | history count u8 |
//	           | history count × (attempt u32 | start time | outcome u8 | [end time unless running] | err str) |
//	  then     | window count u32 | window count × (kind str | unique str | id u64 | until time) |
//	  then     | the schedules (schedule_record.go, which also lays out the schedule records) |
//
// Record is one journaled transition. Which fields a tag uses is fixed by encode; decode
// rejects anything encode would not write.
type Record struct {
	Tag       uint8
	ID        uint64
	Attempt   int         // Started, Finished, Released, Snoozed
	Due       time.Time   // Enqueued, Deferred, Retried, Snoozed; Finished when Next is Waiting
	Target    string      // Enqueued
	Payload   []byte      // Enqueued
	Kind      OutcomeKind // Finished
	Retryable bool        // Finished with OutcomeFailed
	Err       string      // Finished, empty on success
	Next      JobState    // Finished: Waiting, Succeeded or Dead
	Reason    Reason      // Finished and Expired when dead
	Opts      Opts        // Enqueued
	At        time.Time   // Started, Finished, Released, Snoozed: when (for the attempt history); ScheduleSet, ScheduleFired
	Sched     SchedRecord // the schedule records (schedule_record.go)
}

// validate states which field combinations encode writes.
func (r *Record) validate() error {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: tag %d: "+f, append([]any{ErrDecode, r.Tag}, args...)...)
	}
	if scheduleTag(r.Tag) {
		return r.validateSchedule()
	}
	if pauseTag(r.Tag) {
		if r.ID != 0 {
			return bad("id %d on a kind's record", r.ID)
		}
		if err := CheckName("kind", r.Target, false); err != nil {
			return bad("%v", err)
		}
		return nil
	}
	if r.ID < 1 {
		return bad("id 0")
	}
	switch r.Tag {
	case TagEnqueued:
		if err := r.Opts.validate(); err != nil {
			return bad("%v", err)
		}
	case TagDeferred, TagRetried, TagCancelled:
	case TagStarted, TagReleased, TagSnoozed:
		if r.Attempt < 1 || r.Attempt > math.MaxUint32 {
			return bad("attempt %d out of range", r.Attempt)
		}
	case TagExpired:
		if r.Reason != Late && r.Reason != Spent {
			return bad("expired with reason %v", r.Reason)
		}
	case TagFinished:
		if r.Attempt < 1 || r.Attempt > math.MaxUint32 {
			return bad("attempt %d out of range", r.Attempt)
		}
		ok := false
		switch r.Kind {
		case OutcomeSucceeded:
			ok = r.Next == Succeeded && r.Reason == NoReason && !r.Retryable && r.Err == ""
		case OutcomeFailed:
			if r.Retryable {
				ok = (r.Next == Waiting && r.Reason == NoReason) || (r.Next == Dead && (r.Reason == Spent || r.Reason == Late))
			} else {
				ok = r.Next == Dead && r.Reason == Permanent
			}
		case OutcomePanicked:
			ok = r.Next == Dead && r.Reason == Panic && !r.Retryable
		}
		if !ok {
			return bad("outcome %v retryable=%v err=%q next %v reason %v is not a transition", r.Kind, r.Retryable, r.Err, r.Next, r.Reason)
		}
	default:
		return bad("unknown tag")
	}
	return nil
}

// EncodeRecord returns the payload of r. An invalid record is misuse and panics.
func EncodeRecord(r Record) []byte { return appendRecord(make([]byte, 0, r.sizeMax()), r) }

// sizeMax bounds the bytes of r's payload, so an encoding buffer is allocated once.
func (r *Record) sizeMax() int {
	return 64 + len(r.Target) + len(r.Payload) + len(r.Err) + len(r.Opts.Kind) + len(r.Opts.Unique) + r.Opts.extLen()
}

// enqueuedLen is the length of an Enqueued record's payload as appendRecord writes it: version,
// id, due, target, payload and options (three fixed fields, two strings, the unique window).
func (r *Record) enqueuedLen() int {
	return 1 + 8 + 8 + 4 + len(r.Target) + 4 + len(r.Payload) + 4 + 4 + 8 + 4 + len(r.Opts.Kind) + 4 + len(r.Opts.Unique) + 8 + r.Opts.extLen()
}

// appendRecord appends the payload of r to b (EncodeRecord).
func appendRecord(b []byte, r Record) []byte {
	if err := r.validate(); err != nil {
		panic(fmt.Sprintf("runner: encode: %v", err))
	}
	w := writer{b: b}
	w.u8(codecVersion)
	w.u64(r.ID)
	switch r.Tag {
	case TagEnqueued:
		w.time(r.Due)
		w.str(r.Target)
		w.bytes(r.Payload)
		w.opts(r.Opts)
	case TagStarted, TagReleased, TagSnoozed:
		w.u32(uint32(r.Attempt))
		w.time(r.At)
		if r.Tag == TagSnoozed {
			w.time(r.Due)
		}
	case TagFinished:
		w.u32(uint32(r.Attempt))
		w.u8(uint8(r.Kind))
		w.bool(r.Retryable)
		w.str(r.Err)
		w.u8(uint8(r.Next))
		w.u8(uint8(r.Reason))
		if r.Next == Waiting {
			w.time(r.Due)
		}
		w.time(r.At)
	case TagDeferred, TagRetried:
		w.time(r.Due)
	case TagExpired:
		w.u8(uint8(r.Reason))
	case TagScheduleSet, TagScheduleRemoved, TagScheduleFired:
		w.scheduleRecord(r)
	case TagPaused, TagResumed:
		w.str(r.Target)
	}
	return w.b
}

// DecodeRecord parses a payload written by EncodeRecord for tag.
func DecodeRecord(tag uint8, data []byte) (Record, error) {
	var r Record
	err := decodeRecord(reader{b: data}, tag, &r)
	if r.Payload != nil {
		r.Payload = append([]byte(nil), r.Payload...)
	}
	return r, err
}

// decodeRecord is DecodeRecord over rd, whose settings say whether the payload may alias the
// data and whether names are interned (replay: see Machine.Replay). It decodes into *r in
// place (a Record is hundreds of bytes: replay reuses one rather than copy one per record).
func decodeRecord(rd reader, tag uint8, r *Record) error {
	*r = Record{Tag: tag}
	if tag == TagSnapshot || tag == 0 || (tag > TagResumed && !scheduleTag(tag)) {
		return fmt.Errorf("%w: tag %d is not a record", ErrDecode, tag)
	}
	if v := rd.u8(); v != codecVersion && rd.err == nil {
		return formatError(fmt.Sprintf("record (tag %d)", tag), v)
	}
	r.ID = rd.u64()
	switch tag {
	case TagEnqueued:
		if rd.enqueued(r) {
			break
		}
		r.Due = rd.time()
		r.Target = rd.name()
		r.Payload = rd.payload()
		r.Opts = rd.opts()
	case TagStarted, TagReleased, TagSnoozed:
		r.Attempt = int(rd.u32())
		r.At = rd.time()
		if tag == TagSnoozed {
			r.Due = rd.time()
		}
	case TagFinished:
		r.Attempt = int(rd.u32())
		r.Kind = OutcomeKind(rd.u8())
		r.Retryable = rd.bool()
		r.Err = rd.str()
		r.Next = JobState(rd.u8())
		r.Reason = Reason(rd.u8())
		if r.Next == Waiting {
			r.Due = rd.time()
		}
		r.At = rd.time()
	case TagDeferred, TagRetried:
		r.Due = rd.time()
	case TagExpired:
		r.Reason = Reason(rd.u8())
	case TagScheduleSet, TagScheduleRemoved, TagScheduleFired:
		rd.scheduleRecord(r)
	case TagPaused, TagResumed:
		r.Target = rd.name()
	}
	if err := rd.done(); err != nil {
		return err
	}
	return r.validate()
}

// Snapshot is the whole durable state (docs/journal.md); breakers are not part of it.
type Snapshot struct {
	NextID  uint64 // the id the next enqueue gets; ≥ 1
	TermSeq uint64 // the last terminal sequence number handed out
	Jobs    []Job  // ascending by id
	// Windows are the unique keys reserved after a success (Opts.UniqueFor), by (kind, key);
	// they outlive their job, which compaction may prune.
	Windows []UniqueWindow
	// Schedules are the periodic jobs' schedules, by name (schedule.go).
	Schedules []Schedule
	// Paused are the paused kinds, by name: written after the schedules only when there are
	// any, so a snapshot without is as it was before pausing existed.
	Paused []string
}

// UniqueWindow is a unique key (Kind, Unique) that job ID, succeeded, holds until Until.
type UniqueWindow struct {
	Kind, Unique string
	ID           uint64
	Until        time.Time
}

func (s *Snapshot) validate() error {
	if err := validateJobs(s.NextID, s.TermSeq, len(s.Jobs), func(i int) (uint64, string) {
		return s.Jobs[i].ID, s.Jobs[i].broken(s.TermSeq)
	}); err != nil {
		return err
	}
	return s.validateRest()
}

// validateJobs checks a snapshot's n jobs, job(i) the i-th's id and what is broken about it
// (its broken(termSeq)): ids ascending below nextID, and each job possible on its own.
// DecodeSnapshot and the machine's load share it.
func validateJobs(nextID, termSeq uint64, n int, job func(int) (uint64, string)) error {
	if nextID < 1 {
		return snapshotErr("next id 0")
	}
	var prev uint64
	for i := range n {
		id, why := job(i)
		if id <= prev || id >= nextID {
			return snapshotErr("job id %d out of order or ≥ next id %d", id, nextID)
		}
		if why != "" {
			return snapshotErr("%s", why)
		}
		prev = id
	}
	return nil
}

func snapshotErr(f string, args ...any) error {
	return fmt.Errorf("%w: snapshot: "+f, append([]any{ErrDecode}, args...)...)
}

// validateRest checks what a snapshot holds besides its jobs.
func (s *Snapshot) validateRest() error {
	for i, w := range s.Windows {
		if w.Unique == "" || w.ID < 1 || w.ID >= s.NextID {
			return snapshotErr("window %+v", w)
		}
		if i > 0 {
			if p := s.Windows[i-1]; p.Kind > w.Kind || (p.Kind == w.Kind && p.Unique >= w.Unique) {
				return snapshotErr("windows out of order at %d", i)
			}
		}
	}
	for i, k := range s.Paused {
		if err := CheckName("kind", k, false); err != nil || (i > 0 && s.Paused[i-1] >= k) {
			return snapshotErr("paused kind %q out of order or invalid", k)
		}
	}
	return s.validateSchedules()
}

// EncodeSnapshot returns the payload of s. An invalid snapshot is misuse and panics.
func EncodeSnapshot(s Snapshot) []byte {
	if err := s.validate(); err != nil {
		panic(fmt.Sprintf("runner: encode: %v", err))
	}
	var sched writer
	sched.schedules(s.Schedules)
	// Sized once: appending a snapshot of a million jobs would copy it about twenty times.
	w := writer{b: make([]byte, 0, encodedSize(&s)+len(sched.b))}
	w.u8(codecVersion)
	w.u64(s.NextID)
	w.u64(s.TermSeq)
	w.u32(uint32(len(s.Jobs)))
	for i := range s.Jobs {
		j := &s.Jobs[i]
		w.u64(j.ID)
		w.u8(uint8(j.State))
		w.u8(uint8(j.Reason))
		w.bool(j.Deferred)
		w.u32(uint32(j.Attempts))
		w.time(j.FirstDue)
		w.time(j.Due)
		w.u64(j.TermSeq)
		w.str(j.Target)
		w.bytes(j.Payload)
		w.str(j.LastErr)
		w.opts(j.Opts)
		w.u8(uint8(len(j.History)))
		for _, h := range j.History {
			w.u32(uint32(h.Attempt))
			w.time(h.Start)
			w.u8(uint8(h.Outcome))
			if h.Outcome != AttemptRunning {
				w.time(h.End)
			}
			w.str(h.Err)
		}
	}
	w.u32(uint32(len(s.Windows)))
	for _, u := range s.Windows {
		w.str(u.Kind)
		w.str(u.Unique)
		w.u64(u.ID)
		w.time(u.Until)
	}
	w.b = append(w.b, sched.b...)
	if len(s.Paused) > 0 {
		w.u32(uint32(len(s.Paused)))
		for _, k := range s.Paused {
			w.str(k)
		}
	}
	return w.b
}

// encodedSize is the length of EncodeSnapshot(s) but its schedules, as it writes them: the
// header, then per job 84 bytes and its strings and payload, per attempt 17 bytes, 8 more
// for an end, and its error, and per window 24 bytes and its key.
func encodedSize(s *Snapshot) int {
	n := 1 + 8 + 8 + 4 + 4
	for i := range s.Jobs {
		j := &s.Jobs[i]
		n += 84 + len(j.Target) + len(j.Payload) + len(j.LastErr) + len(j.Opts.Kind) + len(j.Opts.Unique) + j.Opts.extLen()
		for _, h := range j.History {
			n += 17 + len(h.Err)
			if h.Outcome != AttemptRunning {
				n += 8
			}
		}
	}
	for _, u := range s.Windows {
		n += 24 + len(u.Kind) + len(u.Unique)
	}
	return n
}

// DecodeSnapshot parses a payload written by EncodeSnapshot.
func DecodeSnapshot(data []byte) (Snapshot, error) {
	var s Snapshot
	err := decodeSnapshot(reader{b: data}, &s, func(n int) { s.Jobs = make([]Job, n) },
		func(i int, j *Job) { s.Jobs[i] = *j })
	if err != nil {
		return s, err
	}
	return s, s.validate()
}

// decodeSnapshot reads a snapshot's payload into s: it calls start with the number of jobs,
// then put with each job by index, decoded into a Job put must copy from (so the machine's
// load fills its own jobs in place); it validates nothing. With rd.alias, payloads are the bytes in place; with rd.names, targets and kinds
// are interned.
func decodeSnapshot(rd reader, s *Snapshot, start func(n int), put func(int, *Job)) error {
	if v := rd.u8(); v != codecVersion && rd.err == nil {
		return formatError("snapshot", v)
	}
	s.NextID = rd.u64()
	s.TermSeq = rd.u64()
	n := rd.u32()
	// Each job takes at least 84 bytes: refuse counts the data cannot hold before allocating.
	if rd.err == nil && uint64(n) > uint64(len(rd.b))/84 {
		return fmt.Errorf("%w: snapshot claims %d jobs in %d bytes", ErrDecode, n, len(rd.b))
	}
	if n > 0 && rd.err == nil {
		start(int(n))
		j := new(Job) // one for all: put copies from it
		for i := range int(n) {
			*j = Job{}
			j.ID = rd.u64()
			j.State = JobState(rd.u8())
			j.Reason = Reason(rd.u8())
			j.Deferred = rd.bool()
			j.Attempts = int(rd.u32())
			j.FirstDue = rd.time()
			j.Due = rd.time()
			j.TermSeq = rd.u64()
			j.Target = rd.name()
			j.Payload = rd.payload()
			j.LastErr = rd.str()
			j.Opts = rd.opts()
			if n := rd.u8(); n > 0 && rd.err == nil {
				j.History = make([]AttemptRecord, n)
				for k := range j.History {
					h := &j.History[k]
					h.Attempt = int(rd.u32())
					h.Start = rd.time()
					h.Outcome = AttemptOutcome(rd.u8())
					if h.Outcome != AttemptRunning {
						h.End = rd.time()
					}
					h.Err = rd.str()
				}
			}
			if rd.err != nil {
				break
			}
			put(i, j)
		}
	}
	// Each window takes at least 24 bytes (two length prefixes, id, until).
	if nw := rd.u32(); rd.err == nil && uint64(nw) > uint64(len(rd.b))/24 {
		return fmt.Errorf("%w: snapshot claims %d windows in %d bytes", ErrDecode, nw, len(rd.b))
	} else if nw > 0 && rd.err == nil { // a refused byte (a bool's) sets err but reads on
		s.Windows = make([]UniqueWindow, nw)
		for i := range s.Windows {
			u := &s.Windows[i]
			u.Kind, u.Unique, u.ID, u.Until = rd.str(), rd.str(), rd.u64(), rd.time()
		}
	}
	s.Schedules = rd.schedules()
	if len(rd.b) > 0 && rd.err == nil {
		// Each kind takes at least its 4-byte length.
		if n := rd.u32(); rd.err == nil && (n == 0 || uint64(n) > uint64(len(rd.b))/4) {
			return fmt.Errorf("%w: snapshot claims %d paused kinds in %d bytes", ErrDecode, n, len(rd.b))
		} else {
			for range n {
				s.Paused = append(s.Paused, rd.str())
			}
		}
	}
	return rd.done()
}

// norm drops the monotonic reading and location so live times equal replayed ones.
func norm(t time.Time) time.Time { return time.Unix(0, t.UnixNano()).UTC() }

// timeMin and timeMax bound the times a record can hold (UnixNano's range).
var (
	timeMin = time.Unix(0, math.MinInt64).UTC()
	timeMax = time.Unix(0, math.MaxInt64).UTC()
)

func inRange(t time.Time) bool { return !t.Before(timeMin) && !t.After(timeMax) }

type writer struct{ b []byte }

// optsExt is set in the attempts field (at most MaxInt32, so its top bit is free) when the
// options' extension follows the unique window: key, group, hold and timeout. Options without
// those fields are written as before the extension existed, byte for byte.
const optsExt = 1 << 31

// optsExtLen is the extension's length but its strings: two lengths, hold, timeout.
const optsExtLen = 4 + 4 + 1 + 8

func (w *writer) opts(o Opts) {
	w.u32(uint32(int32(o.Priority)))
	a := uint32(o.AttemptsMax)
	if o.ext() {
		a |= optsExt
	}
	w.u32(a)
	w.u64(uint64(o.Deadline))
	w.str(o.Kind)
	w.str(o.Unique)
	w.u64(uint64(o.UniqueFor))
	if o.ext() {
		w.str(o.Key)
		w.str(o.Group)
		w.bool(o.Hold)
		w.u64(uint64(o.Timeout))
	}
}

func (r *reader) opts() Opts {
	var o Opts
	o.Priority = int(int32(r.u32()))
	a := r.u32()
	o.AttemptsMax = int(a &^ optsExt)
	o.Deadline = time.Duration(int64(r.u64()))
	o.Kind = r.name()
	o.Unique = r.str()
	o.UniqueFor = time.Duration(int64(r.u64()))
	if a&optsExt != 0 {
		o.Key = r.name()
		o.Group = r.name()
		o.Hold = r.bool()
		o.Timeout = time.Duration(int64(r.u64()))
	}
	return o
}

// extLen is the length of o's extension as w.opts writes it (0 without one).
func (o *Opts) extLen() int {
	if !o.ext() {
		return 0
	}
	return optsExtLen + len(o.Key) + len(o.Group)
}

func (w *writer) u8(v uint8)   { w.b = append(w.b, v) }
func (w *writer) u32(v uint32) { w.b = binary.LittleEndian.AppendUint32(w.b, v) }
func (w *writer) u64(v uint64) { w.b = binary.LittleEndian.AppendUint64(w.b, v) }
func (w *writer) time(t time.Time) {
	w.u64(uint64(t.UnixNano()))
}
func (w *writer) bool(v bool) {
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}
func (w *writer) bytes(p []byte) {
	w.u32(uint32(len(p)))
	w.b = append(w.b, p...)
}
func (w *writer) str(s string) {
	w.u32(uint32(len(s)))
	w.b = append(w.b, s...)
}

// reader reads little-endian fields; the first short read sets err and later reads return zero.
type reader struct {
	b   []byte
	err error
	// alias: payload returns the bytes in place (the caller copies what it keeps).
	alias bool
	// names interns targets and kinds (nil: none).
	names *interner
}

func (r *reader) take(n uint64) []byte {
	// Compared as uint64: a u32 length from the data must not turn negative as an int.
	if n > uint64(len(r.b)) {
		return r.short(n)
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

// short sets err for a read of n bytes past the end, and empties b so later reads are short
// too (and return zero) without each checking err; kept out of the readers so they inline.
//
//go:noinline
func (r *reader) short(n uint64) []byte {
	if r.err == nil {
		r.err = fmt.Errorf("%w: short: need %d bytes, have %d", ErrDecode, n, len(r.b))
		r.b = nil
	}
	return nil
}

func (r *reader) u8() uint8 {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *reader) u32() uint32 {
	if p := r.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if p := r.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (r *reader) time() time.Time { return time.Unix(0, int64(r.u64())).UTC() }

func (r *reader) bool() bool {
	v := r.u8()
	if v > 1 && r.err == nil {
		r.err = fmt.Errorf("%w: bool byte %d", ErrDecode, v)
	}
	return v == 1
}

func (r *reader) bytes() []byte {
	p := r.take(uint64(r.u32()))
	if p == nil {
		return nil
	}
	return append([]byte(nil), p...)
}

func (r *reader) str() string { return string(r.take(uint64(r.u32()))) }

// payload is bytes, or with alias set the bytes in place (nil when empty, as bytes).
func (r *reader) payload() []byte {
	if !r.alias {
		return r.bytes()
	}
	if p := r.take(uint64(r.u32())); len(p) > 0 {
		return p
	}
	return nil
}

// namesMax bounds the names a reader interns, so the table stays small whatever the journal.
const namesMax = 4096

// interner holds one string per distinct name, and the names last found in a small table
// indexed by a hash of three bytes: records that cycle over a few targets cost a comparison,
// not a map lookup (a third of a pending job's decoding before).
type interner struct {
	m      map[string]string
	recent [recentNames]string
}

const (
	recentBits  = 6
	recentNames = 1 << recentBits
)

// name is str for a target or kind: with names set, one string per distinct name (a replay of
// a million jobs of one target holds one copy of it, and converts it once).
func (r *reader) name() string {
	if r.names == nil {
		return r.str()
	}
	return r.names.intern(r.take(uint64(r.u32())))
}

// nameOf is name for the bytes b, already taken.
func (r *reader) nameOf(b []byte) string {
	if r.names == nil {
		return strOf(b)
	}
	return r.names.intern(b)
}

// strOf is string(b) without the runtime call for an empty b (most kinds and keys are).
func strOf(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return string(b)
}

func (in *interner) intern(b []byte) string {
	n := len(b)
	if n == 0 {
		return ""
	}
	h := uint32(b[0]) | uint32(b[n/2])<<8 | uint32(b[n-1])<<16 | uint32(n)<<24
	slot := &in.recent[h*0x9E3779B1>>(32-recentBits)]
	if string(b) == *slot {
		return *slot
	}
	s, ok := in.m[string(b)]
	if !ok {
		s = string(b)
		if len(in.m) < namesMax {
			in.m[s] = s
		}
	}
	*slot = s
	return s
}

// enqueued decodes the fields of an Enqueued record after its id, as decodeRecord's reads do,
// with one bounds check per field of variable length instead of one per read (replay decodes
// millions). It reports false, having changed nothing, unless the data holds exactly those
// fields; decodeRecord's reads then say what is wrong.
func (r *reader) enqueued(rec *Record) bool {
	le := binary.LittleEndian
	b := r.b
	if r.err != nil || len(b) < 12 { // due, target's length
		return false
	}
	due := int64(le.Uint64(b))
	n := uint64(le.Uint32(b[8:]))
	if b = b[12:]; n+4 > uint64(len(b)) { // target, payload's length
		return false
	}
	target := b[:n]
	n, b = uint64(le.Uint32(b[n:])), b[n+4:]
	if n+20 > uint64(len(b)) { // payload, priority, attempts, deadline, kind's length
		return false
	}
	payload := b[:n]
	b = b[n:]
	prio, attempts, deadline := le.Uint32(b), le.Uint32(b[4:]), le.Uint64(b[8:])
	if attempts&optsExt != 0 {
		return false // the options' extension: decodeRecord's reads take it
	}
	if n, b = uint64(le.Uint32(b[16:])), b[20:]; n+4 > uint64(len(b)) { // kind, unique's length
		return false
	}
	kind := b[:n]
	n, b = uint64(le.Uint32(b[n:])), b[n+4:]
	if n+8 != uint64(len(b)) { // unique, unique window, nothing after
		return false
	}
	unique, uniqueFor := b[:n], le.Uint64(b[n:])
	r.b = b[len(b):]
	rec.Due = time.Unix(0, due).UTC()
	rec.Target = r.nameOf(target)
	switch {
	case len(payload) == 0: // nil, as payload and bytes read it
	case r.alias:
		rec.Payload = payload
	default:
		rec.Payload = append([]byte(nil), payload...)
	}
	o := &rec.Opts
	o.Priority, o.AttemptsMax, o.Deadline = int(int32(prio)), int(attempts), time.Duration(int64(deadline))
	o.Kind, o.Unique, o.UniqueFor = r.nameOf(kind), strOf(unique), time.Duration(int64(uniqueFor))
	return true
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", ErrDecode, len(r.b))
	}
	return r.err
}
