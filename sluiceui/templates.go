package sluiceui

import (
	"fmt"
	"html/template"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/display"
)

// pageNames are the templates in assets/, each rendered inside assets/layout.html.
var pageNames = []string{"overview", "jobs", "job", "confirm", "kinds", "confirmkind", "breakers", "schedules", "error"}

func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{
		"when":     when,
		"ago":      ago,
		"payload":  payloadHTML,
		"text":     textHTML,
		"plain":    func(n int, s string) string { return display.Text(s, n) },
		"long":     func(n int, s string) bool { return len(s) > n },
		"terminal": func(s sluice.State) bool { return s.Terminal() },
		"stateOf":  func(name string) sluice.State { st, _ := ParseState(name); return st },
		"title": func(s string) string {
			if s == "" {
				return s
			}
			return strings.ToUpper(s[:1]) + s[1:]
		},
	}
	base := template.Must(template.New("layout").Funcs(funcs).ParseFS(assets, "assets/layout.html"))
	pages := make(map[string]*template.Template, len(pageNames))
	for _, n := range pageNames {
		pages[n] = template.Must(template.Must(base.Clone()).ParseFS(assets, "assets/"+n+".html"))
	}
	return pages
}

// when renders t in UTC to the second ("—" for the zero time).
func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// ago renders t relative to now ("in 4s", "2m ago").
func ago(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := t.Sub(now).Round(time.Second)
	if d >= 0 {
		return "in " + d.String()
	}
	return (-d).String() + " ago"
}

// textHTML is how the UI shows a journaled string (a target, a kind, a key, an error): its
// first max bytes, every control or format character and invalid byte as a visible escape
// (<span class="esc">\x1b</span>), and, when cut, its full length. Everything else is
// HTML-escaped. The CLI's twin is display.Text; both split with display.Segments.
func textHTML(max int, s string) template.HTML {
	segs, cut := display.Segments(s, max)
	var b strings.Builder
	for _, sg := range segs {
		if sg.Escape {
			b.WriteString(`<span class="esc">`)
			b.WriteString(template.HTMLEscapeString(sg.Text))
			b.WriteString(`</span>`)
			continue
		}
		b.WriteString(template.HTMLEscapeString(sg.Text))
	}
	if cut {
		fmt.Fprintf(&b, `<span class="cut">%s</span>`, template.HTMLEscapeString(display.Cut(len(s))))
	}
	return template.HTML(b.String()) // built from escaped text only
}

// payloadMax is how much of a payload the job page shows; the rest is a download.
const payloadMax = 4096

// payloadHTML shows a payload as text (textHTML) when it is UTF-8, else as hex; either cut to
// payloadMax bytes of the payload.
func payloadHTML(b []byte) template.HTML {
	if utf8.Valid(b) {
		return textHTML(payloadMax, string(b))
	}
	n := min(len(b), payloadMax/2)
	out := fmt.Sprintf("(%d bytes, hex) %x", len(b), b[:n])
	if n < len(b) {
		out += display.Cut(len(b))
	}
	return template.HTML(template.HTMLEscapeString(out))
}
