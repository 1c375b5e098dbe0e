package sim

import (
	"math"
	"strconv"

	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim/internal/runview"
)

// Periodic jobs in the world. Each runner node draws up to three schedules (intervals and cron
// specs, some with catch-up "skip") from its own "schedules/<node>" stream; half the seeds draw
// none. A node registers them at every open, as a program calls Schedule at startup (the same
// spec keeps the next period); its producer changes a payload or a spec, removes one or adds
// it back now and then (from the "schedule-changes/<node>" stream, so no other draw moves).
// Every commit reports the periods it handled to the checker (period-once, check_schedule.go),
// and the jobs they enqueued as appended (acknowledged when the commit succeeded). At the
// liveness phase every node removes its schedules, so that the world can settle.

// schedSpecs are the specs the world draws: periods of 10 s to 1 min, both kinds.
var schedSpecs = []string{"@every 10s", "@every 25s", "@every 1m", "*/15 * * * * *", "0 * * * * *", "*/30 * * * * *"}

// pSchedChange is the probability that a producer tick changes one of the node's schedules.
const pSchedChange = 0.05

// simSched is one schedule as the node's program last asked for it.
type simSched struct {
	name    string
	spec    string
	catchUp runner.CatchUp
	kind    string // one of the node's registered kinds
	unique  bool   // its jobs hold the unique key "sched-<name>" (a period finding it held is skipped)
	// attempts is its jobs' own AttemptsMax (0: the policy's), at most the policy's, so that
	// the liveness bound still holds.
	attempts int
	version  int // bumped at each payload change
	removed  bool
}

func (s *simSched) uniqueKey() string {
	if !s.unique {
		return ""
	}
	return "sched-" + s.name
}

func (s *simSched) payload(node int) string {
	return "sched-" + strconv.Itoa(node) + "-" + s.name + "-v" + strconv.Itoa(s.version)
}

// drawSchedules draws node n's schedules.
func (n *runnerNode) drawSchedules() {
	w := n.w
	r := Stream(w.cfg.Seed, "schedules/"+n.name)
	n.rSched = Stream(w.cfg.Seed, "schedule-changes/"+n.name)
	if r.Intn(2) == 0 {
		return
	}
	ru := Stream(w.cfg.Seed, "schedule-unique/"+n.name)
	for i := range min(1+r.Intn(3), w.cfg.Schedules) {
		s := &simSched{name: "s" + strconv.Itoa(i+1), spec: schedSpecs[r.Intn(len(schedSpecs))], kind: kindNames[r.Intn(len(kindNames))]}
		if r.Intn(3) == 0 {
			s.catchUp = runner.CatchUpSkip
		}
		s.unique = ru.Intn(3) == 0
		if ru.Intn(3) == 0 {
			s.attempts = 1 + ru.Intn(max(1, w.cfg.Attempts))
		}
		n.scheds = append(n.scheds, s)
	}
}

// registerSchedules runs after each open: every schedule the program wants is set (again),
// every one it removed is removed; at the liveness phase all are removed.
func (n *runnerNode) registerSchedules() {
	have := map[string]bool{}
	for _, s := range n.e.Schedules() {
		have[s.Name] = true
	}
	for _, s := range n.scheds {
		switch {
		case n.w.liveness || s.removed:
			if have[s.name] {
				n.unschedule(s)
			}
		default:
			n.schedule(s)
		}
	}
}

// beforeCommit runs before each commit: it ends the schedules at the liveness phase and notes
// which due schedules' unique keys a job holds now (a key can only be freed, never taken, by
// the commit before its periods fire: other schedules' keys differ), for noteFirings. It
// returns the schedules it read.
func (n *runnerNode) beforeCommit() []runner.Schedule {
	n.maybeEndSchedules()
	clear(n.heldKeys)
	now := n.w.now()
	scheds := n.e.Schedules()
	for _, s := range scheds {
		if s.Opts.Unique == "" || s.Next.IsZero() || s.Next.After(now) {
			continue
		}
		if n.heldKeys == nil {
			n.heldKeys = map[string]bool{}
		}
		n.heldKeys[s.Name] = n.keyHeld(s.Opts)
	}
	return scheds
}

// maybeEndSchedules removes every schedule once the liveness phase has begun.
func (n *runnerNode) maybeEndSchedules() {
	if !n.w.liveness || len(n.e.Schedules()) == 0 {
		return
	}
	for _, s := range n.scheds {
		if !s.removed {
			n.unschedule(s)
		}
	}
}

