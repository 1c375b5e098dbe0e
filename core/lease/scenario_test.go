package lease

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/scenariotest"
)

// TestScenarios replays corpus/lease/*.txt. Commands (times in seconds from the epoch):
//
//	new [pacing=0.2,0.5,1] [coalesce=0.25]
//	receive at=T stamp=T window=30s ceiling=12h receipts=(r1,r2)
//	tick at=T
//	reply call=N at=T [all=CLASS | r1=CLASS ...]      CLASS: ok retryable gone fatal plain
//	dispose at=T receipt=R kind=ack|release|terminal|abandon [after=10s]
//	disposed call=N at=T [all=CLASS | r1=CLASS ...]
//	shutdown at=T
//	lease R
//	run until=T latency=L [fail=N]   drive the machine: wake at WakeAt, answer every renewal
//	                                 after L (the first N renewal calls fail retryably)
//
// Each command prints the effects of its step (Describe) and the log lines it produced.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, filepath.Join("..", "..", "corpus", "lease"), func(t *testing.T, path string) {
		h := &harness{}
		datadriven.RunTest(t, path, h.run)
	})
}

type harness struct {
	m    *Machine
	logs bytes.Buffer
}

func secs(t *testing.T, s string) time.Time { return scenariotest.Secs(t, epoch, s) }

func dur(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("bad duration %q: %v", s, err)
	}
	return d
}

var arg = scenariotest.Arg

func classErr(t *testing.T, c string) error {
	switch c {
	case "ok":
		return nil
	case "retryable":
		return &core.TransportError{Class: core.Retryable, Op: "change-visibility", Code: "ThrottlingException", Err: errors.New("slow down")}
	case "gone":
		return &core.TransportError{Class: core.Gone, Op: "change-visibility", Code: "MessageNotInflight", Err: errors.New("not in flight")}
	case "fatal":
		return &core.TransportError{Class: core.Fatal, Op: "change-visibility", Code: "AccessDenied", Err: errors.New("denied")}
	case "plain":
		return errors.New("connection reset")
	}
	t.Fatalf("unknown class %q", c)
	return nil
}

func (h *harness) out(rd Ready) string {
	return scenariotest.Output(Describe(rd, h.m.WakeAt(), epoch), &h.logs, h.m.checkInvariants())
}

func (h *harness) step(t *testing.T, ev Event) string {
	if err := h.m.Step(ev); err != nil {
		return "error: " + err.Error() + "\n" + h.out(h.m.Ready())
	}
	return h.out(h.m.Ready())
}

// replyErrs builds the per-entry errors of a reply from r1=CLASS arguments (default ok).
func replyErrs(t *testing.T, d *datadriven.TestData, receipts []string) ([]error, error) {
	if a, ok := d.Arg("all"); ok && a.Vals[0] != "ok" {
		return nil, classErr(t, a.Vals[0])
	}
	errs := make([]error, len(receipts))
	for i, r := range receipts {
		if a, ok := d.Arg(r); ok {
			errs[i] = classErr(t, a.Vals[0])
		}
	}
	return errs, nil
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "new":
		cfg := Config{Logger: scenariotest.Logger(&h.logs, slog.LevelDebug)}
		if a, ok := d.Arg("pacing"); ok {
			for _, v := range a.Vals {
				cfg.Pacing = append(cfg.Pacing, dur(t, v+"s"))
			}
		}
		if a, ok := d.Arg("coalesce"); ok {
			cfg.Coalesce = dur(t, a.Vals[0]+"s")
		}
		h.m = mustNew(cfg)
		return "ok\n"
	case "receive":
		a, _ := d.Arg("receipts")
		var msgs []core.Message
		for _, r := range a.Vals {
			msgs = append(msgs, core.Message{ID: "m" + strings.TrimPrefix(r, "r"), Receipt: r, ReceiveCount: 1})
		}
		return h.step(t, Received{
			Now: secs(t, arg(t, d, "at", "")), Stamp: secs(t, arg(t, d, "stamp", arg(t, d, "at", ""))),
			Window: dur(t, arg(t, d, "window", "30s")), Ceiling: dur(t, arg(t, d, "ceiling", "12h")),
			Messages: msgs,
		})
	case "tick":
		return h.step(t, Tick{Now: secs(t, arg(t, d, "at", ""))})
	case "reply", "disposed":
		id, _ := strconv.Atoi(arg(t, d, "call", ""))
		c := h.m.calls[CallID(id)]
		var keys []string
		if c != nil {
			for _, r := range c.receipts {
				keys = append(keys, r.key)
			}
		}
		errs, whole := replyErrs(t, d, keys)
		at := secs(t, arg(t, d, "at", ""))
		if d.Cmd == "reply" {
			return h.step(t, RenewResult{Call: CallID(id), Now: at, Entries: errs, Err: whole})
		}
		return h.step(t, DisposeResult{Call: CallID(id), Now: at, Entries: errs, Err: whole})
	case "dispose":
		kinds := map[string]Kind{"ack": Ack, "release": Release, "terminal": TerminalBackoff, "abandon": Abandon}
		k, ok := kinds[arg(t, d, "kind", "")]
		if !ok {
			t.Fatalf("%s: unknown kind", d.Pos)
		}
		return h.step(t, Dispose{Now: secs(t, arg(t, d, "at", "")), Receipt: arg(t, d, "receipt", ""),
			Disposition: Disposition{Kind: k, After: dur(t, arg(t, d, "after", "0s"))}})
	case "shutdown":
		return h.step(t, Shutdown{Now: secs(t, arg(t, d, "at", ""))})
	case "lease":
		var b strings.Builder
		for _, a := range d.CmdArgs {
			l, ok := h.m.Lease(a.Key)
			if !ok {
				fmt.Fprintf(&b, "%s not held\n", a.Key)
				continue
			}
			b.WriteString(DescribeLease(l, epoch) + "\n")
		}
		return b.String()
	case "run":
		return h.drive(t, secs(t, arg(t, d, "until", "")), dur(t, arg(t, d, "latency", "0")+"s"), d)
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return ""
}

