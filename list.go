package sluice

import (
	"context"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/core/runner"
)

// ListScanMax bounds the ids one List page looks at, so a page's cost is bounded whatever the
// filter.
const ListScanMax = 100_000

// listChunkMax bounds the ids the runner's goroutine looks at in one turn for List: a page is
// read in chunks, and commands that arrive meanwhile (an Enqueue) are committed between them,
// so a read holds up other work for one chunk at most, whatever the page costs.
const listChunkMax = 1024

// ListFilter selects jobs for List. Zero fields select everything.
type ListFilter struct {
	States []State // any of these (StatePending, StateDead, ...)
	Kind   string  // the kind's name ("": any; Kind.List sets its own)
	Target string
	// PriorityMin and PriorityMax, when set, bound the priority (inclusive).
	PriorityMin, PriorityMax *int
	IDMin, IDMax             uint64 // inclusive id range; IDMax 0: no upper bound
	After                    uint64 // the cursor: only ids after it (the previous page's Next)
	Limit                    int    // jobs per page; 0: 100; at most 1,000
	// OmitPayload leaves every job's Payload nil: a listing that shows no payload copies none.
	OmitPayload bool

	scan int // ids one chunk looks at (Runner.list sets it)
}

// statesMax is how many states exist: a ListFilter names each at most once.
const statesMax = int(StateCancelled)

func (f ListFilter) validate() error {
	switch {
	case f.Limit < 0 || f.Limit > 1000:
		return fmt.Errorf("%w: ListFilter.Limit %d: must be in [0, 1000] (0 means 100)", ErrInvalidJob, f.Limit)
	case f.IDMax != 0 && f.IDMax < f.IDMin:
		return fmt.Errorf("%w: ListFilter ids [%d, %d]: IDMax is below IDMin", ErrInvalidJob, f.IDMin, f.IDMax)
	case len(f.States) > statesMax:
		return fmt.Errorf("%w: ListFilter.States has %d entries: there are %d states, name each once", ErrInvalidJob, len(f.States), statesMax)
	case len(f.Kind) > NameMax || len(f.Target) > NameMax:
		return fmt.Errorf("%w: ListFilter.Kind or Target of %d bytes: a name has at most %d (NameMax)", ErrInvalidJob, max(len(f.Kind), len(f.Target)), NameMax)
	}
	for _, s := range f.States {
		if s < StatePending || s > StateCancelled {
			return fmt.Errorf("%w: ListFilter.States holds %v: not a state", ErrInvalidJob, s)
		}
	}
	return nil
}

// stateSet is f.States as a bit set, so a job's check costs the same for any list.
func (f ListFilter) stateSet() uint16 {
	var set uint16
	for _, s := range f.States {
		set |= 1 << s
	}
	return set
}

// Page is one page of List.
type Page[A any] struct {
	Jobs []JobInfo[A]
	Next uint64 // pass as ListFilter.After for the next page
	More bool   // ids are left in the range: call again
}

// list reads one page of f in chunks of at most listChunkMax ids, each a read on the owner's
// goroutine (one consistent view per chunk); other commands are taken between chunks.
func (r *Runner) list(ctx context.Context, f ListFilter) (Page[[]byte], error) {
	if err := f.validate(); err != nil {
		return Page[[]byte]{}, err
	}
	limit := f.Limit
	if limit == 0 {
		limit = 100
	}
	var p Page[[]byte]
	for scanned := 0; scanned < ListScanMax; scanned += listChunkMax {
		c := f
		c.Limit, c.scan = limit-len(p.Jobs), min(listChunkMax, ListScanMax-scanned)
		rep, err := r.call(ctx, command{kind: cmdList, filter: c})
		if err == nil {
			err = rep.err
		}
		if err != nil {
			return Page[[]byte]{}, err
		}
		if p.Jobs == nil {
			p.Jobs = rep.page.Jobs
		} else {
			p.Jobs = append(p.Jobs, rep.page.Jobs...)
		}
		p.Next, p.More = rep.page.Next, rep.page.More
		if !p.More || len(p.Jobs) >= limit {
			break
		}
		f.After = p.Next
	}
	return p, nil
}

// listPage runs one chunk of f on the engine (the owner's goroutine); blocked says why a
// waiting job is not starting (JobInfo.Blocked).
func listPage(eng *runner.Engine, f ListFilter, blocked func(*runner.Job) string) Page[[]byte] {
	limit, scan := f.Limit, f.scan
	if limit == 0 {
		limit = 100
	}
	if scan == 0 {
		scan = ListScanMax
	}
	states := f.stateSet()
	to := f.IDMax
	if to == 0 {
		to = math.MaxUint64
	}
	match := func(j *runner.Job) bool {
		switch {
		case f.Target != "" && j.Target != f.Target,
			f.Kind != "" && j.Opts.Kind != f.Kind,
			f.PriorityMin != nil && j.Opts.Priority < *f.PriorityMin,
			f.PriorityMax != nil && j.Opts.Priority > *f.PriorityMax:
			return false
		case states != 0:
			return states&(1<<stateOf(j.State, j.Deferred, j.Attempts)) != 0
		}
		return true
	}
	list := eng.List
	if f.OmitPayload {
		list = eng.ListBare
	}
	jobs, next, more := list(max(f.IDMin, f.After+1), to, match, limit, scan)
	p := Page[[]byte]{Next: next, More: more, Jobs: make([]JobInfo[[]byte], len(jobs))}
	for i := range jobs {
		p.Jobs[i] = infoOf(jobs[i])
		p.Jobs[i].Blocked = blocked(&jobs[i])
	}
	return p
}
