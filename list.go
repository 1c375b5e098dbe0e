package sluice

import (
	"fmt"
	"math"
	"slices"

	"github.com/sluicehq/sluice/core/runner"
)

// ListScanMax bounds the ids one List page looks at, so a page's cost is bounded whatever the
// filter.
const ListScanMax = 100_000

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
}

func (f ListFilter) validate() error {
	switch {
	case f.Limit < 0 || f.Limit > 1000:
		return fmt.Errorf("%w: ListFilter.Limit %d: must be in [0, 1000] (0 means 100)", ErrInvalidJob, f.Limit)
	case f.IDMax != 0 && f.IDMax < f.IDMin:
		return fmt.Errorf("%w: ListFilter ids [%d, %d]: IDMax is below IDMin", ErrInvalidJob, f.IDMin, f.IDMax)
	}
	return nil
}

// Page is one page of List.
type Page[A any] struct {
	Jobs []JobInfo[A]
	Next uint64 // pass as ListFilter.After for the next page
	More bool   // ids are left in the range: call again
}

// listPage runs f on the engine (the owner's goroutine: one consistent view).
func listPage(eng *runner.Engine, f ListFilter) Page[[]byte] {
	limit := f.Limit
	if limit == 0 {
		limit = 100
	}
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
		case len(f.States) > 0:
			return slices.Contains(f.States, stateOf(j.State, j.Deferred, j.Attempts))
		}
		return true
	}
	jobs, next, more := eng.List(max(f.IDMin, f.After+1), to, match, limit, ListScanMax)
	p := Page[[]byte]{Next: next, More: more, Jobs: make([]JobInfo[[]byte], len(jobs))}
	for i, j := range jobs {
		p.Jobs[i] = infoOf(j)
	}
	return p
}
