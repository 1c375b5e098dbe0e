// Command sluice inspects and operates a runner's journal directory: counts, jobs and their
// attempts, a scan of the journal for damage, retry, cancel, pause and resume while no runner
// holds the directory, and the web UI (package sluiceui) served read-only.
//
// Read commands (stats, jobs, show, schedules, verify, serve) never write: they read the journal without
// the directory's lock, so they also work beside a live runner (seeing the journal as of its
// last sync). retry, cancel, pause and resume take the lock, and refuse, writing nothing,
// while a runner holds it.
//
// Exit status: 0 done, 1 a finding (verify found damage; a job or a kind was not found or
// could not be changed; the journal could not be read), 2 a usage error, 3 the directory is
// held by a running runner (nothing was written).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/sluiceui"
)

const usage = `sluice inspects and operates a runner's journal directory.

usage:
  sluice stats     --dir DIR [--json]
  sluice jobs      --dir DIR [--state S[,S...]] [--kind K] [--target T] [--after ID]
                   [--limit N | --all] [--json]
  sluice show      --dir DIR [--json] ID
  sluice schedules --dir DIR [--json]
  sluice verify    --dir DIR
  sluice retry     --dir DIR ID
  sluice cancel    --dir DIR ID
  sluice pause     --dir DIR KIND
  sluice resume    --dir DIR KIND
  sluice serve     --dir DIR [--addr HOST:PORT [--allow-remote]]

commands:
  stats      jobs by state, the last id issued, attempts a crash interrupted
  jobs       one page of jobs, ascending by id; the next page's command is printed to stderr
  show       one job with its attempt history (the last 10 attempts) and why it waits: its
             due time, a paused kind, its sequence held by an earlier job
  schedules  the periodic jobs' schedules: name, spec, kind, target, next due, last period
  verify     scan the journal: header, batches, LSNs, the clean-close mark, the snapshot and
             every record; report damage with the file, the offset and what to do
  retry      re-enqueue a dead job, due now (only while no runner holds DIR)
  cancel     cancel a job that is not terminal (only while no runner holds DIR)
  pause      pause a kind: its jobs start no attempt, across restarts, until resumed
             (only while no runner holds DIR; a live runner: Runner.Pause or the UI)
  resume     let a paused kind start attempts again (only while no runner holds DIR)
  serve      the web UI for DIR, read-only (see docs/operating.md to mount it in a live service)

flags:
  --dir DIR      the runner's directory (the one given to sluice.Open); required
  --json         print JSON instead of text
  --state S      jobs in any of these states: pending, waiting, deferred, running, succeeded,
                 dead, cancelled (comma-separated)
  --kind K       jobs of this kind
  --target T     jobs for this target
  --after ID     start after this id (the previous page's last id)
  --limit N      jobs per page (default 50, at most 1000)
  --all          every matching job, all pages
  --addr A       serve's listen address (default 127.0.0.1:8080); a loopback address
                 unless --allow-remote is given
  --allow-remote serve on an address other hosts can reach: every page, payloads included,
                 is shown to whoever connects (no authentication)

Text output shows control characters, format characters (such as bidirectional overrides)
and invalid UTF-8 in targets, kinds, keys, errors and payloads as visible escapes (\x1b,
\u202e, \xff), and cuts long values with their length stated; --json prints them exactly.

Read commands never write and take no lock. A directory shows what its journal holds:
paused kinds, flow keys and sequences; the limits and rates a program registers its kinds
with live in that program, so stats, jobs and show cannot say a job waits for them.

retry, cancel, pause and resume open DIR as the runner does (recovering it as the next
Open would, then writing one record) and refuse while a runner holds DIR: stop it first, or
act through the runner's API or the UI mounted beside it.

exit status: 0 done, 1 a finding (damage, a job or kind not found or not changed, an
unreadable journal), 2 usage error, 3 DIR is held by a running runner (nothing was written)
`

