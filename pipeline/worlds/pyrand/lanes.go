package pyrand

import (
	"fmt"
	"math"
	"math/bits"
)

// BatchLanes is the number of generators a Batch seeds at once. Its seeding
// kernels run the lanes' init_by_array chains side by side in vector
// registers: sixteen 16-lane AVX-512 registers (or four passes of eight
// 8-lane AVX2 registers) in flight, enough independent chains to cover the
// 11-cycle latency of one init_by_array step. It is a multiple of 256 and a
// power of two.
const BatchLanes = 256

// nPre is the number of outputs per lane the seeding kernels compute ahead,
// in the vector registers: enough for a task's draws, including rejections.
const nPre = 16

// Batch holds BatchLanes CPython-compatible MT19937 generators whose
// 624-word states are stored lane-interleaved (word i of lane l at st[i][l]),
// the layout the vector seeding kernels read and write.
//
// The zero value is ready to seed. A Batch is about 650 KiB: allocate it once
// (new(Batch)) and reseed it, and do not copy it once seeded. Seeding must
// not run concurrently with any other use; between seedings, distinct lanes
// may be used from distinct goroutines, as each touches only its own column.
type Batch struct {
	st    [n][BatchLanes]uint32
	out   [nPre][BatchLanes]uint32 // outputs 0..nPre-1 (words 0..nPre-1 twisted)
	keys  [2][BatchLanes]uint32    // init_by_array key added on even / odd steps
	lanes [BatchLanes]Lane
	count int // lanes seeded by the last SeedRange or Seed
}

// Lane is a view of one lane of a Batch with the same methods as Gen. Its
// outputs are exactly those of random.Random(seed) for the lane's seed, for
// any number of outputs: the first nPre (16) were computed while seeding,
// and it twists later words of its column lazily, one per output, as Gen
// does. Reseeding the Batch restarts its Lanes with the new seeds.
type Lane struct {
	b      *Batch
	l      int
	idx    int // index of the next word to twist and output
	preEnd int // outputs idx < preEnd come from b.out: nPre, then 0 after a wrap
}

// SeedRange seeds lane l like random.Random(first+l), for l in
// [0, BatchLanes). Any first with first+BatchLanes-1 ≤ 2^64-1 is accepted;
// seeds from 2^32 up use a two-word init_by_array key, as CPython does. It
// panics if the range would overflow uint64.
func (b *Batch) SeedRange(first uint64) {
	if first > math.MaxUint64-(BatchLanes-1) {
		panic(fmt.Sprintf("pyrand: SeedRange(%d) overflows uint64; first must be at most 2^64-%d", first, BatchLanes))
	}
	for l := range BatchLanes {
		b.setKey(l, first+uint64(l))
	}
	b.seed(BatchLanes)
}

// Seed seeds lane l like random.Random(seeds[l]) for each of the
// 1 ≤ len(seeds) ≤ BatchLanes seeds; Lane(l) is then valid for
// l < len(seeds). A short list costs as much as a full one. It panics for an
// empty list or one longer than BatchLanes, a programming error.
func (b *Batch) Seed(seeds []uint64) {
	if len(seeds) < 1 || len(seeds) > BatchLanes {
		panic(fmt.Sprintf("pyrand: Seed needs 1 to %d seeds, got %d", BatchLanes, len(seeds)))
	}
	for l := range BatchLanes {
		var s uint64
		if l < len(seeds) {
			s = seeds[l]
		}
		b.setKey(l, s)
	}
	b.seed(len(seeds))
}

// setKey records lane l's init_by_array key. Step t of the first loop adds
// key[t mod len(key)] + t mod len(key), so a one-word key adds key[0] on
// every step and a two-word key alternates key[0] and key[1]+1.
func (b *Batch) setKey(l int, seed uint64) {
	b.keys[0][l] = uint32(seed)
	if seed>>32 == 0 {
		b.keys[1][l] = uint32(seed)
	} else {
		b.keys[1][l] = uint32(seed>>32) + 1
	}
}

func (b *Batch) seed(count int) {
	seedKernel(b)
	for l := range b.lanes {
		b.lanes[l] = Lane{b: b, l: l, preEnd: nPre}
	}
	b.count = count
}

// Len returns the number of lanes the last SeedRange or Seed seeded: 0
// before the first, BatchLanes after SeedRange.
func (b *Batch) Len() int { return b.count }

// Lane returns the generator of lane l, 0 ≤ l < Len(). It does not allocate;
// repeated calls return the same *Lane, which continues where it stopped. It
// panics for l out of range, a programming error.
func (b *Batch) Lane(l int) *Lane {
	if uint(l) >= uint(b.count) {
		panic(fmt.Sprintf("pyrand: Lane(%d) out of range: batch holds %d seeded lanes", l, b.count))
	}
	ln := &b.lanes[l]
	ln.b = b // in case the Batch was moved after seeding
	return ln
}

// Uint32 returns the next 32-bit output, as genrand_uint32 does. The first
// nPre come from the seeding kernel; later ones twist one word per output as
// Gen.Uint32 does (see there for why that is exact).
func (ln *Lane) Uint32() uint32 {
	i := ln.idx
	if i < ln.preEnd {
		ln.idx = i + 1
		return ln.b.out[i&(nPre-1)][ln.l&(BatchLanes-1)] // i < preEnd ≤ nPre
	}
	return ln.twist(i)
}

// twist twists word i of the lane and returns its output.
func (ln *Lane) twist(i int) uint32 {
	st := &ln.b.st
	l := ln.l & (BatchLanes - 1)
	i1 := i + 1
	if i1 == n {
		i1 = 0
		ln.preEnd = 0 // the second pass twists words 0..nPre-1 again
	}
	im := i + m
	if im >= n {
		im -= n
	}
	y := (st[i][l] & upperMask) | (st[i1][l] & lowerMask)
	v := st[im][l] ^ (y >> 1) ^ (-(y & 1) & matrixA)
	st[i][l] = v
	ln.idx = i1
	return temper(v)
}

// Bits returns getrandbits(k) for 1 ≤ k ≤ 32, as Gen.Bits does. It panics
// for k outside that range, a programming error.
func (ln *Lane) Bits(k int) uint32 {
	if k < 1 || k > 32 {
		panic("pyrand: Bits needs 1 <= k <= 32")
	}
	return ln.Uint32() >> (32 - k)
}

// Below returns _randbelow(m) for 1 ≤ m ≤ 2^31, as Gen.Below does,
// consuming as many outputs as CPython would. It panics for m outside that
// range, a programming error.
func (ln *Lane) Below(m int) int {
	if m < 1 || int64(m) > 1<<31 {
		panic("pyrand: Below needs 1 <= m <= 2^31")
	}
	k := bits.Len32(uint32(m))
	for {
		r := ln.Uint32() >> (32 - k)
		if int(r) < m {
			return int(r)
		}
	}
}

// Choice returns the index random.choice would pick from a sequence of
// length m: Below(m).
func (ln *Lane) Choice(m int) int { return ln.Below(m) }

// Source is the method set Gen and Lane share, for code that draws from
// either a single generator or a lane of a Batch. Calls through it are
// dynamic; code on a hot path may prefer the concrete types.
type Source interface {
	Uint32() uint32
	Bits(k int) uint32
	Below(m int) int
	Choice(m int) int
}

var (
	_ Source = (*Gen)(nil)
	_ Source = (*Lane)(nil)
)
