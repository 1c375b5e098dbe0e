package explain

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/svgtime"
	"github.com/sluicehq/sluice/sim"
)

// A timeline (simrun --seed N --timeline run.html) is one self-contained HTML page: inline SVG
// and CSS, no scripts, no fonts or anything else from the network. It is drawn from the trace
// alone, so the same seed gives the same bytes. Lanes, top to bottom:
//
//   - per runner node: attempts as bars labelled job#attempt (green succeeded, amber failed,
//     grey other), crashes (red), restarts (orange), opens (green ticks), commits (grey ticks,
//     one per fsync'd batch) and compactions (blue);
//   - per target of each node: its breaker's history, every attempt started on it as a dot
//     coloured by outcome (a run of failures is what opens a breaker);
//   - per worker: handlers as bars by receipt, and each receipt's lease window from receive to
//     disposition (delete or release) or drop (cancel), with renewals as ticks;
//   - the world: the phase change and the violation.
//
// The violation is a red line across every lane; the events of the entities it names (the
// job, the target, the receipt's message) are drawn with a black outline and listed below.

// Timeline geometry, in SVG user units (svgtime draws it).
const (
	tlLabel = 190  // label column
	tlWidth = 1400 // plot width
)

// tlEpoch is offset zero on svgtime's axis: simulated offsets become instants after it.
var tlEpoch = time.Unix(0, 0).UTC()

type tlEvent struct {
	at        time.Duration
	who, what string
}

type tlBar struct {
	from, to  time.Duration
	label     string
	class     string
	highlight bool
	ticks     []time.Duration // renewals inside a lease window
	owner     string          // the worker holding a lease window
}

type tlMark struct {
	at        time.Duration
	class     string
	title     string
	highlight bool
}

type tlLane struct {
	name  string
	bars  []*tlBar
	marks []tlMark
}

// WriteTimeline runs o with its trace captured and writes the run's timeline to out.
func WriteTimeline(out io.Writer, o sim.Options) (*sim.Result, error) {
	var buf bytes.Buffer
	o.Trace = &buf
	res, err := sim.Run(o)
	if err != nil {
		return nil, err
	}
	var evs []tlEvent
	for _, l := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
		at, who, what := splitLine(l)
		d, err := time.ParseDuration(at)
		if err != nil {
			continue
		}
		evs = append(evs, tlEvent{at: d, who: who, what: what})
	}
	return res, renderTimeline(out, res, evs)
}

func renderTimeline(out io.Writer, res *sim.Result, evs []tlEvent) error {
	lead := leadOf(res.Violation)
	c := &collector{lanes: map[string]*tlLane{}, open: map[string]*tlBar{}, lead: lead}
	for _, e := range evs {
		c.add(e)
	}
	end := res.End
	for _, b := range c.open {
		if b.to < 0 {
			b.to = end
		}
	}
	names := make([]string, 0, len(c.lanes))
	for n, l := range c.lanes {
		names = append(names, n)
		for _, b := range l.bars {
			end = max(end, b.to) // a bar drawn past the run's end (a handler cut by the violation)
		}
	}
	sort.Slice(names, func(i, j int) bool { return laneOrder(names[i]) < laneOrder(names[j]) })
	chart := svgtime.Chart{From: tlEpoch, To: tlEpoch.Add(max(end, 1)), Width: tlWidth, Label: tlLabel}
	for _, n := range names {
		chart.Lanes = append(chart.Lanes, chartLane(c.lanes[n]))
	}
	for i := 0; i <= 10; i++ {
		t := end * time.Duration(i) / 10
		chart.Axis = append(chart.Axis, svgtime.Tick{At: tlEpoch.Add(t), Text: sim.Offset(t)})
	}
	if v := res.Violation; v != nil {
		chart.Markers = []svgtime.Marker{{At: tlEpoch.Add(v.At), Class: "violation",
			Data:  []svgtime.Attr{{Name: "invariant", Value: v.Invariant}},
			Title: fmt.Sprintf("VIOLATION %s at %s: %s", v.Invariant, sim.Offset(v.At), v.Detail)}}
	}
	var b strings.Builder
	writeHead(&b, res)
	if err := svgtime.Write(&b, chart); err != nil {
		return err
	}
	if res.Violation != nil {
		b.WriteString("<h2>events leading to the violation (outlined above)</h2>\n<pre>\n")
		for _, e := range evs {
			if lead(e.who, e.what) {
				fmt.Fprintf(&b, "%s %s %s\n", sim.Offset(e.at), html.EscapeString(e.who), html.EscapeString(e.what))
			}
		}
		b.WriteString("</pre>\n")
	}
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(out, b.String())
	return err
}

// leadOf matches the events leading to a violation: every event of the job, target or message
// it names, and the crashes, restarts and opens of the process it names (none without one).
func leadOf(v *sim.Violation) func(who, what string) bool {
	var ents []entity
	if v != nil {
		ents = entities(v)
	}
	return func(who, what string) bool {
		for _, e := range ents {
			if e.match(who, what) && (!e.broad || lifecycle(what)) {
				return true
			}
		}
		return false
	}
}

