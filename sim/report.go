package sim

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Focus is one entity's last events, as sim/explain's Explain finds them in a rerun.
type Focus struct {
	Entity string
	Lines  []string
}

// Machine names the machine (or the layer) whose promise a violation broke.
func Machine(v *Violation) string {
	switch v.Invariant {
	case InvNoLostAck, InvReplayEqualsLive, InvNoPhantom, InvCorruptionRefused, InvRecoveryOpens, InvRecordLimit:
		return "the runner's journal and recovery (core/runner engine over core/journal)"
	case InvSingleRun, InvCapacity, InvAttemptsMax, InvNoStartAfterLate, InvNoStartBeforeDue, InvNoRestartTerminal, InvStopSpendsNothing:
		return "the runner machine (core/runner)"
	case InvBackoff:
		return "the retry policy as the runner machine applies it (core/retry, core/runner)"
	case InvBreakerRespected:
		return "the target's circuit breaker (core/breaker, via core/runner)"
	case InvLeaseNoRenewAfter, InvLeaseNoCallAfter, InvLeaseRequestExact, InvLeaseNoOverlap:
		return "the lease controller (core/lease, inside core/worker)"
	case InvCallWithinLease:
		return "the lease controller (core/lease, inside core/worker)"
	case InvHiddenWhileWork, InvNoConcurrent, InvSingleDisposition, InvStopMargin:
		return "the worker engine and its lease controller (core/worker, core/lease)"
	case InvMachine:
		switch {
		case strings.Contains(v.Detail, ": disk:"):
			return "the simulated disk's own invariants (sim/disk)"
		case strings.Contains(v.Detail, ": runner:"):
			return "the runner engine's own checkInvariants (core/runner)"
		case strings.Contains(v.Detail, "worker"):
			return "the worker engine's own checkInvariants (core/worker, core/lease)"
		}
		return "a machine's own checkInvariants (see the detail)"
	case InvConfigRefused:
		return "configuration validation (the machines' New and the runner engine's Open)"
	case InvWorkConserving, InvRetryOnTime, InvDeferredOnTime:
		return "the runner machine's scheduling and its driver's wake-ups (core/runner, sim/runner.go)"
	case InvHandlerPrompt, InvDispositionPrompt:
		return "the worker engine and its driver (core/worker, sim/worker.go)"
	case InvRenewalOnTime, InvDropAtMargin:
		return "the lease controller's timing and its driver's wake-ups (core/lease, sim/worker.go)"
	case InvWakeAtNotLate:
		return "a machine's WakeAt or the timer its driver armed (see the detail)"
	case InvLiveness:
		return "the whole world: something did not settle once faults were off"
	}
	return "unknown"
}

// Repro is the command that reproduces the run.
func (r *Result) Repro() string {
	s := "go run ./cmd/simrun --seed " + strconv.FormatInt(r.Config.Seed, 10) + " --profile " + r.Config.Profile
	if r.Options.Safety > 0 && r.Options.Safety != SafetyDefault {
		s += " --duration " + r.Options.Safety.String()
	}
	if r.Options.Steps > 0 && r.Options.Steps != StepsMaxDefault {
		s += " --steps " + strconv.Itoa(r.Options.Steps)
	}
	if r.Options.Shrunk != "" {
		s += " --shrunk " + r.Options.Shrunk
	}
	return s
}

// Verdicts of a run, each with its own simrun exit status.
const (
	VerdictOK         = "ok"         // every invariant held and the run finished
	VerdictViolation  = "violation"  // an invariant broke (exit 1)
	VerdictIncomplete = "incomplete" // stopped by the steps max before it finished (exit 3)
	VerdictFault      = "fault"      // the simulator itself panicked (exit 4)
)

// Verdict is the run's verdict: a fault outranks a violation, which outranks incomplete.
func (r *Result) Verdict() string {
	switch {
	case r.Fault != "":
		return VerdictFault
	case r.Violation != nil:
		return VerdictViolation
	case r.Stopped != "":
		return VerdictIncomplete
	}
	return VerdictOK
}

// OK reports whether the run finished and no invariant broke.
func (r *Result) OK() bool { return r.Verdict() == VerdictOK }

// Failure names what a failing run failed on: the invariant, "incomplete", or "simulator-fault".
func (r *Result) Failure() string {
	switch r.Verdict() {
	case VerdictFault:
		return "simulator-fault"
	case VerdictViolation:
		return r.Violation.Invariant
	case VerdictIncomplete:
		return "incomplete"
	}
	return ""
}

// Report writes the summary; its last line is the trace digest.
func (r *Result) Report(out io.Writer) error {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "sluice simulator: seed %d, profile %s\n", c.Seed, c.Profile)
	b.WriteString(indent(c.String()))
	fmt.Fprintf(&b, "phases         safety 0.000s..%s, liveness %s..%s (bound %s)\n",
		Offset(r.SafetyEnd), Offset(r.SafetyEnd), Offset(max(r.End, r.SafetyEnd)), Offset(r.Bound))
	fmt.Fprintf(&b, "liveness       %s\n", r.Liveness)
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
	switch r.Verdict() {
	case VerdictFault:
		fmt.Fprintf(&b, "result         SIMULATOR FAULT (a panic inside the simulator, not a verdict on the code under test)\n")
		fmt.Fprintf(&b, "\nSIMULATOR FAULT seed %d at %s\n%s", c.Seed, Offset(r.End), r.Fault)
		fmt.Fprintf(&b, "last %d events:\n", len(r.Last))
		for _, l := range r.Last {
			b.WriteString("  " + l + "\n")
		}
		fmt.Fprintf(&b, "reproduce: %s\n", r.Repro())
	case VerdictViolation:
		fmt.Fprintf(&b, "result         VIOLATION %s\n", r.Violation.Invariant)
		fmt.Fprintf(&b, "\nVIOLATION %s at %s (events to failure: %d)\n  %s\n", r.Violation.Invariant, Offset(r.Violation.At), r.Steps, r.Violation.Detail)
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
	case VerdictIncomplete:
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
