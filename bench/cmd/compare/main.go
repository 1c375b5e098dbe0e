// Command compare runs sluice and its baselines (River on SQLite, River on
// PostgreSQL, goqite on SQLite) through the same workloads in one process,
// alternating systems within each round, and prints medians and ratios.
//
// Run it from bench/: go run ./cmd/compare (or ./run.sh). -h lists the flags.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/bench/extras"
	"github.com/sluicehq/sluice/bench/harness"
	"github.com/sluicehq/sluice/bench/systems"
)

type config struct {
	params    harness.Params
	rounds    int
	systems   string
	workloads string
	extras    bool
	steps     string // extras steps to run, comma-separated ("" = all)
	profile   string
	profRun   string
	tmp       string
}

func main() {
	if dir := os.Getenv(extras.FreshOpenEnv); dir != "" {
		if err := extras.FreshOpen(dir); err != nil {
			fmt.Fprintln(os.Stderr, "compare: fresh open:", err)
			os.Exit(1)
		}
		return
	}
	var c config
	flag.IntVar(&c.rounds, "rounds", 3, "rounds; each round runs every workload on every system, in rotated order")
	flag.IntVar(&c.params.Jobs, "jobs", 5000, "jobs in workload W1")
	flag.IntVar(&c.params.BatchJobs, "batch-jobs", 10000, "jobs in workload W2")
	flag.IntVar(&c.params.RetryJobs, "retry-jobs", 2000, "jobs in workload W4 (each runs 3 attempts)")
	flag.IntVar(&c.params.Producers, "producers", 8, "producers in W1 and W3")
	flag.IntVar(&c.params.Workers, "workers", 8, "workers (concurrent handlers) for every system")
	flag.IntVar(&c.params.Batch, "batch", 1000, "batch size in W2 and W4")
	flag.DurationVar(&c.params.SteadyFor, "steady", 4*time.Second, "duration of the steady-state workload W3")
	flag.IntVar(&c.params.SteadyRate, "rate", 500, "jobs/s offered in W3")
	flag.DurationVar(&c.params.Timeout, "timeout", 120*time.Second, "limit for one run of one workload on one system")
	flag.StringVar(&c.systems, "systems", "", "comma-separated systems to run (default all)")
	flag.StringVar(&c.workloads, "workloads", "W1,W2,W3,W4", "comma-separated workloads")
	flag.BoolVar(&c.extras, "extras", true, "also run the sluice-only figures (recovery, compaction, simulator, lease controller)")
	flag.StringVar(&c.steps, "extras-steps", "", `comma-separated sluice-only figures to run (default all), by their names as printed ("a 1 GiB journal opened"); with -workloads none, only those`)
	flag.StringVar(&c.profile, "cpuprofile", "", "write a CPU profile of the first run matching -profile-run to this file")
	flag.StringVar(&c.profRun, "profile-run", "W2/sluice-group", "workload/system whose first run -cpuprofile records")
	flag.StringVar(&c.tmp, "tmpdir", os.TempDir(), "parent of the scratch directory (must be a real disk for durable numbers)")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	scratch, err := os.MkdirTemp(c.tmp, "sluice-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)

	started := time.Now()
	out := os.Stdout
	printMachine(out, scratch)
	probeRate, overRate, err := diskProbe(out, scratch)
	if err != nil {
		return err
	}

	want := func(name string) bool {
		if c.systems == "" {
			return true
		}
		return slices.Contains(strings.Split(c.systems, ","), name)
	}
	var all []harness.System
	for _, s := range sluiceSystems() {
		if want(s.Name()) {
			all = append(all, s)
		}
	}
	if want("river-sqlite") {
		all = append(all, systems.RiverSQLite{})
	}
	if want("river-pg") {
		cl, err := systems.StartPG(ctx, scratch)
		if err != nil {
			fmt.Fprintf(out, "river-pg SKIPPED: cannot start the private PostgreSQL cluster: %v\n", err)
		} else {
			defer func() {
				if err := cl.Stop(); err != nil {
					fmt.Fprintln(os.Stderr, "compare:", err)
				}
			}()
			all = append(all, &systems.RiverPG{Cluster: cl})
		}
	}
	if want("goqite-sqlite") {
		all = append(all, systems.Goqite{})
	}
	if len(all) == 0 {
		return fmt.Errorf("no systems selected by -systems=%q", c.systems)
	}

	fmt.Fprintln(out, "\n## Settings")
	fmt.Fprintf(out, "workers=%d producers=%d rounds=%d; a fresh database/journal per run, in %s\n", c.params.Workers, c.params.Producers, c.rounds, scratch)
	fmt.Fprintln(out, "syncs/job: fsyncs counted by sluice (Stats.Syncs) per job; proc CPU cores: this process's user+system CPU time / wall time (the PostgreSQL server's CPU is not included)")
	for _, s := range all {
		for _, line := range s.Settings() {
			fmt.Fprintf(out, "- %-14s %s\n", s.Name()+":", line)
		}
	}

	var wls []harness.Workload
	for _, w := range harness.Workloads(c.params) {
		if slices.Contains(strings.Split(c.workloads, ","), w.ID) {
			wls = append(wls, w)
		}
	}

	var prof *os.File
	if c.profile != "" {
		if prof, err = os.Create(c.profile); err != nil {
			return err
		}
		defer prof.Close()
	}

	// results[workload][system] = one Result per successful round.
	results := map[string]map[string][]harness.Result{}
	failures := map[string]map[string][]string{}
	for _, w := range wls {
		results[w.ID] = map[string][]harness.Result{}
		failures[w.ID] = map[string][]string{}
	}
	runID := 0
	for r := 0; r < c.rounds; r++ {
		for _, w := range wls {
			for k := range all {
				// Rotate the order each round so no system always runs first.
				s := all[(k+r)%len(all)]
				if ctx.Err() != nil {
					return ctx.Err()
				}
				runID++
				dir := filepath.Join(scratch, fmt.Sprintf("run-%03d-%s-%s", runID, w.ID, s.Name()))
				profiling := prof != nil && c.profRun == w.ID+"/"+s.Name()
				if profiling {
					if err := pprof.StartCPUProfile(prof); err != nil {
						profiling = false
					}
				}
				t0 := time.Now()
				res, err := w.Run(ctx, s, dir)
				if profiling {
					pprof.StopCPUProfile()
					prof.Close()
					prof = nil
				}
				os.RemoveAll(dir)
				if err != nil {
					fmt.Fprintf(os.Stderr, "round %d %s %-14s FAILED after %s: %v\n", r+1, w.ID, s.Name(), time.Since(t0).Round(time.Millisecond), err)
					failures[w.ID][s.Name()] = append(failures[w.ID][s.Name()], err.Error())
					continue
				}
				fmt.Fprintf(os.Stderr, "round %d %s %-14s %s  %s\n", r+1, w.ID, s.Name(), time.Since(t0).Round(time.Millisecond), brief(w, res))
				results[w.ID][s.Name()] = append(results[w.ID][s.Name()], res)
			}
		}
	}

	fmt.Fprintln(out, "\n## Results (medians over rounds)")
	for _, w := range wls {
		printTable(out, w, all, results[w.ID], failures[w.ID])
		printBound(out, all, results[w.ID], probeRate, overRate, c.params.Workers)
	}
	if c.extras {
		fmt.Fprintln(out, "\n## sluice-only figures")
		runExtras(ctx, out, scratch, c.steps)
	}
	fmt.Fprintf(out, "\nload average at the end: %s\n", loadavg())
	fmt.Fprintf(out, "total wall time %s\n", time.Since(started).Round(time.Second))
	return nil
}

func brief(w harness.Workload, r harness.Result) string {
	var b strings.Builder
	for _, m := range w.Metrics {
		if v, ok := r[m.Key]; ok {
			fmt.Fprintf(&b, "%s=%.4g ", m.Key, v)
		}
	}
	if r["dups"] > 0 {
		fmt.Fprintf(&b, "DUPLICATE-ATTEMPTS=%.0f", r["dups"])
	}
	return b.String()
}

func values(rs []harness.Result, key string) []float64 {
	var xs []float64
	for _, r := range rs {
		if v, ok := r[key]; ok {
			xs = append(xs, v)
		}
	}
	return xs
}

func fmtNum(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func printTable(out io.Writer, w harness.Workload, all []harness.System, res map[string][]harness.Result, fails map[string][]string) {
	fmt.Fprintf(out, "\n### %s: %s\n\n", w.ID, w.Title)
	var cmpM harness.Metric
	for _, m := range w.Metrics {
		if m.Compare {
			cmpM = m
		}
	}
	ref := ""
	for _, s := range all {
		if strings.HasPrefix(s.Name(), "sluice") && len(res[s.Name()]) > 0 {
			ref = s.Name()
			break
		}
	}
	refV := harness.Median(values(res[ref], cmpM.Key))
	adv := func(v float64) string {
		if ref == "" || v == 0 || refV == 0 {
			return "-"
		}
		if cmpM.HigherBetter {
			return fmt.Sprintf("%.2fx", refV/v)
		}
		return fmt.Sprintf("%.2fx", v/refV)
	}
	cols := []string{"system", "rounds"}
	for _, m := range w.Metrics {
		cols = append(cols, m.Title)
	}
	cols = append(cols, "min.."+"max "+cmpM.Key, advTitle(ref, cmpM))
	rows := [][]string{cols}
	bestName, bestV := "", 0.0
	for _, s := range all {
		rs := res[s.Name()]
		row := []string{s.Name(), fmt.Sprintf("%d", len(rs))}
		if len(rs) == 0 {
			for range w.Metrics {
				row = append(row, "-")
			}
			row = append(row, "-", "-")
			rows = append(rows, row)
			continue
		}
		for _, m := range w.Metrics {
			xs := values(rs, m.Key)
			if len(xs) == 0 {
				row = append(row, "-")
			} else {
				row = append(row, fmtNum(harness.Median(xs)))
			}
		}
		xs := values(rs, cmpM.Key)
		row = append(row, fmtNum(slices.Min(xs))+".."+fmtNum(slices.Max(xs)))
		med := harness.Median(xs)
		row = append(row, adv(med))
		rows = append(rows, row)
		if !strings.HasPrefix(s.Name(), "sluice") {
			if bestName == "" || (cmpM.HigherBetter && med > bestV) || (!cmpM.HigherBetter && med < bestV) {
				bestName, bestV = s.Name(), med
			}
		}
	}
	writeAligned(out, rows)
	for _, s := range all {
		var dups float64
		for _, r := range res[s.Name()] {
			dups += r["dups"]
		}
		if dups > 0 {
			fmt.Fprintf(out, "note: %s ran %.0f attempts more than planned (redeliveries) over all rounds\n", s.Name(), dups)
		}
		for _, f := range fails[s.Name()] {
			fmt.Fprintf(out, "failed run: %s: %s\n", s.Name(), f)
		}
	}
	if ref != "" && bestName != "" {
		fmt.Fprintf(out, "best baseline on %s: %s (%s); %s\n", cmpM.Title, bestName, fmtNum(bestV), verdict(ref, adv(bestV), cmpM, refV, bestV))
	}
}

func advTitle(ref string, m harness.Metric) string {
	if ref == "" {
		return "ratio"
	}
	if m.HigherBetter {
		return ref + "/this"
	}
	return "this/" + ref
}

func verdict(ref, ratio string, m harness.Metric, refV, bestV float64) string {
	var r float64
	if m.HigherBetter {
		r = refV / bestV
	} else {
		r = bestV / refV
	}
	if !m.HigherBetter {
		return fmt.Sprintf("%s latency advantage %s", ref, ratio)
	}
	met := "MET"
	if r < 10 {
		met = "NOT met"
	}
	return fmt.Sprintf("%s/best = %s (target >= 10x: %s)", ref, ratio, met)
}

func writeAligned(out io.Writer, rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if i == 0 {
				fmt.Fprintf(&b, "%-*s", widths[i], c)
			} else {
				fmt.Fprintf(&b, "  %*s", widths[i], c)
			}
		}
		fmt.Fprintln(out, strings.TrimRight(b.String(), " "))
	}
}