// collector turns trace events into lanes of bars and marks.
type collector struct {
	lanes map[string]*tlLane
	open  map[string]*tlBar // lease windows by receipt
	lead  func(who, what string) bool
}

func (c *collector) lane(name string) *tlLane {
	l := c.lanes[name]
	if l == nil {
		l = &tlLane{name: name}
		c.lanes[name] = l
	}
	return l
}

func (c *collector) add(e tlEvent) {
	hl := c.lead(e.who, e.what)
	verb, rest, _ := strings.Cut(e.what, " ")
	switch {
	case strings.HasPrefix(e.who, "node/"):
		c.node(e, hl, verb, rest)
	case strings.HasPrefix(e.who, "worker/"):
		c.worker(e, hl, verb, rest)
	case e.who == "world":
		if strings.HasPrefix(e.what, "phase liveness") {
			c.lane("world").marks = append(c.lane("world").marks, tlMark{at: e.at, class: "phase", title: e.what})
		}
	}
}

// node adds a runner node's event: attempts as bars (and dots on their target's breaker
// lane), crashes, restarts, opens, commits and compactions as marks.
func (c *collector) node(e tlEvent, hl bool, verb, rest string) {
	l := c.lane(e.who)
	switch verb {
	case "start":
		// "start 5#1 t1 for 639ms -> failed"
		f := strings.Fields(rest)
		if len(f) >= 6 {
			d, _ := time.ParseDuration(f[3])
			l.bars = append(l.bars, &tlBar{from: e.at, to: e.at + d, label: f[0], class: "att " + outcomeClass(f[5]), highlight: hl})
			bl := c.lane(e.who + " breaker " + f[1])
			bl.marks = append(bl.marks, tlMark{at: e.at, class: "dot " + outcomeClass(f[5]), title: f[0] + " " + f[5], highlight: hl})
		}
	case "CRASH":
		l.marks = append(l.marks, tlMark{at: e.at, class: "crash", title: e.what, highlight: hl})
	case "enqueue", "cancel", "retry":
		if hl {
			l.marks = append(l.marks, tlMark{at: e.at, class: "enqueue", title: e.what, highlight: true})
		}
	case "RESTART":
		l.marks = append(l.marks, tlMark{at: e.at, class: "restart", title: e.what, highlight: hl})
	case "open:", "open":
		l.marks = append(l.marks, tlMark{at: e.at, class: "open", title: e.what, highlight: hl})
	case "commit:":
		l.marks = append(l.marks, tlMark{at: e.at, class: "sync", title: e.what})
		if strings.Contains(e.what, "; compacted") || strings.HasPrefix(e.what, "commit: compacted") {
			l.marks = append(l.marks, tlMark{at: e.at, class: "compact", title: e.what})
		}
	case "FLIP", "FORGE":
		l.marks = append(l.marks, tlMark{at: e.at, class: "crash", title: e.what, highlight: true})
	case "crash":
		// "crash armed after k disk ops", "crash point armed at disk op k of this commit"
		l.marks = append(l.marks, tlMark{at: e.at, class: "restart", title: e.what, highlight: hl})
	}
}

// worker adds a worker's event: handlers as bars, lease windows from receive to disposition
// or drop with renewals as ticks, crashes, starts and stops as marks.
func (c *collector) worker(e tlEvent, hl bool, verb, rest string) {
	l := c.lane(e.who)
	switch verb {
	case "handle":
		// "handle q/5/1 for 1.492s -> success"
		f := strings.Fields(rest)
		if len(f) >= 4 {
			d, _ := time.ParseDuration(f[2])
			l.bars = append(l.bars, &tlBar{from: e.at, to: e.at + d, label: f[0], class: "att " + outcomeClass(f[4%len(f)]), highlight: hl})
		}
	case "received":
		for _, r := range strings.Fields(rest) {
			if r == "nothing" {
				continue
			}
			b := &tlBar{from: e.at, to: -1, label: r, class: "lease", highlight: c.lead(e.who, r), owner: e.who}
			c.open[r] = b
			l.bars = append(l.bars, b)
		}
	case "renew":
		for _, f := range strings.Fields(rest) {
			r, _, _ := strings.Cut(f, "=")
			if b := c.open[r]; b != nil {
				b.ticks = append(b.ticks, e.at)
			}
		}
	case "delete", "release", "cancel":
		fields := strings.Fields(rest)
		if verb == "cancel" && len(fields) > 1 {
			fields = fields[:1]
		}
		for _, f := range fields {
			r, _, _ := strings.Cut(f, "=")
			if b := c.open[r]; b != nil && b.to < 0 {
				b.to = e.at
				b.class = "lease " + verb
				delete(c.open, r)
			}
		}
	case "CRASH":
		l.marks = append(l.marks, tlMark{at: e.at, class: "crash", title: e.what, highlight: hl})
		for _, r := range sortedKeys(c.open) {
			if b := c.open[r]; b.owner == e.who {
				b.to = e.at
				b.class = "lease dead"
				delete(c.open, r)
			}
		}
	case "START":
		l.marks = append(l.marks, tlMark{at: e.at, class: "open", title: "start"})
	case "SHUTDOWN", "stopped", "stopped:":
		l.marks = append(l.marks, tlMark{at: e.at, class: "restart", title: e.what})
	}
}

