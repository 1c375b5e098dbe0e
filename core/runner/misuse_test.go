package runner

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/core/pool"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/sim/disk"
)

// A driver or a journal writer can have bugs. On states the rapid machine of rapid_test.go
// builds (enqueues, outcomes, cancels, retries, schedules, commits), a buggy driver's calls
// must be refused with their documented error (or ignored) and change nothing; an operator's
// read of the breakers must be sorted and consistent; and a fresh machine loaded from the
// live state must refuse, as ErrDecode or ErrFormat and without applying it, every record a
// writer's bug would leave (a record for a job in the wrong state, an attempt out of order, a
// unique key held twice, damaged fields).

func TestMisuseAndForgedRecordsAreRefused(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rm := &runnerMachine{}
		rm.init(t)
		t.Repeat(map[string]func(*rapid.T){
			"Enqueue":        rm.Enqueue,
			"EnqueueMany":    rm.EnqueueMany,
			"Cancel":         rm.Cancel,
			"Retry":          rm.Retry,
			"AttemptDone":    rm.AttemptDone,
			"Advance":        rm.Advance,
			"Commit":         rm.Commit,
			"SetSchedule":    rm.SetSchedule,
			"RemoveSchedule": rm.RemoveSchedule,
			"Misuse":         func(t *rapid.T) { probeMisuse(t, rm.w.e, rm.w.now) },
			"Breakers":       func(t *rapid.T) { checkBreakers(t, rm.w.e, rm.w.cfg) },
			"ForgeRecords":   func(t *rapid.T) { probeRecords(t, rm.w.e, rm.w.cfg, rm.w.now) },
			"":               rm.check,
		})
	})
}

// stateKey is what a refusal must leave as it was: the status and the state, encoded.
type stateKey struct {
	status string
	state  []byte
}

func stateKeyOf(e *Engine) stateKey {
	return stateKey{fmt.Sprintf("%+v", e.Status()), EncodeSnapshot(e.State())}
}

func (k stateKey) equal(o stateKey) bool {
	return k.status == o.status && bytes.Equal(k.state, o.state)
}

// misuse is one call a buggy driver makes: the call, the sentinel it must be refused with
// (nil: accepted and ignored), and a word its message must hold.
type misuse struct {
	what     string
	sentinel error
	word     string
	call     func() error
}

// probeMisuse makes two drawn misuse calls on e and checks each.
func probeMisuse(t *rapid.T, e *Engine, now time.Time) {
	st := e.State()
	past := time.Unix(0, math.MaxInt64).UTC().Add(time.Hour) // beyond the runner's TimeRange
	enq := func(nj NewJob) func() error {
		return func() error { _, _, err := e.EnqueueJob(now, nj); return err }
	}
	small := func(label string) int { return rapid.IntRange(0, 4).Draw(t, label) }
	ms := []misuse{
		{"EnqueueMany with no jobs", ErrJob, "no jobs", func() error { _, _, err := e.EnqueueMany(now, nil); return err }},
		{"EnqueueMany whose second job has no target", ErrJob, "job 1", func() error {
			_, _, err := e.EnqueueMany(now, []NewJob{{Target: "t1"}, {}})
			return err
		}},
		{"a job without a target", ErrJob, "target", enq(NewJob{Payload: []byte("x")})},
		{"a job due past the time range", ErrTime, "due", enq(NewJob{Target: "t1", Due: past})},
		{"a priority out of range", ErrJob, "priority", enq(NewJob{Target: "t1", Opts: Opts{Priority: PriorityMax + 1 + small("priority")}})},
		{"negative attempts", ErrJob, "attempts", enq(NewJob{Target: "t1", Opts: Opts{AttemptsMax: -1 - small("attempts")}})},
		{"a negative deadline", ErrJob, "deadline", enq(NewJob{Target: "t1", Opts: Opts{Deadline: -time.Second}})},
		{"a negative unique window", ErrJob, "unique window", enq(NewJob{Target: "t1", Opts: Opts{Unique: "u0", UniqueFor: -time.Second}})},
		{"a unique window without a key", ErrJob, "without a unique key", enq(NewJob{Target: "t1", Opts: Opts{UniqueFor: time.Second}})},
		{"a NUL in the unique key", ErrJob, "NUL", enq(NewJob{Target: "t1", Opts: Opts{Unique: "u\x00"}})},
		{"an outcome of an unknown attempt", nil, "", func() error {
			return e.AttemptDone(now, Token{ID: st.NextID + 1 + uint64(small("unknownID")), Attempt: 1}, Success())
		}},
		{"a cancel of an unknown job", ErrNotFound, "", func() error { _, err := e.Cancel(st.NextID + 7); return err }},
	}
	if e.Status().Dispatching {
		ms = append(ms, misuse{"a second Dispatch(on)", nil, "", func() error { return e.Dispatch(now, true) }})
	}
	for _, j := range st.Jobs {
		if j.State == Dead {
			id := j.ID
			ms = append(ms, misuse{"a retry past the time range", ErrTime, "retry", func() error { _, err := e.Retry(past, id); return err }})
			break
		}
	}
	for range 2 {
		m := rapid.SampledFrom(ms).Draw(t, "misuse")
		before := stateKeyOf(e)
		err := m.call()
		switch {
		case m.sentinel == nil && err != nil:
			t.Fatalf("%s was refused (%v); it must be ignored", m.what, err)
		case m.sentinel != nil && !errors.Is(err, m.sentinel):
			t.Fatalf("%s returned %v, not %v", m.what, err, m.sentinel)
		case err != nil && !strings.Contains(err.Error(), m.word):
			t.Fatalf("the refusal of %s does not say %q: %v", m.what, m.word, err)
		case !stateKeyOf(e).equal(before):
			t.Fatalf("%s changed the engine's state (or status) to:\n%+v\n%s", m.what, e.Status(), Describe(e.State(), epoch))
		}
	}
}

