package runner

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// A program can misuse schedules, kinds and job options: a malformed or impossible spec, a
// bad name or catch-up, a schedule whose job the runner would refuse, the removal of a
// schedule it never set, a job with options out of range, a kind registered twice, with a
// negative limit, or after the runner has started. On states the rapid machine builds, each
// must be refused with its documented error, naming what the program gave, and leave the
// runner exactly as it was. Between open and the first dispatch, Kinds must agree with the
// jobs recovered.

// badSpecs are malformed or impossible specs and a part of what their refusal must say.
var badSpecs = []struct{ spec, says string }{
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
	o    Opts
	says string
}{
	{Opts{Priority: PriorityMax + 1}, "priority"},
	{Opts{Priority: PriorityMin - 7}, "priority"},
	{Opts{AttemptsMax: -1}, "attempts"},
	{Opts{AttemptsMax: math.MaxInt32 + 1}, "attempts"},
	{Opts{Deadline: -time.Second}, "deadline"},
	{Opts{Unique: "k", UniqueFor: -time.Second}, "unique window"},
	{Opts{UniqueFor: time.Minute}, "without a unique key"},
	{Opts{Kind: "mail\x00x"}, "NUL"},
}

// refusedState is what a refused call must leave unchanged.
type refusedState struct {
	status Status
	scheds []Schedule
	kinds  []KindStatus
}

func refusedStateOf(e *Engine) refusedState {
	return refusedState{e.Status(), e.Schedules(), e.Kinds()}
}

// checkRefused checks one refusal by e: err wraps want, its text holds every part of says,
// and e's state is before's.
func checkRefused(t *rapid.T, e *Engine, call string, err, want error, before refusedState, says ...string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s returned %v, want an error wrapping %q", call, err, want)
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("%s was refused with %q, which does not name %q", call, err, s)
		}
	}
	if after := refusedStateOf(e); !reflect.DeepEqual(after, before) {
		t.Fatalf("%s was refused but changed the runner: %+v, then %+v", call, before, after)
	}
}

func TestScheduleMisuseIsRefused(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rm := &runnerMachine{}
		rm.init(t)
		t.Repeat(map[string]func(*rapid.T){
			"Enqueue":        rm.Enqueue,
			"AttemptDone":    rm.AttemptDone,
			"Advance":        rm.Advance,
			"Commit":         rm.Commit,
			"SetSchedule":    rm.SetSchedule,
			"RemoveSchedule": rm.RemoveSchedule,
			"Misuse":         func(t *rapid.T) { probeSchedules(t, rm) },
			"Kinds": func(t *rapid.T) {
				if rapid.IntRange(0, 3).Draw(t, "rare") != 3 { // an open of a copy costs the most
					t.Skip("rare action not drawn")
				}
				probeKinds(t, rm)
			},
			"": func(t *rapid.T) {},
		})
	})
}

