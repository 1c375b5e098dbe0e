package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sluicehq/sluice"
)

// errLocked is the directory lock held by a running runner.
var errLocked = sluice.ErrLocked

// change runs retry, cancel, pause and resume: it opens the directory as the runner does,
// taking its lock (sluice.Open refuses with ErrLocked, writing nothing, while a runner holds
// it), writes the one record, synced before the command returns, and closes. No attempt
// starts: the runner is never Run.
func change(ctx context.Context, o options, stdout io.Writer) (int, error) {
	path := filepath.Join(o.dir, journalName)
	if _, err := os.Stat(path); err != nil {
		// Open would create a journal here: a mistyped --dir must not become a runner directory.
		return exitFinding, fmt.Errorf("--dir %s holds no runner journal (%s): %w", o.dir, journalName, err)
	}
	// A live runner first: beside it, an attempt running now looks interrupted in the journal.
	if held, err := lockHeld(o.dir); err == nil && held {
		return exitLocked, lockedErr(o)
	}
	// Open records an interrupted attempt as failed under the retry policy it is given, and
	// this command does not know the runner's: leave that to the runner.
	in, err := sluice.Inspect(o.dir)
	if err != nil {
		return exitFinding, err
	}
	if len(in.Interrupted) > 0 {
		return exitFinding, fmt.Errorf("%s: %d attempts in %s were interrupted by a crash (jobs %s), and only the runner knows the retry policy to record them with: start the runner once, then %s through it or stop it and try again; nothing was written",
			o.cmd, len(in.Interrupted), o.dir, idList(in.Interrupted), o.cmd)
	}
	r, err := openForChange(o.dir)
	if isLocked(err) {
		return exitLocked, lockedErr(o)
	}
	if err != nil {
		return exitFinding, err
	}
	switch o.cmd {
	case "retry":
		err = r.Retry(ctx, o.id)
	case "cancel":
		err = r.Cancel(ctx, o.id)
	case "pause":
		err = r.Pause(ctx, o.kind)
	case "resume":
		err = r.Resume(ctx, o.kind)
	}
	if cerr := r.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing %s: %w", o.dir, cerr)
	}
	// The API's errors carry their own "sluice:", which main prints once for the whole line.
	why := ""
	if err != nil {
		why = strings.TrimPrefix(err.Error(), "sluice: ")
	}
	switch {
	case errors.Is(err, sluice.ErrUnknownKind):
		return exitFinding, fmt.Errorf("%s %s: no job or schedule in %s names this kind; the journal's kinds: %s; nothing was written", o.cmd, term(o.kind, 100), o.dir, kindList(in))
	case errors.Is(err, sluice.ErrNotFound):
		return exitFinding, fmt.Errorf("%s %d: %s (list the ids with `sluice jobs --dir %s`)", o.cmd, o.id, why, shellQuote(o.dir))
	case errors.Is(err, sluice.ErrNotDead):
		return exitFinding, fmt.Errorf("retry %d: only a dead job can be retried: %s (see `sluice show --dir %s %d`)", o.id, why, shellQuote(o.dir), o.id)
	case errors.Is(err, sluice.ErrTerminal):
		return exitFinding, fmt.Errorf("cancel %d: the job is already terminal: %s (see `sluice show --dir %s %d`)", o.id, why, shellQuote(o.dir), o.id)
	case err != nil:
		return exitFinding, err
	}
	switch o.cmd {
	case "retry":
		fmt.Fprintf(stdout, "job %d is pending again, due now: the runner starts it when it next runs\n", o.id)
	case "cancel":
		fmt.Fprintf(stdout, "job %d is cancelled\n", o.id)
	case "pause":
		was := "is paused"
		if slices.Contains(in.Paused, o.kind) {
			was = "was paused already (nothing written)"
		}
		fmt.Fprintf(stdout, "kind %s %s: its jobs start no attempt until `sluice resume --dir %s %s` (or Runner.Resume)\n",
			term(o.kind, 100), was, shellQuote(o.dir), shellQuote(o.kind))
	case "resume":
		was := "is resumed"
		if !slices.Contains(in.Paused, o.kind) {
			was = "was not paused (nothing written)"
		}
		fmt.Fprintf(stdout, "kind %s %s: its jobs start when the runner next runs\n", term(o.kind, 100), was)
	}
	return exitOK, nil
}

// kindList names the kinds in's jobs and schedules, sorted, at most 20 ("none" for none).
func kindList(in sluice.Inspection) string {
	seen := map[string]bool{}
	for _, j := range in.Jobs {
		seen[j.Kind] = true
	}
	for _, s := range in.Schedules {
		seen[s.Kind] = true
	}
	names := slices.Sorted(maps.Keys(seen))
	if len(names) == 0 {
		return "none"
	}
	more := ""
	if len(names) > 20 {
		names, more = names[:20], fmt.Sprintf(" and %d more", len(names)-20)
	}
	for i, n := range names {
		names[i] = term(n, 40)
	}
	return strings.Join(names, ", ") + more
}

// changer is what retry, cancel, pause and resume need of an opened directory.
type changer interface {
	Retry(ctx context.Context, id uint64) error
	Cancel(ctx context.Context, id uint64) error
	Pause(ctx context.Context, kind string) error
	Resume(ctx context.Context, kind string) error
	Close() error
}

// openForChange opens dir as a runner of raw payloads whose handler never runs (the runner
// is never Run). Its warnings (a torn tail cut) go to stderr.
func openForChange(dir string) (changer, error) {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	never := func(context.Context, sluice.Job[[]byte]) error {
		panic("sluice: the inspector's runner started an attempt")
	}
	k, err := sluice.Open(dir, sluice.Config{Logger: log}, sluice.Bytes(), never)
	if err != nil {
		return nil, err
	}
	// The Runner, not the Kind: a kind's handle pauses itself, the runner any kind by name.
	return k.Runner, nil
}

func lockedErr(o options) error {
	if o.cmd == "pause" || o.cmd == "resume" {
		return fmt.Errorf("%s: a running runner holds %s, so nothing was written: %s the kind through that runner (Runner.%s) or the UI mounted beside it (sluiceui), or stop it first",
			o.cmd, o.dir, o.cmd, strings.ToUpper(o.cmd[:1])+o.cmd[1:])
	}
	return fmt.Errorf("%s: a running runner holds %s, so nothing was written: stop it first, or %s the job through the UI mounted beside it (sluiceui)",
		o.cmd, o.dir, o.cmd)
}
