package explain

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/sim"
	"github.com/sluicehq/sluice/sim/config"
)

// Shrinking (simrun --seed N --shrink) searches, deterministically, for a smaller run that
// breaks the same invariant: the seed's drawn configuration plus a shrink token (config.Token)
// of overrides. The search is delta debugging over the token: first every fault kind that is
// on is offered for removal (all, then halves, then one by one) and each kind left is offered
// at a higher rate (so it strikes sooner), then each count tries a ladder of lower values and
// the safety phase is cut to just past the violation; a candidate is kept when it breaks the
// same invariant in no more events.

// Shrunk is the outcome of a shrink.
type Shrunk struct {
	Before, After *sim.Result
	Token         string
	Runs          int // simulator runs the search made
}

// shrinkRunsMax bounds the search; shrinkRoundsMax the passes over faults and counts, each
// of which may open a cut the previous pass could not make.
const (
	shrinkRunsMax   = 600
	shrinkRoundsMax = 6
)

// Shrink searches for a smaller run than o's that breaks the same invariant. It returns an
// error when o's run does not break one.
func Shrink(o sim.Options) (*Shrunk, error) {
	o.Trace = nil
	before, err := sim.Run(o)
	if err != nil {
		return nil, err
	}
	if before.Violation == nil {
		return nil, fmt.Errorf("explain: seed %d (profile %s) breaks no invariant: nothing to shrink", o.Seed, before.Config.Profile)
	}
	inv := before.Violation.Invariant
	base, err := config.ParseToken(o.Shrunk)
	if err != nil {
		return nil, err
	}
	s := &shrinker{o: o, inv: inv, best: before, tok: base, runs: 1}
	s.drawn, err = config.New(o.Seed, before.Config.Profile)
	if err != nil {
		return nil, err
	}
	for round := 0; round < shrinkRoundsMax; round++ {
		progress := s.faults()
		progress = s.counts() || progress
		if !progress {
			break
		}
	}
	s.simplify()
	return &Shrunk{Before: before, After: s.best, Token: s.tok.String(), Runs: s.runs}, nil
}

type shrinker struct {
	o     sim.Options
	inv   string
	drawn config.Config
	best  *sim.Result
	tok   config.Token
	runs  int
}

// try runs t and keeps it when it breaks the same invariant in no more events.
func (s *shrinker) try(t config.Token) bool {
	if s.runs >= shrinkRunsMax {
		return false
	}
	o := s.o
	o.Shrunk = t.String()
	if _, err := t.Apply(s.drawn); err != nil {
		return false
	}
	s.runs++
	r, err := sim.Run(o)
	if err != nil || r.Violation == nil || r.Violation.Invariant != s.inv || r.Fault != "" || r.Steps > s.best.Steps {
		return false
	}
	s.best, s.tok = r, t
	return true
}

// faults offers the fault kinds still on for removal: all, then halves, then one by one.
func (s *shrinker) faults() bool {
	c, _ := s.tok.Apply(s.drawn)
	on := config.FaultsOn(c)
	progress := false
	if c.Faults.ExpectRefusal {
		t := s.tok.Clone()
		t.Damage = true
		progress = s.try(t) || progress
	}
	if c.Faults.Timing.Bunch > 0 {
		t := s.tok.Clone()
		t.Bunch = true
		progress = s.try(t) || progress
	}
	// ddmin over the list: try removing chunks of decreasing size.
	for n := len(on); n >= 1 && len(on) > 0; n /= 2 {
		for i := 0; i < len(on); {
			j := min(i+n, len(on))
			t := s.tok.Clone()
			for _, name := range on[i:j] {
				t.Off[name] = true
			}
			if s.try(t) {
				progress = true
				on = append(on[:i:i], on[j:]...)
				continue
			}
			i = j
		}
	}
	// The kinds left are needed: offer each sooner (its probability multiplied), so the run
	// reaches the failure in fewer events. Every draw is made whatever the probability, so a
	// boost moves no other draw.
	for _, name := range on {
		for _, f := range []int64{2, 4, 16, 64, 256} {
			if f <= s.tok.Boost[name] {
				continue
			}
			t := s.tok.Clone()
			t.Boost[name] = f
			// Not monotone either: a factor that loses the failure does not rule out a larger one.
			progress = s.try(t) || progress
		}
	}
	return progress
}