// probeSchedules makes, on the dispatching engine, a late registration, bad schedules, the
// removal of an unknown one and a job with bad options, each refused without a change.
func probeSchedules(t *rapid.T, rm *runnerMachine) {
	e, now := rm.w.e, rm.w.now
	before := refusedStateOf(e)
	kind := rapid.SampledFrom([]string{"email", "sms", "bulk"}).Draw(t, "kind")
	err := e.Register(KindConfig{Name: kind})
	checkRefused(t, e, "registering kind "+kind+" after dispatching began", err, ErrInvalidConfig, before, strconv.Quote(kind), "after dispatching")
	// A name the program uses (a refused change must keep the schedule as it was) or a new one.
	name := "p" + strconv.Itoa(rapid.IntRange(1, 3).Draw(t, "name"))
	if s := e.Schedules(); len(s) > 0 && rapid.Bool().Draw(t, "usedName") {
		name = rapid.SampledFrom(s).Draw(t, "used").Name
	}
	ok := func(ns NewSchedule) NewSchedule {
		if ns.Target == "" {
			ns.Target = "t1"
		}
		ns.Payload = []byte("probe")
		return ns
	}
	bs := rapid.SampledFrom(badSpecs).Draw(t, "badSpec")
	bo := rapid.SampledFrom(badOpts).Draw(t, "badOpts")
	c, err := rm.w.cfg.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	type probe struct {
		ns   NewSchedule
		want error
		says []string
	}
	probes := []probe{
		{ok(NewSchedule{Name: name, Spec: bs.spec}), ErrSchedule, []string{strconv.Quote(bs.spec), bs.says, strconv.Quote(name)}},
		{ok(NewSchedule{Name: strings.Repeat("n", NameMax+rapid.IntRange(1, 50).Draw(t, "longName")), Spec: "@every 10s"}), ErrSchedule, []string{"at most 1024"}},
		{ok(NewSchedule{Name: name, Spec: "@every 10s", CatchUp: CatchUp(rapid.IntRange(2, 255).Draw(t, "catchUp"))}), ErrSchedule, []string{"catch-up", strconv.Quote(name)}},
		{ok(NewSchedule{Name: name, Spec: "@every 10s", Opts: bo.o}), ErrJob, []string{bo.says, strconv.Quote(name)}},
		{ok(NewSchedule{Name: name, Spec: "@every 10s" + strings.Repeat(" ", c.RecordMax)}), ErrTooLarge, []string{"RecordMax"}},
	}
	if rapid.Bool().Draw(t, "emptyTarget") { // an empty target, in place of the options
		probes[3] = probe{NewSchedule{Name: name, Spec: "@every 10s", Payload: []byte("probe")}, ErrJob, []string{"empty target", strconv.Quote(name)}}
	}
	for _, p := range probes {
		_, err := e.SetSchedule(now, p.ns)
		checkRefused(t, e, fmt.Sprintf("SetSchedule(%.40q, spec %.40q)", p.ns.Name, p.ns.Spec), err, p.want, before, p.says...)
	}
	unknown := "gone-" + strconv.Itoa(rapid.IntRange(0, 99).Draw(t, "unknown"))
	_, err = e.RemoveSchedule(unknown)
	checkRefused(t, e, "RemoveSchedule("+unknown+")", err, ErrNoSchedule, before, strconv.Quote(unknown))
	_, _, err = e.EnqueueJob(now, NewJob{Target: "t1", Payload: []byte("probe"), Opts: bo.o})
	checkRefused(t, e, fmt.Sprintf("EnqueueJob with options %+v", bo.o), err, ErrJob, before, bo.says)
}

// probeKinds opens a copy of the disk without dispatching (where a program registers its
// kinds), checks Kinds against the recovered jobs, then registers a kind twice and one with
// a negative limit, each of which must be refused.
func probeKinds(t *rapid.T, rm *runnerMachine) {
	d, err := copyDisk(rm.w.d)
	if err != nil {
		t.Fatalf("copying the disk: %v", err)
	}
	cfg := rm.w.cfg
	cfg.Rand = rand.New(rand.NewSource(1))
	e, err := Open(d, journalName, cfg, rm.w.now)
	if err != nil {
		t.Fatalf("opening a copy: %v", err)
	}
	defer e.Close()
	waiting := map[string]int{}
	for _, j := range e.State().Jobs {
		if j.State == Waiting {
			waiting[j.Opts.Kind]++
		}
	}
	limits := map[string]int{}
	for _, k := range cfg.Kinds {
		limits[k.Name] = k.Limit
	}
	for _, k := range e.Kinds() {
		want, registered := limits[k.Name]
		registered = registered || !cfg.KindsOnly // without KindsOnly every kind runs, unlimited
		if k.Waiting != waiting[k.Name] || k.InFlight != 0 || k.Registered != registered || registered && k.Limit != want {
			t.Fatalf("Kinds before the first dispatch reports %+v; the journal holds %d waiting jobs of kind %q (registered %v, limit %d)",
				k, waiting[k.Name], k.Name, registered, want)
		}
	}
	before := refusedStateOf(e)
	name := rapid.SampledFrom(cfg.Kinds).Draw(t, "registered").Name
	err = e.Register(KindConfig{Name: name, Limit: rapid.IntRange(0, 2).Draw(t, "limit")})
	checkRefused(t, e, "registering kind "+name+" twice", err, ErrInvalidConfig, before, strconv.Quote(name), "twice")
	limit := -1 - rapid.IntRange(0, 3).Draw(t, "negative")
	err = e.Register(KindConfig{Name: "probe", Limit: limit})
	checkRefused(t, e, "registering a kind with limit "+strconv.Itoa(limit), err, ErrInvalidConfig, before, `"probe"`, strconv.Itoa(limit))
}
