package sluiceui

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
)

// Source is what the UI and the inspector CLI read and act on: a live runner (FromRunner) or a
// stopped directory (FromDir). Every method is safe for concurrent use.
type Source interface {
	// Stats counts jobs by state and the journal's work (see sluice.Stats).
	Stats(ctx context.Context) (sluice.Stats, error)
	// List returns a page of the jobs that match f, ascending by id.
	List(ctx context.Context, f Filter) (Page, error)
	// Get returns one job; an unknown id is an error wrapping sluice.ErrNotFound.
	Get(ctx context.Context, id uint64) (Job, error)
	// Breakers returns the targets whose breaker is not idly closed, sorted by target.
	Breakers(ctx context.Context) ([]Breaker, error)
	// Schedules returns the periodic jobs' schedules, sorted by name.
	Schedules(ctx context.Context) ([]sluice.ScheduleInfo, error)
	// Retry re-enqueues a dead job; Cancel cancels a job that is not terminal. A read-only
	// source returns ErrReadOnly and changes nothing.
	Retry(ctx context.Context, id uint64) error
	Cancel(ctx context.Context, id uint64) error
	// Paused lists the paused kinds, by name (a directory: as its journal says).
	Paused(ctx context.Context) ([]string, error)
	// Pause stops a kind's jobs from starting, durably, until Resume (running attempts go
	// on); either answers at once when the kind is so already. A kind that is neither
	// registered nor named by a job is an error wrapping sluice.ErrUnknownKind. A read-only
	// source returns ErrReadOnly.
	Pause(ctx context.Context, kind string) error
	Resume(ctx context.Context, kind string) error
	// ReadOnly reports whether Retry, Cancel, Pause and Resume always return ErrReadOnly.
	ReadOnly() bool
}

// ErrReadOnly is returned by Retry, Cancel, Pause and Resume of a read-only source (a stopped
// directory inspected without its lock).
var ErrReadOnly = errors.New("sluice: read-only: this view inspects a directory without its lock; " +
	"act through the live runner (its UI), or with `sluice retry|cancel|pause|resume` once it has stopped")

// Job is a job as the UI shows it: sluice's JobInfo with the payload as journaled.
type Job struct {
	ID       uint64
	Kind     string // the kind the job was registered under
	Target   string
	State    sluice.State
	Attempts int
	FirstDue time.Time
	Due      time.Time
	Reason   sluice.Reason
	LastErr  string
	Priority int
	Unique   string
	History  []sluice.Attempt
	Payload  []byte
	// Interrupted: the journal says an attempt was running when it was last written (a
	// stopped directory only: the next Open records it as a failed, interrupted attempt).
	Interrupted bool
	// Key and Group are the job's flow key (WithKey) and sequence (WithGroup); Hold: its
	// kind holds the sequence when it dies.
	Key, Group string
	Hold       bool
	// KeyRunning counts the attempts of its kind and key running at the last write (a
	// stopped directory only; 0 without a key).
	KeyRunning int
	// Blocked says why a waiting job is not starting though its turn may have come ("" when
	// nothing holds it back but its due time, a breaker or a free unit): "its kind is
	// paused", `sequence "s" is held by job 4`, a key or a rate at its limit (a live runner
	// only: a directory knows its pauses and sequences, not the limits a program registers).
	Blocked string
}

// Filter selects jobs for List. Zero fields select everything.
type Filter struct {
	States []sluice.State
	Kind   string
	Target string
	After  uint64 // the cursor: only ids after it (the previous page's Next)
	Limit  int    // jobs per page; 0: 50; at most 1,000
	// NoPayload: the caller shows no payload, so the source may leave Job.Payload nil.
	NoPayload bool
}

// limitMax bounds a page, as sluice.ListFilter does.
const limitMax = 1000

func (f Filter) limit() int {
	switch {
	case f.Limit <= 0:
		return 50
	case f.Limit > limitMax:
		return limitMax
	}
	return f.Limit
}

// match is f's test of j; states is f.States as a set (stateSet).
func (f Filter) match(j *Job, states uint16) bool {
	if f.Kind != "" && j.Kind != f.Kind || f.Target != "" && j.Target != f.Target {
		return false
	}
	return states == 0 || states&(1<<j.State) != 0
}

func (f Filter) stateSet() uint16 {
	var set uint16
	for _, s := range f.States {
		set |= 1 << s
	}
	return set
}

// Page is one page of List.
type Page struct {
	Jobs []Job
	Next uint64 // pass as Filter.After for the next page
	More bool   // ids are left: call again
}

// Breaker is one target's circuit breaker.
type Breaker struct {
	Target   string
	State    string    // "closed", "open" or "half-open"
	Until    time.Time // open: when it may half-open (the end of its cooldown)
	Failures int       // closed: failures remembered within the window
	InFlight int       // half-open: probes in flight
}

// States lists every job state in order, for filters and overviews.
var States = []sluice.State{sluice.StatePending, sluice.StateWaiting, sluice.StateDeferred,
	sluice.StateRunning, sluice.StateSucceeded, sluice.StateDead, sluice.StateCancelled}

// ParseState is the State named s ("dead", ...).
func ParseState(s string) (sluice.State, bool) {
	for _, st := range States {
		if st.String() == s {
			return st, true
		}
	}
	return 0, false
}

// WaitReason says why a job that is not terminal nor running has not started, from what the
// job, the breakers and the clock say ("" for a terminal or running job). live: the source is
// a running runner (a directory's jobs start only once a runner opens it).
func WaitReason(j Job, breakers []Breaker, now time.Time, live bool) string {
	if j.State.Terminal() || j.State == sluice.StateRunning {
		return ""
	}
	due := j.Due.UTC().Format(time.RFC3339)
	switch {
	case j.State == sluice.StateDeferred:
		return fmt.Sprintf("its target's breaker refused it: deferred until %s (no attempt counted)", due)
	case j.Due.After(now) && j.State == sluice.StateWaiting:
		return fmt.Sprintf("backing off after attempt %d failed: due %s", j.Attempts, due)
	case j.Due.After(now):
		return "not due until " + due
	}
	for _, b := range breakers {
		if b.Target != j.Target {
			continue
		}
		switch b.State {
		case "open":
			return fmt.Sprintf("due, but its target's breaker is open until %s", b.Until.UTC().Format(time.RFC3339))
		case "half-open":
			return "due, but its target's breaker is half-open: one probe at a time"
		}
	}
	if j.Blocked != "" {
		return "due, but held back: " + j.Blocked
	}
	if !live {
		return "due: it starts once a runner opens the directory and runs"
	}
	return "due: it starts when a unit is free (Config.Capacity, or its kind's WithConcurrency limit) while Run or Drain is active; a kind no program registered waits (Stats.Unregistered)"
}
