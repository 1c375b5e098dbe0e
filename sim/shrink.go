package sim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Shrinking (simrun --seed N --shrink) searches, deterministically, for a smaller run that
// breaks the same invariant. A run is the seed's drawn configuration plus a token of
// overrides: fault kinds turned off, and counts and durations lowered. The token is
// "key=value" pairs in a fixed key order, joined by commas, for example
//
//	off=late.write,boost=node-crash*16,nodes=1,workers=0,jobs=3,safety-ms=41000
//
// and `simrun --seed N --profile P --shrunk TOKEN` (or a corpus line `run seed=N profile=P
// shrunk=TOKEN`) replays that run byte for byte. The search is delta debugging over the
// token: first every fault kind that is on is offered for removal (all, then halves, then one
// by one) and each kind left is offered at a higher rate (so it strikes sooner), then each
// count tries a ladder of lower values and the safety phase is cut to just past the violation;
// a candidate is kept when it breaks the same invariant in no more events.

// faultKnobs are the fault kinds a token can turn off, by name, in a fixed order.
var faultKnobs = []struct {
	name string
	p    func(c *Config) *float64
}{
	{"write", func(c *Config) *float64 { return &c.Faults.Disk.WriteErr }},
	{"sync", func(c *Config) *float64 { return &c.Faults.Disk.SyncErr }},
	{"rename", func(c *Config) *float64 { return &c.Faults.Disk.RenameErr }},
	{"create", func(c *Config) *float64 { return &c.Faults.Disk.CreateErr }},
	{"remove", func(c *Config) *float64 { return &c.Faults.Disk.RemoveErr }},
	{"truncate", func(c *Config) *float64 { return &c.Faults.Disk.TruncateErr }},
	{"syncdir", func(c *Config) *float64 { return &c.Faults.Disk.SyncDirErr }},
	{"dirpersist", func(c *Config) *float64 { return &c.Faults.Disk.DirPersist }},
	{"open", func(c *Config) *float64 { return &c.Faults.Disk.OpenErr }},
	{"stat", func(c *Config) *float64 { return &c.Faults.Disk.StatErr }},
	{"size", func(c *Config) *float64 { return &c.Faults.Disk.SizeErr }},
	{"read", func(c *Config) *float64 { return &c.Faults.Disk.ReadErr }},
	{"close", func(c *Config) *float64 { return &c.Faults.Disk.CloseErr }},
	{"short-write", func(c *Config) *float64 { return &c.Faults.Disk.ShortWrite }},
	{"leftover", func(c *Config) *float64 { return &c.Faults.Disk.LeftoverErr }},
	{"node-crash", func(c *Config) *float64 { return &c.Faults.Process.NodeCrash }},
	{"commit-crash", func(c *Config) *float64 { return &c.Faults.Process.CommitCrash }},
	{"crash-point", func(c *Config) *float64 { return &c.Faults.Process.CrashPoint }},
	{"close-point", func(c *Config) *float64 { return &c.Faults.Process.ClosePoint }},
	{"worker-crash", func(c *Config) *float64 { return &c.Faults.Process.WorkerCrash }},
	{"handler-crash", func(c *Config) *float64 { return &c.PCrashHandle }},
	{"fail-before", func(c *Config) *float64 { return &c.Faults.Transport.FailBefore }},
	{"fail-after", func(c *Config) *float64 { return &c.Faults.Transport.FailAfter }},
	{"throttle", func(c *Config) *float64 { return &c.Faults.Transport.Throttle }},
	{"5xx", func(c *Config) *float64 { return &c.Faults.Transport.ServerError }},
	{"stale", func(c *Config) *float64 { return &c.Faults.Transport.Stale }},
	{"fatal", func(c *Config) *float64 { return &c.Faults.Transport.Fatal }},
	{"spike", func(c *Config) *float64 { return &c.Faults.Transport.Spike }},
	{"breach", func(c *Config) *float64 { return &c.Faults.Transport.Breach }},
	{"long", func(c *Config) *float64 { return &c.Faults.Timing.LongHandler }},
	{"marathon", func(c *Config) *float64 { return &c.Faults.Timing.Marathon }},
	{"burst", func(c *Config) *float64 { return &c.Faults.Timing.Burst }},
	{"late", func(c *Config) *float64 { return &c.Faults.Timing.Late }},
	{"reorder", func(c *Config) *float64 { return &c.Faults.Timing.Reorder }},
}

