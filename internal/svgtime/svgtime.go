// Package svgtime draws spans of time as SVG: lanes of bars (an attempt from its start to its
// end) and marks (an instant), on one time axis. The job page of the web UI draws a job's
// attempts with it; it imports nothing of the simulator, so production may link it.
//
// The simulator's timeline draws with it too: lanes carrying data attributes and a background
// band, renewal ticks inside bars, dots, markers across every lane and an axis labelled by the
// caller. A chart that sets none of these is drawn as before (testdata/ui.svg pins it).
//
// Rules: the output is a function of the Chart alone (same chart, same bytes); every text is
// escaped; a data attribute's name is checked (Write fails on a bad one, drawing nothing); a bar too short to see is drawn 2 units wide; overlapping bars in a lane go to
// separate rows; nothing is fetched and no script runs (colours come from the page's CSS
// classes, or the defaults given inline as presentation attributes).
package svgtime

import (
	"fmt"
	"html"
	"io"
	"slices"
	"strings"
	"time"
)

// Bar is a span in a lane. A zero To draws it to the chart's end (still running).
type Bar struct {
	From, To  time.Time
	Label     string      // drawn inside the bar when it fits
	Title     string      // the tooltip
	Class     string      // a CSS class; ok, failed, panicked, running, released, closed, half-open, open have colours
	Ticks     []time.Time // instants drawn as short lines across the bar (a lease's renewals)
	TickClass string      // the ticks' CSS class, after "tick"
}

// Mark is an instant in a lane.
type Mark struct {
	At    time.Time
	Title string
	Class string
	Dot   bool // a dot in the lane's first row instead of a line across the lane
}

// Attr is a data attribute, written data-Name="Value"; Name is lower-case letters, digits and
// dashes.
type Attr struct{ Name, Value string }

// Marker is an instant drawn as a line across every lane (a violation).
type Marker struct {
	At    time.Time
	Title string
	Class string
	Data  []Attr
}

// Tick is a label on the axis, formatted by the caller (a simulated offset, say).
type Tick struct {
	At   time.Time
	Text string
}

// Lane is one labelled row (or several, when its bars overlap).
// A lane with Data is drawn as a group <g class="lane" data-...> with a background band.
type Lane struct {
	Name  string
	Bars  []Bar
	Marks []Mark
	Data  []Attr
}

// Chart is what Write draws. From and To bound the axis; a zero Width is 900.
type Chart struct {
	From, To time.Time
	Lanes    []Lane
	Width    int // plot width, without the label column
	Label    int // label column width; 0: 120
	Markers  []Marker
	Axis     []Tick // the axis labels; nil: the From and To stamps with the span
}

// Geometry in SVG user units.
const (
	rowHeight = 18
	rowGap    = 4
	axis      = 20
	barMin    = 2
)

// fills are the defaults of the classes, as presentation attributes (a page's CSS overrides
// them; a strict CSP allows them, unlike style attributes).
var fills = map[string]string{"ok": "#1b7f3b", "failed": "#c77700", "panicked": "#b00020",
	"running": "#3a6ea5", "released": "#888888", "closed": "#9cc9a4", "half-open": "#e0a030", "open": "#b00020"}

