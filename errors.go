package sluice

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/outcome"
)

var (
	// ErrClosed is returned by calls on a runner or worker that has been closed.
	ErrClosed = errors.New("sluice: closed")
	// ErrNotFound is returned for an id the runner does not know (never issued, or a terminal
	// job that compaction has since removed).
	ErrNotFound = errors.New("sluice: job not found")
	// ErrLocked is returned by Open when another runner holds the directory.
	ErrLocked = errors.New("sluice: directory locked")
	// ErrRunning is returned by Run or Drain when another Run or Drain is in progress.
	ErrRunning = errors.New("sluice: already running")

	// ErrShutdown is the cause (context.Cause) of a handler's cancelled context when its runner
	// or worker is stopping: a runner's Run or Drain context ended (or Close) and the grace
	// passed, after which the attempt is released, not counted, unless it succeeds; a worker's
	// shutdown grace ended, after which the message's receipt is left to lapse.
	ErrShutdown = errors.New("sluice: shutting down")

	errNilFailure = outcome.ErrNil
)

// usageError is a public error whose message is written whole, with one "sluice:" prefix,
// while errors.Is and errors.As still find what it wraps (whose own texts would repeat the
// prefix).
type usageError struct {
	msg  string
	errs []error
}

func (e *usageError) Error() string   { return e.msg }
func (e *usageError) Unwrap() []error { return e.errs }

// msgMax bounds a public error's message: the input it quotes is cut already, so this only
// stops an error that quotes another without a bound.
const msgMax = 512

// errorf is fmt.Errorf("sluice: "+format, args...) that unwraps to sentinel (nil: none).
func errorf(sentinel error, format string, args ...any) error {
	var errs []error
	if sentinel != nil {
		errs = []error{sentinel}
	}
	return &usageError{msg: bounded("sluice: " + fmt.Sprintf(format, args...)), errs: errs}
}

// wrapf is errorf whose message ends with err's, without its prefixes, and which unwraps to
// err too.
func wrapf(sentinel, err error, format string, args ...any) error {
	e := errorf(sentinel, format, args...).(*usageError)
	e.msg = bounded(e.msg + ": " + unprefixed(err.Error()))
	e.errs = append(e.errs, err)
	return e
}

// reprefix is err with the one "sluice:" prefix, unwrapping to sentinel and err: a core
// package's error ("runner: invalid job: ...") as the public API states it.
func reprefix(sentinel, err error) error {
	msg, errs := unprefixed(err.Error()), []error{err}
	if sentinel != nil {
		errs = append(errs, sentinel)
		// Keep the sentinel's words, which callers match ("job not found"), said once.
		if words := unprefixed(sentinel.Error()); !strings.HasPrefix(msg, words) {
			msg = words + ": " + msg
		}
	}
	return &usageError{msg: bounded("sluice: " + msg), errs: errs}
}

// corePrefixes are the prefixes of the errors sluice passes on from its own packages.
var corePrefixes = []string{"sluice: ", "runner: ", "journal: ", "qjobs: ", "worker: ", "breaker: ", "retry: "}

// unprefixed is msg without the package prefixes it starts with and without any later
// "sluice: " (an error quoting another).
func unprefixed(msg string) string {
	for again := true; again; {
		again = false
		for _, p := range corePrefixes {
			if strings.HasPrefix(msg, p) {
				msg, again = msg[len(p):], true
			}
		}
	}
	return strings.ReplaceAll(msg, "sluice: ", "")
}

// bounded is msg cut to msgMax bytes on a rune boundary, saying how long it was.
func bounded(msg string) string {
	if len(msg) <= msgMax {
		return msg
	}
	n := msgMax - 32
	for n > 0 && !utf8.RuneStart(msg[n]) {
		n--
	}
	return fmt.Sprintf("%s… (%d bytes)", msg[:n], len(msg))
}

// notMade is the error of a method called on a nil or zero handle: it acts as closed.
func notMade(handle, maker string) error {
	return errorf(ErrClosed, "the %s is nil or a zero value; make it with %s", handle, maker)
}
