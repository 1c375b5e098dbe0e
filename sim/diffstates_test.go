package sim

import (
	"math"
	"math/rand"
	"slices"
	"testing"
	"time"
)

// The merge of ascending lists gives diffStatesByMap's answer, and a lookup by binary search a
// map's (asked in ascending and in random order), on random pairs of lists (equal, changed,
// dropped, added, terminal, running).
func TestDiffStatesMergeAgreesWithMaps(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	states := []string{"waiting", "running", "succeeded", "dead", "cancelled"}
	list := func() []JobView {
		var v []JobView
		for id := uint64(1); id <= 12; id++ {
			if r.Intn(3) == 0 {
				continue
			}
			v = append(v, JobView{ID: id, State: states[r.Intn(len(states))], Attempts: r.Intn(2), Target: "t1"})
		}
		return v
	}
	differ := 0
	for range 5000 {
		a := list()
		b := slices.Clone(a)
		if r.Intn(2) == 0 {
			b = list()
		}
		for _, interrupted := range []bool{false, true} {
			got, want := diffStatesMode(a, b, interrupted), diffStatesByMap(a, b, interrupted)
			if got != want {
				t.Fatalf("merge %q, maps %q for\n%v\n%v", got, want, a, b)
			}
			if got != "" {
				differ++
			}
		}
		x := indexViews(a)
		m := indexViews(append(slices.Clone(a), JobView{ID: 0})) // not ascending: the map
		// Ascending (the remembered next index answers), then in any order (a search does).
		ids := []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
		for range 20 {
			ids = append(ids, uint64(r.Intn(14)))
		}
		for _, id := range ids {
			v, ok := x.get(id)
			w, wok := m.get(id)
			if id == 0 {
				w, wok = JobView{}, false
			}
			if v != w || ok != wok {
				t.Fatalf("get(%d) = %v %v, the map's %v %v", id, v, ok, w, wok)
			}
		}
	}
	if differ == 0 {
		t.Fatal("no pair differed: the test compares nothing")
	}
}

// oversized gives front+repeated('x', n) on every call, whatever the calls before it left in
// its buffer (longer and shorter fronts, smaller and larger sizes).
func TestOversizedIsFrontThenX(t *testing.T) {
	w := &World{}
	for i, c := range []struct {
		front string
		n     int
	}{{"p1-1", 10}, {"p12-345", 8}, {"p1-2", 10}, {"", 3}, {"p3-77", 40}, {"p1-9", 5}} {
		got := string(w.oversized(c.front, c.n))
		if want := c.front + w.repeated('x', c.n); got != want {
			t.Fatalf("call %d: oversized(%q, %d) = %q, want %q", i, c.front, c.n, got, want)
		}
	}
}

// since is t.Sub(Epoch) near Epoch, far from it (saturated), at the zero time and at the fast
// path's edges.
func TestSinceIsSubEpoch(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	ts := []time.Time{{}, Epoch, Epoch.Add(-1), Epoch.Add(1), time.Unix(0, 0), time.Unix(1<<62, 0),
		time.Unix(-1<<62, 999999999), Epoch.Add(time.Duration(math.MaxInt64)), Epoch.Add(time.Duration(math.MinInt64)),
		time.Unix(epochUnix+9e9-1, 999999999).UTC(), time.Unix(epochUnix-9e9+1, 0).UTC(), time.Unix(epochUnix+9e9, 0).UTC()}
	for range 2000 {
		ts = append(ts, Epoch.Add(time.Duration(r.Int63()-r.Int63())), time.Unix(r.Int63n(1<<40)-1<<39, r.Int63n(1e9)))
	}
	for _, tm := range ts {
		if got, want := since(tm), tm.Sub(Epoch); got != want {
			t.Fatalf("since(%v) = %v, want %v", tm, got, want)
		}
	}
}
