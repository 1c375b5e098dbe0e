package runview

import (
	"math/rand"
	"slices"
	"testing"
)

// The merge of ascending lists gives DiffByMap's answer, and a lookup by binary search a
// map's (asked in ascending and in random order), on random pairs of lists (equal, changed,
// dropped, added, terminal, running).
func TestDiffStatesMergeAgreesWithMaps(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	states := []string{"waiting", "running", "succeeded", "dead", "cancelled"}
	list := func() []Job {
		var v []Job
		for id := uint64(1); id <= 12; id++ {
			if r.Intn(3) == 0 {
				continue
			}
			v = append(v, Job{ID: id, State: states[r.Intn(len(states))], Attempts: r.Intn(2), Target: "t1"})
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
			got, want := Diff(a, b, interrupted), DiffByMap(a, b, interrupted)
			if got != want {
				t.Fatalf("merge %q, maps %q for\n%v\n%v", got, want, a, b)
			}
			if got != "" {
				differ++
			}
		}
		x := IndexOf(a)
		m := IndexOf(append(slices.Clone(a), Job{ID: 0})) // not ascending: the map
		// Ascending (the remembered next index answers), then in any order (a search does).
		ids := []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
		for range 20 {
			ids = append(ids, uint64(r.Intn(14)))
		}
		for _, id := range ids {
			v, ok := x.Get(id)
			w, wok := m.Get(id)
			if id == 0 {
				w, wok = Job{}, false
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
