// Package lazyrand builds math/rand generators whose source is seeded at its first draw.
// Seeding a math/rand source costs a few microseconds and 5 KB; a run builds hundreds of
// streams and draws from few of them.
package lazyrand

import "math/rand"

// New returns rand.New(rand.NewSource(seed)), drawing the same numbers, with the seeding
// deferred to the first draw.
func New(seed int64) *rand.Rand { return rand.New(&source{seed: seed}) }

type source struct {
	seed int64
	src  rand.Source64
}

func (s *source) get() rand.Source64 {
	if s.src == nil {
		s.src = rand.NewSource(s.seed).(rand.Source64)
	}
	return s.src
}

func (s *source) Int63() int64   { return s.get().Int63() }
func (s *source) Uint64() uint64 { return s.get().Uint64() }

func (s *source) Seed(seed int64) {
	s.seed, s.src = seed, nil
}