// checkBreakers reads e's breakers as an operator's inspection does: sorted by target, and
// each status consistent with its state.
func checkBreakers(t *rapid.T, e *Engine, cfg Config) {
	bs := e.Breakers()
	for i, b := range bs {
		bad := ""
		switch {
		case i > 0 && bs[i-1].Target >= b.Target:
			bad = "out of order"
		case b.State == breaker.Open && (b.Until.IsZero() || b.Failures != 0 || b.InFlight != 0):
			bad = "open with failures, probes or no end"
		case b.State == breaker.Closed && (!b.Until.IsZero() || b.InFlight != 0 || b.Failures >= cfg.Circuit.Threshold):
			bad = "closed with probes, an end or too many failures"
		case b.State == breaker.HalfOpen && (b.InFlight < 0 || b.InFlight > cfg.Circuit.Probes):
			bad = "half-open with probes out of range"
		}
		if bad != "" {
			t.Fatalf("Breakers lists %s %v %s: %+v", b.Target, b.State, bad, bs)
		}
	}
}

// probeRecords loads a fresh machine from e's live state (as open does after a compaction)
// and feeds it up to three drawn forged records; each must be refused, and the machine's state
// must be what it was.
func probeRecords(t *rapid.T, e *Engine, cfg Config, now time.Time) {
	c, err := cfg.WithDefaults()
	if err != nil {
		t.Fatalf("the world's config: %v", err)
	}
	mc := c.machine()
	mc.Rand = rand.New(rand.NewSource(1))
	st := e.State()
	fs := forgeRecords(rand.New(rand.NewSource(rapid.Int64().Draw(t, "forgeSeed"))), st, now)
	for range 3 {
		f := rapid.SampledFrom(fs).Draw(t, "forged")
		if f.lazy != nil {
			f.data = f.lazy()
		}
		m, err := New(mc)
		if err == nil && !f.first {
			base := st
			if f.base != nil {
				base = f.base()
			}
			err = m.Replay(TagSnapshot, true, EncodeSnapshot(base))
		}
		if err != nil {
			t.Fatalf("a fresh machine did not load the live state: %v", err)
		}
		var before []byte
		if !f.first {
			s, _ := m.Snapshot(math.MaxInt)
			before = EncodeSnapshot(s)
		}
		err = m.Replay(f.tag, f.snap, f.data)
		sentinel := f.sentinel
		if sentinel == nil {
			sentinel = ErrDecode
		}
		switch {
		case err == nil:
			t.Fatalf("replay applied %s", f.what)
		case !errors.Is(err, sentinel):
			t.Fatalf("replay refused %s with %v, which is not %v", f.what, err, sentinel)
		}
		if !f.first {
			s, _ := m.Snapshot(math.MaxInt)
			if !bytes.Equal(EncodeSnapshot(s), before) {
				t.Fatalf("replay refused %s but changed the state to:\n%s", f.what, Describe(s, epoch))
			}
		}
	}
}

