// Package lazyrand builds math/rand generators that draw what rand.New(rand.NewSource(seed))
// draws, without paying for the seeding up front. Seeding a math/rand source costs a few
// microseconds and 5 KB; a run builds hundreds of streams and draws little from most. The
// source is math/rand's own generator, reimplemented here: its first lazyDraws draws come
// straight from the seed, and only a stream that draws more builds the register, seeded
// faster than math/rand seeds it.
package lazyrand

import "math/rand"

// New returns rand.New(rand.NewSource(seed)), drawing the same numbers, with the seeding
// deferred.
func New(seed int64) *rand.Rand { return rand.New(&source{seed: seed}) }

// math/rand's source: an additive lagged Fibonacci generator over a register of rngLen words,
// seeded from a Lehmer generator and xored with a fixed table (cooked).
const (
	rngLen   = 607
	rngTap   = 273
	rngMask  = 1<<63 - 1
	int32max = 1<<31 - 1
)

type source struct {
	seed int64
	reg  *register // nil until lazyDraws draws are made
	n    int       // draws made while reg is nil
	x    uint64    // the seed reduced as seeding reduces it; 0: not yet
}

// register is math/rand's rngSource state, field for field.
type register struct {
	tap, feed int
	vec       [rngLen]int64
}

// lazyDraws is how many draws a source makes before it builds its register: the j-th draw
// (j <= rngTap) adds two words of the seeded register that no earlier draw overwrote, and each
// word is computed alone by jumping the Lehmer sequence ahead. Most streams draw fewer.
const lazyDraws = rngTap

func (s *source) Int63() int64 { return int64(s.Uint64() & rngMask) }

func (s *source) Uint64() uint64 {
	if s.reg == nil {
		if s.n < lazyDraws {
			if s.x == 0 {
				s.x = reduce(s.seed)
			}
			s.n++
			// Draw j reads feed word rngLen-rngTap-j and tap word rngLen-j (both untouched).
			return uint64(word(s.x, rngLen-rngTap-s.n) + word(s.x, rngLen-s.n))
		}
		s.reg = new(register)
		s.reg.seed(s.seed, cooked)
		for i := 0; i < s.n; i++ { // the draws made lazily, again
			s.reg.step()
		}
	}
	return s.reg.step()
}

func (r *register) step() uint64 {
	r.tap--
	if r.tap < 0 {
		r.tap += rngLen
	}
	r.feed--
	if r.feed < 0 {
		r.feed += rngLen
	}
	x := r.vec[r.feed] + r.vec[r.tap]
	r.vec[r.feed] = x
	return uint64(x)
}

func (s *source) Seed(seed int64) {
	*s = source{seed: seed}
}

// reduce is seed as seeding reduces it: into [1, 2^31-2].
func reduce(seed int64) uint64 {
	seed %= int32max
	if seed < 0 {
		seed += int32max
	}
	if seed == 0 {
		seed = 89482311
	}
	return uint64(seed)
}

// word is vec[i] of the register seeded from x (reduced): Lehmer steps 21+3i, 22+3i and
// 23+3i of x, xored with the table.
func word(x uint64, i int) int64 {
	k := 21 + 3*i
	return int64(mulMod(x, lehmerPow[k]))<<40 ^ int64(mulMod(x, lehmerPow[k+1]))<<20 ^
		int64(mulMod(x, lehmerPow[k+2])) ^ cooked[i]
}

// lehmerPow[k] is A^k mod 2^31-1: the Lehmer sequence jumped k steps ahead.
var lehmerPow = func() *[24 + 3*rngLen]uint64 {
	t := new([24 + 3*rngLen]uint64)
	t[0] = 1
	for k := 1; k < len(t); k++ {
		t[k] = mulMod(t[k-1], lehmerA)
	}
	return t
}()

// seed is math/rand's rngSource.Seed against table. Its Lehmer sequence x[k+1] = A*x[k] mod
// 2^31-1 is computed as three interleaved sequences stepping by A^3, each by a multiply and a
// Mersenne reduction, instead of one sequence by Schrage's two divisions per step: the chain
// of divisions was most of what seeding a stream cost.
func (r *register) seed(seed int64, table *[rngLen]int64) {
	r.tap = 0
	r.feed = rngLen - rngTap
	x := reduce(seed)
	for i := 0; i < 20; i++ { // seeding skips 20 steps
		x = mulMod(x, lehmerA)
	}
	// vec[i] takes steps 21+3i, 22+3i and 23+3i.
	a := mulMod(x, lehmerA)
	b := mulMod(a, lehmerA)
	c := mulMod(b, lehmerA)
	for i := range r.vec {
		r.vec[i] = (int64(a)<<40 ^ int64(b)<<20 ^ int64(c)) ^ table[i]
		a, b, c = mulMod(a, lehmerA3), mulMod(b, lehmerA3), mulMod(c, lehmerA3)
	}
}

const (
	lehmerA  = 48271
	lehmerA3 = lehmerA * lehmerA % int32max * lehmerA % int32max
)

// mulMod is x*m mod 2^31-1 for x and m in [1, 2^31-2].
func mulMod(x, m uint64) uint64 {
	p := x * m // < 2^62
	p = p&int32max + p>>31
	if p >= int32max {
		p -= int32max
	}
	return p
}

// cooked is math/rand's table of rngLen words that seeding xors in. It is not exported, so it
// is recovered once from a source math/rand seeded itself: rngLen draws overwrite every word of
// the register once, which gives the register after them; undoing those steps gives it just
// after seeding, and xoring out the Lehmer part leaves the table.
var cooked = recoverCooked()

func recoverCooked() *[rngLen]int64 {
	const seed = 1
	src := rand.NewSource(seed).(rand.Source64)
	var r register
	r.tap, r.feed = 0, rngLen-rngTap
	var out [rngLen]uint64
	for j := range out {
		out[j] = src.Uint64()
		r.tap = (r.tap + rngLen - 1) % rngLen
		r.feed = (r.feed + rngLen - 1) % rngLen
		r.vec[r.feed] = int64(out[j])
	}
	for j := rngLen - 1; j >= 0; j-- { // undo, last step first
		r.vec[r.feed] -= r.vec[r.tap]
		r.tap = (r.tap + 1) % rngLen
		r.feed = (r.feed + 1) % rngLen
	}
	var lehmerPart register
	lehmerPart.seed(seed, new([rngLen]int64)) // against a zero table: the Lehmer part alone
	t := new([rngLen]int64)
	for i := range t {
		t[i] = r.vec[i] ^ lehmerPart.vec[i]
	}
	return t
}
