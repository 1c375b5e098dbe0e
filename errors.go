package sluice

import (
	"errors"
	"fmt"

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
// while errors.Is still finds its sentinel (whose own text would repeat the prefix).
type usageError struct {
	msg string
	is  error
}

func (e *usageError) Error() string { return e.msg }
func (e *usageError) Unwrap() error { return e.is }

// errorf is fmt.Errorf("sluice: "+format, args...) that unwraps to sentinel (nil: none).
func errorf(sentinel error, format string, args ...any) error {
	return &usageError{msg: "sluice: " + fmt.Sprintf(format, args...), is: sentinel}
}

// notMade is the error of a method called on a nil or zero handle: it acts as closed.
func notMade(handle, maker string) error {
	return errorf(ErrClosed, "the %s is nil or a zero value; make it with %s", handle, maker)
}
