package sim

import "strconv"

// Focus is one entity's last events, as sim/explain's Explain finds them in a rerun.
type Focus struct {
	Entity string
	Lines  []string
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
