// Package pyrand reproduces the integer-seeded random number generator of
// CPython's random module, so that a Go task generator draws exactly the
// values random.Random(seed) draws in the seed document's reference core.
//
// The generator is MT19937 (Matsumoto and Nishimura, 1998). CPython seeds it
// from an integer n with init_by_array over the 32-bit words of |n|, least
// significant first ([0] for n = 0), and answers choice(seq) with
// seq[_randbelow(len(seq))], where _randbelow(m) draws getrandbits(k) with
// k = m.bit_length() and rejects values ≥ m (CPython 3.11,
// Modules/_randommodule.c and Lib/random.py).
//
// Seeding is the expensive part: init_by_array is two chains of 623 and 624
// dependent multiplies. Two things make it cheaper here. The state
// init_genrand(19650218) that init_by_array starts from does not depend on the
// seed and is computed once. And outputs are produced lazily, twisting
// one state word at a time instead of all 624 words: a task needs a handful
// of outputs.
//
// Batch is for sweeps over many seeds: it seeds BatchLanes
// generators at once with their states interleaved word by word, so that one
// vector instruction advances the chains of 16 (AVX-512) or 8 (AVX2) seeds,
// and computes each lane's first outputs in the same pass. The kernel is
// chosen at run time from the processor's features (golang.org/x/sys/cpu),
// with a portable Go kernel elsewhere; all produce identical states.
package pyrand

import "math/bits"

const (
	n         = 624
	m         = 397
	matrixA   = 0x9908b0df
	upperMask = 0x80000000
	lowerMask = 0x7fffffff
)

// base is the state init_genrand(19650218) leaves, the starting point of
// every init_by_array call.
var base = func() (mt [n]uint32) {
	mt[0] = 19650218
	for i := 1; i < n; i++ {
		mt[i] = 1812433253*(mt[i-1]^(mt[i-1]>>30)) + uint32(i)
	}
	return mt
}()

// Gen is a CPython-compatible MT19937 generator. The zero value is not
// usable; build one with New. A Gen is about 2.5 KiB and is
// meant to be reused through Reseed.
type Gen struct {
	mt  [n]uint32
	idx int // index of the next word to twist and output
}

// New returns a generator seeded like CPython's random.Random(seed) for a
// non-negative integer seed.
func New(seed uint64) *Gen {
	g := new(Gen)
	g.Reseed(seed)
	return g
}

// Reseed resets g to the state random.Random(seed) starts in.
func (g *Gen) Reseed(seed uint64) {
	if seed>>32 == 0 {
		initByArray(&g.mt, [2]uint32{uint32(seed)}, 1)
	} else {
		initByArray(&g.mt, [2]uint32{uint32(seed), uint32(seed >> 32)}, 2)
	}
	g.idx = 0
}

// initByArray is init_by_array from the MT19937 reference code (mt19937ar.c),
// for keys of one or two words, starting from the precomputed base state.
func initByArray(mt *[n]uint32, key [2]uint32, keyLen int) {
	*mt = base
	i, j := 1, 0
	for k := n; k > 0; k-- {
		prev := mt[i-1]
		mt[i] = (mt[i] ^ ((prev ^ (prev >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= n {
			mt[0] = mt[n-1]
			i = 1
		}
		if j >= keyLen {
			j = 0
		}
	}
	for k := n - 1; k > 0; k-- {
		prev := mt[i-1]
		mt[i] = (mt[i] ^ ((prev ^ (prev >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= n {
			mt[0] = mt[n-1]
			i = 1
		}
	}
	mt[0] = upperMask
}

// Uint32 returns the next 32-bit output, as genrand_uint32 does.
//
// The reference code twists all n words at once every n outputs; twisting
// word i just before output i, in the same order, computes the same values
// (each step reads words i+1 and i+m, which are pre-twist exactly when the
// batch loop would find them so), and a task that needs five outputs pays
// for five twist steps instead of 624.
func (g *Gen) Uint32() uint32 {
	i := g.idx
	mt := &g.mt
	y := (mt[i] & upperMask) | (mt[(i+1)%n] & lowerMask)
	mt[i] = mt[(i+m)%n] ^ (y >> 1) ^ (-(y & 1) & matrixA)
	g.idx = (i + 1) % n
	return temper(mt[i])
}

// temper is MT19937's output tempering.
func temper(y uint32) uint32 {
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// Bits returns getrandbits(k) for 1 ≤ k ≤ 32: the top k bits of the next
// output. It panics for k outside that range, a programming error.
func (g *Gen) Bits(k int) uint32 {
	if k < 1 || k > 32 {
		panic("pyrand: Bits needs 1 <= k <= 32")
	}
	return g.Uint32() >> (32 - k)
}

// Below returns _randbelow(m) for 1 ≤ m ≤ 2^31: a uniform integer in [0, m)
// drawn by rejection on getrandbits(m.bit_length()), consuming as many outputs
// as CPython would.
func (g *Gen) Below(m int) int {
	if m < 1 || int64(m) > 1<<31 {
		panic("pyrand: Below needs 1 <= m <= 2^31")
	}
	k := bits.Len32(uint32(m))
	for {
		r := g.Bits(k)
		if int(r) < m {
			return int(r)
		}
	}
}

// Choice returns the index random.choice would pick from a sequence of
// length m: Below(m).
func (g *Gen) Choice(m int) int { return g.Below(m) }