// forgedRecord is one record replay must refuse: what it is, its tag, snapshot flag and data.
type forgedRecord struct {
	what     string
	tag      uint8
	snap     bool
	data     []byte
	lazy     func() []byte   // builds data when drawn (snapshots cost O(jobs) to encode)
	first    bool            // fed to a fresh machine as its first record (a forged snapshot)
	base     func() Snapshot // the state loaded first, when not the live one
	sentinel error           // ErrDecode unless said
}

// forgeRecords lists the forgeries the state st allows.
func forgeRecords(r *rand.Rand, st Snapshot, now time.Time) []forgedRecord {
	rec := func(what string, rc Record) forgedRecord {
		return forgedRecord{what: what, tag: rc.Tag, data: EncodeRecord(rc)}
	}
	// damaged rewrites the bytes at off of an encoded record.
	damaged := func(what string, rc Record, off int, b ...byte) forgedRecord {
		f := rec(what, rc)
		copy(f.data[off:], b)
		return f
	}
	// snap forges a snapshot of st, its state edited by state and its bytes by edit (each may
	// be nil); built only when drawn.
	snapOf := func(what string, state func(*Snapshot), first bool, edit func([]byte) []byte) forgedRecord {
		return forgedRecord{what: what, tag: TagSnapshot, snap: true, first: first, lazy: func() []byte {
			s := st
			if state != nil {
				s = cloneSnapshot(st)
				state(&s)
			}
			data := EncodeSnapshot(s)
			if edit != nil {
				data = edit(data)
			}
			return data
		}}
	}
	snap := func(what string, first bool, edit func([]byte) []byte) forgedRecord {
		return snapOf(what, nil, first, edit)
	}
	next := st.NextID
	older := snap("a snapshot in an older format", true, func(b []byte) []byte { b[0] = codecVersion - 1; return b })
	older.sentinel = ErrFormat
	fs := []forgedRecord{
		rec("an enqueue of an id after the next", Record{Tag: TagEnqueued, ID: next + 1 + uint64(r.Intn(4)), Due: now, Target: "t1"}),
		rec("a cancel of a job that does not exist", Record{Tag: TagCancelled, ID: next + uint64(r.Intn(4))}),
		damaged("a start of attempt 0", Record{Tag: TagStarted, ID: max(1, next-1), Attempt: 1, At: now}, 9, 0, 0, 0, 0),
		damaged("a release of attempt 0", Record{Tag: TagReleased, ID: max(1, next-1), Attempt: 1, At: now}, 9, 0, 0, 0, 0),
		damaged("an expiry for a permanent failure", Record{Tag: TagExpired, ID: max(1, next-1), Reason: Late}, 9, byte(Permanent)),
		damaged("a finish of attempt 0", Record{Tag: TagFinished, ID: max(1, next-1), Attempt: 1, Kind: OutcomeSucceeded, Next: Succeeded, At: now}, 9, 0, 0, 0, 0),
		damaged("a retryable success", Record{Tag: TagFinished, ID: max(1, next-1), Attempt: 1, Kind: OutcomeSucceeded, Next: Succeeded, At: now}, 14, 1),
		damaged("an enqueue with a priority out of range", Record{Tag: TagEnqueued, ID: next, Due: now, Target: "t1", Payload: []byte("p")},
			1+8+8+4+2+4+1, 0xff, 0xff, 0, 0),
		snap("a second snapshot", false, nil),
		older,
		snap("a snapshot with next id 0", true, func(b []byte) []byte { clear(b[1:9]); return b }),
		snap("a snapshot with trailing bytes", true, func(b []byte) []byte { return append(b, 0) }),
		snap("a snapshot claiming more jobs than it holds", true, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[17:], binary.LittleEndian.Uint32(b[17:])+1<<20)
			return b
		}),
	}
	newer := snap("a snapshot in a newer format", true, func(b []byte) []byte { b[0] = codecVersion + 1; return b })
	newer.sentinel = ErrFormat
	newerRec := damaged("a record in a newer format", Record{Tag: TagCancelled, ID: max(1, next-1)}, 0, codecVersion+1)
	newerRec.sentinel = ErrFormat
	noTag := rec("a record with tag 0", Record{Tag: TagCancelled, ID: max(1, next-1)})
	noTag.tag = 0
	fs = append(fs, newer, newerRec, noTag, forgedRecord{what: "an empty snapshot", tag: TagSnapshot, snap: true, first: true})
	if len(st.Jobs) > 0 {
		fs = append(fs,
			snap("a snapshot whose jobs lie past its next id", true, func(b []byte) []byte {
				binary.LittleEndian.PutUint64(b[1:], 1)
				return b
			}),
			// The first job starts at byte 21: id u64, state u8, reason u8, deferred bool.
			snap("a snapshot whose first job is dead for no reason", true, func(b []byte) []byte {
				b[29], b[30] = byte(Dead), byte(NoReason)
				return b
			}),
			snap("a snapshot whose first job's deferred byte is 7", true, func(b []byte) []byte { b[31] = 7; return b }),
			// Each job takes at least 84 bytes; the world's take more, so this cuts one short.
			snap("a snapshot cut inside its jobs", true, func(b []byte) []byte { return b[:min(len(b)-1, 21+84*len(st.Jobs))] }))
	}
	if next >= 2 {
		// Windows follow the jobs, then the schedules' count: a state without either ends in
		// two zero counts, which the forger replaces with windows of its own.
		windows := func(what string, count uint32, us ...UniqueWindow) forgedRecord {
			return snapOf(what, func(s *Snapshot) { s.Windows, s.Schedules = nil, nil }, true, func(b []byte) []byte {
				b = binary.LittleEndian.AppendUint32(b[:len(b)-8], count)
				for _, u := range us {
					b = binary.LittleEndian.AppendUint32(b, uint32(len(u.Kind)))
					b = append(b, u.Kind...)
					b = binary.LittleEndian.AppendUint32(b, uint32(len(u.Unique)))
					b = append(b, u.Unique...)
					b = binary.LittleEndian.AppendUint64(b, u.ID)
					b = binary.LittleEndian.AppendUint64(b, uint64(u.Until.UnixNano()))
				}
				return binary.LittleEndian.AppendUint32(b, 0)
			})
		}
		until := now.Add(time.Hour)
		fs = append(fs,
			windows("a unique window without a key", 1, UniqueWindow{ID: 1, Until: until}),
			windows("unique windows out of order", 2, UniqueWindow{Unique: "b", ID: 1, Until: until}, UniqueWindow{Unique: "a", ID: 1, Until: until}),
			windows("a snapshot claiming more windows than it holds", 1<<30))
	}
	var open []Job
	for _, j := range st.Jobs {
		if !j.State.Terminal() {
			open = append(open, j)
		}
	}
	for range min(4, len(st.Jobs)) {
		j := st.Jobs[r.Intn(len(st.Jobs))]
		switch j.State {
		case Waiting:
			fs = append(fs,
				rec(fmt.Sprintf("a start of job %d's attempt %d after %d", j.ID, j.Attempts+2, j.Attempts),
					Record{Tag: TagStarted, ID: j.ID, Attempt: j.Attempts + 2, At: now}),
				rec(fmt.Sprintf("a finish of waiting job %d", j.ID),
					Record{Tag: TagFinished, ID: j.ID, Attempt: j.Attempts + 1, Kind: OutcomeSucceeded, Next: Succeeded, At: now}))
		case Running:
			fs = append(fs,
				rec(fmt.Sprintf("a finish of job %d's attempt %d while %d runs", j.ID, j.Attempts+1, j.Attempts),
					Record{Tag: TagFinished, ID: j.ID, Attempt: j.Attempts + 1, Kind: OutcomeSucceeded, Next: Succeeded, At: now}),
				rec(fmt.Sprintf("a release of job %d's attempt %d while %d runs", j.ID, j.Attempts+1, j.Attempts),
					Record{Tag: TagReleased, ID: j.ID, Attempt: j.Attempts + 1, At: now}))
		default:
			fs = append(fs, rec(fmt.Sprintf("a deferral of %v job %d", j.State, j.ID),
				Record{Tag: TagDeferred, ID: j.ID, Due: now}))
		}
	}
	for _, j := range open {
		if j.Opts.Unique != "" {
			fs = append(fs, rec(fmt.Sprintf("an enqueue with job %d's unique key %q", j.ID, j.Opts.Unique),
				Record{Tag: TagEnqueued, ID: next, Due: now, Target: "t1", Opts: Opts{Kind: j.Opts.Kind, Unique: j.Opts.Unique}}))
			break
		}
	}
	for _, d := range st.Jobs {
		if d.State != Dead || len(open) == 0 {
			continue
		}
		// A retry of a dead job whose key an open job took meanwhile.
		o := open[r.Intn(len(open))]
		f := rec(fmt.Sprintf("a retry of dead job %d whose unique key job %d holds", d.ID, o.ID), Record{Tag: TagRetried, ID: d.ID, Due: now})
		f.base = func() Snapshot {
			s := cloneSnapshot(st)
			for i := range s.Jobs {
				if id := s.Jobs[i].ID; id == d.ID || id == o.ID {
					s.Jobs[i].Opts.Kind, s.Jobs[i].Opts.Unique = o.Opts.Kind, "forged"
				}
			}
			return s
		}
		fs = append(fs, f)
		break
	}
	if len(open) >= 2 {
		// Two open jobs holding one key, or one holding a key in another's window.
		a, b := open[r.Intn(len(open))], open[r.Intn(len(open))]
		if a.ID != b.ID {
			fs = append(fs, snapOf(fmt.Sprintf("a snapshot where jobs %d and %d hold one unique key", a.ID, b.ID), func(s *Snapshot) {
				for i := range s.Jobs {
					if id := s.Jobs[i].ID; id == a.ID || id == b.ID {
						s.Jobs[i].Opts.Kind, s.Jobs[i].Opts.Unique = a.Opts.Kind, "forged"
					}
				}
			}, true, nil))
		}
		fs = append(fs, snapOf(fmt.Sprintf("a snapshot where job %d holds a key in job %d's window", a.ID, b.ID), func(s *Snapshot) {
			for i := range s.Jobs {
				if s.Jobs[i].ID == a.ID {
					s.Jobs[i].Opts.Unique = "forged"
				}
			}
			s.Windows = append(s.Windows, UniqueWindow{Kind: a.Opts.Kind, Unique: "forged", ID: b.ID, Until: now.Add(time.Hour)})
			slices.SortFunc(s.Windows, func(x, y UniqueWindow) int {
				return cmp.Or(strings.Compare(x.Kind, y.Kind), strings.Compare(x.Unique, y.Unique))
			})
		}, true, nil))
	}
	return fs
}

