package sluicetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// SeedEnv names the environment variable that replays one run instead of the sweep: a seed
// ("37") or a replay token ("37:jobs=1,crashes=1,stops=0,disk=0,svc=0,horizon=30s").
const SeedEnv = "SLUICETEST_SEED"

// TimelineEnv names the environment variable for the directory timelines are written to
// (default: sluicetest under os.TempDir()).
const TimelineEnv = "SLUICETEST_TIMELINE_DIR"

// shrinkRunsMax bounds the runs one shrink makes.
const shrinkRunsMax = 200

// Option configures Check and Find.
type Option func(*options)

type options struct {
	seeds         []int64
	corpus        string
	timelineDir   string
	noDeterminism bool
	name          string
	pkg           string // the calling test's import path, for the replay command
}

// Seeds sweeps seeds 1 to n.
func Seeds(n int) Option { return SeedRange(1, n) }

// SeedRange sweeps n seeds from first.
func SeedRange(first int64, n int) Option {
	return func(o *options) {
		for i := range int64(n) {
			o.seeds = append(o.seeds, first+i)
		}
	}
}

// Corpus keeps failing runs in path (one replay token a line; '#' starts a comment), replays
// them before the sweep, and appends each new failure's shrunk token. Commit the file (for
// example under testdata/) so a fixed bug stays fixed.
func Corpus(path string) Option { return func(o *options) { o.corpus = path } }

// TimelineDir writes failure timelines to dir instead of $SLUICETEST_TIMELINE_DIR or the
// temporary directory.
func TimelineDir(dir string) Option { return func(o *options) { o.timelineDir = dir } }

// NoDeterminismCheck skips running the first seed twice.
func NoDeterminismCheck() Option { return func(o *options) { o.noDeterminism = true } }

// Failure is what a sweep found: the run, its shrunk reproduction and the timeline's file.
type Failure struct {
	Found    *Violation // as the sweep's seed drew it
	Shrunk   *Violation // the same seed with the knobs lowered as far as it still fails
	Timeline string     // the shrunk run's timeline file ("" if it could not be written)
	test     string     // the test's name, for the replay command ("" from Find)
	pkg      string     // the test's package, for the replay command ("" from Find)
}

func (f *Failure) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sluicetest: %v\n", f.Found)
	fmt.Fprintf(&b, "  knobs:     %s\n", f.Found.Knobs)
	fmt.Fprintf(&b, "  shrunk:    %s: %v\n", f.Shrunk.Knobs, f.Shrunk.Err)
	test := f.test
	if test == "" {
		test = "<test>"
	}
	pkg := f.pkg
	if pkg == "" {
		pkg = "."
	}
	fmt.Fprintf(&b, "  replay:    %s='%s' go test -run '%s' %s\n", SeedEnv, f.Shrunk.Token(), test, pkg)
	if f.Timeline != "" {
		fmt.Fprintf(&b, "  timeline:  %s\n", f.Timeline)
	}
	tl := f.Shrunk.Timeline
	if n := 30; len(tl) > n {
		fmt.Fprintf(&b, "  last %d of %d timeline lines of the shrunk run:\n", n, len(tl))
		tl = tl[len(tl)-n:]
	} else {
		fmt.Fprintf(&b, "  timeline of the shrunk run:\n")
	}
	for _, l := range tl {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	return b.String()
}

// runSpec is one run to make: a seed, and knobs when a token fixed them.
type runSpec struct {
	seed  int64
	knobs *Knobs
	label string
}

// sweep is what Check and Find need of a scenario: its knobs per seed and one run.
type sweep struct {
	knobs    func(seed int64) Knobs
	run      func(seed int64, k Knobs) result
	validate func() error
}

func (sc *Scenario[A]) sweep() sweep {
	return sweep{knobs: sc.knobs, run: func(seed int64, k Knobs) result { return run(sc, seed, k) }, validate: sc.validate}
}

