package runner

import (
	"slices"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/robfig/cron/v3"
	"pgregory.net/rapid"
)

// The rapid model's periodic jobs (rapid_test.go drives them): schedules as plain values, their
// periods computed here independently of ParseSpec for intervals (cron is robfig/cron's own
// definition), fired in the model at each commit before the due jobs are walked.

// mNext is the model's first period of spec strictly after after.
func mNext(spec string, anchor, after time.Time) time.Time {
	if rest, ok := strings.CutPrefix(spec, "@every "); ok {
		d, _ := time.ParseDuration(rest)
		t := anchor.Add(d)
		for !t.After(after) {
			t = t.Add(d)
		}
		return t
	}
	s, err := cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor).Parse(spec)
	if err != nil {
		panic(err)
	}
	return norm(s.Next(after))
}

func (rm *runnerMachine) SetSchedule(t *rapid.T) {
	w, m := rm.w, rm.m
	ns := NewSchedule{
		Name:    rapid.SampledFrom([]string{"a", "b"}).Draw(t, "schedName"),
		Spec:    rapid.SampledFrom([]string{"@every 2s", "@every 5s", "*/3 * * * * *"}).Draw(t, "spec"),
		Target:  rapid.SampledFrom([]string{"a", "b"}).Draw(t, "schedTarget"),
		Payload: []byte(rapid.SampledFrom([]string{"p", "q"}).Draw(t, "schedPayload")),
		CatchUp: rapid.SampledFrom([]CatchUp{CatchUpOne, CatchUpSkip}).Draw(t, "catchUp"),
		Opts:    Opts{Kind: rapid.SampledFrom([]string{"email", "sms"}).Draw(t, "schedKind"), Priority: rapid.SampledFrom([]int{0, 1}).Draw(t, "schedPriority")},
	}
	tk, err := w.e.SetSchedule(w.now, ns)
	if err != nil {
		t.Fatalf("set schedule: %v", err)
	}
	now := norm(w.now)
	s := Schedule{Name: ns.Name}
	if old := m.scheds[ns.Name]; old != nil {
		s = *old
	}
	keep := m.scheds[ns.Name] != nil && s.Spec == ns.Spec && !s.Next.IsZero()
	if !keep {
		s.Anchor = now
		s.Next = mNext(ns.Spec, now, maxTime(now, s.Last))
	}
	s.Spec, s.Target, s.Payload, s.Opts, s.CatchUp = ns.Spec, ns.Target, ns.Payload, ns.Opts, ns.CatchUp
	m.scheds[ns.Name] = &s
	rm.tickets[tk] = 0
	m.pending = append(m.pending, tk)
}

func (rm *runnerMachine) RemoveSchedule(t *rapid.T) {
	w, m := rm.w, rm.m
	name := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "schedName")
	tk, err := w.e.RemoveSchedule(name)
	if (err == nil) != (m.scheds[name] != nil) {
		t.Fatalf("remove schedule %q: %v; model has it: %v", name, err, m.scheds[name] != nil)
	}
	if err != nil {
		return
	}
	delete(m.scheds, name)
	rm.tickets[tk] = 0
	m.pending = append(m.pending, tk)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// fireModel handles the model's due periods at now, in name order, as the machine's Tick does.
func (m *model) fireModel(now time.Time) {
	names := make([]string, 0, len(m.scheds))
	for name := range m.scheds {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s := m.scheds[name]
		if s.Next.After(now) {
			continue
		}
		period := s.Next
		s.LastJob = 0
		if missed := !mNext(s.Spec, s.Anchor, period).After(now); !missed || s.CatchUp != CatchUpSkip {
			id := m.nextID
			m.nextID++
			m.admitJob(id, NewJob{Due: period, Target: s.Target, Payload: s.Payload, Opts: s.Opts})
			s.LastJob = id
			s.Fired++
		}
		s.Last, s.LastAt, s.Next = period, now, mNext(s.Spec, s.Anchor, now)
	}
}

// compareSchedules compares the model's schedules with the engine's.
func (rm *runnerMachine) compareSchedules(t *rapid.T, got []Schedule) {
	var want []Schedule
	for _, s := range rm.m.scheds {
		want = append(want, *s)
	}
	slices.SortFunc(want, func(a, b Schedule) int { return strings.Compare(a.Name, b.Name) })
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("schedules (-model +engine)\n%s", diff)
	}
}

// rebaseSchedules sets the model's schedules to a recovered state's.
func (m *model) rebaseSchedules(ss []Schedule) {
	m.scheds = map[string]*Schedule{}
	for i := range ss {
		s := ss[i]
		m.scheds[s.Name] = &s
	}
}