// counts lowers each count. A run is not monotone in its counts (one job fewer shifts every
// later draw of the workload), so rather than bisect, each count tries a fixed ladder of lower
// values (the lowest few, then fractions of the current one) and keeps the one that fails in
// the fewest events.
func (s *shrinker) counts() bool {
	progress := false
	for _, k := range config.CountKnobs() {
		c, _ := s.tok.Apply(s.drawn)
		if k.Side == "runner" && c.Nodes == 0 || k.Side == "queue" && c.Workers == 0 {
			continue // the side is gone: its counts change nothing
		}
		cur := k.Get(&c)
		if k.Name == "safety-ms" && s.best.Violation != nil {
			// Nothing after the violation matters: start just past it.
			if past := (s.best.Violation.At + time.Second).Milliseconds(); past < cur {
				t := s.tok.Clone()
				t.Counts[k.Name] = past
				if s.try(t) {
					progress, cur = true, past
				}
			}
		}
		for _, v := range ladder(k.Lo, cur) {
			t := s.tok.Clone()
			t.Counts[k.Name] = v
			progress = s.try(t) || progress
		}
	}
	return progress
}

// simplify drops every count override and boost the shrunk run does not need (the run without
// it fails the same way in no more events), so the token names only what matters.
func (s *shrinker) simplify() {
	for _, k := range config.CountKnobs() {
		if _, ok := s.tok.Counts[k.Name]; ok {
			t := s.tok.Clone()
			delete(t.Counts, k.Name)
			s.try(t)
		}
	}
	for _, name := range config.FaultNames() {
		if _, ok := s.tok.Boost[name]; ok {
			t := s.tok.Clone()
			delete(t.Boost, name)
			s.try(t)
		}
	}
}

// ladder lists the values below cur a count tries, ascending and without repeats: lo..lo+3,
// then cur/16, cur/8, cur/4, cur/2, 3cur/4 and cur-1.
func ladder(lo, cur int64) []int64 {
	var out []int64
	add := func(v int64) {
		if v < lo || v >= cur {
			return
		}
		for _, u := range out {
			if u == v {
				return
			}
		}
		out = append(out, v)
	}
	for v := lo; v < lo+4; v++ {
		add(v)
	}
	for _, v := range []int64{cur / 16, cur / 8, cur / 4, cur / 2, cur * 3 / 4, cur - 1} {
		add(v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// faultKinds counts the fault kinds a configuration has on (a shrink's "fault kinds" figure).
func faultKinds(c config.Config) int {
	n := len(config.FaultsOn(c))
	if c.Faults.ExpectRefusal {
		n++
	}
	if c.Faults.Timing.Bunch > 0 {
		n++
	}
	return n
}

// Summary renders the reduction and the replay command.
func (s *Shrunk) Summary() string {
	var b strings.Builder
	b0, a := s.Before, s.After
	fmt.Fprintf(&b, "shrunk seed %d (profile %s), invariant %s, in %d runs\n", b0.Config.Seed, b0.Config.Profile, b0.Violation.Invariant, s.Runs)
	fmt.Fprintf(&b, "  events       %d -> %d\n", b0.Steps, a.Steps)
	fmt.Fprintf(&b, "  fault kinds  %d -> %d (faults the world counted %d -> %d)\n", faultKinds(b0.Config), faultKinds(a.Config), b0.Stats.Faults.Total(), a.Stats.Faults.Total())
	if b0.Config.Nodes > 0 {
		fmt.Fprintf(&b, "  nodes        %d -> %d, jobs per node %d -> %d\n", b0.Config.Nodes, a.Config.Nodes, b0.Config.JobsMax, a.Config.JobsMax)
	}
	if b0.Config.Workers > 0 {
		fmt.Fprintf(&b, "  workers      %d -> %d, messages %d -> %d\n", b0.Config.Workers, a.Config.Workers, b0.Config.MsgsMax, a.Config.MsgsMax)
	}
	fmt.Fprintf(&b, "  safety phase %s -> %s\n", b0.Config.Safety, a.Config.Safety)
	fmt.Fprintf(&b, "  token        %s\n", s.Token)
	fmt.Fprintf(&b, "replay: %s\n", a.Repro())
	fmt.Fprintf(&b, "corpus line: run seed=%d profile=%s shrunk=%s\n", a.Config.Seed, a.Config.Profile, s.Token)
	return b.String()
}