// cloneSnapshot copies the parts of s a forgery edits.
func cloneSnapshot(s Snapshot) Snapshot {
	s.Jobs = slices.Clone(s.Jobs)
	s.Windows = slices.Clone(s.Windows)
	return s
}

// drawConfig draws a valid runner configuration as a program might write it.
func drawConfig(t *rapid.T) Config {
	base := time.Duration(rapid.IntRange(100, 2000).Draw(t, "baseMs")) * time.Millisecond
	cfg := Config{
		Policy: retry.Policy{Attempts: rapid.IntRange(1, 6).Draw(t, "attempts"), Base: base,
			Cap:      base * time.Duration(rapid.IntRange(2, 31).Draw(t, "capFactor")),
			Deadline: rapid.SampledFrom([]time.Duration{0, 20 * time.Second, 300 * time.Second}).Draw(t, "deadline")},
		Circuit: breaker.Circuit{Threshold: rapid.IntRange(1, 5).Draw(t, "threshold"),
			Window:   time.Duration(rapid.IntRange(5, 60).Draw(t, "windowS")) * time.Second,
			Cooldown: time.Duration(rapid.IntRange(1, 30).Draw(t, "cooldownS")) * time.Second,
			Probes:   rapid.IntRange(1, 2).Draw(t, "probes")},
		Capacity:     rapid.IntRange(1, 8).Draw(t, "capacity"),
		CompactBytes: rapid.SampledFrom([]int64{0, 2 << 10, 64 << 20}).Draw(t, "compactBytes"),
		Retention:    rapid.SampledFrom([]int{0, 1, 50}).Draw(t, "retention"),
		Grace:        time.Duration(rapid.IntRange(0, 30).Draw(t, "graceS")) * time.Second,
		RecordMax:    rapid.SampledFrom([]int{0, 4096, 1 << 20}).Draw(t, "recordMax"),
		AgeMax:       rapid.SampledFrom([]time.Duration{0, time.Minute}).Draw(t, "ageMax"),
		Kinds:        []KindConfig{{Name: "mail", Limit: rapid.IntRange(0, 2).Draw(t, "mailLimit")}},
	}
	return cfg
}

