package display

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"plain é 日本", 0, "plain é 日本"},
		{"\x1b[31mred\x1b[0m", 0, `\x1b[31mred\x1b[0m`},
		{"row\nforged\trow\r", 0, `row\nforged\trow\r`},
		{"nul\x00del\x7f", 0, `nul\x00del\x7f`},
		{"c1\u0085\u009b", 0, `c1\u0085\u009b`},
		{"bidi\u202eevil\u2066", 0, `bidi\u202eevil\u2066`},
		{"sep\u2028", 0, `sep\u2028`},
		{"bad\xff\xfeutf8", 0, `bad\xff\xfeutf8`},
		{"abcdef", 3, "abc… (6 bytes)"},
		{"日本語", 4, "日… (9 bytes)"}, // cut on a rune boundary
		{"\x1b\x1b\x1b\x1b", 2, `\x1b\x1b… (4 bytes)`},
	} {
		if got := Text(tc.in, tc.max); got != tc.want {
			t.Errorf("Text(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

// TestTextIsSafe: whatever the input, the output is valid UTF-8 with no control byte, and a
// cut output is bounded by a few times the limit.
func TestTextIsSafe(t *testing.T) {
	var all strings.Builder
	for b := 0; b < 256; b++ {
		all.WriteByte(byte(b))
	}
	for r := rune(0x80); r < 0x3000; r++ {
		all.WriteRune(r)
	}
	out := Text(all.String(), 0)
	if !utf8.ValidString(out) || strings.ContainsFunc(out, func(r rune) bool { return r < ' ' || r == 0x7f || r >= 0x80 && r < 0xa0 }) {
		t.Errorf("Text left a control byte or invalid UTF-8")
	}
	if got := Text(strings.Repeat("\x1b", 1<<20), 100); len(got) > 100*4+40 {
		t.Errorf("Text of 1 MiB cut to 100 gave %d bytes", len(got))
	}
}

func TestSegments(t *testing.T) {
	segs, cut := Segments("a\x1bb", 0)
	want := []Segment{{Text: "a"}, {Text: `\x1b`, Escape: true}, {Text: "b"}}
	if diff := cmp.Diff(want, segs); diff != "" || cut {
		t.Errorf("Segments (-want +got):\n%s (cut %v)", diff, cut)
	}
	if !Plain("ok") || Plain("a\nb") || !Plain("") {
		t.Error("Plain")
	}
}
