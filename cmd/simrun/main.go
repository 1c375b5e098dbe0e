// Command simrun runs sluice's deterministic simulator (SPEC 5): one seed, a sweep of seeds on
// all cores, or a corpus entry. A run is a pure function of (seed, profile, code): the same
// command prints the same bytes on every run and machine.
//
// Exit status: 0 when every run passed, 1 when an invariant broke, 2 on a usage error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/sim"
	"github.com/sluicehq/sluice/sim/faults"
)

const usage = `simrun runs sluice's deterministic simulator.

usage:
  simrun --seed N [--profile P] [--trace] [--duration D] [--steps K]
  simrun --seeds A-B | --count K [--parallel P] [--profile P] [--duration D] [--steps K]
  simrun --replay FILE

flags:
  --seed N       run one seed and print its summary (same bytes every time)
  --seeds A-B    run seeds A..B inclusive
  --count K      run seeds 1..K
  --parallel P   sweep workers (default: number of CPUs); each run is single-threaded
  --profile P    fault profile: %s (default swarm)
  --trace        print every event, one line each, before the summary
  --duration D   simulated length of the safety phase (default %s)
  --steps K      most events per run (default %d)
  --replay FILE  run every entry of a corpus file (corpus/sim/*.txt) and check its digest

exit status: 0 all runs passed, 1 an invariant broke, 2 usage error
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type options struct {
	seed     int64
	seedSet  bool
	lo, hi   int64
	sweep    bool
	parallel int
	profile  string
	trace    bool
	duration time.Duration
	steps    int
	replay   string
}

func usageText() string {
	return fmt.Sprintf(usage, strings.Join(faults.Profiles, ", "), sim.SafetyDefault, sim.StepsMaxDefault)
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("simrun", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	seed := fs.String("seed", "", "")
	seeds := fs.String("seeds", "", "")
	count := fs.Int("count", 0, "")
	fs.IntVar(&o.parallel, "parallel", runtime.NumCPU(), "")
	fs.StringVar(&o.profile, "profile", "swarm", "")
	fs.BoolVar(&o.trace, "trace", false, "")
	fs.DurationVar(&o.duration, "duration", 0, "")
	fs.IntVar(&o.steps, "steps", 0, "")
	fs.StringVar(&o.replay, "replay", "", "")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	modes := 0
	if *seed != "" {
		n, err := strconv.ParseInt(*seed, 10, 64)
		if err != nil {
			return o, fmt.Errorf("--seed %q is not an integer", *seed)
		}
		o.seed, o.seedSet = n, true
		modes++
	}
	if *seeds != "" {
		a, b, ok := strings.Cut(*seeds, "-")
		lo, err1 := strconv.ParseInt(a, 10, 64)
		hi, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil || hi < lo {
			return o, fmt.Errorf("--seeds %q is not a range A-B with A <= B", *seeds)
		}
		o.lo, o.hi, o.sweep = lo, hi, true
		modes++
	}
	if *count != 0 {
		if *count < 0 {
			return o, fmt.Errorf("--count %d is negative", *count)
		}
		o.lo, o.hi, o.sweep = 1, int64(*count), true
		modes++
	}
	if o.replay != "" {
		modes++
	}
	switch {
	case modes == 0:
		return o, errors.New("give one of --seed, --seeds, --count or --replay")
	case modes > 1:
		return o, errors.New("--seed, --seeds, --count and --replay exclude each other")
	case o.parallel < 1:
		return o, fmt.Errorf("--parallel %d must be at least 1", o.parallel)
	case o.duration < 0 || o.steps < 0:
		return o, errors.New("--duration and --steps must not be negative")
	case o.trace && o.sweep:
		return o, errors.New("--trace prints one run: use it with --seed")
	}
	if !validProfile(o.profile) {
		return o, fmt.Errorf("--profile %q: want one of %s", o.profile, strings.Join(faults.Profiles, ", "))
	}
	return o, nil
}

func validProfile(p string) bool {
	for _, q := range faults.Profiles {
		if p == q {
			return true
		}
	}
	return false
}

func run(args []string, stdout, stderr io.Writer) int {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			fmt.Fprint(stdout, usageText())
			return 0
		}
	}
	o, err := parse(args, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "simrun: %v\n\n%s", err, usageText())
		return 2
	}
	switch {
	case o.replay != "":
		return replay(o, stdout, stderr)
	case o.sweep:
		return sweep(o, stdout, stderr)
	}
	opt := sim.Options{Seed: o.seed, Profile: o.profile, Safety: o.duration, Steps: o.steps}
	if o.trace {
		opt.Trace = stdout
	}
	res, err := sim.Run(opt)
	if err != nil {
		fmt.Fprintf(stderr, "simrun: %v\n", err)
		return 2
	}
	if err := res.Report(stdout); err != nil {
		fmt.Fprintf(stderr, "simrun: writing the report: %v\n", err)
		return 1
	}
	if !res.OK() {
		return 1
	}
	return 0
}

func replay(o options, stdout, stderr io.Writer) int {
	data, err := os.ReadFile(o.replay)
	if err != nil {
		fmt.Fprintf(stderr, "simrun: %v\n", err)
		return 2
	}
	entries, err := sim.ParseCorpus(o.replay, string(data))
	if err != nil {
		fmt.Fprintf(stderr, "simrun: %v\n", err)
		return 2
	}
	code := 0
	for _, e := range entries {
		res, err := sim.Run(e.Options())
		if err != nil {
			fmt.Fprintf(stderr, "simrun: %s: %v\n", e.Where, err)
			return 2
		}
		if err := res.Report(stdout); err != nil {
			return 1
		}
		if msg := e.Check(res); msg != "" {
			fmt.Fprintf(stdout, "corpus entry %s: FAIL: %s\n", e.Where, msg)
			code = 1
		} else {
			fmt.Fprintf(stdout, "corpus entry %s: ok (%s)\n", e.Where, e.Note)
		}
	}
	return code
}

type outcome struct {
	seed   int64
	res    *sim.Result
	err    error
	simDur time.Duration
}

func sweep(o options, stdout, stderr io.Writer) int {
	n := o.hi - o.lo + 1
	seeds := make(chan int64)
	results := make(chan outcome)
	var wg sync.WaitGroup
	for i := 0; i < o.parallel; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range seeds {
				res, err := sim.Run(sim.Options{Seed: s, Profile: o.profile, Safety: o.duration, Steps: o.steps})
				oc := outcome{seed: s, res: res, err: err}
				results <- oc
			}
		}()
	}
	go func() {
		for s := o.lo; s <= o.hi; s++ {
			seeds <- s
		}
		close(seeds)
		wg.Wait()
		close(results)
	}()

	tty := isTerminal(stdout)
	start := time.Now()
	var done, events int64
	var simTotal time.Duration
	var failed []outcome
	for oc := range results {
		done++
		if oc.err != nil {
			fmt.Fprintf(stderr, "simrun: seed %d: %v\n", oc.seed, oc.err)
			return 2
		}
		simTotal += oc.res.End
		events += int64(oc.res.Steps)
		if !oc.res.OK() {
			failed = append(failed, oc)
		}
		if tty {
			width := 40
			k := int(done * int64(width) / n)
			fmt.Fprintf(stdout, "\r[%s%s] %d/%d seeds, %d failed", strings.Repeat("#", k), strings.Repeat(".", width-k), done, n, len(failed))
		} else if !oc.res.OK() || done%100 == 0 || done == n {
			status := "ok"
			if !oc.res.OK() {
				status = "VIOLATION " + oc.res.Violation.Invariant
			}
			fmt.Fprintf(stdout, "seed %d: %s (%d/%d done)\n", oc.seed, status, done, n)
		}
	}
	if tty {
		fmt.Fprintln(stdout)
	}
	wall := time.Since(start)
	sort.Slice(failed, func(i, j int) bool { return failed[i].seed < failed[j].seed })
	fmt.Fprintf(stdout, "swept %d seeds (profile %s) in %s on %d workers: %d failed; %.0f simulated s per wall s, %d events\n",
		n, o.profile, wall.Round(time.Millisecond), o.parallel, len(failed), simTotal.Seconds()/wall.Seconds(), events)
	if len(failed) == 0 {
		return 0
	}
	fmt.Fprintln(stdout, "failing seeds:")
	for _, f := range failed {
		fmt.Fprintf(stdout, "  seed %d: %s — %s\n", f.seed, f.res.Violation.Invariant, f.res.Repro())
	}
	return 1
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
