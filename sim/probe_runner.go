package sim

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
	"time"

	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/core/pool"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim/disk"
	"github.com/sluicehq/sluice/sim/internal/lazyrand"
)

// The runner probe family: at some of the points where the world replays a copy of a node's
// disk (replayDue), the node's driver makes the calls a buggy driver would make, and checks
// that the engine refuses each with its documented error and that its state is unchanged
// ("a refused input changes nothing"); an operator reads the breakers (Breakers) and checks
// them; and a fresh machine is loaded from the live state and fed records a writer's bug
// would leave (a record for a job in the wrong state, an attempt out of order, a unique key
// held twice, damaged fields), each of which replay must refuse as ErrDecode (or ErrFormat)
// without applying it. Draws come from the node's own "probe" stream, so no other family's
// draws move.

// probeRunner runs the probes after a commit, one time in three of the replay points.
func (n *runnerNode) probeRunner() {
	w := n.w
	if n.rProbe == nil {
		n.rProbe = Stream(w.cfg.Seed, "probe/"+n.name)
	}
	r := n.rProbe
	if r.Intn(3) != 0 {
		return
	}
	st := n.e.State()
	n.checkBreakers()
	n.probeMisuse(r, st)
	n.probeRecords(r, st)
	n.probeConfig(r)
	if r.Intn(4) == 0 {
		n.probeOlderJournal(r)
	}
}

// stateKey is what a refusal must leave as it was: the status and the state, encoded (the
// codec is cheaper than a rendering; a failure renders both).
func (n *runnerNode) stateKey() stateKey {
	return stateKey{fmt.Sprintf("%+v", n.e.Status()), runner.EncodeSnapshot(n.e.State())}
}

// stateKey holds the two apart: formatting the snapshot in would copy MiBs of payload.
type stateKey struct {
	status string
	state  []byte
}

// keyed stores k in *at and returns it.
func keyed(at **stateKey, k stateKey) stateKey {
	*at = &k
	return k
}

func (k stateKey) equal(o stateKey) bool {
	return k.status == o.status && bytes.Equal(k.state, o.state)
}

// misuse is one call a buggy driver makes: the call, and the sentinel it must be refused with
// (nil: accepted and ignored), and a word its message must hold.
type misuse struct {
	what     string
	sentinel error
	word     string
	call     func() error
}