// chartLane turns a collected lane into svgtime's: classes carry the colours (the page's style
// sheet), "lead" outlines the events leading to the violation, titles carry the offsets.
func chartLane(l *tlLane) svgtime.Lane {
	out := svgtime.Lane{Name: l.name, Data: []svgtime.Attr{{Name: "lane", Value: l.name}}}
	for _, bar := range l.bars {
		sb := svgtime.Bar{From: tlEpoch.Add(bar.from), To: tlEpoch.Add(max(bar.to, bar.from+1)), Class: withLead(bar.class, bar.highlight),
			Title: fmt.Sprintf("%s %s..%s", bar.label, sim.Offset(bar.from), sim.Offset(bar.to))}
		for _, t := range bar.ticks {
			sb.Ticks = append(sb.Ticks, tlEpoch.Add(t))
			sb.TickClass = "renew"
		}
		out.Bars = append(out.Bars, sb)
	}
	for _, m := range l.marks {
		out.Marks = append(out.Marks, svgtime.Mark{At: tlEpoch.Add(m.at), Class: withLead(m.class, m.highlight),
			Title: sim.Offset(m.at) + " " + m.title, Dot: strings.HasPrefix(m.class, "dot")})
	}
	return out
}

func withLead(class string, highlight bool) string {
	if highlight {
		return class + " lead"
	}
	return class
}

// writeHead writes the page up to the SVG: the title, the style sheet and the run's verdict.
func writeHead(b *strings.Builder, res *sim.Result) {
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n")
	fmt.Fprintf(b, "<title>sluice simulator: seed %d, profile %s</title>\n", res.Config.Seed, html.EscapeString(res.Config.Profile))
	b.WriteString(tlStyle)
	fmt.Fprintf(b, "<h1>seed %d, profile %s: %s</h1>\n", res.Config.Seed, html.EscapeString(res.Config.Profile), html.EscapeString(res.Verdict()))
	fmt.Fprintf(b, "<p>%d events over %s simulated; reproduce: <code>%s</code></p>\n", res.Steps, sim.Offset(res.End), html.EscapeString(res.Repro()))
	if v := res.Violation; v != nil {
		fmt.Fprintf(b, "<p class=\"verdict\">VIOLATION <b>%s</b> at %s in %s: %s</p>\n", v.Invariant, sim.Offset(v.At), html.EscapeString(Machine(v)), html.EscapeString(v.Detail))
	}
}

// tlStyle is the page's style sheet, closing the head and opening the body.
const tlStyle = `<style>
body { font-family: monospace; font-size: 12px; margin: 12px; }
svg text { font-family: monospace; font-size: 11px; }
.band { fill: #fafafa; stroke: #e4e4e4; }
.att.ok rect { fill: #7bc47f; } .att.bad rect { fill: #f0b44c; } .att.other rect { fill: #b8b8b8; }
.lease rect { fill: #cfe3f7; stroke: #7aa6d6; stroke-width: 0.5; }
.lease.release rect { fill: #e6dcf5; } .lease.cancel rect { fill: #f7d0d0; } .lease.dead rect { fill: #ddd; }
.renew { stroke: #1d5fa8; }
.crash rect { fill: #d62728; } .restart rect { fill: #ff7f0e; } .open rect { fill: #2ca02c; }
.sync rect { fill: #999; opacity: 0.3; } .compact rect { fill: #1f77b4; }
.phase rect { fill: #555; } .enqueue rect { fill: #9467bd; }
.dot.ok circle { fill: #2ca02c; } .dot.bad circle { fill: #d62728; } .dot.other circle { fill: #888; }
.lead rect, .lead circle { stroke: #000; stroke-width: 1.5; }
.violation { stroke: #d62728; stroke-width: 2; stroke-dasharray: 6 3; }
</style>
</head>
<body>
`

func sortedKeys(m map[string]*tlBar) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// lifecycle reports whether a trace line is a process's crash, restart, open or stop.
func lifecycle(what string) bool {
	for _, p := range []string{"CRASH", "RESTART", "open", "FLIP", "FORGE", "crash", "SHUTDOWN", "START"} {
		if strings.HasPrefix(what, p) {
			return true
		}
	}
	return false
}

// laneOrder sorts nodes, then each node's breakers, then workers, then the world.
func laneOrder(n string) string {
	switch {
	case strings.HasPrefix(n, "node/"):
		return "0" + n
	case strings.HasPrefix(n, "worker/"):
		return "1" + n
	}
	return "2" + n
}

// outcomeClass maps an outcome word to a colour class.
func outcomeClass(o string) string {
	switch o {
	case "succeeded", "success":
		return "ok"
	case "failed", "retry", "retryable", "permanent", "panicked", "panic", "terminal", "poison":
		return "bad"
	}
	return "other"
}
