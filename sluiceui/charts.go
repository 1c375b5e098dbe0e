package sluiceui

import (
	"fmt"
	"html/template"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/display"
	"github.com/sluicehq/sluice/internal/svgtime"
)

// Charts are SVG drawn on the server from a census (census.go) or a job: no script, nothing
// fetched. Every text in them is escaped by the writer; names go through display first.

// chartKindsMax bounds the kinds charted one by one (the total is always charted).
const chartKindsMax = 12

// attemptTimeline draws a job's attempts on a time axis (svgtime), from its first due time or
// first attempt to its last end (now while one runs).
func attemptTimeline(j Job, now time.Time) template.HTML {
	if len(j.History) == 0 {
		return ""
	}
	from, to := j.History[0].Start, j.History[0].Start
	if !j.FirstDue.IsZero() && j.FirstDue.Before(from) && from.Sub(j.FirstDue) < 24*time.Hour {
		from = j.FirstDue
	}
	lane := svgtime.Lane{Name: "attempts"}
	for _, a := range j.History {
		end := a.End
		if end.IsZero() {
			end = now
		}
		to = latest(to, end)
		lane.Bars = append(lane.Bars, svgtime.Bar{From: a.Start, To: a.End, Label: fmt.Sprintf("#%d", a.Number),
			Class: outcomeClass(a.Outcome), Title: fmt.Sprintf("attempt %d: %s, %s to %s %s", a.Number, a.Outcome,
				when(a.Start), when(a.End), display.Text(a.Err, 200))})
	}
	if to.Sub(from) < time.Second {
		to = from.Add(time.Second)
	}
	return svg(svgtime.Chart{From: from, To: to, Lanes: []svgtime.Lane{lane}, Width: 700, Label: 80})
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func outcomeClass(o string) string {
	switch o {
	case "succeeded":
		return "ok"
	case "failed", "panicked", "running", "released":
		return o
	}
	return ""
}

func svg(c svgtime.Chart) template.HTML {
	var b strings.Builder
	_ = svgtime.Write(&b, c) // a strings.Builder does not fail
	// svgtime escapes every text it writes: the markup is safe to inline.
	return template.HTML(b.String())
}

// chartsData is what the overview's charts section shows.
type chartsData struct {
	Rates    []template.HTML // per kind (the total first): started, succeeded, failed per minute
	States   []template.HTML // per kind (the total first): counts by state, one bar a census
	Breakers template.HTML   // each target's breaker, one cell a census
	Samples  int
	Partial  bool
}

func charts(c *census, hist []*census) chartsData {
	d := chartsData{Samples: len(hist), Partial: c.Partial}
	kinds := c.Kinds
	if len(kinds) > chartKindsMax {
		kinds = kinds[:chartKindsMax]
	}
	d.Rates = append(d.Rates, rateChart("all kinds", c.Total))
	d.States = append(d.States, stateChart("all kinds", hist, func(c *census) *kindCensus { return &c.Total }))
	for _, k := range kinds {
		name := "kind " + display.Text(k.Kind, 40)
		d.Rates = append(d.Rates, rateChart(name, k))
		d.States = append(d.States, stateChart(name, hist, func(c *census) *kindCensus {
			i, ok := slices.BinarySearchFunc(c.Kinds, k.Kind, func(e kindCensus, n string) int { return strings.Compare(e.Kind, n) })
			if !ok {
				return nil
			}
			return &c.Kinds[i]
		}))
	}
	d.Breakers = breakerChart(hist)
	return d
}

// Chart geometry, in SVG user units.
const (
	barW    = 8  // one minute's bar
	rateH   = 36 // one series' height
	labelW  = 90 // the series' label column
	stateH  = 80 // the stacked counts' height
	legendH = 16
	legendW = 560 // seven states' swatches and names, wider than the bars
)

// rateChart draws the attempts started, succeeded and failed in each minute of the hour
// before the census, one row of bars a series, each scaled to its own largest minute.
func rateChart(name string, k kindCensus) template.HTML {
	var b strings.Builder
	series := []struct {
		label, fill string
		v           *[minutes]int
	}{{"started", "#3a6ea5", &k.Started}, {"succeeded", "#1b7f3b", &k.Succeeded}, {"failed", "#b00020", &k.Failed}}
	w := labelW + minutes*barW
	h := legendH + len(series)*(rateH+6)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="rates" role="img" width="%d" height="%d" viewBox="0 0 %d %d">`, w, h, w, h)
	fmt.Fprintf(&b, `<title>%s: attempts per minute, the last hour</title><text x="0" y="12" font-size="12">%s: attempts per minute, the last hour (oldest left)</text>`,
		template.HTMLEscapeString(name), template.HTMLEscapeString(name))
	for si, s := range series {
		top := legendH + si*(rateH+6)
		peak := slices.Max(s.v[:])
		total := 0
		for _, n := range s.v {
			total += n
		}
		fmt.Fprintf(&b, `<text x="0" y="%d" font-size="11" data-series="%s" data-total="%d">%s %d</text>`, top+rateH/2+4, s.label, total, s.label, total)
		for i, n := range s.v {
			if n == 0 {
				continue
			}
			bh := max(1, n*rateH/peak)
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%d %s, %d min ago</title></rect>`,
				labelW+i*barW, top+rateH-bh, barW-1, bh, s.fill, n, s.label, minutes-1-i)
		}
	}
	b.WriteString("</svg>")
	return template.HTML(b.String()) // every text above is escaped or a number
}

