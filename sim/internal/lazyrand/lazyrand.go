// Package lazyrand builds math/rand generators that draw what rand.New(rand.NewSource(seed))
// draws without seeding a source up front. Seeding one costs microseconds and 5 KB, and a run
// builds hundreds of streams, most of which draw a few numbers or none.
package lazyrand

import "math/rand"

// New returns a generator drawing exactly what rand.New(rand.NewSource(seed)) draws.
func New(seed int64) *rand.Rand {
	s := &source{}
	s.Seed(seed)
	return rand.New(s)
}

// math/rand's additive lagged Fibonacci source (rng.go): output c (1-based) is
// vec[feed] + vec[tap], stored at feed, with tap = -c and feed = rngLen-rngTap-c mod rngLen.
// Up to rngTap outputs read only registers never written, so each of them is two registers
// of the seeded state, computed on their own.
const (
	rngLen   = 607
	rngTap   = 273
	rngMask  = 1<<63 - 1
	int32max = 1<<31 - 1
	// cheapMax is how many outputs are computed register by register before the source is
	// seeded in full (each costs six modular products; seeding costs 1,841).
	cheapMax = 24
)

type source struct {
	seed int64
	x0   uint64 // the Lehmer generator's start, as rngSource.Seed derives it from seed
	n    int    // outputs drawn before src was made
	src  rand.Source64
}

func (s *source) Seed(seed int64) {
	s.seed, s.n, s.src = seed, 0, nil
	seed %= int32max
	if seed < 0 {
		seed += int32max
	}
	if seed == 0 {
		seed = 89482311
	}
	s.x0 = uint64(seed)
}

func (s *source) Int63() int64 { return int64(s.Uint64() & rngMask) }

func (s *source) Uint64() uint64 {
	if s.src != nil {
		return s.src.Uint64()
	}
	if s.n < cheapMax {
		s.n++
		return uint64(s.reg(rngLen-rngTap-s.n) + s.reg(rngLen-s.n))
	}
	// Seeded in full, then moved past the outputs already drawn.
	s.src = rand.NewSource(s.seed).(rand.Source64)
	for range s.n {
		s.src.Uint64()
	}
	return s.src.Uint64()
}

// reg is register i of the freshly seeded state: rngSource.Seed steps the Lehmer generator
// x = 48271x mod (2^31-1) 20 times, then 3 times per register.
func (s *source) reg(i int) int64 {
	n := 20 + 3*i + 1
	x1 := s.x0 * lehmerPow[n] % int32max
	x2 := x1 * 48271 % int32max
	x3 := x2 * 48271 % int32max
	return int64(x1)<<40 ^ int64(x2)<<20 ^ int64(x3) ^ cooked[i]
}

// lehmerPow[n] is 48271^n mod (2^31-1), for the steps Seed takes.
var lehmerPow = func() (p [20 + 3*rngLen + 1]uint64) {
	p[0] = 1
	for n := 1; n < len(p); n++ {
		p[n] = p[n-1] * 48271 % int32max
	}
	return p
}()