func printMachine(out io.Writer, scratch string) {
	fmt.Fprintln(out, "## Machine")
	fmt.Fprintf(out, "go %s %s/%s, NumCPU=%d, GOMAXPROCS=%d\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0))
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "model name") {
				fmt.Fprintf(out, "cpu: %s\n", strings.TrimSpace(strings.SplitN(sc.Text(), ":", 2)[1]))
				break
			}
		}
		f.Close()
	}
	fmt.Fprintf(out, "load average at the start: %s (other work on the machine adds noise: systems alternate within each round and the tables show medians)\n", loadavg())
	dev, fstype, mnt := mountOf(scratch)
	fmt.Fprintf(out, "scratch dir %s on %s (%s, mounted at %s)\n", scratch, dev, fstype, mnt)
	if fstype == "tmpfs" {
		fmt.Fprintln(out, "WARNING: tmpfs makes fsync free; durable figures below are meaningless (use -tmpdir on a real disk)")
	}
}

func mountOf(path string) (dev, fstype, mnt string) {
	data, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return "?", "?", "?"
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		m := f[1]
		if (path == m || strings.HasPrefix(path, strings.TrimSuffix(m, "/")+"/")) && len(m) >= len(mnt) {
			dev, mnt, fstype = f[0], m, f[2]
		}
	}
	return dev, fstype, mnt
}

