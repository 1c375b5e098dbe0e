package worker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/lease"
	"github.com/sluicehq/sluice/internal/scenariotest"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestScenarios replays corpus/worker/*.txt. Commands (times in seconds from the epoch):
//
//	new [budget=N] [redrive=N] [concurrency=N] [prefetch=N] [grace=D] [margin=D] [poison=(m1,...)]
//	tick at=T
//	received call=N at=T msgs=(m1:1,m2:5) | err=CLASS   message id:receive count; the
//	                                                    receipt is id/count (m1/1); CLASS
//	                                                    may be cancelled (the context's error)
//	handler receipt=R at=T outcome=success|retryable|permanent|terminal [after=D]
//	handlers at=T R=OUTCOME ...                        several results, then one Ready
//	reply call=N at=T [all=CLASS | R=CLASS ... | results=K]
//	                                                   a lease call's reply (CallDone);
//	                                                   results=K: K successes, whatever the
//	                                                   call's size (a broken transport)
//	shutdown at=T
//	stats
//
// Each command prints the effects of its step (Describe) and the log lines it produced.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, filepath.Join("..", "..", "corpus", "worker"), func(t *testing.T, path string) {
		h := &harness{}
		datadriven.RunTest(t, path, h.run)
	})
}

type harness struct {
	n     *Node
	e     *Machine // n's machine
	logs  bytes.Buffer
	calls map[lease.CallID][]string
}

func secs(t *testing.T, s string) time.Time { return scenariotest.Secs(t, epoch, s) }

var arg = scenariotest.Arg

func intArg(t *testing.T, d *datadriven.TestData, key string) int {
	n, err := strconv.Atoi(arg(t, d, key, "0"))
	if err != nil {
		t.Fatalf("%s: bad %s: %v", d.Pos, key, err)
	}
	return n
}

func classErr(t *testing.T, c string) error {
	switch c {
	case "ok":
		return nil
	case "retryable":
		return &core.TransportError{Class: core.Retryable, Op: "call", Code: "ServiceUnavailable", Err: errors.New("503")}
	case "gone":
		return &core.TransportError{Class: core.Gone, Op: "call", Code: "MessageNotInflight", Err: errors.New("not in flight")}
	case "fatal":
		return &core.TransportError{Class: core.Fatal, Op: "call", Code: "AccessDenied", Err: errors.New("denied")}
	case "cancelled":
		return context.Canceled
	}
	t.Fatalf("unknown class %q", c)
	return nil
}

// ready reads the Node's Ready, performs nothing (the commands play the replies) and renders
// it with what Advance says follows: the wake, or the exit.
func (h *harness) ready() string {
	if h.n.Exited() {
		return ""
	}
	rd := h.n.Ready()
	next := h.n.Advance()
	if next.Exit {
		return h.out(rd, time.Time{}, describeExit(next))
	}
	return h.out(rd, next.Wake, "")
}

func describeExit(next Next) string {
	if next.Err != nil {
		return "exit err=" + strconv.Quote(next.Err.Error()) + "\n"
	}
	return "exit\n"
}

func (h *harness) out(rd Ready, wake time.Time, exit string) string {
	for _, c := range rd.Changes {
		for _, e := range c.Entries {
			h.calls[c.Call] = append(h.calls[c.Call], e.Receipt)
		}
	}
	for _, d := range rd.Deletes {
		h.calls[d.Call] = d.Receipts
	}
	return scenariotest.Output(Describe(rd, wake, epoch)+exit, &h.logs, h.n.CheckInvariants())
}

func (h *harness) step(ev Event) string {
	if err := h.n.Step(ev); err != nil {
		return "error: " + err.Error() + "\n" + h.ready()
	}
	return h.ready()
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "new":
		cfg := Config{Logger: scenariotest.Logger(&h.logs, slog.LevelInfo), Budget: intArg(t, d, "budget"), RedriveMaxReceives: intArg(t, d, "redrive"),
			Concurrency: intArg(t, d, "concurrency"), Prefetch: intArg(t, d, "prefetch")}
		if a, ok := d.Arg("grace"); ok {
			g, err := time.ParseDuration(a.Vals[0])
			if err != nil {
				t.Fatal(err)
			}
			cfg.Grace = g
		}
		if a, ok := d.Arg("margin"); ok {
			m, err := time.ParseDuration(a.Vals[0])
			if err != nil {
				t.Fatal(err)
			}
			cfg.StopMargin = m
		}
		if a, ok := d.Arg("poison"); ok {
			bad := map[string]bool{}
			for _, v := range a.Vals {
				bad[v] = true
			}
			cfg.Decode = func(m core.Message) error {
				if bad[m.ID] {
					return errors.New("not JSON")
				}
				return nil
			}
		}
		n, err := NewNode(cfg)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		h.n, h.e, h.calls = n, n.m, map[lease.CallID][]string{}
		return "ok\n"
	case "tick":
		return h.step(Tick{Now: secs(t, arg(t, d, "at", ""))})
	case "received":
		ev := ReceiveDone{Call: CallID(intArg(t, d, "call")), Now: secs(t, arg(t, d, "at", ""))}
		if a, ok := d.Arg("err"); ok {
			ev.Err = classErr(t, a.Vals[0])
		}
		if a, ok := d.Arg("msgs"); ok {
			for _, v := range a.Vals {
				id, count, _ := strings.Cut(v, ":")
				n, err := strconv.Atoi(count)
				if err != nil {
					t.Fatalf("%s: bad message %q", d.Pos, v)
				}
				ev.Messages = append(ev.Messages, core.Message{ID: id, Receipt: id + "/" + count, Body: []byte("{}"), ReceiveCount: n})
			}
		}
		return h.step(ev)
	case "handler":
		outcomes := map[string]Outcome{"success": Success, "retryable": Retryable, "permanent": Permanent, "terminal": Terminal}
		o, ok := outcomes[arg(t, d, "outcome", "")]
		if !ok {
			t.Fatalf("%s: unknown outcome", d.Pos)
		}
		r := Result{Outcome: o}
		if o != Success {
			r.Err = errors.New("handler says " + o.String())
		}
		if a, ok := d.Arg("after"); ok {
			after, err := time.ParseDuration(a.Vals[0])
			if err != nil {
				t.Fatal(err)
			}
			r.After = &after
		}
		return h.step(HandlerDone{Receipt: arg(t, d, "receipt", ""), Now: secs(t, arg(t, d, "at", "")), Result: r})
	case "handlers":
		// Several handler results stepped before one Ready, as a driver draining its queue does.
		outcomes := map[string]Outcome{"success": Success, "retryable": Retryable, "permanent": Permanent, "terminal": Terminal}
		at := secs(t, arg(t, d, "at", ""))
		var errs string
		for _, a := range d.CmdArgs {
			if a.Key == "at" {
				continue
			}
			o, ok := outcomes[a.Vals[0]]
			if !ok {
				t.Fatalf("%s: unknown outcome %q", d.Pos, a.Vals[0])
			}
			r := Result{Outcome: o}
			if o != Success {
				r.Err = errors.New("handler says " + o.String())
			}
			if err := h.n.Step(HandlerDone{Receipt: a.Key, Now: at, Result: r}); err != nil {
				errs += "error: " + err.Error() + "\n"
			}
		}
		return errs + h.ready()
	case "reply":
		id := lease.CallID(intArg(t, d, "call"))
		ev := CallDone{Call: id, Now: secs(t, arg(t, d, "at", ""))}
		if a, ok := d.Arg("all"); ok && a.Vals[0] != "ok" {
			ev.Err = classErr(t, a.Vals[0])
		} else if _, ok := d.Arg("results"); ok {
			ev.Entries = make([]error, intArg(t, d, "results"))
		} else {
			for _, r := range h.calls[id] {
				var err error
				if a, ok := d.Arg(r); ok {
					err = classErr(t, a.Vals[0])
				}
				ev.Entries = append(ev.Entries, err)
			}
		}
		return h.step(ev)
	case "shutdown":
		return h.step(Shutdown{Now: secs(t, arg(t, d, "at", ""))})
	case "stats":
		st := h.e.Status()
		return DescribeStatus(st) + "heartbeat " + lease.Offset(st.Heartbeat, epoch) + "\n"
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return ""
}
