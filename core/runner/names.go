package runner

import (
	"fmt"
	"strings"
)

// NameMax bounds, in bytes, each name a job or schedule carries: its kind, target, unique key
// and schedule name. Every record holds them and every page of the UI shows them, so one
// name never costs more than a small, stated amount; payloads are where data goes.
const NameMax = 1024

// CheckName says why s cannot be the name what ("target", "kind", "unique key", "schedule
// name"): empty when required, a NUL byte (the unique-key index joins kind and key with one),
// or more than NameMax bytes. Every name is checked here, at enqueue, schedule and register;
// replay accepts what the journal holds.
func CheckName(what, s string, required bool) error {
	switch {
	case s == "" && required:
		return fmt.Errorf("%s is empty", what)
	case len(s) > NameMax:
		return fmt.Errorf("%s %s has %d bytes: at most %d", what, QuoteCut(s), len(s), NameMax)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%s %s holds a NUL byte", what, QuoteCut(s))
	}
	return nil
}

// quoteCutMax is how much of a name an error message quotes.
const quoteCutMax = 64

// QuoteCut is s quoted (%q: control bytes and invalid UTF-8 escaped), cut to its first
// quoteCutMax bytes on a rune boundary when longer, so an error message never carries a
// megabyte of hostile input.
func QuoteCut(s string) string {
	if len(s) <= quoteCutMax {
		return fmt.Sprintf("%q", s)
	}
	n := quoteCutMax
	for n > 0 && !runeStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:n], len(s))
}

func runeStart(b byte) bool { return b&0xC0 != 0x80 }

// cutUTF8 is s cut to at most n bytes on a rune boundary, so a cut error stays valid UTF-8
// when it was.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !runeStart(s[n]) {
		n--
	}
	return s[:n]
}

// checkNames checks a new job's target, kind and unique key.
func checkNames(nj NewJob) error {
	if err := CheckName("target", nj.Target, true); err != nil {
		return err
	}
	if err := CheckName("kind", nj.Opts.Kind, false); err != nil {
		return err
	}
	if err := CheckName("unique key", nj.Opts.Unique, false); err != nil {
		return err
	}
	if err := CheckName("flow key", nj.Opts.Key, false); err != nil {
		return err
	}
	return CheckName("group", nj.Opts.Group, false)
}