// diskProbe measures 64-byte append + fsync on the scratch disk, and the same over
// bytes written and synced before (the file's size does not change, so the file system has
// no metadata to commit: what sluice's journal pays, since it preallocates), so the table
// can be read against what the disk allows.
func diskProbe(out io.Writer, dir string) (appends, overwrites float64, err error) {
	if appends, err = probeSyncs(out, dir, false); err != nil {
		return 0, 0, err
	}
	if overwrites, err = probeSyncs(out, dir, true); err != nil {
		return 0, 0, err
	}
	return appends, overwrites, nil
}

// probeSyncs times 64-byte writes each followed by an fsync: appends, or overwrites of a
// region zero-filled and synced first.
func probeSyncs(out io.Writer, dir string, overwrite bool) (float64, error) {
	f, err := os.CreateTemp(dir, "probe-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 64)
	const n = 2000
	what := "append"
	if overwrite {
		what = "overwrite"
		if _, err := f.Write(make([]byte, n*len(buf))); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return 0, err
		}
	}
	lat := make([]time.Duration, 0, n)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		t := time.Now()
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
		lat = append(lat, time.Since(t))
	}
	el := time.Since(t0)
	fmt.Fprintf(out, "disk probe: 64-byte %s + fsync x%d: %.0f/s, p50 %s, p99 %s\n", what, n, n/el.Seconds(),
		harness.Percentile(lat, 50).Round(time.Microsecond), harness.Percentile(lat, 99).Round(time.Microsecond))
	return n / el.Seconds(), nil
}

