package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core/runner"
)

// The misuse family of schedules, kinds and job options: now and then a node's program makes
// the calls a buggy program would (a malformed or impossible spec, a bad name or catch-up, a
// schedule whose job the runner would refuse, the removal of a schedule it never set, a job
// with options out of range, a kind registered twice, with a negative limit, or after the
// runner has started) and the world checks that each is refused with the documented error,
// naming what the user gave, and that the runner's state is exactly what it was
// (config-refused). Before the first dispatch it also checks Kinds against the jobs the node
// recovered. Draws come from the node's own "probes/<node>" stream, so no other family's draws
// move; one open in four probes.

// badSpec is one malformed or impossible spec and what its refusal must say.
type badSpec struct {
	spec string
	says string // a part of the refusal's text, besides the spec itself
}

var badSpecs = []badSpec{
	{"@every 0s", "at least"},
	{"@every -10s", "at least"},
	{"@every 500ms", "at least"},
	{"@every soon", "time: invalid duration"},
	{"@every10s", `want "@every <duration>"`},
	{"@everyday", `want "@every <duration>"`},
	{"TZ=UTC */15 * * * * *", "time zones are not supported"},
	{"CRON_TZ=Europe/Paris 0 * * * *", "time zones are not supported"},
	{"* * * * * * *", "expected"},
	{"61 * * * *", "above maximum"},
	{"", "empty spec"},
	{"0 0 30 2 *", "has no period after"},      // February 30th: cron finds none
	{"@every 2500000h", "has no period after"}, // past the last time a record holds
}

// badOpts are job options out of range and the option their refusal must name.
var badOpts = []struct {
	o    runner.Opts
	says string
}{
	{runner.Opts{Priority: runner.PriorityMax + 1}, "priority"},
	{runner.Opts{Priority: runner.PriorityMin - 7}, "priority"},
	{runner.Opts{AttemptsMax: -1}, "attempts"},
	{runner.Opts{AttemptsMax: math.MaxInt32 + 1}, "attempts"},
	{runner.Opts{Deadline: -time.Second}, "deadline"},
	{runner.Opts{Unique: "k", UniqueFor: -time.Second}, "unique window"},
	{runner.Opts{UniqueFor: time.Minute}, "without a unique key"},
	{runner.Opts{Kind: "mail\x00x"}, "NUL"},
}

// probeStream is node n's stream of this family, made at its first open.
func (n *runnerNode) probeStream() *rand.Rand {
	if n.rSchedProbe == nil {
		n.rSchedProbe = Stream(n.w.cfg.Seed, "probes/"+n.name)
	}
	return n.rSchedProbe
}

// refusedState is what a refused call must leave unchanged.
type refusedState struct {
	status runner.Status
	scheds []runner.Schedule
	kinds  []runner.KindStatus
}

func stateOf(e *runner.Engine) refusedState {
	return refusedState{e.Status(), e.Schedules(), e.Kinds()}
}

// checkRefused checks one refusal by engine e: err wraps want, its text holds every part of
// says, and e's state is before's. It reports whether all held (a failure is reported).
func (n *runnerNode) checkRefused(e *runner.Engine, call string, err, want error, before refusedState, says ...string) bool {
	w := n.w
	if !errors.Is(err, want) {
		w.chk.Fail(InvConfigRefused, "%s: %s returned %v, want an error wrapping %q", n.name, call, err, want)
		return false
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			w.chk.Fail(InvConfigRefused, "%s: %s was refused with %q, which does not name %q", n.name, call, err, s)
			return false
		}
	}
	if after := stateOf(e); !reflect.DeepEqual(after, before) {
		w.chk.Fail(InvConfigRefused, "%s: %s was refused but changed the runner: %+v, then %+v", n.name, call, before, after)
		return false
	}
	w.chk.Pass(InvConfigRefused)
	return true
}