// badRunnerFields are the ways to break a runner.Config, each with the field its refusal
// must name.
var badRunnerFields = []struct {
	field string
	apply func(c *Config)
}{
	{"Policy.Attempts", func(c *Config) { c.Policy.Attempts = -1 - c.Policy.Attempts }},
	{"Policy.Base", func(c *Config) { c.Policy.Base = -1 - c.Policy.Base }},
	{"Policy.Cap", func(c *Config) { c.Policy.Cap = max(1, c.Policy.Base/2); c.Policy.Base = 2 * c.Policy.Cap }},
	{"Policy.Deadline", func(c *Config) { c.Policy.Deadline = -1 - c.Policy.Deadline }},
	{"Circuit.Threshold", func(c *Config) { c.Circuit.Threshold = -1 - c.Circuit.Threshold }},
	{"Circuit.Window", func(c *Config) { c.Circuit.Window = -1 - c.Circuit.Window }},
	{"Circuit.Cooldown", func(c *Config) { c.Circuit.Cooldown = -1 - c.Circuit.Cooldown }},
	{"Circuit.Probes", func(c *Config) { c.Circuit.Probes = -1 - c.Circuit.Probes }},
	{"Grace", func(c *Config) { c.Grace = -1 - c.Grace }},
	{"Capacity", func(c *Config) { c.Capacity = -1 - c.Capacity }},
	{"CompactBytes", func(c *Config) { c.CompactBytes = -1 - c.CompactBytes }},
	{"Retention", func(c *Config) { c.Retention = -1 - c.Retention }},
	{"RecordMax", func(c *Config) { c.RecordMax = 1023 }}, // below the least allowed
	{"SnapshotMax", func(c *Config) { c.SnapshotMax = max(c.RecordMax, 1024) - 1 }},
	{"AgeMax", func(c *Config) { c.AgeMax = -1 - c.AgeMax }},
	{"Limit", func(c *Config) { c.Kinds = append(slices.Clone(c.Kinds), KindConfig{Name: "bad", Limit: -1}) }},
}