// probeMisuse makes two drawn misuse calls on the live engine and checks each.
func (n *runnerNode) probeMisuse(r *rand.Rand, st runner.Snapshot) {
	w := n.w
	now := w.now()
	past := time.Unix(0, math.MaxInt64).UTC().Add(time.Hour) // beyond the runner's TimeRange
	enq := func(nj runner.NewJob) func() error {
		return func() error { _, _, err := n.e.EnqueueJob(now, nj); return err }
	}
	ms := []misuse{
		{"EnqueueMany with no jobs", runner.ErrJob, "no jobs", func() error { _, _, err := n.e.EnqueueMany(now, nil); return err }},
		{"EnqueueMany whose second job has no target", runner.ErrJob, "job 1", func() error {
			_, _, err := n.e.EnqueueMany(now, []runner.NewJob{{Target: "t1"}, {}})
			return err
		}},
		{"a job without a target", runner.ErrJob, "target", enq(runner.NewJob{Payload: []byte("x")})},
		{"a job due past the time range", runner.ErrTime, "due", enq(runner.NewJob{Target: "t1", Due: past})},
		{"a priority out of range", runner.ErrJob, "priority", enq(runner.NewJob{Target: "t1", Opts: runner.Opts{Priority: runner.PriorityMax + 1 + r.Intn(5)}})},
		{"negative attempts", runner.ErrJob, "attempts", enq(runner.NewJob{Target: "t1", Opts: runner.Opts{AttemptsMax: -1 - r.Intn(5)}})},
		{"a negative deadline", runner.ErrJob, "deadline", enq(runner.NewJob{Target: "t1", Opts: runner.Opts{Deadline: -time.Second}})},
		{"a negative unique window", runner.ErrJob, "unique window", enq(runner.NewJob{Target: "t1", Opts: runner.Opts{Unique: "u0", UniqueFor: -time.Second}})},
		{"a unique window without a key", runner.ErrJob, "without a unique key", enq(runner.NewJob{Target: "t1", Opts: runner.Opts{UniqueFor: time.Second}})},
		{"a NUL in the unique key", runner.ErrJob, "NUL", enq(runner.NewJob{Target: "t1", Opts: runner.Opts{Unique: "u\x00"}})},
		{"an outcome of an unknown attempt", nil, "", func() error {
			return n.e.AttemptDone(now, runner.Token{ID: st.NextID + 1 + uint64(r.Intn(9)), Attempt: 1}, runner.Success())
		}},
		{"a cancel of an unknown job", runner.ErrNotFound, "", func() error { _, err := n.e.Cancel(st.NextID + 7); return err }},
	}
	if !n.stopping && n.e.Status().Dispatching {
		ms = append(ms, misuse{"a second Dispatch(on)", nil, "", func() error { return n.e.Dispatch(now, true) }})
	}
	for _, j := range st.Jobs {
		if j.State == runner.Dead {
			id := j.ID
			ms = append(ms, misuse{"a retry past the time range", runner.ErrTime, "retry", func() error { _, err := n.e.Retry(past, id); return err }})
			break
		}
	}
	var after *stateKey // the last call's, when it was keyed: nothing changes the engine since
	for range 2 {
		m := ms[r.Intn(len(ms))]
		var before stateKey
		if after != nil {
			before = *after
		} else {
			before = n.stateKey()
		}
		after = nil
		err := m.call()
		switch {
		case m.sentinel == nil && err != nil:
			w.chk.Fail(InvMachine, "%s: %s was refused (%v); it must be ignored", n.name, m.what, err)
		case m.sentinel != nil && !errors.Is(err, m.sentinel):
			w.chk.Fail(InvMachine, "%s: %s returned %v, not %v", n.name, m.what, err, m.sentinel)
		case err != nil && !strings.Contains(err.Error(), m.word):
			w.chk.Fail(InvMachine, "%s: the refusal of %s does not say %q: %v", n.name, m.what, m.word, err)
		case !keyed(&after, n.stateKey()).equal(before):
			w.chk.Fail(InvMachine, "%s: %s changed the engine's state (or status) to:\n%+v\n%s", n.name, m.what, n.e.Status(), runner.Describe(n.e.State(), Epoch))
		default:
			w.chk.Pass(InvMachine)
			verdict := "ignored"
			if err != nil {
				verdict = "refused: " + err.Error()
			}
			w.trace(n.name, "probe: "+m.what+" "+verdict)
			continue
		}
		return
	}
}

// checkBreakers reads the engine's breakers as an operator's inspection does and checks them:
// sorted by target, and each status consistent with its state.
// It traces them.
func (n *runnerNode) checkBreakers() {
	w := n.w
	bs := n.e.Breakers()
	var open []string
	for i, b := range bs {
		bad := ""
		switch {
		case i > 0 && bs[i-1].Target >= b.Target:
			bad = "out of order"
		case b.State == breaker.Open && (b.Until.IsZero() || b.Failures != 0 || b.InFlight != 0):
			bad = "open with failures, probes or no end"
		case b.State == breaker.Closed && (!b.Until.IsZero() || b.InFlight != 0 || b.Failures >= n.w.cfg.Threshold):
			bad = "closed with probes, an end or too many failures"
		case b.State == breaker.HalfOpen && (b.InFlight < 0 || b.InFlight > w.cfg.Probes):
			bad = "half-open with probes out of range"
		}
		if bad != "" {
			w.chk.Fail(InvMachine, "%s: Breakers lists %s %v %s: %+v", n.name, b.Target, b.State, bad, bs)
			return
		}
		switch b.State {
		case breaker.Closed:
			open = append(open, fmt.Sprintf("%s %v (%d failures)", b.Target, b.State, b.Failures))
		case breaker.HalfOpen:
			open = append(open, fmt.Sprintf("%s %v (%d probes)", b.Target, b.State, b.InFlight))
		default:
			open = append(open, fmt.Sprintf("%s %v until %s", b.Target, b.State, b.Until.Sub(Epoch)))
		}
	}
	w.chk.Pass(InvMachine)
	if len(open) > 0 {
		w.trace(n.name, "breakers: "+strings.Join(open, ", "))
	}
}