// Check sweeps the scenario's seeds as subtests of t ("seed=N"; corpus entries first, as
// "corpus=TOKEN"). The first failing seed fails its subtest with the broken invariant, the
// shrunk reproduction, the replay command and the timeline file, and ends the sweep. With
// $SLUICETEST_SEED set, only that run is made. Unless NoDeterminismCheck, the first seed runs
// twice and must give the same timeline.
func Check[A any](t *testing.T, sc Scenario[A], opts ...Option) {
	t.Helper()
	checkSweep(t, sc.sweep(), opts)
}

func checkSweep(t *testing.T, sw sweep, opts []Option) {
	t.Helper()
	o := buildOptions(opts)
	o.name, o.pkg = t.Name(), callerPackage()
	specs, err := o.specs()
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.validate(); err != nil {
		t.Fatal(err)
	}
	if !o.noDeterminism && len(specs) > 0 {
		if err := determinism(sw, specs[0]); err != nil {
			t.Fatal(err)
		}
	}
	for _, sp := range specs {
		var f *Failure
		t.Run(sp.label, func(t *testing.T) {
			t.Helper() // the report points at the user's Check call, not here
			f = runOne(sw, sp, &o)
			if f != nil {
				t.Fatal(f.String())
			}
		})
		if f != nil {
			return
		}
	}
}

// Find sweeps like Check without a *testing.T and returns the first failure (nil: every seed
// passed) or an error for a bad option, scenario or a nondeterministic run. Use it to assert
// that a known bug is found.
func Find[A any](sc Scenario[A], opts ...Option) (*Failure, error) {
	return findSweep(sc.sweep(), opts)
}

func findSweep(sw sweep, opts []Option) (*Failure, error) {
	o := buildOptions(opts)
	o.name = "find"
	specs, err := o.specs()
	if err != nil {
		return nil, err
	}
	if err := sw.validate(); err != nil {
		return nil, err
	}
	if !o.noDeterminism && len(specs) > 0 {
		if err := determinism(sw, specs[0]); err != nil {
			return nil, err
		}
	}
	for _, sp := range specs {
		if f := runOne(sw, sp, &o); f != nil {
			return f, nil
		}
	}
	return nil, nil
}

func buildOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if len(o.seeds) == 0 {
		Seeds(100)(&o)
	}
	return o
}

func (sc *Scenario[A]) validate() error {
	if sc.Setup == nil {
		return errors.New("sluicetest: Scenario.Setup is nil: it must build the handler")
	}
	noop := func(context.Context, sluice.Job[A]) error { return nil }
	var ce *sluice.ConfigError
	if _, err := sluice.NewRunnerKit(sc.simConfig(), sc.kindName(), noop, sc.Kind...); errors.As(err, &ce) {
		return fmt.Errorf("sluicetest: invalid Scenario.Config: %s = %v: %s", ce.Field, ce.Value, ce.Rule)
	} else if err != nil {
		return fmt.Errorf("sluicetest: invalid Scenario.Config: %w", err)
	}
	return nil
}

func (sc *Scenario[A]) knobs(seed int64) Knobs {
	jobs, horizon := sc.JobsMax, sc.Horizon
	if jobs <= 0 {
		jobs = jobsMaxDefault
	}
	if horizon <= 0 {
		horizon = horizonDefault
	}
	return drawKnobs(seed, jobs, horizon)
}

// specs lists the runs: $SLUICETEST_SEED alone, else the corpus then the seeds.
func (o *options) specs() ([]runSpec, error) {
	if env := os.Getenv(SeedEnv); env != "" {
		sp, err := parseToken(env)
		if err != nil {
			return nil, fmt.Errorf("sluicetest: %s=%q: %w", SeedEnv, env, err)
		}
		return []runSpec{sp}, nil
	}
	var out []runSpec
	if o.corpus != "" {
		toks, err := readCorpus(o.corpus)
		if err != nil {
			return nil, err
		}
		for _, tok := range toks {
			sp, err := parseToken(tok)
			if err != nil {
				return nil, fmt.Errorf("sluicetest: corpus %s: %q: %w", o.corpus, tok, err)
			}
			sp.label = "corpus=" + tok
			out = append(out, sp)
		}
	}
	for _, s := range o.seeds {
		out = append(out, runSpec{seed: s, label: fmt.Sprintf("seed=%d", s)})
	}
	return out, nil
}