// drive plays a well-behaved driver until the given time: it ticks at every WakeAt and
// answers each renewal call after latency, the first `fail` calls with a retryable fault.
// It prints the renewal sends (first five and last), the spacing between consecutive sends of
// r1, drops, and the final leases.
func (h *harness) drive(t *testing.T, until time.Time, latency time.Duration, d *datadriven.TestData) string {
	fail := 0
	if a, ok := d.Arg("fail"); ok {
		fail, _ = strconv.Atoi(a.Vals[0])
	}
	type pending struct {
		c  ChangeVisibility
		at time.Time
	}
	var out strings.Builder
	var queue []pending
	var sends []time.Time
	var asked []time.Duration
	entries := 0
	var gaps []time.Duration
	calls := 0
	handle := func(rd Ready, now time.Time) {
		for _, c := range rd.Cancel {
			fmt.Fprintf(&out, "%s cancel %s (%s)\n", Offset(now, epoch), c.Receipt, c.Reason)
		}
		for _, c := range rd.Changes {
			if c.Purpose != Renewal {
				t.Fatalf("run only answers renewals")
			}
			for _, e := range c.Entries {
				if e.Receipt == "r1" {
					if n := len(sends); n > 0 {
						gaps = append(gaps, now.Sub(sends[n-1]))
					}
					sends = append(sends, now)
					asked = append(asked, e.Timeout)
				}
			}
			entries += len(c.Entries)
			queue = append(queue, pending{c, now.Add(latency)})
		}
		if err := h.m.checkInvariants(); err != nil {
			t.Fatalf("invariant at %s: %v", Offset(now, epoch), err)
		}
	}
	for step := 0; step < 1_000_000; step++ {
		wake := h.m.Ready()
		handle(wake, machineNow(h.m))
		next := h.m.WakeAt()
		if len(queue) > 0 && (next.IsZero() || !queue[0].at.After(next)) {
			p := queue[0]
			queue = queue[1:]
			if p.at.After(until) {
				break
			}
			var whole error
			errs := make([]error, len(p.c.Entries))
			if calls < fail {
				whole = classErr(t, "retryable")
			}
			calls++
			if err := h.m.Step(RenewResult{Call: p.c.Call, Now: p.at, Entries: errs, Err: whole}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if next.IsZero() || next.After(until) {
			break
		}
		if err := h.m.Step(Tick{Now: next}); err != nil {
			t.Fatal(err)
		}
	}
	handle(h.m.Ready(), machineNow(h.m))
	out.WriteString(scenariotest.TakeLogs(&h.logs))
	fmt.Fprintf(&out, "renewal calls: %d, entries: %d\n", calls, entries)
	fmt.Fprintf(&out, "r1 renewals sent: %d\n", len(sends))
	for i, s := range sends {
		if i < 5 || i >= len(sends)-5 {
			fmt.Fprintf(&out, "  send %d at %s asked %v\n", i+1, Offset(s, epoch), asked[i])
		}
	}
	if len(gaps) > 0 {
		lo, hi := gaps[0], gaps[0]
		for _, g := range gaps {
			lo, hi = min(lo, g), max(hi, g)
		}
		fmt.Fprintf(&out, "spacing min=%v max=%v\n", lo, hi)
	}
	for _, r := range receipts(h.m) {
		l, _ := h.m.Lease(r)
		out.WriteString(DescribeLease(l, epoch) + "\n")
	}
	return out.String()
}