// countKnobs are the counts and durations a token can lower, in a fixed order, with the
// lowest value each can take (durations in milliseconds).
var countKnobs = []struct {
	name string
	lo   int64
	get  func(c *Config) int64
	set  func(c *Config, v int64)
}{
	{"nodes", 0, func(c *Config) int64 { return int64(c.Nodes) }, func(c *Config, v int64) { c.Nodes = int(v) }},
	{"workers", 0, func(c *Config) int64 { return int64(c.Workers) }, func(c *Config, v int64) { c.Workers = int(v) }},
	{"jobs", 1, func(c *Config) int64 { return int64(c.JobsMax) }, func(c *Config, v int64) { c.JobsMax = int(v) }},
	{"schedules", 0, func(c *Config) int64 { return int64(c.Schedules) }, func(c *Config, v int64) { c.Schedules = int(v) }},
	{"msgs", 1, func(c *Config) int64 { return int64(c.MsgsMax) }, func(c *Config, v int64) { c.MsgsMax = int(v) }},
	{"capacity", 1, func(c *Config) int64 { return int64(c.Capacity) }, func(c *Config, v int64) { c.Capacity = int(v) }},
	{"concurrency", 1, func(c *Config) int64 { return int64(c.Concurrency) }, func(c *Config, v int64) { c.Concurrency = int(v) }},
	{"prefetch", 0, func(c *Config) int64 { return int64(c.Prefetch) }, func(c *Config, v int64) { c.Prefetch = int(v) }},
	{"targets", 1, func(c *Config) int64 { return int64(c.Targets) }, func(c *Config, v int64) { c.Targets = int(v) }},
	{"attempts", 1, func(c *Config) int64 { return int64(c.Attempts) }, func(c *Config, v int64) { c.Attempts = int(v) }},
	{"receive-max", 1, func(c *Config) int64 { return int64(c.ReceiveMax) }, func(c *Config, v int64) { c.ReceiveMax = int(v) }},
	{"handler-ms", 1, func(c *Config) int64 { return c.HandlerMax.Milliseconds() }, func(c *Config, v int64) {
		c.HandlerMax = time.Duration(v) * time.Millisecond
		c.HandlerMin = min(c.HandlerMin, c.HandlerMax)
	}},
	{"safety-ms", 1000, func(c *Config) int64 { return c.Safety.Milliseconds() }, func(c *Config, v int64) { c.Safety = time.Duration(v) * time.Millisecond }},
}

// countSide says which side of the world a count configures: "runner", "queue" or "" (both).
var countSide = map[string]string{
	"jobs": "runner", "schedules": "runner", "capacity": "runner", "targets": "runner", "attempts": "runner",
	"msgs": "queue", "concurrency": "queue", "prefetch": "queue", "receive-max": "queue",
}

// Token is a parsed shrink token: fault kinds off and lowered counts.
type Token struct {
	Off    map[string]bool
	Counts map[string]int64
	Boost  map[string]int64 // a fault kind's probability multiplied (capped at 1): the fault comes sooner
	Damage bool             // "off=damage": the run's damage to synced data is off
	Bunch  bool             // "off=bunch": the scheduling family's bunching is off
}