var tokenRE = regexp.MustCompile(`^(-?\d+)(?::jobs=(\d+),crashes=(\d+),stops=(\d+),disk=([01]),svc=([01]),horizon=([0-9a-zµ.]+))?$`)

// parseToken reads "SEED" or "SEED:KNOBS" (Knobs.String's form).
func parseToken(s string) (runSpec, error) {
	m := tokenRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return runSpec{}, errors.New("want SEED or SEED:jobs=J,crashes=C,stops=S,disk=0|1,svc=0|1,horizon=DURATION")
	}
	seed, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return runSpec{}, err
	}
	sp := runSpec{seed: seed, label: fmt.Sprintf("seed=%d", seed)}
	if m[2] == "" {
		return sp, nil
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	h, err := time.ParseDuration(m[7])
	if err != nil {
		return runSpec{}, err
	}
	sp.knobs = &Knobs{Jobs: atoi(m[2]), Crashes: atoi(m[3]), Stops: atoi(m[4]),
		DiskFaults: m[5] == "1", ServiceFaults: m[6] == "1", Horizon: h}
	return sp, nil
}

func readCorpus(path string) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sluicetest: reading corpus: %w", err)
	}
	defer f.Close()
	var toks []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		toks = append(toks, l)
	}
	return toks, sc.Err()
}

func appendCorpus(path, tok string) error {
	toks, err := readCorpus(path)
	if err != nil {
		return err
	}
	for _, t := range toks {
		if t == tok {
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("sluicetest: writing corpus: %w", err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("sluicetest: writing corpus: %w", err)
	}
	if len(toks) == 0 {
		fmt.Fprintln(f, "# sluicetest corpus: runs that once broke an invariant, replayed before every sweep.")
	}
	_, err = fmt.Fprintln(f, tok)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// runOne makes one run and, on a violation, shrinks it, writes its timeline and keeps it in
// the corpus.
func runOne(sw sweep, sp runSpec, o *options) *Failure {
	k := sw.knobs(sp.seed)
	if sp.knobs != nil {
		k = *sp.knobs
	}
	res := sw.run(sp.seed, k)
	if res.violation == nil {
		return nil
	}
	f := &Failure{Found: res.violation, Shrunk: shrink(sw, res.violation)}
	if o.name != "find" {
		f.test, f.pkg = "^"+regexp.QuoteMeta(o.name)+"$", o.pkg
	}
	f.Timeline = writeTimeline(o, f.Shrunk)
	if o.corpus != "" {
		_ = appendCorpus(o.corpus, f.Shrunk.Token()) // best effort: the report names the token
	}
	return f
}

// shrink lowers the knobs one at a time, keeping each change that still breaks the same
// invariant, until none does.
func shrink(sw sweep, v *Violation) *Violation {
	best := v
	runs := 0
	for runs < shrinkRunsMax {
		improved := false
		for _, k := range smaller(best.Knobs) {
			runs++
			r := sw.run(best.Seed, k)
			if r.violation != nil && r.violation.Invariant == best.Invariant {
				best, improved = r.violation, true
				break
			}
			if runs >= shrinkRunsMax {
				break
			}
		}
		if !improved {
			break
		}
	}
	return best
}

// smaller lists knobs one step below k, the biggest cuts first.
func smaller(k Knobs) []Knobs {
	var out []Knobs
	add := func(f func(*Knobs)) {
		c := k
		f(&c)
		if c != k {
			out = append(out, c)
		}
	}
	add(func(c *Knobs) { c.Crashes = 0 })
	add(func(c *Knobs) { c.Stops = 0 })
	add(func(c *Knobs) { c.DiskFaults = false })
	add(func(c *Knobs) { c.ServiceFaults = false })
	add(func(c *Knobs) { c.Jobs = 1 })
	add(func(c *Knobs) { c.Jobs /= 2; c.Jobs = max(c.Jobs, 1) })
	add(func(c *Knobs) { c.Jobs = max(c.Jobs-1, 1) })
	add(func(c *Knobs) { c.Crashes = max(c.Crashes-1, 0) })
	add(func(c *Knobs) { c.Stops = max(c.Stops-1, 0) })
	add(func(c *Knobs) { c.Horizon = max(c.Horizon/2, time.Second) })
	return out
}

// writeTimeline writes v's timeline to a text file and returns its path ("" on failure).
func writeTimeline(o *options, v *Violation) string {
	dir := o.timelineDir
	if dir == "" {
		dir = os.Getenv(TimelineEnv)
	}
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "sluicetest")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' || r == ':' || r == '=' {
			return '_'
		}
		return r
	}, o.name)
	path := filepath.Join(dir, fmt.Sprintf("%s-seed-%d.txt", name, v.Seed))
	var b strings.Builder
	fmt.Fprintf(&b, "sluicetest timeline\nseed %d, replay token %s\ninvariant %q: %v\n\n", v.Seed, v.Token(), v.Invariant, v.Err)
	for _, l := range v.Timeline {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return ""
	}
	return path
}

