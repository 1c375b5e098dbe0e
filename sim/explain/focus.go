package explain

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/sim"
)

// A focused report shows, beside the last events of the whole world, the last events of each
// entity a violation names (the job, its target's breaker history, the receipt and its
// message, the node or worker) and the machine whose invariant broke. It is built by running
// the seed again with the trace captured, so a sweep pays nothing for it.

// focusLinesMax is how many lines each entity shows.
const focusLinesMax = 12

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
func entities(v *sim.Violation) []entity {
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
func Explain(res *sim.Result) error {
	if res.Violation == nil {
		return nil
	}
	var buf bytes.Buffer
	o := res.Options
	o.Trace = &buf
	if _, err := sim.Run(o); err != nil {
		return err
	}
	res.Focus = focusOf(res.Violation, strings.Split(strings.TrimRight(buf.String(), "\n"), "\n"))
	return nil
}

func focusOf(v *sim.Violation, lines []string) []sim.Focus {
	var out []sim.Focus
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
			out = append(out, sim.Focus{Entity: e.name, Lines: got})
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