// String renders the token in its fixed key order ("" for no overrides).
func (t Token) String() string {
	var parts []string
	var off []string
	for _, k := range faultKnobs {
		if t.Off[k.name] {
			off = append(off, k.name)
		}
	}
	if t.Bunch {
		off = append(off, "bunch")
	}
	if t.Damage {
		off = append(off, "damage")
	}
	if len(off) > 0 {
		parts = append(parts, "off="+strings.Join(off, "."))
	}
	var boost []string
	for _, k := range faultKnobs {
		if f, ok := t.Boost[k.name]; ok {
			boost = append(boost, k.name+"*"+strconv.FormatInt(f, 10))
		}
	}
	if len(boost) > 0 {
		parts = append(parts, "boost="+strings.Join(boost, "."))
	}
	for _, k := range countKnobs {
		if v, ok := t.Counts[k.name]; ok {
			parts = append(parts, k.name+"="+strconv.FormatInt(v, 10))
		}
	}
	return strings.Join(parts, ",")
}

// ParseToken parses a token written by Token.String.
func ParseToken(s string) (Token, error) {
	t := Token{Off: map[string]bool{}, Counts: map[string]int64{}, Boost: map[string]int64{}}
	if s == "" {
		return t, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return t, fmt.Errorf("sim: shrink token part %q is not key=value", part)
		}
		if k == "off" {
			for _, name := range strings.Split(v, ".") {
				if name == "damage" {
					t.Damage = true
					continue
				}
				if name == "bunch" {
					t.Bunch = true
					continue
				}
				if !knownFault(name) {
					return t, fmt.Errorf("sim: shrink token: unknown fault kind %q", name)
				}
				t.Off[name] = true
			}
			continue
		}
		if k == "boost" {
			for _, b := range strings.Split(v, ".") {
				name, f, ok := strings.Cut(b, "*")
				n, err := strconv.ParseInt(f, 10, 64)
				if !ok || !knownFault(name) || err != nil || n < 1 {
					return t, fmt.Errorf("sim: shrink token: boost %q is not kind*factor", b)
				}
				t.Boost[name] = n
			}
			continue
		}
		if !knownCount(k) {
			return t, fmt.Errorf("sim: shrink token: unknown key %q", k)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return t, fmt.Errorf("sim: shrink token: %s=%q is not a count", k, v)
		}
		t.Counts[k] = n
	}
	return t, nil
}

func knownFault(name string) bool {
	for _, k := range faultKnobs {
		if k.name == name {
			return true
		}
	}
	return false
}

func knownCount(name string) bool {
	for _, k := range countKnobs {
		if k.name == name {
			return true
		}
	}
	return false
}

// ApplyToken applies a shrink token to a drawn configuration.
func ApplyToken(c Config, s string) (Config, error) {
	t, err := ParseToken(s)
	if err != nil {
		return c, err
	}
	return t.apply(c)
}

func (t Token) apply(c Config) (Config, error) {
	for _, k := range faultKnobs {
		if t.Off[k.name] {
			*k.p(&c) = 0
		}
		if f, ok := t.Boost[k.name]; ok {
			*k.p(&c) = min(1, *k.p(&c)*float64(f))
		}
	}
	if t.Off["late"] {
		c.Faults.Timing.LateMax = 0
	}
	if t.Damage {
		c.Faults.ExpectRefusal = false
	}
	if t.Bunch {
		c.Faults.Timing.Bunch = 0
	}
	for _, k := range countKnobs {
		if v, ok := t.Counts[k.name]; ok {
			k.set(&c, v)
		}
	}
	if !c.Faults.Process.On() {
		c.PCrashHandle = 0
	}
	return c, c.Validate()
}

func (t Token) clone() Token {
	u := Token{Off: make(map[string]bool, len(t.Off)), Counts: make(map[string]int64, len(t.Counts)),
		Boost: make(map[string]int64, len(t.Boost)), Damage: t.Damage, Bunch: t.Bunch}
	for k, v := range t.Boost {
		u.Boost[k] = v
	}
	for k, v := range t.Off {
		u.Off[k] = v
	}
	for k, v := range t.Counts {
		u.Counts[k] = v
	}
	return u
}

