package queue

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/sluicehq/sluice/core"
)

// TestScenarios replays corpus/queue/*.txt. Commands:
//
//	new [visibility=D] [max-receive=N] [lapsed=gone|ignore|extend] [stale-delete=gone|ignored]
//	send <body>...                     ids of the new messages
//	advance <D>                        moves the clock
//	receive [dlq] max=N [vis=D]        one line per delivery: id receipt count body
//	change <receipt> <D>               ok or class/code
//	delete <receipt>                   ok or class/code
//	change-batch / delete-batch        entries as input lines ("<receipt> <D>" / "<receipt>")
//	next                               NextVisibleAt
//	dump [dlq]                         Describe
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, filepath.Join("..", "..", "corpus", "queue"), func(t *testing.T, path string) {
		s := &scenario{now: Epoch}
		datadriven.RunTest(t, path, s.run)
	})
}

type scenario struct {
	q, dlq *Queue
	now    time.Time
}

func (s *scenario) pick(d *datadriven.TestData) *Queue {
	if d.HasArg("dlq") {
		return s.dlq
	}
	return s.q
}

func duration(t *testing.T, v string) time.Duration {
	t.Helper()
	dur, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("bad duration %q: %v", v, err)
	}
	return dur
}

func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	var b strings.Builder
	switch d.Cmd {
	case "new":
		cfg := Config{Name: "q"}
		var v string
		if d.HasArg("visibility") {
			d.ScanArgs(t, "visibility", &v)
			cfg.VisibilityDefault = duration(t, v)
		}
		if d.HasArg("max-receive") {
			d.ScanArgs(t, "max-receive", &cfg.MaxReceiveCount)
			s.dlq = New(Config{Name: "dlq"}, nil)
			cfg.DeadLetter = s.dlq
		}
		if d.HasArg("lapsed") {
			d.ScanArgs(t, "lapsed", &v)
			modes := map[string]Lapsed{"gone": LapsedGone, "ignore": LapsedIgnore, "extend": LapsedExtend}
			m, ok := modes[v]
			if !ok {
				t.Fatalf("unknown lapse mode %q", v)
			}
			cfg.Lapsed = m
		}
		if d.HasArg("stale-delete") {
			d.ScanArgs(t, "stale-delete", &v)
			if v == "ignored" {
				cfg.StaleDelete = StaleDeleteIgnored
			}
		}
		s.q = New(cfg, nil)
		return "ok\n"
	case "send":
		for _, a := range d.CmdArgs {
			fmt.Fprintln(&b, s.q.Send(s.now, []byte(a.Key)))
		}
	case "advance":
		s.now = s.now.Add(duration(t, d.CmdArgs[0].Key))
		fmt.Fprintf(&b, "now %s\n", s.q.offset(s.now))
	case "receive":
		var max int
		d.ScanArgs(t, "max", &max)
		var vis time.Duration
		if d.HasArg("vis") {
			var v string
			d.ScanArgs(t, "vis", &v)
			vis = duration(t, v)
		}
		ms := s.pick(d).Receive(s.now, max, vis)
		for _, m := range ms {
			fmt.Fprintf(&b, "%s %s count=%d body=%s\n", m.ID, m.Receipt, m.ReceiveCount, m.Body)
		}
		if len(ms) == 0 {
			b.WriteString("none\n")
		}
	case "change":
		err := s.q.ChangeVisibility(s.now, d.CmdArgs[0].Key, duration(t, d.CmdArgs[1].Key))
		fmt.Fprintln(&b, errSummary(err))
	case "delete":
		fmt.Fprintln(&b, errSummary(s.q.Delete(s.now, d.CmdArgs[0].Key)))
	case "change-batch":
		var entries []core.VisibilityChange
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			f := strings.Fields(line)
			entries = append(entries, core.VisibilityChange{Receipt: f[0], Timeout: duration(t, f[1])})
		}
		for i, err := range s.q.ChangeVisibilityBatch(s.now, entries) {
			fmt.Fprintf(&b, "%s: %s\n", entries[i].Receipt, errSummary(err))
		}
	case "delete-batch":
		receipts := strings.Fields(d.Input)
		for i, err := range s.q.DeleteBatch(s.now, receipts) {
			fmt.Fprintf(&b, "%s: %s\n", receipts[i], errSummary(err))
		}
	case "next":
		at, ok := s.q.NextVisibleAt()
		if !ok {
			return "none\n"
		}
		fmt.Fprintf(&b, "%s\n", s.q.offset(at))
	case "dump":
		b.WriteString(s.pick(d).Describe(s.now))
	default:
		t.Fatalf("unknown command %q", d.Cmd)
	}
	for _, q := range []*Queue{s.q, s.dlq} {
		if q != nil {
			if err := q.checkInvariants(); err != nil {
				t.Fatalf("after %s: %v", d.Pos, err)
			}
		}
	}
	return b.String()
}