// machineConfig is the machine part of the node's config, with a stream of its own.
func (n *runnerNode) machineConfig() (runner.MachineConfig, bool) {
	c, err := n.cfg.WithDefaults()
	if err != nil {
		return runner.MachineConfig{}, false
	}
	return runner.MachineConfig{Policy: c.Policy, Circuit: c.Circuit, Capacity: c.Capacity, RecordMax: c.RecordMax,
		Grace: c.Grace, Logger: c.Logger, Rand: lazyrand.New(1), Decode: c.Decode, AgeMax: c.AgeMax,
		Kinds: c.Kinds, KindsOnly: c.KindsOnly}, true
}

// forgedRecord is one record replay must refuse: what it is, its tag, snapshot flag and data.
type forgedRecord struct {
	what     string
	tag      uint8
	snap     bool
	data     []byte
	lazy     func() []byte          // builds data when drawn (snapshots cost O(jobs) to encode)
	first    bool                   // fed to a fresh machine as its first record (a forged snapshot)
	base     func() runner.Snapshot // the state loaded first, when not the live one
	sentinel error                  // ErrDecode unless said
}

// probeRecords loads a fresh machine from the live state (as open does after a compaction)
// and feeds it up to three drawn forged records; each must be refused, and the machine's state
// must be what it was.
func (n *runnerNode) probeRecords(r *rand.Rand, st runner.Snapshot) {
	w := n.w
	cfg, ok := n.machineConfig()
	if !ok {
		return
	}
	fs := forgeRecords(r, st, w.now())
	for range 3 {
		f := fs[r.Intn(len(fs))]
		if f.lazy != nil {
			f.data = f.lazy()
		}
		m, err := runner.New(cfg)
		if err == nil && !f.first {
			base := st
			if f.base != nil {
				base = f.base()
			}
			err = m.Replay(runner.TagSnapshot, true, runner.EncodeSnapshot(base))
		}
		if err != nil {
			w.chk.Fail(InvReplayEqualsLive, "%s: a fresh machine did not load the live state: %v", n.name, err)
			return
		}
		var before []byte
		if !f.first {
			s, _ := m.Snapshot(math.MaxInt)
			before = runner.EncodeSnapshot(s)
		}
		err = m.Replay(f.tag, f.snap, f.data)
		sentinel := f.sentinel
		if sentinel == nil {
			sentinel = runner.ErrDecode
		}
		switch {
		case err == nil:
			w.chk.Fail(InvCorruptionRefused, "%s: replay applied %s", n.name, f.what)
			return
		case !errors.Is(err, sentinel):
			w.chk.Fail(InvCorruptionRefused, "%s: replay refused %s with %v, which is not %v", n.name, f.what, err, sentinel)
			return
		}
		if !f.first {
			s, _ := m.Snapshot(math.MaxInt)
			if !bytes.Equal(runner.EncodeSnapshot(s), before) {
				w.chk.Fail(InvCorruptionRefused, "%s: replay refused %s but changed the state to:\n%s", n.name, f.what, runner.Describe(s, Epoch))
				return
			}
		}
		w.chk.Pass(InvCorruptionRefused)
		w.trace(n.name, "probe: replay refused "+f.what+": "+err.Error())
	}
}

// forgeRecords lists the forgeries the state st allows.
func forgeRecords(r *rand.Rand, st runner.Snapshot, now time.Time) []forgedRecord {
	f := &forger{st: st, now: now}
	fs := f.damagedRecords(r)
	fs = append(fs, f.damagedSnapshots()...)
	return append(fs, f.outOfOrder(r)...)
}

// forger builds forged records of a state st at now.
type forger struct {
	st  runner.Snapshot
	now time.Time
}

func (f *forger) rec(what string, rc runner.Record) forgedRecord {
	return forgedRecord{what: what, tag: rc.Tag, data: runner.EncodeRecord(rc)}
}