// loadavg is the first three fields of /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// printBound prints, for each sluice system, what its processing phase did
// with fsyncs: the runner syncs a Started record before each dispatch and a
// Finished record before each completion, so with Capacity units at most
// Capacity jobs can share one fsync, and the disk's serial fsync rate (the
// probe) caps the processing rate near Capacity × probe rate.
//
// The ceiling is given against both probes: appends (what the target names, and
// what a journal that appends pays) and overwrites (what this journal's fsyncs are, since it
// preallocates: the disk's own best for them).
func printBound(out io.Writer, all []harness.System, res map[string][]harness.Result, probe, over float64, capacity int) {
	for _, s := range all {
		if !strings.HasPrefix(s.Name(), "sluice") {
			continue
		}
		jps := values(res[s.Name()], "proc jobs/sync")
		sps := values(res[s.Name()], "proc syncs/s")
		if len(jps) == 0 || len(sps) == 0 {
			continue
		}
		fmt.Fprintf(out, "%s processing phase (medians): %.2f jobs per fsync, %.0f fsyncs/s (%.0f%% of the disk probe's %.0f/s)",
			s.Name(), harness.Median(jps), harness.Median(sps), 100*harness.Median(sps)/probe, probe)
		if s.Name() == "sluice-group" {
			ceiling := float64(capacity) * probe
			fmt.Fprintf(out, "; ceiling with Capacity %d: %d attempts per fsync x %.0f fsyncs/s = %.0f attempts/s", capacity, capacity, probe, ceiling)
			ps := values(res[s.Name()], "process/s")
			if len(ps) > 0 {
				fmt.Fprintf(out, "; processing at %.0f%% of it", 100*harness.Median(ps)/ceiling)
			}
			if over > 0 {
				oc := float64(capacity) * over
				fmt.Fprintf(out, "; against the overwrite probe (%.0f fsyncs/s): %.0f attempts/s", over, oc)
				if len(ps) > 0 {
					fmt.Fprintf(out, ", processing at %.0f%% of it", 100*harness.Median(ps)/oc)
				}
			}
		}
		fmt.Fprintln(out)
	}
}
