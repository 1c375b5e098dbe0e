// Command simrun runs sluice's deterministic simulator (docs/simulator.md): one seed, a sweep of seeds on
// all cores, or a corpus entry. A run is a pure function of (seed, profile, code): the same
// command prints the same bytes on every run and machine.
//
// Exit status: 0 when every run passed, 1 when an invariant broke, 2 on a usage error, 3 when
// a run stopped at --steps before it finished (incomplete), 4 when the simulator itself
// panicked (a simulator fault), 5 when --check-determinism found a seed whose two runs differ.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/sim"
	"github.com/sluicehq/sluice/sim/config"
	"github.com/sluicehq/sluice/sim/corpus"
	"github.com/sluicehq/sluice/sim/explain"
	"github.com/sluicehq/sluice/sim/faults"
)

const usage = `simrun runs sluice's deterministic simulator.

usage:
  simrun --seed N [--profile P] [--trace] [--duration D] [--steps K] [--shrunk TOKEN]
         [--shrink] [--timeline FILE.html]
  simrun --seeds A-B | --count K [--parallel P] [--profile P] [--duration D] [--steps K]
         [--check-determinism] [--timelines DIR]
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
  --shrink       search for a smaller run breaking the same invariant; print the reduction
                 and the command that replays it
  --shrunk TOKEN replay a shrunk run (the token --shrink printed)
  --timeline F   write the run as one self-contained HTML page (inline SVG) to F
  --check-determinism  run every seed twice (the second with other heap and map
                 capacities) and fail a seed whose digests differ, naming the first
                 diverging event
  --timelines DIR  after a failing sweep, write timelines of its 3 shortest failures to DIR
  --cpuprofile F write a CPU profile of the whole command to F (go tool pprof)

exit status: 0 all runs passed, 1 an invariant broke, 2 usage error, 3 incomplete (a run hit
--steps), 4 simulator fault (a panic inside the simulator), 5 nondeterminism
`

// Exit statuses.
const (
	exitOK             = 0
	exitViolation      = 1
	exitUsage          = 2
	exitIncomplete     = 3
	exitFault          = 4
	exitNondeterminism = 5
)