// checkRefusal checks one refusal: it wraps sentinel, names field (as the error's typed Field
// when it has one, and part by part in its text), and nothing was touched.
func checkRefusal(t *rapid.T, call string, err, sentinel error, field string, untouched bool) {
	t.Helper()
	var ce *ConfigError
	if errors.As(err, &ce) && ce.Field != field {
		t.Fatalf("%s with a bad %s was refused naming %s", call, field, ce.Field)
	}
	for _, part := range strings.Split(field, ".") {
		if err == nil || !strings.Contains(err.Error(), part) {
			t.Fatalf("the refusal of %s with a bad %s does not name it: %v", call, field, err)
		}
	}
	switch {
	case !errors.Is(err, sentinel):
		t.Fatalf("%s with a bad %s was refused with %v, which does not wrap %v", call, field, err, sentinel)
	case !untouched:
		t.Fatalf("the refused %s with a bad %s touched the disk", call, field)
	}
}

// TestBadConfigIsRefusedNamingTheField: Open and Replay with one field of a drawn config out
// of range refuse it before touching the disk, wrapping ErrInvalidConfig and naming the field;
// so do the machine and its parts (runner.New, breaker.New, pool.New, retry's Validate).
func TestBadConfigIsRefusedNamingTheField(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawConfig(t)
		d := disk.New(rapid.Int64().Draw(t, "diskSeed"))
		if e, err := Open(d, journalName, cfg, epoch); err != nil {
			t.Fatalf("Open with a good config: %v", err)
		} else if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		for _, bad := range badRunnerFields {
			c := cfg
			bad.apply(&c)
			before := d.Ops()
			e, err := Open(d, journalName, c, epoch)
			if err == nil {
				e.Close()
				t.Fatalf("Open accepted a config with a bad %s", bad.field)
			}
			checkRefusal(t, "Open", err, ErrInvalidConfig, bad.field, d.Ops() == before)
			before = d.Ops()
			_, err = Replay(d, journalName, c)
			checkRefusal(t, "Replay", err, ErrInvalidConfig, bad.field, d.Ops() == before)
		}
		good, err := cfg.WithDefaults()
		if err != nil {
			t.Fatal(err)
		}
		good.Rand = rand.New(rand.NewSource(1))
		for _, b := range machineBads(t, good.machine()) {
			checkRefusal(t, "building the machine", b.build(), b.sentinel, b.field, true)
		}
	})
}

type machineBad struct {
	field    string
	sentinel error
	build    func() error
}