// Exit statuses.
const (
	exitOK      = 0
	exitFinding = 1
	exitUsage   = 2
	exitLocked  = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runContext(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type options struct {
	cmd    string
	dir    string
	json   bool
	filter sluiceui.Filter
	state  string
	all    bool
	addr   string
	remote bool
	id     uint64
	kind   string           // pause and resume
	clock  func() time.Time // time.Now; tests set it
}

func (o options) now() time.Time {
	if o.clock == nil {
		return time.Now()
	}
	return o.clock()
}

// errUsage marks an error as a usage error (exit 2).
type errUsage struct{ error }

func usageErr(format string, a ...any) error { return errUsage{fmt.Errorf(format, a...)} }

var commands = []string{"stats", "jobs", "show", "schedules", "verify", "retry", "cancel", "pause", "resume", "serve"}

func parse(args []string) (options, error) {
	o := options{addr: "127.0.0.1:8080"}
	if len(args) == 0 {
		return o, usageErr("give a command: %s", strings.Join(commands, ", "))
	}
	o.cmd = args[0]
	known := false
	for _, c := range commands {
		known = known || c == o.cmd
	}
	if !known {
		return o, usageErr("unknown command %q: want one of %s", o.cmd, strings.Join(commands, ", "))
	}
	fs := flag.NewFlagSet("sluice "+o.cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.dir, "dir", "", "")
	fs.BoolVar(&o.json, "json", false, "")
	fs.StringVar(&o.state, "state", "", "")
	fs.StringVar(&o.filter.Kind, "kind", "", "")
	fs.StringVar(&o.filter.Target, "target", "", "")
	fs.Uint64Var(&o.filter.After, "after", 0, "")
	fs.IntVar(&o.filter.Limit, "limit", 50, "")
	fs.BoolVar(&o.all, "all", false, "")
	fs.StringVar(&o.addr, "addr", o.addr, "")
	fs.BoolVar(&o.remote, "allow-remote", false, "")
	// Flags may come before or after the positional id.
	var pos []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			return o, usageErr("%v", err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	allowed := map[string][]string{
		"stats":     {"dir", "json"},
		"jobs":      {"dir", "json", "state", "kind", "target", "after", "limit", "all"},
		"show":      {"dir", "json"},
		"schedules": {"dir", "json"},
		"verify":    {"dir"},
		"retry":     {"dir"},
		"cancel":    {"dir"},
		"pause":     {"dir"},
		"resume":    {"dir"},
		"serve":     {"dir", "addr", "allow-remote"},
	}[o.cmd]
	for name := range set {
		ok := false
		for _, a := range allowed {
			ok = ok || a == name
		}
		if !ok {
			return o, usageErr("%s does not take --%s", o.cmd, name)
		}
	}
	if o.dir == "" {
		return o, usageErr("%s: --dir is required (the runner's directory)", o.cmd)
	}
	needID := o.cmd == "show" || o.cmd == "retry" || o.cmd == "cancel"
	needKind := o.cmd == "pause" || o.cmd == "resume"
	switch {
	case needID && len(pos) != 1:
		return o, usageErr("%s takes one job id, got %d arguments", o.cmd, len(pos))
	case needKind && len(pos) != 1:
		return o, usageErr("%s takes one kind's name, got %d arguments (the kinds: `sluice stats --dir %s`)", o.cmd, len(pos), shellQuote(o.dir))
	case needKind:
		o.kind = pos[0]
	case !needID && len(pos) > 0:
		return o, usageErr("%s takes no argument, got %q", o.cmd, pos[0])
	case o.filter.Limit < 1 || o.filter.Limit > 1000:
		return o, usageErr("--limit %d: want 1 to 1000", o.filter.Limit)
	case o.all && set["limit"]:
		return o, usageErr("--all and --limit exclude each other")
	}
	if needID {
		id, err := strconv.ParseUint(pos[0], 10, 64)
		if err != nil || id == 0 {
			return o, usageErr("job id %q: want a positive integer", pos[0])
		}
		o.id = id
	}
	states, err := sluiceui.ParseStates(o.state)
	if err != nil {
		return o, usageErr("--state: %v", strings.TrimPrefix(err.Error(), "sluice: "))
	}
	o.filter.States = states
	if o.cmd == "serve" {
		if err := checkAddr(o.addr, o.remote); err != nil {
			return o, errUsage{err}
		}
	}
	return o, nil
}

// run runs one command and returns its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run; serve stops when ctx ends.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	for i, a := range args {
		if a == "-h" || a == "--help" || a == "-help" || i == 0 && a == "help" {
			fmt.Fprint(stdout, usage)
			return exitOK
		}
	}
	o, err := parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "sluice: %v\n\n%s", err, usage)
		return exitUsage
	}
	var code int
	switch o.cmd {
	case "verify":
		code, err = verify(o, stdout)
	case "retry", "cancel", "pause", "resume":
		code, err = change(ctx, o, stdout)
	default:
		code, err = read(ctx, o, stdout, stderr)
	}
	if err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "sluice: ") {
			msg = "sluice: " + msg
		}
		fmt.Fprintln(stderr, msg)
		if code == exitOK {
			code = exitFinding
		}
	}
	return code
}

// read runs the commands that read through a sluiceui.Source.
func read(ctx context.Context, o options, stdout, stderr io.Writer) (int, error) {
	src, err := sluiceui.FromDir(o.dir)
	if err != nil {
		return exitFinding, fmt.Errorf("%w (check --dir)", err)
	}
	switch o.cmd {
	case "stats":
		return stats(ctx, src, o, stdout)
	case "jobs":
		return jobs(ctx, src, o, stdout, stderr)
	case "show":
		return show(ctx, src, o, stdout)
	case "schedules":
		return schedules(ctx, src, o, stdout)
	case "serve":
		return serve(ctx, src, o, stdout)
	}
	panic("sluice: unknown read command " + o.cmd)
}

// isLocked says whether err is the directory lock held by another runner.
func isLocked(err error) bool { return errors.Is(err, errLocked) }