// damaged rewrites the bytes at off of an encoded record.
func (f *forger) damaged(what string, rc runner.Record, off int, b ...byte) forgedRecord {
	fr := f.rec(what, rc)
	copy(fr.data[off:], b)
	return fr
}

// snapOf forges a snapshot of st, its state edited by state and its bytes by edit (each may
// be nil); built only when drawn.
func (f *forger) snapOf(what string, state func(*runner.Snapshot), first bool, edit func([]byte) []byte) forgedRecord {
	st := f.st
	return forgedRecord{what: what, tag: runner.TagSnapshot, snap: true, first: first, lazy: func() []byte {
		s := st
		if state != nil {
			s = cloneSnapshot(st)
			state(&s)
		}
		data := runner.EncodeSnapshot(s)
		if edit != nil {
			data = edit(data)
		}
		return data
	}}
}

func (f *forger) snap(what string, first bool, edit func([]byte) []byte) forgedRecord {
	return f.snapOf(what, nil, first, edit)
}

// damagedRecords are records and snapshots with a field or byte no writer leaves.
func (f *forger) damagedRecords(r *rand.Rand) []forgedRecord {
	now := f.now
	next := f.st.NextID
	older := f.snap("a snapshot in an older format", true, func(b []byte) []byte { b[0] = recordVersion - 1; return b })
	older.sentinel = runner.ErrFormat
	fs := []forgedRecord{
		f.rec("an enqueue of an id after the next", runner.Record{Tag: runner.TagEnqueued, ID: next + 1 + uint64(r.Intn(4)), Due: now, Target: "t1"}),
		f.rec("a cancel of a job that does not exist", runner.Record{Tag: runner.TagCancelled, ID: next + uint64(r.Intn(4))}),
		f.damaged("a start of attempt 0", runner.Record{Tag: runner.TagStarted, ID: max(1, next-1), Attempt: 1, At: now}, 9, 0, 0, 0, 0),
		f.damaged("a release of attempt 0", runner.Record{Tag: runner.TagReleased, ID: max(1, next-1), Attempt: 1, At: now}, 9, 0, 0, 0, 0),
		f.damaged("an expiry for a permanent failure", runner.Record{Tag: runner.TagExpired, ID: max(1, next-1), Reason: runner.Late}, 9, byte(runner.Permanent)),
		f.damaged("a finish of attempt 0", runner.Record{Tag: runner.TagFinished, ID: max(1, next-1), Attempt: 1, Kind: runner.OutcomeSucceeded, Next: runner.Succeeded, At: now}, 9, 0, 0, 0, 0),
		f.damaged("a retryable success", runner.Record{Tag: runner.TagFinished, ID: max(1, next-1), Attempt: 1, Kind: runner.OutcomeSucceeded, Next: runner.Succeeded, At: now}, 14, 1),
		f.damaged("an enqueue with a priority out of range", runner.Record{Tag: runner.TagEnqueued, ID: next, Due: now, Target: "t1", Payload: []byte("p")},
			1+8+8+4+2+4+1, 0xff, 0xff, 0, 0),
		f.snap("a second snapshot", false, nil),
		older,
		f.snap("a snapshot with next id 0", true, func(b []byte) []byte { clear(b[1:9]); return b }),
		f.snap("a snapshot with trailing bytes", true, func(b []byte) []byte { return append(b, 0) }),
		f.snap("a snapshot claiming more jobs than it holds", true, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[17:], binary.LittleEndian.Uint32(b[17:])+1<<20)
			return b
		}),
	}
	newer := f.snap("a snapshot in a newer format", true, func(b []byte) []byte { b[0] = recordVersion + 1; return b })
	newer.sentinel = runner.ErrFormat
	newerRec := f.damaged("a record in a newer format", runner.Record{Tag: runner.TagCancelled, ID: max(1, next-1)}, 0, recordVersion+1)
	newerRec.sentinel = runner.ErrFormat
	noTag := f.rec("a record with tag 0", runner.Record{Tag: runner.TagCancelled, ID: max(1, next-1)})
	noTag.tag = 0
	fs = append(fs, newer, newerRec, noTag, forgedRecord{what: "an empty snapshot", tag: runner.TagSnapshot, snap: true, first: true})
	return fs
}