func main() {
	tuneGC()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// gcPercent is the GC target simrun runs with unless GOGC is set. A run's live heap is a few
// MiB, so the default (100) collects every few MiB of allocation: a fifth of a sweep's CPU went
// to GC. heapFloor counts as live, so the heap goal never drops below about 160 MiB
// ((heapFloor+live)*(1+gcPercent/100)): without it the goal swung with each seed's live heap
// (32 to 350 MiB), the scavenger gave the difference back to the OS after every large seed,
// and the next one faulted it in again (200 seeds: 780 MiB given back, 220k page faults, a
// sixth of the CPU in the kernel; with the floor 120k to 140k faults, two thirds of the kernel
// time, the same peak). The floor's pages are never written, so it takes no memory. The soft
// limit keeps a large sweep bounded.
const (
	gcPercent  = 400
	heapFloor  = 32 << 20
	memSoftMax = 1 << 30
)

// floor holds the heap floor for the life of the process.
var floor []byte

func tuneGC() {
	if os.Getenv("GOGC") != "" {
		return // the user's choice (GOGC=100 gives the default's behaviour back)
	}
	debug.SetGCPercent(gcPercent)
	floor = make([]byte, heapFloor)
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memSoftMax)
	}
}

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
	shrink   bool
	shrunk   string
	timeline string
	determ   bool
	tlDir    string
	cpuprof  string
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
	fs.BoolVar(&o.shrink, "shrink", false, "")
	fs.StringVar(&o.shrunk, "shrunk", "", "")
	fs.StringVar(&o.timeline, "timeline", "", "")
	fs.BoolVar(&o.determ, "check-determinism", false, "")
	fs.StringVar(&o.tlDir, "timelines", "", "")
	fs.StringVar(&o.cpuprof, "cpuprofile", "", "")
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
	case (o.shrink || o.shrunk != "" || o.timeline != "") && !o.seedSet:
		return o, errors.New("--shrink, --shrunk and --timeline take one run: use them with --seed")
	case (o.determ || o.tlDir != "") && !o.sweep:
		return o, errors.New("--check-determinism and --timelines take a sweep: use them with --seeds or --count")
	case o.shrink && o.trace:
		return o, errors.New("--shrink prints the reduction, not a trace: replay the shrunk run with --trace")
	}
	if o.shrunk != "" {
		if _, err := config.ParseToken(o.shrunk); err != nil {
			return o, fmt.Errorf("--shrunk: %v", err)
		}
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
		return exitUsage
	}
	if o.cpuprof != "" {
		f, err := os.Create(o.cpuprof)
		if err != nil {
			fmt.Fprintf(stderr, "simrun: --cpuprofile: %v\n", err)
			return exitUsage
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			fmt.Fprintf(stderr, "simrun: --cpuprofile: %v\n", err)
			return exitUsage
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	switch {
	case o.replay != "":
		return replay(o, stdout, stderr)
	case o.sweep:
		return sweep(o, stdout, stderr)
	}
	opt := sim.Options{Seed: o.seed, Profile: o.profile, Safety: o.duration, Steps: o.steps, Shrunk: o.shrunk}
	if o.shrink {
		return shrink(opt, stdout, stderr)
	}
	if o.trace {
		opt.Trace = stdout
	}
	res, err := sim.Run(opt)
	if err != nil {
		fmt.Fprintf(stderr, "simrun: %v\n", err)
		return exitUsage
	}
	if err := explain.Explain(res); err != nil {
		fmt.Fprintf(stderr, "simrun: explaining the violation: %v\n", err)
	}
	if err := explain.Report(res, stdout); err != nil {
		fmt.Fprintf(stderr, "simrun: writing the report: %v\n", err)
		return exitViolation
	}
	if o.timeline != "" {
		if err := writeTimeline(o.timeline, opt); err != nil {
			fmt.Fprintf(stderr, "simrun: --timeline: %v\n", err)
			return exitUsage
		}
		fmt.Fprintf(stdout, "timeline written to %s\n", o.timeline)
	}
	return exitCode(res)
}

// exitCode maps a run's verdict to simrun's exit status.
func exitCode(res *sim.Result) int {
	switch res.Verdict() {
	case sim.VerdictFault:
		return exitFault
	case sim.VerdictViolation:
		return exitViolation
	case sim.VerdictIncomplete:
		return exitIncomplete
	}
	return exitOK
}

func writeTimeline(path string, opt sim.Options) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := explain.WriteTimeline(f, opt); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func shrink(opt sim.Options, stdout, stderr io.Writer) int {
	start := time.Now()
	s, err := explain.Shrink(opt)
	if err != nil {
		fmt.Fprintf(stderr, "simrun: --shrink: %v\n", err)
		return exitUsage
	}
	fmt.Fprint(stdout, s.Summary())
	// Wall time goes to stderr: stdout stays the same bytes on every run.
	fmt.Fprintf(stderr, "shrink took %s\n", time.Since(start).Round(time.Millisecond))
	return exitViolation
}

func replay(o options, stdout, stderr io.Writer) int {
	data, err := os.ReadFile(o.replay)
	if err != nil {
		fmt.Fprintf(stderr, "simrun: %v\n", err)
		return exitUsage
	}
	entries, err := corpus.Parse(o.replay, string(data))
	if err != nil {
		fmt.Fprintf(stderr, "simrun: %v\n", err)
		return exitUsage
	}
	code := exitOK
	for _, e := range entries {
		res, err := sim.Run(e.Options())
		if err != nil {
			fmt.Fprintf(stderr, "simrun: %s: %v\n", e.Where, err)
			return exitUsage
		}
		if err := explain.Report(res, stdout); err != nil {
			return exitViolation
		}
		if res.Fault != "" {
			code = worse(code, exitFault)
		}
		if msg := e.Check(res); msg != "" {
			fmt.Fprintf(stdout, "corpus entry %s: FAIL: %s\n", e.Where, msg)
			code = worse(code, exitViolation)
		} else {
			fmt.Fprintf(stdout, "corpus entry %s: ok (%s)\n", e.Where, e.Note)
		}
	}
	return code
}

type outcome struct {
	seed      int64
	res       *sim.Result
	err       error
	perturbed bool   // --check-determinism: the second run of the seed
	diverge   string // --check-determinism: the first diverging event, "" when the runs agree
}

type job struct {
	seed    int64
	perturb bool
}

// runSeeds runs o's seeds (twice each with --check-determinism) on o.parallel workers and
// sends each outcome as it comes; the channel closes when every run is done.
func runSeeds(o options, base sim.Options) <-chan outcome {
	jobs := make(chan job)
	results := make(chan outcome)
	var wg sync.WaitGroup
	for i := 0; i < o.parallel; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				opt := base
				opt.Seed, opt.Perturb = j.seed, j.perturb
				res, err := sim.Run(opt)
				results <- outcome{seed: j.seed, res: res, err: err, perturbed: j.perturb}
			}
		}()
	}
	go func() {
		// With --check-determinism each seed runs twice, as two jobs, so two different
		// workers usually run them.
		for s := o.lo; s <= o.hi; s++ {
			jobs <- job{seed: s}
			if o.determ {
				jobs <- job{seed: s, perturb: true}
			}
		}
		close(jobs)
		wg.Wait()
		close(results)
	}()
	return results
}