// stateFills colour the states in the stacked counts.
var stateFills = [...]string{sluice.StatePending: "#7aa6d6", sluice.StateWaiting: "#3a6ea5", sluice.StateDeferred: "#e0a030",
	sluice.StateRunning: "#6a3d9a", sluice.StateSucceeded: "#1b7f3b", sluice.StateDead: "#b00020", sluice.StateCancelled: "#888888"}

// stateChart draws the counts by state of each census of the last hour as a stacked bar at
// its minute; of picks the kind's counts (nil: none then).
func stateChart(name string, hist []*census, of func(*census) *kindCensus) template.HTML {
	var b strings.Builder
	w, h := labelW+legendW, legendH+stateH+legendH
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="states" role="img" width="%d" height="%d" viewBox="0 0 %d %d">`, w, h, w, h)
	fmt.Fprintf(&b, `<title>%s: jobs by state, the last hour</title><text x="0" y="12" font-size="12">%s: jobs by state, one bar a minute viewed (oldest left)</text>`,
		template.HTMLEscapeString(name), template.HTMLEscapeString(name))
	peak := 1
	for _, c := range hist {
		if k := of(c); k != nil {
			peak = max(peak, sum(k.States[:]))
		}
	}
	if len(hist) > 0 {
		last := hist[len(hist)-1].At
		for _, c := range hist {
			k := of(c)
			i, ok := minuteOf(c.At, last.Add(time.Nanosecond))
			if k == nil || !ok {
				continue
			}
			y := legendH + stateH
			for st := sluice.StatePending; st <= sluice.StateCancelled; st++ {
				n := k.States[st]
				if n == 0 {
					continue
				}
				bh := max(1, n*stateH/peak)
				y -= bh
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s: %d %s</title></rect>`,
					labelW+i*barW, y, barW-1, bh, stateFills[st], when(c.At), n, st)
			}
		}
	}
	fmt.Fprintf(&b, `<text x="0" y="%d" font-size="11">peak %d</text>`, legendH+12, peak)
	x := labelW
	for st := sluice.StatePending; st <= sluice.StateCancelled; st++ {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="8" height="8" fill="%s"/><text x="%d" y="%d" font-size="10">%s</text>`,
			x, legendH+stateH+4, stateFills[st], x+10, legendH+stateH+12, st)
		x += legendW / 7
	}
	b.WriteString("</svg>")
	return template.HTML(b.String()) // every text above is escaped, a number or a state's name
}

func sum(v []int) int {
	n := 0
	for _, x := range v {
		n += x
	}
	return n
}

// breakerChartMax bounds the targets drawn.
const breakerChartMax = 30

// breakerChart draws each target's breaker over the censuses of the last hour (svgtime): a
// bar from one census to the next in the state it had (a target not listed was idly closed).
func breakerChart(hist []*census) template.HTML {
	if len(hist) == 0 {
		return ""
	}
	var targets []string
	for _, c := range hist {
		for _, br := range c.Breakers {
			targets = append(targets, br.Target)
		}
	}
	slices.Sort(targets)
	targets = slices.Compact(targets)
	if len(targets) == 0 {
		return ""
	}
	targets = targets[:min(len(targets), breakerChartMax)]
	// Each census stands for the minute after it (or up to the next, if sooner).
	end := hist[len(hist)-1].At.Add(histEvery)
	lanes := make([]svgtime.Lane, len(targets))
	for i, t := range targets {
		lanes[i].Name = display.Text(t, 24)
		for ci, c := range hist {
			to := c.At.Add(histEvery)
			if ci+1 < len(hist) && hist[ci+1].At.Before(to) {
				to = hist[ci+1].At
			}
			state := "closed"
			for _, br := range c.Breakers {
				if br.Target == t {
					state = br.State
				}
			}
			lanes[i].Bars = append(lanes[i].Bars, svgtime.Bar{From: c.At, To: to, Class: state,
				Title: fmt.Sprintf("%s from %s", state, when(c.At))})
		}
	}
	return svg(svgtime.Chart{From: end.Add(-time.Hour), To: end, Lanes: lanes, Width: 600, Label: 180})
}