// machineBads are the machine's and its parts' configurations with one field out of range.
func machineBads(t *rapid.T, cfg MachineConfig) []machineBad {
	machine := func(edit func(c *MachineConfig)) func() error {
		return func() error {
			c := cfg
			edit(&c)
			_, err := New(c)
			return err
		}
	}
	small := rapid.IntRange(0, 2).Draw(t, "small")
	return []machineBad{
		{"Capacity", ErrInvalidConfig, machine(func(c *MachineConfig) { c.Capacity = -small })},
		{"RecordMax", ErrInvalidConfig, machine(func(c *MachineConfig) { c.RecordMax = -small })},
		{"Logger", ErrInvalidConfig, machine(func(c *MachineConfig) { c.Logger = nil })},
		{"Rand", ErrInvalidConfig, machine(func(c *MachineConfig) { c.Rand = nil })},
		{"Grace", ErrInvalidConfig, machine(func(c *MachineConfig) { c.Grace = -1 - c.Grace })},
		{"AgeMax", ErrInvalidConfig, machine(func(c *MachineConfig) { c.AgeMax = -1 - c.AgeMax })},
		{"Policy.Attempts", ErrInvalidConfig, machine(func(c *MachineConfig) { c.Policy.Attempts = -1 - c.Policy.Attempts })},
		{"Limit", ErrInvalidConfig, machine(func(c *MachineConfig) {
			c.Kinds = append(slices.Clone(c.Kinds), KindConfig{Name: "probe", Limit: -1 - small})
		})},
		{"Circuit.Probes", ErrInvalidConfig, machine(func(c *MachineConfig) { c.Circuit.Probes = -1 - c.Circuit.Probes })},
		{"Threshold", breaker.ErrInvalid, func() error {
			c := cfg.Circuit
			c.Threshold = -1 - c.Threshold
			_, err := breaker.New(breaker.Config{Circuit: c})
			return err
		}},
		{"Capacity", pool.ErrInvalidConfig, func() error { _, err := pool.New(pool.Config{Capacity: -small}); return err }},
		{"Cap", retry.ErrInvalid, func() error {
			p := cfg.Policy
			p.Cap = max(1, p.Base/2)
			p.Base = 2 * p.Cap
			return p.Validate()
		}},
	}
}

// TestOlderJournalIsRefusedUnchanged: a journal whose first record is in the format of an
// earlier sluice (as an upgrade finds it) is refused by Replay and Open as ErrFormat, Open
// saying nothing was changed, and the file's bytes stay what they were.
func TestOlderJournalIsRefusedUnchanged(t *testing.T) {
	d := disk.New(1)
	data := EncodeRecord(Record{Tag: TagEnqueued, ID: 1, Due: epoch, Target: "t1", Payload: []byte("older")})
	data[0] = codecVersion - 1
	j, err := journal.Open(d, journalName, journal.Config{}, func(journal.Record) error { return nil })
	if err == nil {
		_, err = j.Append(TagEnqueued, data)
	}
	if err == nil {
		_, err = j.Commit()
	}
	if err == nil {
		err = j.Close()
	}
	if err != nil {
		t.Fatalf("writing a journal of an older format: %v", err)
	}
	read := func() []byte {
		f, err := d.Open(journalName)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		size, err := f.Size()
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, size)
		if _, err := f.ReadAt(b, 0); err != nil && size > 0 {
			t.Fatal(err)
		}
		return b
	}
	before := read()
	cfg := Config{Policy: retry.DefaultPolicy(), Circuit: breaker.DefaultCircuit(), Capacity: 2, Rand: rand.New(rand.NewSource(1))}
	_, rerr := Replay(d, journalName, cfg)
	e, oerr := Open(d, journalName, cfg, epoch)
	if e != nil {
		e.Close()
	}
	switch after := read(); {
	case !errors.Is(rerr, ErrFormat):
		t.Errorf("Replay of a journal of an older format returned %v, not ErrFormat", rerr)
	case !errors.Is(oerr, ErrFormat) || !strings.Contains(oerr.Error(), "nothing was changed"):
		t.Errorf("Open of a journal of an older format returned %v, not ErrFormat saying nothing was changed", oerr)
	case !bytes.Equal(before, after):
		t.Errorf("refusing a journal of an older format changed its bytes (%d became %d)", len(before), len(after))
	}
}

