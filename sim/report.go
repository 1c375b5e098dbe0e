package sim

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Repro is the command that reproduces the run.
func (r *Result) Repro() string {
	s := "go run ./cmd/simrun --seed " + strconv.FormatInt(r.Config.Seed, 10) + " --profile " + r.Config.Profile
	if r.Options.Safety > 0 && r.Options.Safety != SafetyDefault {
		s += " --duration " + r.Options.Safety.String()
	}
	if r.Options.Steps > 0 && r.Options.Steps != StepsMaxDefault {
		s += " --steps " + strconv.Itoa(r.Options.Steps)
	}
	return s
}

// OK reports whether no invariant broke.
func (r *Result) OK() bool { return r.Violation == nil }

// Report writes the summary; its last line is the trace digest.
func (r *Result) Report(out io.Writer) error {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "sluice simulator: seed %d, profile %s\n", c.Seed, c.Profile)
	b.WriteString(indent(c.String()))
	fmt.Fprintf(&b, "phases         safety 0.000s..%s, liveness %s..%s (bound %s)\n",
		Offset(r.SafetyEnd), Offset(r.SafetyEnd), Offset(max(r.End, r.SafetyEnd)), Offset(r.Bound))
	fmt.Fprintf(&b, "simulated      %s\n", Offset(r.End))
	fmt.Fprintf(&b, "events         %d (trace lines %d)\n", r.Steps, r.Lines)
	fmt.Fprintf(&b, "crashes        %s\n", r.Stats.Crashes)
	fmt.Fprintf(&b, "faults         %s\n", r.Stats.Faults)
	if c.Nodes > 0 {
		fmt.Fprintf(&b, "jobs           %s\n", r.Stats.Jobs)
	}
	if c.Workers > 0 {
		fmt.Fprintf(&b, "messages       %s\n", r.Stats.Messages)
		fmt.Fprintf(&b, "renewals       %s\n", r.Stats.Renewals)
		fmt.Fprintf(&b, "drops          %s\n", r.Stats.Drops)
		fmt.Fprintf(&b, "duplicates     %s per 100 messages: %s\n", per100(r.Stats.Duplicates.Total(), r.Stats.Messages.Get("sent")), r.Stats.Duplicates)
	}
	total := 0
	var parts []string
	for i, inv := range Invariants {
		total += r.Checks[i]
		if r.Checks[i] > 0 {
			parts = append(parts, inv.Name+"="+strconv.Itoa(r.Checks[i]))
		}
	}
	fmt.Fprintf(&b, "invariants     %d checks: %s\n", total, strings.Join(parts, " "))
	switch {
	case r.Violation != nil:
		fmt.Fprintf(&b, "result         VIOLATION %s\n", r.Violation.Invariant)
		fmt.Fprintf(&b, "\nVIOLATION %s at %s\n  %s\n", r.Violation.Invariant, Offset(r.Violation.At), r.Violation.Detail)
		fmt.Fprintf(&b, "last %d events:\n", len(r.Last))
		for _, l := range r.Last {
			b.WriteString("  " + l + "\n")
		}
		fmt.Fprintf(&b, "reproduce: %s\n", r.Repro())
	case r.Stopped != "":
		fmt.Fprintf(&b, "result         ok (stopped early: %s)\n", r.Stopped)
	default:
		b.WriteString("result         ok\n")
	}
	fmt.Fprintf(&b, "trace sha256 %s\n", r.Digest)
	_, err := io.WriteString(out, b.String())
	return err
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "config         " + l
	}
	return strings.Join(lines, "\n") + "\n"
}

var _ = time.Second

// per100 renders n per 100 of total with two decimals ("0.00" when total is 0).
func per100(n, total int) string {
	if total == 0 {
		return "0.00"
	}
	return strconv.FormatFloat(float64(n)*100/float64(total), 'f', 2, 64)
}