func (n *runnerNode) schedule(s *simSched) {
	w := n.w
	_, err := n.propose(runner.SetSchedule{Schedule: runner.NewSchedule{Name: s.name, Spec: s.spec, Target: "t1",
		Payload: []byte(s.payload(n.id)), CatchUp: s.catchUp, Opts: runner.Opts{Kind: s.kind, Unique: s.uniqueKey(), AttemptsMax: s.attempts}}},
		pendingCmd{kind: cmdSchedule})
	if err != nil {
		w.trace(n.name, "schedule "+s.name+" refused: "+err.Error())
		return
	}
	for _, v := range n.e.Schedules() {
		if v.Name == s.name {
			w.chk.ScheduleSubmitted(n.id, runview.OfSchedule(v))
			w.trace(n.name, "schedule "+runner.DescribeSchedule(v, Epoch))
		}
	}
}

func (n *runnerNode) unschedule(s *simSched) {
	w := n.w
	if _, err := n.propose(runner.RemoveSchedule{Name: s.name}, pendingCmd{kind: cmdSchedule}); err != nil {
		w.trace(n.name, "unschedule "+s.name+" refused: "+err.Error())
		return
	}
	w.chk.ScheduleRemoveSubmitted(n.id, s.name)
	w.trace(n.name, "unschedule "+s.name)
}

// maybeChangeSchedule is the producer's draw: change a payload or a spec, remove a schedule or
// add a removed one back.
func (n *runnerNode) maybeChangeSchedule() {
	if len(n.scheds) == 0 || !n.up || n.w.liveness || n.rSched.Float64() >= pSchedChange {
		return
	}
	s := n.scheds[n.rSched.Intn(len(n.scheds))]
	switch k := n.rSched.Intn(4); {
	case s.removed:
		s.removed = false
		n.schedule(s)
	case k == 0:
		s.removed = true
		n.unschedule(s)
	case k == 1:
		s.spec = schedSpecs[n.rSched.Intn(len(schedSpecs))]
		n.schedule(s)
	default:
		s.version++
		n.schedule(s)
	}
}

// noteFirings reports what the commit just made of the schedules: the jobs it enqueued
// (appended; acknowledged when acked) and each period handled. before and after are
// Schedules() around the commit's write, which fired them, and [next, upTo) the ids its
// firings took (jobs enqueued during the batch's flight come after); a commit handles at most
// one period per schedule. Under mutSplitFiring a commit that handled a period leaves its
// journal split and the node crashes (mut_split.go): the commit is then not acknowledged, and
// the caller must check n.up.
func (n *runnerNode) noteFirings(before, after []runner.Schedule, next, upTo uint64, acked bool) {
	w := n.w
	split := acked && w.mutation == mutSplitFiring && n.splitFired()
	if split {
		acked = false
		defer func() {
			w.chk.CommitUnacked(n.id, runview.Jobs(n.views, n.e.State()))
			w.chk.SchedulesUnacked(n.id, n.scheduleViews())
			n.crash("between the batch of a period's job and the batch of its schedule's advance (planted defect)")
		}()
	}
	for id := next; id < upTo; id++ {
		j, ok := n.e.Get(id)
		if !ok {
			continue
		}
		w.chk.JobAppended(n.id, id, j.FirstDue.Sub(Epoch), j.Target, string(j.Payload))
		w.chk.JobOptions(n.id, id, j.Opts.Kind, j.Opts.Unique)
		w.chk.JobAttemptsMax(n.id, id, j.Opts.AttemptsMax)
		if acked {
			w.chk.JobAcked(n.id, id)
			n.acked = append(n.acked, id)
		}
	}
	prev := map[string]runner.Schedule{}
	for _, s := range before {
		prev[s.Name] = s
	}
	for _, s := range after {
		if b, ok := prev[s.Name]; ok && (!s.Last.Equal(b.Last) || !s.LastAt.Equal(b.LastAt)) {
			w.trace(n.name, "period "+runner.DescribeSchedule(s, Epoch))
			v := runview.OfSchedule(s)
			if s.LastJob == 0 && s.Opts.Unique != "" {
				v.Held = n.heldKeys[s.Name] // as before the commit: its Tick may free the key after the period
			}
			w.chk.PeriodFired(n.id, v, acked)
		}
	}
}

// keyHeld reports whether a job of the node that is not terminal holds o's unique key (the
// world's schedules keep no window after a success).
func (n *runnerNode) keyHeld(o runner.Opts) bool {
	jobs, _, _ := n.e.List(1, math.MaxUint64, func(j *runner.Job) bool {
		return !j.State.Terminal() && j.Opts.Kind == o.Kind && j.Opts.Unique == o.Unique
	}, 1, math.MaxInt)
	return len(jobs) > 0
}

// scheduleViews is the node's schedules as the checker compares them.
func (n *runnerNode) scheduleViews() []ScheduleView { return runview.Schedules(n.e.Schedules()) }
