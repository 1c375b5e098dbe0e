// Package corpus parses the simulator's corpus files (corpus/sim/*.txt): each entry pins one
// run of package sim, its seed, profile and overrides, and the outcome and trace digest the
// run must produce.
package corpus

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/sim"
	"github.com/sluicehq/sluice/sim/config"
)

// A corpus entry (corpus/sim/*.txt) pins one run: the seed, its profile, a one-line note of
// what it found or shows, and what the run must produce. The files use the datadriven syntax
// (github.com/cockroachdb/datadriven), so `go test ./sim -run TestCorpus -rewrite` can update
// the expected digests after a deliberate change:
//
//	# A paragraph saying what the file's entries prove.
//	run seed=17 profile=disk [duration=5m] [steps=100000] [shrunk=TOKEN]
//	note fsync failure acknowledged an enqueue (fixed in core/runner)
//	----
//	ok
//	digest 3f2a...
//
// The expected output is "ok" or "violation <invariant>", then the run's trace digest.

// Entry is one parsed entry.
type Entry struct {
	Where    string // file:line
	Seed     int64
	Profile  string
	Safety   time.Duration
	Steps    int
	Shrunk   string // a shrink token (sim/config)
	Note     string
	Expected string // the lines after ----
}

// Options returns the run the entry pins.
func (e Entry) Options() sim.Options {
	return sim.Options{Seed: e.Seed, Profile: e.Profile, Safety: e.Safety, Steps: e.Steps, Shrunk: e.Shrunk}
}

// Outcome renders what a corpus entry records of a result.
func Outcome(r *sim.Result) string {
	status := r.Verdict()
	if r.Violation != nil {
		status = "violation " + r.Violation.Invariant
	}
	return status + "\ndigest " + r.Digest + "\n"
}

// Check compares a result with the entry; "" when it matches.
func (e Entry) Check(r *sim.Result) string {
	got := Outcome(r)
	if strings.TrimSpace(got) == strings.TrimSpace(e.Expected) {
		return ""
	}
	return fmt.Sprintf("want %q, got %q (a deliberate behaviour change: check the run, then go test ./sim -run TestCorpus -rewrite)",
		strings.TrimSpace(e.Expected), strings.TrimSpace(got))
}

// ParseRunArgs parses the arguments of a "run" line: seed=N profile=P duration=D steps=K
// shrunk=TOKEN.
func ParseRunArgs(args []string) (Entry, error) {
	e := Entry{Profile: "swarm", Seed: -1}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return e, fmt.Errorf("argument %q is not key=value", a)
		}
		var err error
		switch k {
		case "seed":
			e.Seed, err = strconv.ParseInt(v, 10, 64)
		case "profile":
			e.Profile = v
		case "duration":
			e.Safety, err = time.ParseDuration(v)
		case "steps":
			e.Steps, err = strconv.Atoi(v)
		case "shrunk":
			e.Shrunk = v
			_, err = config.ParseToken(v)
		default:
			return e, fmt.Errorf("unknown argument %q", k)
		}
		if err != nil {
			return e, fmt.Errorf("argument %s: %w", a, err)
		}
	}
	if e.Seed < 0 {
		return e, fmt.Errorf("run needs seed=N")
	}
	return e, nil
}

// Parse parses a corpus file (the datadriven subset above).
func Parse(name, text string) ([]Entry, error) {
	lines := strings.Split(text, "\n")
	var out []Entry
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		fields := strings.Fields(l)
		if fields[0] != "run" {
			return nil, fmt.Errorf("%s:%d: unknown command %q", name, i+1, fields[0])
		}
		e, err := ParseRunArgs(fields[1:])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, i+1, err)
		}
		e.Where = name + ":" + strconv.Itoa(i+1)
		i++
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != "----"; i++ {
			if n, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "note "); ok {
				e.Note = n
			}
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s: entry at %s has no ----", name, e.Where)
		}
		var exp []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			exp = append(exp, lines[i])
		}
		e.Expected = strings.Join(exp, "\n")
		out = append(out, e)
	}
	return out, nil
}