// probeKinds runs between open and the first dispatch (where a program registers its kinds):
// it checks Kinds against the recovered jobs, then registers a kind twice and one with a
// negative limit, each of which must be refused.
func (n *runnerNode) probeKinds(e *runner.Engine) {
	r := n.probeStream()
	if r.Intn(4) != 0 {
		return
	}
	w := n.w
	waiting := map[string]int{}
	for _, j := range e.State().Jobs {
		if j.State == runner.Waiting {
			waiting[j.Opts.Kind]++
		}
	}
	for _, k := range e.Kinds() {
		i := kindIndex(k.Name)
		registered, want := i >= 0, 0
		if registered {
			want = w.cfg.KindLimits[i]
		}
		if k.Waiting != waiting[k.Name] || k.InFlight != 0 || k.Registered != registered || registered && k.Limit != want {
			w.chk.Fail(InvMachine, "%s: Kinds before the first dispatch reports %+v; the journal holds %d waiting jobs of kind %q (registered %v, limit %d)",
				n.name, k, waiting[k.Name], k.Name, registered, want)
			return
		}
	}
	before := stateOf(e)
	name := kindNames[r.Intn(len(kindNames))]
	err := e.Register(runner.KindConfig{Name: name, Limit: r.Intn(3)})
	if !n.checkRefused(e, "registering kind "+name+" twice", err, runner.ErrInvalidConfig, before, strconv.Quote(name), "twice") {
		return
	}
	limit := -1 - r.Intn(4)
	err = e.Register(runner.KindConfig{Name: "probe", Limit: limit})
	if !n.checkRefused(e, "registering a kind with limit "+strconv.Itoa(limit), err, runner.ErrInvalidConfig, before, `"probe"`, strconv.Itoa(limit)) {
		return
	}
	w.trace(n.name, "probe: kinds checked; a kind registered twice and a negative limit refused")
}

// kindIndex is the index of name in kindNames, or -1.
func kindIndex(name string) int {
	for i, k := range kindNames {
		if k == name {
			return i
		}
	}
	return -1
}

// probeSchedules runs after the node registered its schedules at an open: a late
// registration, bad schedules, the removal of an unknown one and jobs with bad options, each
// refused without a change.
func (n *runnerNode) probeSchedules() {
	r := n.probeStream()
	if r.Intn(4) != 0 {
		return
	}
	w, e := n.w, n.e
	if e.Poisoned() != nil {
		return // a compaction at open was lost: the Node fails and the node restarts
	}
	before := stateOf(e)
	kind := kindNames[r.Intn(len(kindNames))]
	err := e.Register(runner.KindConfig{Name: kind})
	if !n.checkRefused(e, "registering kind "+kind+" after dispatching began", err, runner.ErrInvalidConfig, before, strconv.Quote(kind)) {
		return
	}
	// A name the node uses (a refused change must keep the schedule as it was) or a new one.
	name := "p" + strconv.Itoa(1+r.Intn(3))
	if len(n.scheds) > 0 && r.Intn(2) == 0 {
		name = n.scheds[r.Intn(len(n.scheds))].name
	}
	ok := func(ns runner.NewSchedule) runner.NewSchedule {
		if ns.Name == "" && ns.Spec == "" {
			ns.Name, ns.Spec = name, schedSpecs[r.Intn(len(schedSpecs))]
		}
		if ns.Target == "" {
			ns.Target = "t1"
		}
		ns.Payload = []byte("probe")
		return ns
	}
	type probe struct {
		ns   runner.NewSchedule
		want error
		says []string
	}
	bs := badSpecs[r.Intn(len(badSpecs))]
	bo := badOpts[r.Intn(len(badOpts))]
	probes := []probe{
		{ok(runner.NewSchedule{Name: name, Spec: bs.spec}), runner.ErrSchedule, []string{strconv.Quote(bs.spec), bs.says, strconv.Quote(name)}},
		{ok(runner.NewSchedule{Name: w.repeated('n', runner.NameMax+1+r.Intn(50)), Spec: "@every 10s"}), runner.ErrSchedule, []string{"at most"}},
		{ok(runner.NewSchedule{Name: name, Spec: "@every 10s", CatchUp: runner.CatchUp(2 + r.Intn(254))}), runner.ErrSchedule, []string{"catch-up", strconv.Quote(name)}},
		{ok(runner.NewSchedule{Opts: bo.o}), runner.ErrJob, []string{bo.says, strconv.Quote(name)}},
		{ok(runner.NewSchedule{Name: name, Spec: n.tooLongSpec()}), runner.ErrTooLarge, []string{"RecordMax"}},
	}
	if r.Intn(2) == 0 { // an empty target, in place of the options
		probes[3] = probe{runner.NewSchedule{Name: name, Spec: "@every 10s", Payload: []byte("probe")}, runner.ErrJob, []string{"empty target", strconv.Quote(name)}}
	}
	for _, p := range probes {
		_, err := e.SetSchedule(w.now(), p.ns)
		if !n.checkRefused(e, fmt.Sprintf("SetSchedule(%.40q, spec %.40q)", p.ns.Name, p.ns.Spec), err, p.want, before, p.says...) {
			return
		}
	}
	unknown := "gone-" + strconv.Itoa(r.Intn(100))
	if _, err := e.RemoveSchedule(unknown); !n.checkRefused(e, "RemoveSchedule("+unknown+")", err, runner.ErrNoSchedule, before, strconv.Quote(unknown)) {
		return
	}
	_, _, err = e.EnqueueJob(w.now(), runner.NewJob{Target: "t1", Payload: []byte("probe"), Opts: bo.o})
	if !n.checkRefused(e, fmt.Sprintf("EnqueueJob with options %+v", bo.o), err, runner.ErrJob, before, bo.says) {
		return
	}
	w.tracef(n.name, "probe: a late registration, %d bad schedules (spec %q), an unknown removal and options %+v refused, nothing changed",
		len(probes), bs.spec, bo.o)
	if r.Intn(2) == 0 {
		n.probeUnregistered()
	}
}

