// Package display renders journaled strings (targets, kinds, unique keys, errors, payloads)
// for people: the web UI and the CLI both go through Segments, so what a hostile or broken
// string can do to a page or a terminal is decided in one place.
//
// Rules:
//
//  1. Printable UTF-8 is shown as it is.
//  2. Every control character (C0, DEL, C1), every format character (bidirectional overrides,
//     zero-width joiners), the line and paragraph separators, and every byte that is not
//     valid UTF-8 is shown as a visible escape: \n, \t, \r, \x1b, \u202e, \xff.
//  3. A string longer than the limit is cut on a rune boundary; the caller states the full
//     length (Cut says how).
package display

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Segment is a run of text shown as it is, or one escape.
type Segment struct {
	Text   string
	Escape bool // Text is an escape (\x1b) standing for a byte or rune of the input
}

// Segments splits the first max bytes of s (all of s when max ≤ 0) into runs to show as
// they are and escapes, and reports whether s was cut.
func Segments(s string, max int) (segs []Segment, cut bool) {
	if max > 0 && len(s) > max {
		n := max
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s, cut = s[:n], true
	}
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		esc := escape(r, size, s[i])
		if esc == "" {
			i += size
			continue
		}
		if start < i {
			segs = append(segs, Segment{Text: s[start:i]})
		}
		segs = append(segs, Segment{Text: esc, Escape: true})
		i += size
		start = i
	}
	if start < len(s) {
		segs = append(segs, Segment{Text: s[start:]})
	}
	return segs, cut
}

// escape is the escape for the rune r of size bytes (b its first byte), or "" to show it.
func escape(r rune, size int, b byte) string {
	switch {
	case r == utf8.RuneError && size == 1:
		return fmt.Sprintf(`\x%02x`, b)
	case r == '\n':
		return `\n`
	case r == '\t':
		return `\t`
	case r == '\r':
		return `\r`
	case r < 0x80 && (r < ' ' || r == 0x7f):
		return fmt.Sprintf(`\x%02x`, r)
	case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029':
		return fmt.Sprintf(`\u%04x`, r)
	}
	return ""
}

// Text is s with every escape inlined, cut to max bytes of s (max ≤ 0: no cut) with the cut
// stated: "abc… (1048576 bytes)". Its result holds no control byte and is valid UTF-8.
func Text(s string, max int) string {
	segs, cut := Segments(s, max)
	var b strings.Builder
	for _, sg := range segs {
		b.WriteString(sg.Text)
	}
	if cut {
		b.WriteString(Cut(len(s)))
	}
	return b.String()
}

// Cut is the mark after a string cut short: its full length in bytes.
func Cut(n int) string { return fmt.Sprintf("… (%d bytes)", n) }

// Plain reports whether s shows as it is: nothing to escape.
func Plain(s string) bool {
	segs, _ := Segments(s, 0)
	return len(segs) == 0 || len(segs) == 1 && !segs[0].Escape
}