// Shrunk is the outcome of a shrink.
type Shrunk struct {
	Before, After *Result
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
func Shrink(o Options) (*Shrunk, error) {
	o.Trace = nil
	before, err := Run(o)
	if err != nil {
		return nil, err
	}
	if before.Violation == nil {
		return nil, fmt.Errorf("sim: seed %d (profile %s) breaks no invariant: nothing to shrink", o.Seed, before.Config.Profile)
	}
	inv := before.Violation.Invariant
	base, err := ParseToken(o.Shrunk)
	if err != nil {
		return nil, err
	}
	s := &shrinker{o: o, inv: inv, best: before, tok: base, runs: 1}
	s.drawn, err = NewConfig(o.Seed, before.Config.Profile)
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
	o     Options
	inv   string
	drawn Config
	best  *Result
	tok   Token
	runs  int
}

// try runs t and keeps it when it breaks the same invariant in no more events.
func (s *shrinker) try(t Token) bool {
	if s.runs >= shrinkRunsMax {
		return false
	}
	o := s.o
	o.Shrunk = t.String()
	if _, err := t.apply(s.drawn); err != nil {
		return false
	}
	s.runs++
	r, err := Run(o)
	if err != nil || r.Violation == nil || r.Violation.Invariant != s.inv || r.Fault != "" || r.Steps > s.best.Steps {
		return false
	}
	s.best, s.tok = r, t
	return true
}

// faults offers the fault kinds still on for removal: all, then halves, then one by one.
func (s *shrinker) faults() bool {
	c, _ := s.tok.apply(s.drawn)
	var on []string
	for _, k := range faultKnobs {
		if *k.p(&c) != 0 {
			on = append(on, k.name)
		}
	}
	progress := false
	if c.Faults.ExpectRefusal {
		t := s.tok.clone()
		t.Damage = true
		progress = s.try(t) || progress
	}
	if c.Faults.Timing.Bunch > 0 {
		t := s.tok.clone()
		t.Bunch = true
		progress = s.try(t) || progress
	}
	// ddmin over the list: try removing chunks of decreasing size.
	for n := len(on); n >= 1 && len(on) > 0; n /= 2 {
		for i := 0; i < len(on); {
			j := min(i+n, len(on))
			t := s.tok.clone()
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
			t := s.tok.clone()
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
	for _, k := range countKnobs {
		c, _ := s.tok.apply(s.drawn)
		if side := countSide[k.name]; side == "runner" && c.Nodes == 0 || side == "queue" && c.Workers == 0 {
			continue // the side is gone: its counts change nothing
		}
		cur := k.get(&c)
		if k.name == "safety-ms" && s.best.Violation != nil {
			// Nothing after the violation matters: start just past it.
			if past := (s.best.Violation.At + time.Second).Milliseconds(); past < cur {
				t := s.tok.clone()
				t.Counts[k.name] = past
				if s.try(t) {
					progress, cur = true, past
				}
			}
		}
		for _, v := range ladder(k.lo, cur) {
			t := s.tok.clone()
			t.Counts[k.name] = v
			progress = s.try(t) || progress
		}
	}
	return progress
}

// simplify drops every count override and boost the shrunk run does not need (the run without
// it fails the same way in no more events), so the token names only what matters.
func (s *shrinker) simplify() {
	for _, k := range countKnobs {
		if _, ok := s.tok.Counts[k.name]; ok {
			t := s.tok.clone()
			delete(t.Counts, k.name)
			s.try(t)
		}
	}
	for _, k := range faultKnobs {
		if _, ok := s.tok.Boost[k.name]; ok {
			t := s.tok.clone()
			delete(t.Boost, k.name)
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

// FaultKinds counts the fault kinds a result's configuration has on (a shrink's "faults" figure).
func FaultKinds(c Config) int {
	n := 0
	for _, k := range faultKnobs {
		if *k.p(&c) != 0 {
			n++
		}
	}
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
	fmt.Fprintf(&b, "  fault kinds  %d -> %d (faults the world counted %d -> %d)\n", FaultKinds(b0.Config), FaultKinds(a.Config), b0.Stats.Faults.Total(), a.Stats.Faults.Total())
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