// engineCall is one call a driver still holding an engine makes after it failed or closed: a
// handler returning, a client enqueueing, the stop flushing, compacting and closing.
type engineCall struct {
	what string
	call func(e *Engine) error
}

var heldEngineCalls = []engineCall{
	{"Enqueue", func(e *Engine) error { _, _, err := e.Enqueue(epoch, time.Time{}, "t1", []byte("after")); return err }},
	{"EnqueueJob and Commit", func(e *Engine) error {
		_, _, err := e.EnqueueJob(epoch, NewJob{Target: "t1", Payload: []byte("after")})
		if err == nil {
			_, err = e.Commit(epoch)
		}
		return err
	}},
	{"AttemptDone", func(e *Engine) error { return e.AttemptDone(epoch, Token{ID: 1, Attempt: 1}, Success()) }},
	{"Dispatch", func(e *Engine) error { return e.Dispatch(epoch, false) }},
	{"Commit", func(e *Engine) error { _, err := e.Commit(epoch); return err }},
	{"Compact", func(e *Engine) error { return e.Compact() }},
	{"Close", func(e *Engine) error { return e.Close() }},
}

// TestHeldEngineRefusesEveryCall: after a failed sync poisons an engine, or after it was
// closed, every call a driver still holding it makes is refused (ErrPoisoned, or
// journal.ErrClosed; a poisoned engine's refusal comes first), and nothing refused touches
// its disk; on a poisoned engine, nothing refused changes its state either. Close on a
// poisoned engine closes it.
func TestHeldEngineRefusesEveryCall(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(d *disk.Disk, e *Engine) error
		kept  bool // a refusal keeps the state
		want  func(what string) []error
	}{
		{"poisoned", poisonEngine, true, func(what string) []error {
			if what == "Close" {
				return []error{nil}
			}
			return []error{ErrPoisoned}
		}},
		{"closed", func(_ *disk.Disk, e *Engine) error { return e.Close() }, false, func(what string) []error {
			if what == "Enqueue" || what == "AttemptDone" || what == "Dispatch" {
				return []error{nil} // taken in memory: the Commit that would write it is refused
			}
			return []error{journal.ErrClosed}
		}},
		{"poisoned and closed", func(d *disk.Disk, e *Engine) error {
			if err := poisonEngine(d, e); err != nil {
				return err
			}
			return e.Close()
		}, true, func(string) []error { return []error{ErrPoisoned, journal.ErrClosed} }},
	} {
		for _, c := range heldEngineCalls {
			t.Run(tc.name+"/"+c.what, func(t *testing.T) {
				d := disk.New(1)
				e, err := Open(d, journalName, heldEngineConfig(), epoch)
				if err != nil {
					t.Fatal(err)
				}
				if err := tc.setup(d, e); err != nil {
					t.Fatal(err)
				}
				ops, before := d.Ops(), stateKeyOf(e)
				err = c.call(e)
				if !wrapsOneOf(err, tc.want(c.what)) {
					t.Fatalf("%s on a %s engine returned %v, want one of %v", c.what, tc.name, err, tc.want(c.what))
				}
				if err == nil {
					return
				}
				if d.Ops() != ops || tc.kept && !stateKeyOf(e).equal(before) {
					t.Fatalf("%s refused on a %s engine changed its state or its disk (%d operations)", c.what, tc.name, d.Ops()-ops)
				}
			})
		}
	}
}

func heldEngineConfig() Config {
	return Config{Policy: retry.DefaultPolicy(), Circuit: breaker.DefaultCircuit(), Capacity: 2, Rand: rand.New(rand.NewSource(1))}
}

// poisonEngine enqueues a job and fails the sync of the commit that writes it.
func poisonEngine(d *disk.Disk, e *Engine) error {
	if _, _, err := e.Enqueue(epoch, epoch, "t1", []byte("p")); err != nil {
		return err
	}
	d.FailNext(disk.OpSync, nil)
	if _, err := e.Commit(epoch); err == nil {
		return errors.New("a failed sync was not reported")
	}
	if !errors.Is(e.Poisoned(), ErrPoisoned) {
		return fmt.Errorf("a failed sync left the engine usable: %v", e.Poisoned())
	}
	return nil
}

// wrapsOneOf reports whether err wraps one of want (nil in want: err nil).
func wrapsOneOf(err error, want []error) bool {
	for _, w := range want {
		if w == nil && err == nil || w != nil && errors.Is(err, w) {
			return true
		}
	}
	return false
}
