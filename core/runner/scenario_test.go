package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/sim/disk"
)

// TestScenarios runs corpus/runner/*.txt. Commands:
//
//	init [seed=N] [prealloc=N, default -1: off] [capacity=N] [attempts=N] [base=D] [cap=D] [deadline=D] [threshold=N]
//	     [window=D] [cooldown=D] [probes=N] [compact-bytes=N] [retention=N]
//	     [kinds=K:L,K2:L2] [kinds-only=true]
//	                          kinds registered at open (L: limit, 0 none); kinds-only: the
//	                          others wait
//	register kind=K [limit=N] register a kind on the open engine (before dispatching)
//	     [key-limit=N] [rate=C/PER[/B]] [key-rate=C/PER[/B]] [fair=true] [timeout=D]
//	pause kind=K | resume kind=K
//	blocked ids=N,M           why each waiting job is not starting (Machine.Blocked)
//	kinds                     every kind known: registered, limit, waiting, in flight
//	open [dispatch=false]     open (or reopen) the engine at the current time, dispatching
//	                          unless told not to
//	     [age-max=D]
//	enqueue target=T [due=D] [payload=S] [priority=N] [attempts-max=N] [job-deadline=D]
//	     [kind=K] [unique=U] [unique-for=D] [key=K] [group=G] [hold=true] [timeout=D]
//	                          submit (D: offset from the epoch)
//	enqueue-many              one batch; each input line "job <enqueue's arguments>"
//	cancel id=N | retry id=N
//	done id=N attempt=K outcome=success|retry|permanent|panic|snooze [after=D] [err=S]
//	commit                    one batch; prints acks, starts, cancels, wake
//	flush                     a batch that admits nothing (the stop path)
//	dispatch on=true|false    admission on, or off to begin a graceful stop
//	close                     close the engine cleanly (after a stop)
//	inspect                   Replay the live disk (not a copy): state, running attempts it
//	                          would requeue, and whether any file changed
//	advance by=D              move the clock
//	crash                     drop the engine, crash the disk
//	crash-after n=K           the K-th mutating disk op from now and all later ones fail
//	fail-next op=write|sync|rename|syncdir|create
//	compact | state | replay | status | files | breaker target=T
//	history id=N              the job's attempt history
//	schedule name=N spec=S [target=T] [payload=P] [catch-up=one|skip] [priority=N] [unique=U]
//	unschedule name=N | schedules
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "../../corpus/runner", func(t *testing.T, path string) {
		var w *world
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out, err := scenarioCmd(t, &w, d)
			if err != nil {
				return "error: " + errText(err) + "\n"
			}
			if w != nil && w.e != nil {
				if err := w.e.CheckInvariants(); err != nil {
					t.Fatalf("%s: invariant: %v", d.Pos, err)
				}
			}
			return out
		})
	})
}

func argDur(t *testing.T, d *datadriven.TestData, key string, def time.Duration) time.Duration {
	if !d.HasArg(key) {
		return def
	}
	var s string
	d.ScanArgs(t, key, &s)
	v, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %s=%s: %v", d.Pos, key, s, err)
	}
	return v
}

func argInt(t *testing.T, d *datadriven.TestData, key string, def int) int {
	if !d.HasArg(key) {
		return def
	}
	var v int
	d.ScanArgs(t, key, &v)
	return v
}

// argJob is the job an enqueue's arguments describe (due as an offset from epoch).
func argJob(t *testing.T, d *datadriven.TestData, now time.Time) NewJob {
	return NewJob{
		Due:     epoch.Add(argDur(t, d, "due", now.Sub(epoch))),
		Target:  argStr(t, d, "target", "a"),
		Payload: []byte(argStr(t, d, "payload", "")),
		Opts: Opts{Priority: argInt(t, d, "priority", 0), AttemptsMax: argInt(t, d, "attempts-max", 0),
			Deadline: argDur(t, d, "job-deadline", 0), Kind: argStr(t, d, "kind", ""), Unique: argStr(t, d, "unique", ""),
			UniqueFor: argDur(t, d, "unique-for", 0), Key: argStr(t, d, "key", ""), Group: argStr(t, d, "group", ""),
			Hold: argStr(t, d, "hold", "false") == "true", Timeout: argDur(t, d, "timeout", 0)},
	}
}