// Write draws c as one <svg> element, or returns an error and writes nothing.
func Write(w io.Writer, c Chart) error {
	if err := check(c); err != nil {
		return err
	}
	width, label := c.Width, c.Label
	if width <= 0 {
		width = 900
	}
	if label <= 0 {
		label = 120
	}
	span := c.To.Sub(c.From)
	if span <= 0 {
		span = time.Second
	}
	x := func(t time.Time) float64 {
		d := min(max(t.Sub(c.From), 0), span)
		return float64(label) + float64(width)*float64(d)/float64(span)
	}
	var b strings.Builder
	y := 0
	for _, l := range c.Lanes {
		y = writeLane(&b, l, y, label+width, c.To, x)
	}
	for _, m := range c.Markers {
		fmt.Fprintf(&b, `<line class="marker %s"%s x1="%.1f" y1="0" x2="%.1f" y2="%d" stroke="#b00020" stroke-width="2"><title>%s</title></line>`+"\n",
			esc(m.Class), attrs(m.Data), x(m.At), x(m.At), y, esc(m.Title))
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>`+"\n", label, y, label+width, y)
	if c.Axis == nil {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11">%s</text>`+"\n", label, y+14, esc(stamp(c.From)))
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" text-anchor="end">%s (%s)</text>`+"\n",
			label+width, y+14, esc(stamp(c.To)), esc(span.Round(time.Millisecond).String()))
	}
	for i, t := range c.Axis {
		anchor := "middle"
		if i == 0 {
			anchor = "start"
		} else if i == len(c.Axis)-1 {
			anchor = "end"
		}
		fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="%d" font-size="11" text-anchor="%s">%s</text>`+"\n", x(t.At), y+14, anchor, esc(t.Text))
	}
	_, err := fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" class="timeline" role="img" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n%s</svg>\n",
		label+width, y+axis, label+width, y+axis, b.String())
	return err
}

// writeLane draws lane l from height y (full is the label column plus the plot) and returns
// the next lane's y.
func writeLane(b *strings.Builder, l Lane, y, full int, end time.Time, x func(time.Time) float64) int {
	rows := pack(l.Bars)
	n := 1
	for _, r := range rows {
		n = max(n, r+1)
	}
	h := n*(rowHeight+rowGap) - rowGap
	if l.Data != nil {
		fmt.Fprintf(b, `<g class="lane"%s>`+"\n", attrs(l.Data))
		fmt.Fprintf(b, `<rect class="band" x="0" y="%d" width="%d" height="%d" fill="#fafafa"/>`+"\n", y, full, h)
	}
	fmt.Fprintf(b, `<text class="lane" x="0" y="%d" font-size="12">%s</text>`+"\n", y+13, esc(l.Name))
	for i, bar := range l.Bars {
		to := bar.To
		if to.IsZero() {
			to = end
		}
		x0, x1 := x(bar.From), x(to)
		bw := max(x1-x0, barMin)
		by := y + rows[i]*(rowHeight+rowGap)
		fmt.Fprintf(b, `<g class="bar %s"><title>%s</title><rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`,
			esc(bar.Class), esc(bar.Title), x0, by, bw, rowHeight, fill(bar.Class))
		if bar.Label != "" && bw > float64(7*len(bar.Label)) {
			fmt.Fprintf(b, `<text x="%.1f" y="%d" font-size="11" fill="#fff">%s</text>`, x0+3, by+13, esc(bar.Label))
		}
		for _, t := range bar.Ticks {
			fmt.Fprintf(b, `<line class="tick %s" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#1d5fa8"/>`,
				esc(bar.TickClass), x(t), by, x(t), by+rowHeight)
		}
		b.WriteString("</g>\n")
	}
	for _, m := range l.Marks {
		if m.Dot {
			fmt.Fprintf(b, `<g class="mark %s"><title>%s</title><circle cx="%.1f" cy="%d" r="3" fill="%s"/></g>`+"\n",
				esc(m.Class), esc(m.Title), x(m.At), y+rowHeight/2, fill(m.Class))
			continue
		}
		fmt.Fprintf(b, `<g class="mark %s"><title>%s</title><rect x="%.1f" y="%d" width="2" height="%d" fill="#b00020"/></g>`+"\n",
			esc(m.Class), esc(m.Title), x(m.At)-1, y, h)
	}
	if l.Data != nil {
		b.WriteString("</g>\n")
	}
	return y + n*(rowHeight+rowGap)
}

// check refuses a data attribute whose name would not be one (an injection, or a typo).
func check(c Chart) error {
	var all []Attr
	for _, l := range c.Lanes {
		all = append(all, l.Data...)
	}
	for _, m := range c.Markers {
		all = append(all, m.Data...)
	}
	for _, a := range all {
		ok := a.Name != ""
		for _, r := range a.Name {
			ok = ok && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-')
		}
		if !ok {
			return fmt.Errorf("svgtime: data attribute name %q is not lower-case letters, digits and dashes: rename it", cut(a.Name))
		}
	}
	return nil
}

func attrs(as []Attr) string {
	var b strings.Builder
	for _, a := range as {
		fmt.Fprintf(&b, ` data-%s="%s"`, a.Name, esc(a.Value))
	}
	return b.String()
}

func cut(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000Z") }

func fill(class string) string {
	if f, ok := fills[class]; ok {
		return f
	}
	return "#555555"
}

func esc(s string) string { return html.EscapeString(s) }

// pack gives each bar a row: the first whose last bar ended at or before the bar's start, in
// order of start (ties by index), so the rows are the same for the same bars.
func pack(bars []Bar) []int {
	idx := make([]int, len(bars))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return bars[a].From.Compare(bars[b].From) })
	rows := make([]int, len(bars))
	var ends []time.Time // per row, the end of its last bar; zero: open-ended
	for _, i := range idx {
		r := 0
		for r < len(ends) && (ends[r].IsZero() || ends[r].After(bars[i].From)) {
			r++
		}
		if r == len(ends) {
			ends = append(ends, time.Time{})
		}
		ends[r], rows[i] = bars[i].To, r
	}
	return rows
}
