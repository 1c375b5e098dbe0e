package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A shrink token overrides a seed's drawn configuration: fault kinds turned off or boosted,
// and counts and durations lowered. It is "key=value" pairs in a fixed key order, joined by
// commas, for example
//
//	off=late.write,boost=node-crash*16,nodes=1,workers=0,jobs=3,safety-ms=41000
//
// and `simrun --seed N --profile P --shrunk TOKEN` (or a corpus line `run seed=N profile=P
// shrunk=TOKEN`) replays that run byte for byte. The search that writes tokens is
// sim/explain's Shrink.

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
	return t.Apply(c)
}

// Apply applies the token's overrides to c and validates the result.
func (t Token) Apply(c Config) (Config, error) {
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

// Clone returns a deep copy of t.
func (t Token) Clone() Token {
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

// CountKnob is a count or duration a token can lower: its name, the lowest value it can take
// (durations in milliseconds), the side of the world it configures ("runner", "queue" or ""
// for both) and its value in a configuration.
type CountKnob struct {
	Name string
	Lo   int64
	Side string
	Get  func(c *Config) int64
}

// CountKnobs lists the counts a token can lower, in the token's fixed order.
func CountKnobs() []CountKnob {
	out := make([]CountKnob, len(countKnobs))
	for i, k := range countKnobs {
		out[i] = CountKnob{Name: k.name, Lo: k.lo, Side: countSide[k.name], Get: k.get}
	}
	return out
}

// FaultNames lists the fault kinds a token can turn off or boost, in the token's fixed order.
func FaultNames() []string {
	out := make([]string, len(faultKnobs))
	for i, k := range faultKnobs {
		out[i] = k.name
	}
	return out
}

// FaultsOn lists the fault kinds whose rate in c is not zero, in the token's fixed order.
func FaultsOn(c Config) []string {
	var out []string
	for _, k := range faultKnobs {
		if *k.p(&c) != 0 {
			out = append(out, k.name)
		}
	}
	return out
}