func argStr(t *testing.T, d *datadriven.TestData, key, def string) string {
	if !d.HasArg(key) {
		return def
	}
	var v string
	d.ScanArgs(t, key, &v)
	return v
}

func scenarioCmd(t *testing.T, wp **world, d *datadriven.TestData) (string, error) {
	w := *wp
	if d.Cmd != "init" && w == nil {
		t.Fatalf("%s: init first", d.Pos)
	}
	needEngine := func() {
		if w.e == nil {
			t.Fatalf("%s: %s without an open engine", d.Pos, d.Cmd)
		}
	}
	switch d.Cmd {
	case "init":
		cfg := Config{
			Policy: retry.Policy{
				Attempts: argInt(t, d, "attempts", 5), Base: argDur(t, d, "base", time.Second),
				Cap: argDur(t, d, "cap", 5*time.Minute), Deadline: argDur(t, d, "deadline", 0),
			},
			Circuit: breaker.Circuit{
				Threshold: argInt(t, d, "threshold", 5), Window: argDur(t, d, "window", 30*time.Second),
				Cooldown: argDur(t, d, "cooldown", 30*time.Second), Probes: argInt(t, d, "probes", 1),
			},
			Capacity:     argInt(t, d, "capacity", 2),
			CompactBytes: int64(argInt(t, d, "compact-bytes", 1<<30)),
			// Off unless asked: the scenarios print file sizes, which spare zeros would pad.
			PreallocBytes: int64(argInt(t, d, "prealloc", -1)),
			Retention:     argInt(t, d, "retention", 0),
			Grace:         argDur(t, d, "grace", 10*time.Second),
			AgeMax:        argDur(t, d, "age-max", 0),
			KindsOnly:     argStr(t, d, "kinds-only", "false") == "true",
		}
		if ks := argStr(t, d, "kinds", ""); ks != "" {
			for _, k := range strings.Split(ks, ",") {
				name, limit, _ := strings.Cut(k, ":")
				var l int
				if limit != "" {
					if _, err := fmt.Sscan(limit, &l); err != nil {
						t.Fatalf("%s: kinds=%s: %v", d.Pos, ks, err)
					}
				}
				cfg.Kinds = append(cfg.Kinds, KindConfig{Name: name, Limit: l})
			}
		}
		logs := &strings.Builder{}
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn,
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}}))
		*wp = newWorld(int64(argInt(t, d, "seed", 1)), cfg)
		(*wp).logs = logs
		return "ok\n", nil
	case "logs":
		out := w.logs.String()
		w.logs.Reset()
		if out == "" {
			return "none\n", nil
		}
		return out, nil
	case "open":
		if err := w.openWith(argStr(t, d, "dispatch", "true") == "true"); err != nil {
			return "", err
		}
		return fmt.Sprintf("opened: %d orphans requeued\n", w.e.Orphans()) + Describe(w.e.State(), epoch), nil
	case "enqueue":
		needEngine()
		tk, id, err := w.e.EnqueueJob(w.now, argJob(t, d, w.now))
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("ticket %d job %d (not yet durable)\n", tk, id), nil
	case "enqueue-many":
		// One job per input line: "job target=a priority=2 ...", the arguments of enqueue.
		needEngine()
		var jobs []NewJob
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			_, args, err := datadriven.ParseLine(line)
			if err != nil {
				t.Fatalf("%s: %v", d.Pos, err)
			}
			jobs = append(jobs, argJob(t, &datadriven.TestData{Pos: d.Pos, CmdArgs: args}, w.now))
		}
		tk, ids, err := w.e.EnqueueMany(w.now, jobs)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("ticket %d jobs %v (not yet durable)\n", tk, ids), nil
	case "cancel", "retry":
		needEngine()
		id := uint64(argInt(t, d, "id", 0))
		var tk Ticket
		var err error
		if d.Cmd == "cancel" {
			tk, err = w.e.Cancel(id)
		} else {
			tk, err = w.e.Retry(w.now, id)
		}
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("ticket %d\n", tk), nil
	case "done":
		needEngine()
		tok := Token{ID: uint64(argInt(t, d, "id", 0)), Attempt: argInt(t, d, "attempt", 0)}
		var o Outcome
		switch k := argStr(t, d, "outcome", "success"); k {
		case "success":
			o = Success()
		case "retry":
			o = Failure(argStr(t, d, "err", "boom"), true)
		case "permanent":
			o = Failure(argStr(t, d, "err", "bad input"), false)
		case "panic":
			o = Panicked(argStr(t, d, "err", "nil map"))
		case "snooze":
			o = Snoozed(argDur(t, d, "after", 0))
		default:
			t.Fatalf("%s: outcome %q", d.Pos, k)
		}
		if d.HasArg("after") {
			a := argDur(t, d, "after", 0)
			o.After = &a
		}
		return "ok\n", w.e.AttemptDone(w.now, tok, o)
	case "commit":
		needEngine()
		res, err := w.e.Commit(w.now)
		if err != nil {
			return "", err
		}
		if s := DescribeResult(res, epoch); s != "" {
			return s, nil
		}
		return "nothing\n", nil
	case "flush":
		needEngine()
		res, err := w.e.Flush(w.now)
		if err != nil {
			return "", err
		}
		if s := DescribeResult(res, epoch); s != "" {
			return s, nil
		}
		return "nothing\n", nil
	case "dispatch":
		needEngine()
		on := argStr(t, d, "on", "true") == "true"
		if err := w.e.Dispatch(w.now, on); err != nil {
			return "", err
		}
		return fmt.Sprintf("dispatching=%v stopped=%v\n", on, w.e.Status().Stopped), nil
	case "close":
		needEngine()
		err := w.e.Close()
		w.e = nil
		if err != nil {
			return "", err
		}
		return "closed\n" + w.files(), nil
	case "advance":
		w.now = w.now.Add(argDur(t, d, "by", 0))
		return fmt.Sprintf("now %s\n", offset(w.now, epoch)), nil
	case "crash":
		w.crash()
		return "crashed\n" + w.files(), nil
	case "crash-after":
		w.d.CrashAfter(argInt(t, d, "n", 1))
		return "ok\n", nil
	case "fail-next":
		ops := map[string]disk.Op{"write": disk.OpWrite, "sync": disk.OpSync, "rename": disk.OpRename,
			"syncdir": disk.OpSyncDir, "create": disk.OpCreate}
		op, ok := ops[argStr(t, d, "op", "")]
		if !ok {
			t.Fatalf("%s: op", d.Pos)
		}
		w.d.FailNext(op, disk.ErrInjected)
		return "ok\n", nil
	case "compact":
		needEngine()
		if err := w.e.Compact(); err != nil {
			return "", err
		}
		return "compacted\n" + w.files(), nil
	case "history":
		needEngine()
		j, ok := w.e.Get(uint64(argInt(t, d, "id", 0)))
		if !ok {
			return "no such job\n", nil
		}
		var b strings.Builder
		for _, h := range j.History {
			fmt.Fprintf(&b, "attempt %d start=%s %v", h.Attempt, offset(h.Start, epoch), h.Outcome)
			if !h.End.IsZero() {
				fmt.Fprintf(&b, " end=%s", offset(h.End, epoch))
			}
			if h.Err != "" {
				fmt.Fprintf(&b, " err=%q", h.Err)
			}
			b.WriteByte('\n')
		}
		return b.String(), nil
	case "state":
		needEngine()
		return Describe(w.e.State(), epoch), nil
	case "replay":
		s, err := w.replay()
		if err != nil {
			return "", err
		}
		return Describe(s, epoch), nil
	case "register":
		needEngine()
		if err := w.e.Register(KindConfig{Name: argStr(t, d, "kind", ""), Limit: argInt(t, d, "limit", 0),
			KeyLimit: argInt(t, d, "key-limit", 0), Rate: argRate(t, d, "rate"), KeyRate: argRate(t, d, "key-rate"),
			Fair: argStr(t, d, "fair", "false") == "true", Timeout: argDur(t, d, "timeout", 0)}); err != nil {
			return "", err
		}
		return "ok\n", nil
	case "pause", "resume":
		needEngine()
		var err error
		if d.Cmd == "pause" {
			_, err = w.e.Pause(w.now, argStr(t, d, "kind", ""))
		} else {
			_, err = w.e.Resume(w.now, argStr(t, d, "kind", ""))
		}
		if err != nil {
			return "", err
		}
		return "ok\n", nil
	case "blocked":
		needEngine()
		var b strings.Builder
		for _, id := range strings.Split(argStr(t, d, "ids", ""), ",") {
			var n uint64
			if _, err := fmt.Sscan(id, &n); err != nil {
				t.Fatalf("%s: ids=%s: %v", d.Pos, id, err)
			}
			fmt.Fprintf(&b, "job %d: %s\n", n, describeBlock(w.e.Blocked(n)))
		}
		return b.String(), nil
	case "kinds":
		needEngine()
		var b strings.Builder
		for _, k := range w.e.Kinds() {
			fmt.Fprintf(&b, "kind %q registered=%v limit=%d waiting=%d inflight=%d\n", k.Name, k.Registered, k.Limit, k.Waiting, k.InFlight)
		}
		return b.String(), nil
	case "status":
		needEngine()
		s := w.e.Status()
		out := fmt.Sprintf("waiting=%d deferred=%d running=%d succeeded=%d dead=%d cancelled=%d inflight=%d/%d poisoned=%v",
			s.Waiting, s.Deferred, s.Running, s.Succeeded, s.Dead, s.Cancelled, s.InFlight, s.Capacity, s.Poisoned != nil)
		if s.Unregistered > 0 {
			out += fmt.Sprintf(" unregistered=%d", s.Unregistered)
		}
		if s.Paused > 0 || s.Held > 0 {
			out += fmt.Sprintf(" paused=%d held=%d", s.Paused, s.Held)
		}
		if !s.Dispatching {
			out += fmt.Sprintf(" stopped=%v", s.Stopped)
		}
		return out + "\n", nil
	case "files":
		return w.files(), nil
	case "inspect":
		before := w.digest()
		s, err := Replay(w.d, journalName, w.cfg)
		if err != nil {
			return "", err
		}
		var b strings.Builder
		b.WriteString(Describe(s, epoch))
		for _, j := range s.Jobs {
			if j.State == Running {
				fmt.Fprintf(&b, "would requeue %v as interrupted\n", Token{j.ID, j.Attempts})
			}
		}
		if after := w.digest(); after != before {
			fmt.Fprintf(&b, "files changed:\n%s----\n%s", before, after)
		} else {
			b.WriteString("files unchanged\n")
		}
		return b.String(), nil
	case "schedule", "unschedule", "schedules":
		needEngine()
		return scheduleCmd(t, w, d)
	case "breaker":
		needEngine()
		return w.e.m.breakerState(argStr(t, d, "target", "a")).String() + "\n", nil
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return "", errors.New("unreachable")
}