// damagedSnapshots are snapshots of the jobs and unique windows st holds, damaged.
func (f *forger) damagedSnapshots() []forgedRecord {
	st, now, next := f.st, f.now, f.st.NextID
	var fs []forgedRecord
	if len(st.Jobs) > 0 {
		fs = append(fs,
			f.snap("a snapshot whose jobs lie past its next id", true, func(b []byte) []byte {
				binary.LittleEndian.PutUint64(b[1:], 1)
				return b
			}),
			// The first job starts at byte 21: id u64, state u8, reason u8, deferred bool.
			f.snap("a snapshot whose first job is dead for no reason", true, func(b []byte) []byte {
				b[29], b[30] = byte(runner.Dead), byte(runner.NoReason)
				return b
			}),
			f.snap("a snapshot whose first job's deferred byte is 7", true, func(b []byte) []byte { b[31] = 7; return b }),
			// Each job takes at least 84 bytes; the world's take more, so this cuts one short.
			f.snap("a snapshot cut inside its jobs", true, func(b []byte) []byte { return b[:min(len(b)-1, 21+84*len(st.Jobs))] }))
	}
	if next >= 2 {
		// Windows follow the jobs, then the schedules' count: a state without either ends in
		// two zero counts, which the forger replaces with windows of its own.
		windows := func(what string, count uint32, us ...runner.UniqueWindow) forgedRecord {
			return f.snapOf(what, func(s *runner.Snapshot) { s.Windows, s.Schedules = nil, nil }, true, func(b []byte) []byte {
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
			windows("a unique window without a key", 1, runner.UniqueWindow{ID: 1, Until: until}),
			windows("unique windows out of order", 2, runner.UniqueWindow{Unique: "b", ID: 1, Until: until}, runner.UniqueWindow{Unique: "a", ID: 1, Until: until}),
			windows("a snapshot claiming more windows than it holds", 1<<30))
	}
	return fs
}

// outOfOrder are records a job's state forbids and unique keys held twice.
func (f *forger) outOfOrder(r *rand.Rand) []forgedRecord {
	st, now, next := f.st, f.now, f.st.NextID
	var fs []forgedRecord
	var open []runner.Job
	for _, j := range st.Jobs {
		if !j.State.Terminal() {
			open = append(open, j)
		}
	}
	for range min(4, len(st.Jobs)) {
		j := st.Jobs[r.Intn(len(st.Jobs))]
		switch j.State {
		case runner.Waiting:
			fs = append(fs,
				f.rec(fmt.Sprintf("a start of job %d's attempt %d after %d", j.ID, j.Attempts+2, j.Attempts),
					runner.Record{Tag: runner.TagStarted, ID: j.ID, Attempt: j.Attempts + 2, At: now}),
				f.rec(fmt.Sprintf("a finish of waiting job %d", j.ID),
					runner.Record{Tag: runner.TagFinished, ID: j.ID, Attempt: j.Attempts + 1, Kind: runner.OutcomeSucceeded, Next: runner.Succeeded, At: now}))
		case runner.Running:
			fs = append(fs,
				f.rec(fmt.Sprintf("a finish of job %d's attempt %d while %d runs", j.ID, j.Attempts+1, j.Attempts),
					runner.Record{Tag: runner.TagFinished, ID: j.ID, Attempt: j.Attempts + 1, Kind: runner.OutcomeSucceeded, Next: runner.Succeeded, At: now}),
				f.rec(fmt.Sprintf("a release of job %d's attempt %d while %d runs", j.ID, j.Attempts+1, j.Attempts),
					runner.Record{Tag: runner.TagReleased, ID: j.ID, Attempt: j.Attempts + 1, At: now}))
		default:
			fs = append(fs, f.rec(fmt.Sprintf("a deferral of %v job %d", j.State, j.ID),
				runner.Record{Tag: runner.TagDeferred, ID: j.ID, Due: now}))
		}
	}
	for _, j := range open {
		if j.Opts.Unique != "" {
			fs = append(fs, f.rec(fmt.Sprintf("an enqueue with job %d's unique key %q", j.ID, j.Opts.Unique),
				runner.Record{Tag: runner.TagEnqueued, ID: next, Due: now, Target: "t1", Opts: runner.Opts{Kind: j.Opts.Kind, Unique: j.Opts.Unique}}))
			break
		}
	}
	for _, d := range st.Jobs {
		if d.State != runner.Dead || len(open) == 0 {
			continue
		}
		// A retry of a dead job whose key an open job took meanwhile.
		o := open[r.Intn(len(open))]
		fr := f.rec(fmt.Sprintf("a retry of dead job %d whose unique key job %d holds", d.ID, o.ID), runner.Record{Tag: runner.TagRetried, ID: d.ID, Due: now})
		fr.base = func() runner.Snapshot {
			s := cloneSnapshot(st)
			for i := range s.Jobs {
				if id := s.Jobs[i].ID; id == d.ID || id == o.ID {
					s.Jobs[i].Opts.Kind, s.Jobs[i].Opts.Unique = o.Opts.Kind, "forged"
				}
			}
			return s
		}
		fs = append(fs, fr)
		break
	}
	if len(open) >= 2 {
		// Two open jobs holding one key, or one holding a key in another's window.
		a, b := open[r.Intn(len(open))], open[r.Intn(len(open))]
		if a.ID != b.ID {
			fs = append(fs, f.snapOf(fmt.Sprintf("a snapshot where jobs %d and %d hold one unique key", a.ID, b.ID), func(s *runner.Snapshot) {
				for i := range s.Jobs {
					if id := s.Jobs[i].ID; id == a.ID || id == b.ID {
						s.Jobs[i].Opts.Kind, s.Jobs[i].Opts.Unique = a.Opts.Kind, "forged"
					}
				}
			}, true, nil))
		}
		fs = append(fs, f.snapOf(fmt.Sprintf("a snapshot where job %d holds a key in job %d's window", a.ID, b.ID), func(s *runner.Snapshot) {
			for i := range s.Jobs {
				if s.Jobs[i].ID == a.ID {
					s.Jobs[i].Opts.Unique = "forged"
				}
			}
			s.Windows = append(s.Windows, runner.UniqueWindow{Kind: a.Opts.Kind, Unique: "forged", ID: b.ID, Until: now.Add(time.Hour)})
			slices.SortFunc(s.Windows, func(x, y runner.UniqueWindow) int {
				return cmp.Or(strings.Compare(x.Kind, y.Kind), strings.Compare(x.Unique, y.Unique))
			})
		}, true, nil))
	}
	return fs
}

// cloneSnapshot copies the parts of s a forgery edits.
func cloneSnapshot(s runner.Snapshot) runner.Snapshot {
	s.Jobs = slices.Clone(s.Jobs)
	s.Windows = slices.Clone(s.Windows)
	return s
}

// probeConfig builds the runner's machine and its parts with one drawn field out of range and
// checks the refusal names it (InvConfigRefused). All are pure: nothing can have been touched.
func (n *runnerNode) probeConfig(r *rand.Rand) {
	w := n.w
	cfg, ok := n.machineConfig()
	if !ok {
		return
	}
	type bad struct {
		field    string
		sentinel error
		build    func() error
	}
	machine := func(edit func(c *runner.MachineConfig)) func() error {
		return func() error {
			c := cfg
			edit(&c)
			_, err := runner.New(c)
			return err
		}
	}
	bads := []bad{
		{"Capacity", runner.ErrInvalidConfig, machine(func(c *runner.MachineConfig) { c.Capacity = -r.Intn(3) })},
		{"RecordMax", runner.ErrInvalidConfig, machine(func(c *runner.MachineConfig) { c.RecordMax = -r.Intn(3) })},
		{"Logger", runner.ErrInvalidConfig, machine(func(c *runner.MachineConfig) { c.Logger = nil })},
		{"Rand", runner.ErrInvalidConfig, machine(func(c *runner.MachineConfig) { c.Rand = nil })},
		{"Grace", runner.ErrInvalidConfig, machine(func(c *runner.MachineConfig) { c.Grace = -1 - c.Grace })},
		{"AgeMax", runner.ErrInvalidConfig, machine(func(c *runner.MachineConfig) { c.AgeMax = -1 - c.AgeMax })},
		{"Policy.Attempts", runner.ErrInvalidConfig, machine(func(c *runner.MachineConfig) { c.Policy.Attempts = -1 - c.Policy.Attempts })},
		{"Limit", runner.ErrInvalidConfig, machine(func(c *runner.MachineConfig) {
			c.Kinds = append(slices.Clone(c.Kinds), runner.KindConfig{Name: "probe", Limit: -1 - r.Intn(3)})
		})},
		{"Circuit.Probes", runner.ErrInvalidConfig, machine(func(c *runner.MachineConfig) { c.Circuit.Probes = -1 - c.Circuit.Probes })},
		{"Threshold", breaker.ErrInvalid, func() error {
			c := cfg.Circuit
			c.Threshold = -1 - c.Threshold
			_, err := breaker.New(breaker.Config{Circuit: c})
			return err
		}},
		{"Capacity", pool.ErrInvalidConfig, func() error { _, err := pool.New(pool.Config{Capacity: -r.Intn(3)}); return err }},
		{"Cap", retry.ErrInvalid, func() error {
			p := cfg.Policy
			p.Cap = max(1, p.Base/2)
			p.Base = 2 * p.Cap
			return p.Validate()
		}},
	}
	b := bads[r.Intn(len(bads))]
	err := b.build()
	if err == nil {
		w.chk.Fail(InvConfigRefused, "%s: a bad %s was accepted", n.name, b.field)
		return
	}
	w.trace(n.name, "probe: a bad "+b.field+" refused: "+err.Error())
	checkConfigRefusal(w, n.name, err, b.sentinel, b.field, "", true)
}

// probeOlderJournal writes, on a disk of its own, a journal whose first record is in the
// format of an earlier sluice (as an upgrade finds it), and checks that runner.Replay and
// runner.Open refuse it as ErrFormat, Open saying nothing was changed, and that the file's
// bytes are what they were.
func (n *runnerNode) probeOlderJournal(r *rand.Rand) {
	w := n.w
	d := disk.New(r.Int63())
	data := runner.EncodeRecord(runner.Record{Tag: runner.TagEnqueued, ID: 1, Due: w.now(), Target: "t1", Payload: []byte("older")})
	data[0] = recordVersion - 1
	j, err := journal.Open(d, journalName, journal.Config{}, func(journal.Record) error { return nil })
	if err == nil {
		_, err = j.Append(runner.TagEnqueued, data)
	}
	if err == nil {
		_, err = j.Commit()
	}
	if err == nil {
		err = j.Close()
	}
	if err != nil {
		w.chk.Fail(InvMachine, "%s: writing a journal of an older format on a faultless disk: %v", n.name, err)
		return
	}
	before, _ := readAll(d, journalName)
	cfg := n.cfg
	cfg.Rand = lazyrand.New(1)
	_, rerr := runner.Replay(d, journalName, cfg)
	e, oerr := runner.Open(d, journalName, cfg, w.now())
	if e != nil {
		e.Close()
	}
	after, _ := readAll(d, journalName)
	switch {
	case !errors.Is(rerr, runner.ErrFormat):
		w.chk.Fail(InvCorruptionRefused, "%s: Replay of a journal of an older format returned %v, not ErrFormat", n.name, rerr)
	case !errors.Is(oerr, runner.ErrFormat) || !strings.Contains(oerr.Error(), "nothing was changed"):
		w.chk.Fail(InvCorruptionRefused, "%s: Open of a journal of an older format returned %v, not ErrFormat saying nothing was changed", n.name, oerr)
	case !bytes.Equal(before, after):
		w.chk.Fail(InvCorruptionRefused, "%s: refusing a journal of an older format changed its bytes (%d became %d)", n.name, len(before), len(after))
	default:
		w.chk.Pass(InvCorruptionRefused)
		w.trace(n.name, "probe: a journal of an older format refused: "+oerr.Error())
	}
}
