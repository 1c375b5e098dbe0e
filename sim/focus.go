package sim

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
)

// A focused report shows, beside the last events of the whole world, the last events of each
// entity a violation names (the job, its target's breaker history, the receipt and its
// message, the node or worker) and the machine whose invariant broke. It is built by running
// the seed again with the trace captured, so a sweep pays nothing for it.

// focusLinesMax is how many lines each entity shows.
const focusLinesMax = 12

// Focus is one entity's last events.
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
	case InvLiveness:
		return "the whole world: something did not settle once faults were off"
	}
	return "unknown"
}

var (
	reNode    = regexp.MustCompile(`\bnode[ /](\d+)`)
	reJob     = regexp.MustCompile(`\bjob (\d+)`)
	reIDs     = regexp.MustCompile(`\bids=(\d+)\.\.(\d+)`)
	reTarget  = regexp.MustCompile(`\btarget (t\d+)`)
	reReceipt = regexp.MustCompile(`\b(q/\d+)/\d+\b`)
	reWorker  = regexp.MustCompile(`\bworker[ /](\d+)`)
)

// inRange reports whether what names a batch of ids ("ids=A..B") that holds id.
func inRange(what, id string) bool {
	m := reIDs.FindStringSubmatch(what)
	if m == nil {
		return false
	}
	lo, _ := strconv.ParseUint(m[1], 10, 64)
	hi, _ := strconv.ParseUint(m[2], 10, 64)
	n, _ := strconv.ParseUint(id, 10, 64)
	return lo <= n && n <= hi
}

// entity is a named filter over trace lines.
type entity struct {
	name  string
	match func(who, what string) bool
	broad bool // a whole process: shown in reports, not outlined in timelines
}

// entities lists what a violation's detail names, in a fixed order.
func entities(v *Violation) []entity {
	d := v.Detail
	var out []entity
	node := ""
	if m := reNode.FindStringSubmatch(d); m != nil {
		node = "node/" + m[1]
	}
	if m := reJob.FindStringSubmatch(d); m != nil && node != "" {
		id := m[1]
		out = append(out, entity{name: "job " + id + " on " + node, match: func(who, what string) bool {
			return who == node && (strings.Contains(what, "id="+id+" ") || strings.HasSuffix(what, "id="+id) ||
				strings.Contains(what, " "+id+"#") || strings.Contains(what, "job "+id+" ") || inRange(what, id))
		}})
	}
	if m := reTarget.FindStringSubmatch(d); m != nil && node != "" {
		t := m[1]
		out = append(out, entity{name: "target " + t + " on " + node + " (its breaker's history: attempts started and their outcomes)", match: func(who, what string) bool {
			return who == node && strings.HasPrefix(what, "start ") && (strings.Contains(what, " "+t+" ") || strings.HasSuffix(what, " "+t))
		}})
	}
	for _, m := range reReceipt.FindAllStringSubmatch(d, -1) {
		msg := m[1] + "/"
		dup := false
		for _, e := range out {
			dup = dup || e.name == "message "+m[1]
		}
		if !dup {
			out = append(out, entity{name: "message " + m[1] + " (every delivery's receipt)", match: func(who, what string) bool {
				return strings.Contains(what, msg)
			}})
		}
	}
	if node != "" {
		out = append(out, entity{node, func(who, what string) bool { return who == node }, true})
	}
	if m := reWorker.FindStringSubmatch(d); m != nil {
		wk := "worker/" + m[1]
		out = append(out, entity{wk, func(who, what string) bool { return who == wk }, true})
	}
	return out
}

// Explain runs res's seed again with the trace captured and fills res.Focus with the last
// events of each entity its violation names. It does nothing for a run without a violation.
func Explain(res *Result) error {
	if res.Violation == nil {
		return nil
	}
	var buf bytes.Buffer
	o := res.Options
	o.Trace = &buf
	if _, err := Run(o); err != nil {
		return err
	}
	res.Focus = focusOf(res.Violation, strings.Split(strings.TrimRight(buf.String(), "\n"), "\n"))
	return nil
}

func focusOf(v *Violation, lines []string) []Focus {
	var out []Focus
	for _, e := range entities(v) {
		var got []string
		for _, l := range lines {
			_, who, what := splitLine(l)
			if e.match(who, what) {
				got = append(got, l)
			}
		}
		if len(got) > focusLinesMax {
			got = got[len(got)-focusLinesMax:]
		}
		if len(got) > 0 {
			out = append(out, Focus{Entity: e.name, Lines: got})
		}
	}
	return out
}

// splitLine splits a trace line "<time> <who> <what>".
func splitLine(l string) (at, who, what string) {
	at, rest, _ := strings.Cut(l, " ")
	who, what, _ = strings.Cut(rest, " ")
	return at, who, what
}