// determinism runs sp twice and compares the timelines.
func determinism(sw sweep, sp runSpec) error {
	k := sw.knobs(sp.seed)
	if sp.knobs != nil {
		k = *sp.knobs
	}
	a, b := sw.run(sp.seed, k), sw.run(sp.seed, k)
	if a.digest == b.digest {
		return nil
	}
	i := 0
	for i < len(a.timeline) && i < len(b.timeline) && a.timeline[i] == b.timeline[i] {
		i++
	}
	line := func(tl []string) string {
		if i < len(tl) {
			return tl[i]
		}
		return "(end)"
	}
	return fmt.Errorf("sluicetest: seed %d ran twice and differed at timeline line %d:\n  first run:  %s\n  second run: %s\n"+
		"the handler or the workload is not deterministic: read time with sluicetest.Now(ctx), not time.Now; draw randomness from the workload's *rand.Rand; "+
		"do not let map order reach a Service call; do not start goroutines that outlive the handler or call Services beside it",
		sp.seed, i+1, line(a.timeline), line(b.timeline))
}

// callerPackage is the import path of the first caller outside sluicetest and testing: the
// package of the user's test, which the replay command names ("" if none is found).
func callerPackage() string {
	_, self, _, _ := runtime.Caller(0)
	selfDir := filepath.Dir(self)
	var pcs [32]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	for {
		f, more := frames.Next()
		ours := filepath.Dir(f.File) == selfDir && !strings.HasSuffix(f.File, "_test.go")
		if f.Function != "" && !ours && !strings.HasPrefix(f.Function, "testing.") && !strings.HasPrefix(f.Function, "runtime.") {
			return packageOf(f.Function)
		}
		if !more {
			return ""
		}
	}
}

// packageOf is the import path of a function's full name ("example.com/app/hooks.TestX.func1"
// is "example.com/app/hooks"); an external test package's "_test" is dropped, since go test
// takes the package's path.
func packageOf(fn string) string {
	slash := strings.LastIndex(fn, "/")
	dot := strings.Index(fn[slash+1:], ".")
	if dot < 0 {
		return ""
	}
	return strings.TrimSuffix(fn[:slash+1+dot], "_test")
}

// kindName is the kind the scenario's jobs carry: sluice.DefaultKind when Kind options register
// it, else none.
func (sc *Scenario[A]) kindName() string {
	if len(sc.Kind) > 0 {
		return sluice.DefaultKind
	}
	return ""
}
