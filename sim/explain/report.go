package explain

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/sim"
)

// Machine names the machine (or the layer) whose promise a violation broke.
func Machine(v *sim.Violation) string {
	switch v.Invariant {
	case sim.InvNoLostAck, sim.InvReplayEqualsLive, sim.InvNoPhantom, sim.InvCorruptionRefused, sim.InvRecoveryOpens, sim.InvRecordLimit:
		return "the runner's journal and recovery (core/runner engine over core/journal)"
	case sim.InvSingleRun, sim.InvCapacity, sim.InvAttemptsMax, sim.InvNoStartAfterLate, sim.InvNoStartBeforeDue, sim.InvNoRestartTerminal, sim.InvStopSpendsNothing:
		return "the runner machine (core/runner)"
	case sim.InvBackoff:
		return "the retry policy as the runner machine applies it (core/retry, core/runner)"
	case sim.InvBreakerRespected:
		return "the target's circuit breaker (core/breaker, via core/runner)"
	case sim.InvLeaseNoRenewAfter, sim.InvLeaseNoCallAfter, sim.InvLeaseRequestExact, sim.InvLeaseNoOverlap:
		return "the lease controller (core/lease, inside core/worker)"
	case sim.InvCallWithinLease:
		return "the lease controller (core/lease, inside core/worker)"
	case sim.InvHiddenWhileWork, sim.InvNoConcurrent, sim.InvSingleDisposition, sim.InvStopMargin:
		return "the worker engine and its lease controller (core/worker, core/lease)"
	case sim.InvMachine:
		switch {
		case strings.Contains(v.Detail, ": disk:"):
			return "the simulated disk's own invariants (sim/disk)"
		case strings.Contains(v.Detail, ": runner:"):
			return "the runner engine's own checkInvariants (core/runner)"
		case strings.Contains(v.Detail, "worker"):
			return "the worker engine's own checkInvariants (core/worker, core/lease)"
		}
		return "a machine's own checkInvariants (see the detail)"
	case sim.InvConfigRefused:
		return "configuration validation (the machines' New and the runner engine's Open)"
	case sim.InvWorkConserving, sim.InvRetryOnTime, sim.InvDeferredOnTime:
		return "the runner machine's scheduling and its driver's wake-ups (core/runner, sim/runner.go)"
	case sim.InvHandlerPrompt, sim.InvDispositionPrompt:
		return "the worker engine and its driver (core/worker, sim/worker.go)"
	case sim.InvRenewalOnTime, sim.InvDropAtMargin:
		return "the lease controller's timing and its driver's wake-ups (core/lease, sim/worker.go)"
	case sim.InvWakeAtNotLate:
		return "a machine's WakeAt or the timer its driver armed (see the detail)"
	case sim.InvLiveness:
		return "the whole world: something did not settle once faults were off"
	}
	return "unknown"
}

// Report writes a run's summary; its last line is the trace digest.
func Report(r *sim.Result, out io.Writer) error {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "sluice simulator: seed %d, profile %s\n", c.Seed, c.Profile)
	b.WriteString(indent(c.String()))
	fmt.Fprintf(&b, "phases         safety 0.000s..%s, liveness %s..%s (bound %s)\n",
		sim.Offset(r.SafetyEnd), sim.Offset(r.SafetyEnd), sim.Offset(max(r.End, r.SafetyEnd)), sim.Offset(r.Bound))
	fmt.Fprintf(&b, "liveness       %s\n", r.Liveness)
	fmt.Fprintf(&b, "simulated      %s\n", sim.Offset(r.End))
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
	for i, inv := range sim.Invariants {
		total += r.Checks[i]
		if r.Checks[i] > 0 {
			parts = append(parts, inv.Name+"="+strconv.Itoa(r.Checks[i]))
		}
	}
	fmt.Fprintf(&b, "invariants     %d checks: %s\n", total, strings.Join(parts, " "))
	switch r.Verdict() {
	case sim.VerdictFault:
		fmt.Fprintf(&b, "result         SIMULATOR FAULT (a panic inside the simulator, not a verdict on the code under test)\n")
		fmt.Fprintf(&b, "\nSIMULATOR FAULT seed %d at %s\n%s", c.Seed, sim.Offset(r.End), r.Fault)
		fmt.Fprintf(&b, "last %d events:\n", len(r.Last))
		for _, l := range r.Last {
			b.WriteString("  " + l + "\n")
		}
		fmt.Fprintf(&b, "reproduce: %s\n", r.Repro())
	case sim.VerdictViolation:
		fmt.Fprintf(&b, "result         VIOLATION %s\n", r.Violation.Invariant)
		fmt.Fprintf(&b, "\nVIOLATION %s at %s (events to failure: %d)\n  %s\n", r.Violation.Invariant, sim.Offset(r.Violation.At), r.Steps, r.Violation.Detail)
		fmt.Fprintf(&b, "machine: %s\n", Machine(r.Violation))
		if len(r.Focus) > 0 {
			b.WriteString("events of the entities involved:\n")
			for _, f := range r.Focus {
				fmt.Fprintf(&b, "  %s:\n", f.Entity)
				for _, l := range f.Lines {
					b.WriteString("    " + l + "\n")
				}
			}
		}
		fmt.Fprintf(&b, "last %d events:\n", len(r.Last))
		for _, l := range r.Last {
			b.WriteString("  " + l + "\n")
		}
		fmt.Fprintf(&b, "reproduce: %s\n", r.Repro())
		fmt.Fprintf(&b, "shrink:    %s --shrink\n", r.Repro())
	case sim.VerdictIncomplete:
		fmt.Fprintf(&b, "result         INCOMPLETE (stopped early: %s; not a pass)\n", r.Stopped)
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

// per100 renders n per 100 of total with two decimals ("0.00" when total is 0).
func per100(n, total int) string {
	if total == 0 {
		return "0.00"
	}
	return strconv.FormatFloat(float64(n)*100/float64(total), 'f', 2, 64)
}