// retiredKind is a kind no node registers (a program that dropped it, or a typo).
const retiredKind = "retired"

// probeUnregistered enqueues a job of a kind the node does not register, as a client of an
// older program would: it must wait, never start, counted by Status().Unregistered and shown
// unregistered by Kinds; then the operator cancels it (a cancel the checker follows as any).
func (n *runnerNode) probeUnregistered() {
	w := n.w
	before := n.e.Status()
	if !n.enqueueOpts(w.loop.Now(), "t1", "p"+strconv.Itoa(n.id)+"-retired-"+strconv.FormatUint(before.NextID, 10), false, runner.Opts{Kind: retiredKind}) {
		return
	}
	st := n.e.Status()
	if st.NextID != before.NextID+1 {
		return // refused (traced by enqueueOpts)
	}
	id := before.NextID
	var ks runner.KindStatus
	for _, k := range n.e.Kinds() {
		if k.Name == retiredKind {
			ks = k
		}
	}
	if st.Unregistered != before.Unregistered+1 || ks.Name == "" || ks.Registered || ks.Waiting < 1 {
		w.chk.Fail(InvMachine, "%s: job %d of unregistered kind %q waits, but the status counts %d unregistered (%d before) and Kinds reports %+v",
			n.name, id, retiredKind, st.Unregistered, before.Unregistered, ks)
		return
	}
	w.chk.Pass(InvMachine)
	if _, err := n.propose(runner.Cancel{ID: id}, pendingCmd{kind: cmdCancel, id: id}); err != nil {
		w.chk.Fail(InvMachine, "%s: cancelling job %d of unregistered kind %q: %v", n.name, id, retiredKind, err)
		return
	}
	w.trace(n.name, "probe: job "+strconv.FormatUint(id, 10)+" of unregistered kind "+retiredKind+" waits unstarted; cancel id="+strconv.FormatUint(id, 10))
}

// tooLongSpec is a spec of RecordMax bytes and more (the trailing blanks), built once per
// RecordMax: it may be MiBs long.
func (n *runnerNode) tooLongSpec() string {
	if want := len("@every 10s") + n.cfg.RecordMax; len(n.longSpec) != want {
		n.longSpec = "@every 10s" + n.w.repeated(' ', n.cfg.RecordMax)
	}
	return n.longSpec
}
