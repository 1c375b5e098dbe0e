package qjobs

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sluicehq/sluice/core/flow"
	"github.com/sluicehq/sluice/internal/scenariotest"
)

// TestScenarios replays corpus/qjobs/*.txt. Commands (times in seconds from t0):
//
//	new [fifo] [waitmax=N]
//	register kind=K [rate=COUNT/PER[/BURST]] [keyrate=...] [keylimit=N] [timeout=D]
//	deliver r=R at=T [kind=K] [key=K] [waits=N] [timeout=D] [count=N]   a delivery of a fresh job
//	done r=R at=T [result=success|retryable|permanent] [cancelled] [timedout]
//	sent r=R at=T [err=TEXT]
//	stats
//
// Each command prints the effects of its step, one line each, and an INVARIANT line when the
// machine's own check fails.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, filepath.Join("..", "..", "corpus", "qjobs"), func(t *testing.T, path string) {
		h := &scenario{}
		datadriven.RunTest(t, path, h.run)
	})
}

type scenario struct{ m *Machine }

func (h *scenario) at(t *testing.T, d *datadriven.TestData) time.Time {
	return scenariotest.Secs(t, t0, scenariotest.Arg(t, d, "at", ""))
}

func duration(t *testing.T, d *datadriven.TestData, key string) time.Duration {
	v := scenariotest.Arg(t, d, key, "0s")
	dur, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: bad %s: %v", d.Pos, key, err)
	}
	return dur
}

func integer(t *testing.T, d *datadriven.TestData, key, def string) int {
	n, err := strconv.Atoi(scenariotest.Arg(t, d, key, def))
	if err != nil {
		t.Fatalf("%s: bad %s: %v", d.Pos, key, err)
	}
	return n
}

// rateArg parses COUNT/PER[/BURST], PER a duration.
func rateArg(t *testing.T, d *datadriven.TestData, key string) flow.Rate {
	a, ok := d.Arg(key)
	if !ok {
		return flow.Rate{}
	}
	parts := strings.Split(a.Vals[0], "/")
	var r flow.Rate
	var err error
	if len(parts) < 2 || len(parts) > 3 {
		t.Fatalf("%s: %s=%s: want COUNT/PER[/BURST]", d.Pos, key, a.Vals[0])
	}
	if r.Count, err = strconv.Atoi(parts[0]); err == nil {
		if r.Per, err = time.ParseDuration(parts[1]); err == nil && len(parts) == 3 {
			r.Burst, err = strconv.Atoi(parts[2])
		}
	}
	if err != nil {
		t.Fatalf("%s: %s: %v", d.Pos, key, err)
	}
	return r
}

func (h *scenario) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "new":
		cfg := testConfig()
		cfg.FIFO = d.HasArg("fifo")
		cfg.WaitMax = integer(t, d, "waitmax", "0")
		m, err := New(cfg)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		h.m = m
		return "ok\n"
	case "register":
		f := Flow{Rate: rateArg(t, d, "rate"), KeyRate: rateArg(t, d, "keyrate"), KeyLimit: integer(t, d, "keylimit", "0"),
			Timeout: duration(t, d, "timeout")}
		return h.step(Register{Kind: scenariotest.Arg(t, d, "kind", ""), Flow: f})
	case "deliver":
		a := Attrs{Kind: scenariotest.Arg(t, d, "kind", "mail"), Target: "smtp", FirstDue: t0,
			Key: scenariotest.Arg(t, d, "key", "-"), Waits: integer(t, d, "waits", "0"), Timeout: duration(t, d, "timeout")}
		if a.Key == "-" {
			a.Key = ""
		}
		msg := message(Encode(a, []byte("p")), integer(t, d, "count", "1"))
		return h.step(Deliver{Now: h.at(t, d), Receipt: scenariotest.Arg(t, d, "r", ""), Message: msg})
	case "done":
		o := Outcome{Result: Success}
		switch res := scenariotest.Arg(t, d, "result", "success"); res {
		case "success":
		case "retryable":
			o = Outcome{Result: Retryable, Err: "boom"}
		case "permanent":
			o = Outcome{Result: Permanent, Err: "bad"}
		default:
			t.Fatalf("%s: result %q", d.Pos, res)
		}
		return h.step(AttemptDone{Receipt: scenariotest.Arg(t, d, "r", ""), Now: h.at(t, d), Outcome: o,
			Cancelled: d.HasArg("cancelled"), TimedOut: d.HasArg("timedout")})
	case "sent":
		var err error
		if a, ok := d.Arg("err"); ok {
			err = fmt.Errorf("%s", a.Vals[0])
		}
		return h.step(SendDone{Receipt: scenariotest.Arg(t, d, "r", ""), Now: h.at(t, d), Err: err})
	case "stats":
		st := h.m.Status()
		return fmt.Sprintf("runs=%d waits=%d held=%d timed-out=%d dead=%d deliveries=%d\n",
			st.Runs, st.FlowWaits, st.FlowHeld, st.TimedOut, st.DeadLettered, st.Deliveries)
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return ""
}

func (h *scenario) step(ev Event) string {
	if err := h.m.Step(ev); err != nil {
		return "error: " + err.Error() + "\n"
	}
	var b strings.Builder
	rd := h.m.Ready()
	for _, r := range rd.Runs {
		fmt.Fprintf(&b, "run %s attempt=%d", r.Receipt, r.Attempt)
		if r.Delay > 0 {
			fmt.Fprintf(&b, " after=%v", r.Delay)
		}
		if r.Timeout > 0 {
			fmt.Fprintf(&b, " timeout=%v", r.Timeout)
		}
		b.WriteString("\n")
	}
	for _, s := range rd.Sends {
		fmt.Fprintf(&b, "%s %s", s.Receipt, s.String())
		if s.Attrs.Waits > 0 {
			fmt.Fprintf(&b, " waits=%d", s.Attrs.Waits)
		}
		if s.Attrs.Key != "" {
			fmt.Fprintf(&b, " key=%s", s.Attrs.Key)
		}
		if s.Attrs.LastErr != "" {
			fmt.Fprintf(&b, " err=%q", s.Attrs.LastErr)
		}
		b.WriteString("\n")
	}
	for _, dn := range rd.Done {
		fmt.Fprintf(&b, "%s %s", dn.Receipt, dn.String())
		if dn.Err != "" {
			fmt.Fprintf(&b, " (%s)", dn.Err)
		}
		b.WriteString("\n")
	}
	for _, n := range rd.Notes {
		fmt.Fprintf(&b, "note %s %v\n", n.Text, n.Args)
	}
	if err := h.m.CheckInvariants(); err != nil {
		fmt.Fprintf(&b, "INVARIANT: %v\n", err)
	}
	if b.Len() == 0 {
		return "ok\n"
	}
	return b.String()
}