func sweep(o options, stdout, stderr io.Writer) int {
	n := o.hi - o.lo + 1
	base := sim.Options{Profile: o.profile, Safety: o.duration, Steps: o.steps}
	results := runSeeds(o, base)

	tty := isTerminal(stdout)
	start := time.Now()
	var done, events int64
	var simTotal time.Duration
	var failed []outcome
	var ratios []ratio
	first := map[int64]outcome{} // --check-determinism: the run whose pair has not arrived
	for oc := range results {
		if oc.err != nil {
			// Only an option can make Run fail, and every seed shares the options.
			fmt.Fprintf(stderr, "simrun: seed %d: %v\n", oc.seed, oc.err)
			return exitUsage
		}
		if o.determ {
			prev, ok := first[oc.seed]
			if !ok {
				first[oc.seed] = oc
				continue
			}
			delete(first, oc.seed)
			if oc.perturbed {
				oc, prev = prev, oc // report the plain run
			}
			if oc.res.Digest != prev.res.Digest {
				oc.diverge = firstDivergence(base, oc.seed)
			}
		}
		done++
		if oc.res.OK() {
			ratios = append(ratios, ratio{oc.seed, oc.res.Liveness.Ratio()})
		}
		simTotal += oc.res.End
		events += int64(oc.res.Steps)
		bad := !oc.res.OK() || oc.diverge != ""
		if bad {
			failed = append(failed, oc)
		}
		if tty {
			width := 40
			k := int(done * int64(width) / n)
			fmt.Fprintf(stdout, "\r[%s%s] %d/%d seeds, %d failed", strings.Repeat("#", k), strings.Repeat(".", width-k), done, n, len(failed))
		} else if bad || done%100 == 0 || done == n {
			status := "ok"
			if bad {
				status = strings.ToUpper(failureOf(oc))
			}
			fmt.Fprintf(stdout, "seed %d: %s (%d/%d done)\n", oc.seed, status, done, n)
		}
	}
	if tty {
		fmt.Fprintln(stdout)
	}
	wall := time.Since(start)
	runs := "each seed once"
	if o.determ {
		runs = "each seed twice (determinism check)"
	}
	fmt.Fprintf(stdout, "swept %d seeds (profile %s, %s) in %s on %d workers: %d failed; %.0f simulated s per wall s, %d events\n",
		n, o.profile, runs, wall.Round(time.Millisecond), o.parallel, len(failed), simTotal.Seconds()/wall.Seconds(), events)
	if len(ratios) > 0 {
		fmt.Fprintln(stdout, settleSummary(ratios))
	}
	if len(failed) == 0 {
		return exitOK
	}
	rank(failed, stdout)
	if o.tlDir != "" {
		writeTimelines(o.tlDir, base, failed, stdout, stderr)
	}
	code := exitOK
	for _, f := range failed {
		code = worse(code, failCode(f))
	}
	return code
}

// ratio is one passing seed's liveness settle time over its bound (the tighter side's).
type ratio struct {
	seed int64
	r    float64
}

