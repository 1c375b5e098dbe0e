package lazyrand

import (
	"math"
	"math/rand"
	"testing"
)

// The lazy generator draws what an eagerly seeded one draws, through every method a run uses.
func TestSameDraws(t *testing.T) {
	for seed := int64(-3); seed < 200; seed++ {
		a, b := rand.New(rand.NewSource(seed)), New(seed)
		for i := 0; i < 50; i++ {
			if x, y := a.Int63(), b.Int63(); x != y {
				t.Fatalf("seed %d draw %d: Int63 %d != %d", seed, i, x, y)
			}
			if x, y := a.Uint64(), b.Uint64(); x != y {
				t.Fatalf("seed %d: Uint64 %d != %d", seed, x, y)
			}
			if x, y := a.Intn(1+i), b.Intn(1+i); x != y {
				t.Fatalf("seed %d: Intn %d != %d", seed, x, y)
			}
			if x, y := a.Float64(), b.Float64(); x != y {
				t.Fatalf("seed %d: Float64 %v != %v", seed, x, y)
			}
			if x, y := a.Int63n(1000+int64(i)), b.Int63n(1000+int64(i)); x != y {
				t.Fatalf("seed %d: Int63n %d != %d", seed, x, y)
			}
			if x, y := a.Perm(5), b.Perm(5); x[0] != y[0] || x[4] != y[4] {
				t.Fatalf("seed %d: Perm %v != %v", seed, x, y)
			}
			if x, y := a.NormFloat64(), b.NormFloat64(); x != y {
				t.Fatalf("seed %d: NormFloat64", seed)
			}
			if x, y := a.ExpFloat64(), b.ExpFloat64(); x != y {
				t.Fatalf("seed %d: ExpFloat64", seed)
			}
		}
		a.Seed(seed + 7)
		b.Seed(seed + 7)
		if x, y := a.Int63(), b.Int63(); x != y {
			t.Fatalf("seed %d: after Seed %d != %d", seed, x, y)
		}
	}
}

// Seeds at the edges of seeding's reduction mod 2^31-1, each past a full turn of the register.
func TestEdgeSeeds(t *testing.T) {
	const m = 1<<31 - 1
	seeds := []int64{0, 1, -1, m, -m, m - 1, m + 1, 2 * m, 89482311, 1 << 62, -1 << 62,
		math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	for _, seed := range seeds {
		a, b := rand.NewSource(seed).(rand.Source64), New(seed)
		for i := 0; i < 3*rngLen; i++ {
			if x, y := a.Uint64(), b.Uint64(); x != y {
				t.Fatalf("seed %d draw %d: Uint64 %d != %d", seed, i, x, y)
			}
		}
	}
}

func BenchmarkFirstDraw(b *testing.B) {
	seed := int64(0)
	for b.Loop() {
		seed++
		New(seed).Int63()
	}
}

// Seed restarts a source wherever it is: before, at and after the draw that builds the register.
func TestSeedMidway(t *testing.T) {
	for _, k := range []int{0, 1, lazyDraws - 1, lazyDraws, lazyDraws + 1, rngLen, 2 * rngLen} {
		a, b := rand.NewSource(5).(rand.Source64), New(5)
		for i := 0; i < k; i++ {
			if x, y := a.Uint64(), b.Uint64(); x != y {
				t.Fatalf("after %d draws: %d != %d", i, x, y)
			}
		}
		a.Seed(int64(k) + 11)
		b.Seed(int64(k) + 11)
		for i := 0; i < rngLen+3; i++ {
			if x, y := a.Uint64(), b.Uint64(); x != y {
				t.Fatalf("reseeded after %d draws, draw %d: %d != %d", k, i, x, y)
			}
		}
	}
}
