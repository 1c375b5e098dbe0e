package sluiceui

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// A census counts every job by kind and state, and the attempts that started and ended in
// each minute of the hour before it, from the jobs' histories (the last 10 attempts of each).
// It reads the source page by page (no payloads), so on a live runner it costs the runner
// chunks of work between which it commits; the handler takes one at most every censusEvery
// and keeps one a minute for the last hour, which the charts draw.
const (
	censusEvery    = 10 * time.Second
	histEvery      = time.Minute
	histMax        = 60   // an hour of minutes
	censusPagesMax = 2000 // pages of 1,000 jobs: a census counts at most 2,000,000 jobs
	minutes        = 60
)

// census is one count of the jobs.
type census struct {
	At       time.Time
	Total    kindCensus // every kind together (Kind "")
	Kinds    []kindCensus
	Breakers []Breaker
	Partial  bool // censusPagesMax pages were read before the last job
}

// kindCensus is one kind's counts. Index i of the per-minute arrays is the minute that ends
// minutes-1-i minutes before the census.
type kindCensus struct {
	Kind                       string
	States                     [int(sluice.StateCancelled) + 1]int
	Started, Succeeded, Failed [minutes]int
}

func (k *kindCensus) add(j *Job, at time.Time) {
	k.States[j.State]++
	for _, a := range j.History {
		if i, ok := minuteOf(a.Start, at); ok {
			k.Started[i]++
		}
		if a.End.IsZero() {
			continue
		}
		if i, ok := minuteOf(a.End, at); ok {
			switch a.Outcome {
			case "succeeded":
				k.Succeeded[i]++
			case "failed", "panicked":
				k.Failed[i]++
			}
		}
	}
}

// minuteOf is the index of the minute t falls in, within the hour before at.
func minuteOf(t, at time.Time) (int, bool) {
	ago := at.Sub(t)
	if ago < 0 || ago >= minutes*time.Minute {
		return 0, false
	}
	return minutes - 1 - int(ago/time.Minute), true
}

// takeCensus counts src's jobs as of now.
func takeCensus(ctx context.Context, src Source, now time.Time) (*census, error) {
	c := &census{At: now}
	byKind := map[string]*kindCensus{}
	f := Filter{Limit: limitMax, NoPayload: true}
	for page := 0; ; page++ {
		if page == censusPagesMax {
			c.Partial = true
			break
		}
		p, err := src.List(ctx, f)
		if err != nil {
			return nil, err
		}
		for i := range p.Jobs {
			j := &p.Jobs[i]
			k := byKind[j.Kind]
			if k == nil {
				k = &kindCensus{Kind: j.Kind}
				byKind[j.Kind] = k
			}
			k.add(j, now)
			c.Total.add(j, now)
		}
		if !p.More {
			break
		}
		f.After = p.Next
	}
	for _, k := range byKind {
		c.Kinds = append(c.Kinds, *k)
	}
	slices.SortFunc(c.Kinds, func(a, b kindCensus) int { return strings.Compare(a.Kind, b.Kind) })
	brs, err := src.Breakers(ctx)
	if err != nil {
		return nil, err
	}
	c.Breakers = brs
	return c, nil
}

// censusAt returns a census no older than censusEvery, taking one if needed, and keeps one a
// minute for the last hour.
func (h *handler) censusAt(ctx context.Context, now time.Time) (*census, []*census, error) {
	h.cmu.Lock()
	defer h.cmu.Unlock()
	if c := h.cen; c != nil && !now.Before(c.At) && now.Sub(c.At) < censusEvery {
		return c, slices.Clone(h.hist), nil
	}
	c, err := takeCensus(ctx, h.src, now)
	if err != nil {
		return nil, nil, err
	}
	h.cen = c
	if n := len(h.hist); n == 0 || now.Sub(h.hist[n-1].At) >= histEvery-censusEvery/2 || now.Before(h.hist[n-1].At) {
		h.hist = append(h.hist, c)
	}
	for len(h.hist) > 0 && (len(h.hist) > histMax || now.Sub(h.hist[0].At) > time.Hour) {
		h.hist = h.hist[1:]
	}
	return c, slices.Clone(h.hist), nil
}
