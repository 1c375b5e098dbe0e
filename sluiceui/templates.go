package sluiceui

import (
	"fmt"
	"html/template"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
)

// pageNames are the templates in assets/, each rendered inside assets/layout.html.
var pageNames = []string{"overview", "jobs", "job", "confirm", "breakers", "error"}

func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{
		"when":     when,
		"ago":      ago,
		"payload":  payloadText,
		"short":    short,
		"terminal": func(s sluice.State) bool { return s.Terminal() },
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

// payloadText shows a payload as text when it is printable UTF-8, else as hex.
func payloadText(b []byte) string {
	if utf8.Valid(b) && !strings.ContainsFunc(string(b), func(r rune) bool { return r < ' ' && r != '\n' && r != '\t' }) {
		return string(b)
	}
	return fmt.Sprintf("(%d bytes, hex) %x", len(b), b)
}

// short cuts s to n runes.
func short(n int, s string) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