// settleSummary renders the distribution of settle time over bound across passing seeds, so a
// change that slows settling shows as a number even when no seed fails.
func settleSummary(rs []ratio) string {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].r != rs[j].r {
			return rs[i].r < rs[j].r
		}
		return rs[i].seed < rs[j].seed
	})
	q := func(p float64) float64 { return rs[int(p*float64(len(rs)-1))].r }
	top := rs[len(rs)-1]
	return fmt.Sprintf("liveness settle time / bound over %d passing seeds: median %.4f, p90 %.4f, max %.4f (seed %d)",
		len(rs), q(0.5), q(0.9), top.r, top.seed)
}

// failureOf names what a failed outcome failed on.
func failureOf(oc outcome) string {
	if oc.diverge != "" {
		return "nondeterministic"
	}
	return oc.res.Failure()
}

func failCode(oc outcome) int {
	if oc.diverge != "" {
		return exitNondeterminism
	}
	return exitCode(oc.res)
}

// worse ranks exit statuses: a simulator fault, then nondeterminism, a violation, incomplete.
func worse(a, b int) int {
	rank := map[int]int{exitOK: 0, exitIncomplete: 1, exitViolation: 2, exitNondeterminism: 3, exitFault: 4}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// rank lists failing seeds grouped by what they broke (groups in name order), shortest
// (events to failure) first within a group.
func rank(failed []outcome, stdout io.Writer) {
	sort.SliceStable(failed, func(i, j int) bool {
		a, b := failed[i], failed[j]
		if fa, fb := failureOf(a), failureOf(b); fa != fb {
			return fa < fb
		}
		if a.res.Steps != b.res.Steps {
			return a.res.Steps < b.res.Steps
		}
		return a.seed < b.seed
	})
	fmt.Fprintln(stdout, "failing seeds, by invariant, shortest first (events to failure):")
	group := ""
	for _, f := range failed {
		if g := failureOf(f); g != group {
			group = g
			k := 0
			for _, h := range failed {
				if failureOf(h) == g {
					k++
				}
			}
			fmt.Fprintf(stdout, "  %s (%d):\n", g, k)
		}
		extra := ""
		if f.diverge != "" {
			extra = " — first diverging event: " + f.diverge
		}
		fmt.Fprintf(stdout, "    seed %d: %d events — %s%s\n", f.seed, f.res.Steps, f.res.Repro(), extra)
	}
}

// writeTimelines writes the timelines of the shortest failures (at most 3) to dir.
func writeTimelines(dir string, base sim.Options, failed []outcome, stdout, stderr io.Writer) {
	short := append([]outcome(nil), failed...)
	sort.SliceStable(short, func(i, j int) bool { return short[i].res.Steps < short[j].res.Steps })
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "simrun: --timelines: %v\n", err)
		return
	}
	for _, f := range short[:min(3, len(short))] {
		opt := base
		opt.Seed = f.seed
		path := filepath.Join(dir, "seed-"+strconv.FormatInt(f.seed, 10)+".html")
		if err := writeTimeline(path, opt); err != nil {
			fmt.Fprintf(stderr, "simrun: --timelines: %v\n", err)
			return
		}
		fmt.Fprintf(stdout, "timeline of seed %d written to %s\n", f.seed, path)
	}
}

// firstDivergence runs seed twice more with the trace captured (plain, then perturbed) and
// names the first line where they differ.
func firstDivergence(base sim.Options, seed int64) string {
	var a, b strings.Builder
	oa, ob := base, base
	oa.Seed, ob.Seed = seed, seed
	oa.Trace, ob.Trace, ob.Perturb = &a, &b, true
	if _, err := sim.Run(oa); err != nil {
		return err.Error()
	}
	if _, err := sim.Run(ob); err != nil {
		return err.Error()
	}
	la, lb := strings.Split(a.String(), "\n"), strings.Split(b.String(), "\n")
	for i := 0; i < len(la) && i < len(lb); i++ {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d: %q vs %q", i+1, la[i], lb[i])
		}
	}
	if len(la) != len(lb) {
		return fmt.Sprintf("one trace ends at line %d, the other at %d", len(la), len(lb))
	}
	return "the traces agree when rerun: the divergence is not reproducible (a data race or wall-clock read)"
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