// errText renders an error without the wording of other packages' messages, which scenario
// files should not pin: the runner's sentinel, then the disk fault underneath.
func errText(err error) string {
	var why string
	switch {
	case errors.Is(err, disk.ErrCrashed):
		why = " (disk crashed)"
	case errors.Is(err, disk.ErrInjected):
		why = " (injected fault)"
	}
	switch {
	case errors.Is(err, ErrPoisoned):
		return "poisoned, reopen" + why
	case strings.HasPrefix(err.Error(), "runner: compaction kept the old journal"):
		return "compaction kept the old journal" + why
	}
	return err.Error()
}

// argRate parses key=COUNT/PER[/BURST] (zero without the key).
func argRate(t *testing.T, d *datadriven.TestData, key string) Rate {
	s := argStr(t, d, key, "")
	if s == "" {
		return Rate{}
	}
	parts := strings.Split(s, "/")
	var r Rate
	if _, err := fmt.Sscan(parts[0], &r.Count); err != nil || len(parts) < 2 {
		t.Fatalf("%s: %s=%s: want COUNT/PER[/BURST]", d.Pos, key, s)
	}
	per, err := time.ParseDuration(parts[1])
	if err != nil {
		t.Fatalf("%s: %s=%s: %v", d.Pos, key, s, err)
	}
	r.Per = per
	if len(parts) > 2 {
		if _, err := fmt.Sscan(parts[2], &r.Burst); err != nil {
			t.Fatalf("%s: %s=%s: %v", d.Pos, key, s, err)
		}
	}
	return r
}
