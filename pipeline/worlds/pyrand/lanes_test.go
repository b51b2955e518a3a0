package pyrand

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// batchGolden holds the Batch part of testdata/pyrand/golden.json: CPython's
// first 8 outputs of random.Random(s) for 128 consecutive seeds s from each
// base, and 1500 outputs for a few seeds inside those ranges.
type batchGolden struct {
	Range8    map[string][][]uint32 `json:"range8"`
	RangeLong map[string][]uint32   `json:"range_long"`
}

func loadBatchGolden(t testing.TB) batchGolden {
	t.Helper()
	b, err := os.ReadFile("../../../testdata/pyrand/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g batchGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Range8) != 6 || len(g.RangeLong) != 4 {
		t.Fatalf("golden file incomplete: %d range8 bases, %d range_long seeds; rerun testdata/pyrand/gen.py",
			len(g.Range8), len(g.RangeLong))
	}
	return g
}

// forEachKernel runs f once per seeding kernel, with seedKernel switched to
// it. A kernel the processor cannot run is reported as skipped.
func forEachKernel(t *testing.T, f func(t *testing.T)) {
	have := map[string]bool{}
	for _, k := range kernels() {
		have[k.name] = true
	}
	for _, name := range allKernelNames {
		t.Run(name, func(t *testing.T) {
			if !have[name] {
				t.Skipf("this processor cannot run the %s kernel", name)
			}
			defer useKernel(t, name)()
			f(t)
		})
	}
}

// useKernel switches seedKernel to the named kernel and returns the function
// that switches it back.
func useKernel(t testing.TB, name string) func() {
	for _, k := range kernels() {
		if k.name == name {
			saved := seedKernel
			seedKernel = k.seed
			return func() { seedKernel = saved }
		}
	}
	t.Fatalf("no kernel %q on this processor", name)
	return nil
}

func TestKernelsIncludeGoLast(t *testing.T) {
	ks := kernels()
	if ks[len(ks)-1].name != "go" {
		t.Fatalf("last kernel is %q, want the portable go kernel", ks[len(ks)-1].name)
	}
	for _, k := range ks {
		found := false
		for _, name := range allKernelNames {
			found = found || name == k.name
		}
		if !found {
			t.Fatalf("kernel %q missing from allKernelNames, so no test runs it", k.name)
		}
	}
}

func TestBatchMatchesCPython(t *testing.T) {
	g := loadBatchGolden(t)
	b := new(Batch)
	forEachKernel(t, func(t *testing.T) {
		for base, rows := range g.Range8 {
			lo := seedOf(t, base)
			hi := lo + uint64(len(rows)) - 1
			// Cover [lo, hi] with batches, the last one (or the only one)
			// ending at hi when a batch is wider than the golden range.
			for start := lo; ; start += BatchLanes {
				first := start
				if first > hi-(BatchLanes-1) && hi >= BatchLanes-1 {
					first = hi - (BatchLanes - 1)
				}
				b.SeedRange(first)
				if b.Len() != BatchLanes {
					t.Fatalf("Len after SeedRange = %d, want %d", b.Len(), BatchLanes)
				}
				for l := range BatchLanes {
					seed := first + uint64(l)
					if seed < start || seed > hi {
						continue
					}
					ln := b.Lane(l)
					for i, w := range rows[seed-lo] {
						if got := ln.Uint32(); got != w {
							t.Fatalf("seed %d (lane %d from %d) output %d: got %d, CPython %d",
								seed, l, first, i, got, w)
						}
					}
				}
				if hi-start < BatchLanes {
					break
				}
			}
		}
		// 1500 outputs cross two twists of the 624-word state.
		for s, want := range g.RangeLong {
			seed := seedOf(t, s)
			first := seed - seed%BatchLanes
			if first > math.MaxUint64-(BatchLanes-1) {
				first = math.MaxUint64 - (BatchLanes - 1)
			}
			b.SeedRange(first)
			ln := b.Lane(int(seed - first))
			for i, w := range want {
				if got := ln.Uint32(); got != w {
					t.Fatalf("seed %d output %d: got %d, CPython %d", seed, i, got, w)
				}
			}
		}
	})
}

func TestBatchChoiceMatchesCPython(t *testing.T) {
	g := loadGolden(t)
	b := new(Batch)
	forEachKernel(t, func(t *testing.T) {
		seeds := make([]uint64, 0, len(g.Choice4))
		for s := range g.Choice4 {
			seeds = append(seeds, seedOf(t, s))
		}
		for len(seeds) > 0 {
			part := seeds[:min(len(seeds), BatchLanes)]
			seeds = seeds[len(part):]
			b.Seed(part)
			for l, s := range part {
				ln := b.Lane(l)
				for i, w := range g.Choice4[strconv.FormatUint(s, 10)] {
					if got := ln.Choice(4); got != w {
						t.Fatalf("seed %d choice %d: got %d, CPython %d", s, i, got, w)
					}
				}
			}
		}
	})
}

// requireStateEqual checks that lane l of b holds exactly what Gen holds
// after Reseed(seed) and nPre outputs: the precomputed outputs, then all 624
// words of the state.
func requireStateEqual(t *testing.T, b *Batch, l int, seed uint64, g *Gen) {
	t.Helper()
	g.Reseed(seed)
	for i := range nPre {
		if got, want := b.out[i][l], g.Uint32(); got != want {
			t.Fatalf("seed %d (lane %d): precomputed output %d is %d, Gen gives %d", seed, l, i, got, want)
		}
	}
	for i := range n {
		if b.st[i][l] != g.mt[i] {
			t.Fatalf("seed %d (lane %d): state word %d is %#x, Gen has %#x", seed, l, i, b.st[i][l], g.mt[i])
		}
	}
}

func TestBatchStateEqualsReseed(t *testing.T) {
	firsts := []uint64{
		0, 1, 1 << 20, 1<<31 - 64, 1<<32 - BatchLanes, 1<<32 - 64, 1<<32 - 1, 1 << 32,
		12345678901234, math.MaxUint64 - (BatchLanes - 1),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		firsts = append(firsts, uint64(rng.Uint32()), rng.Uint64()>>1)
	}
	b := new(Batch)
	var g Gen
	forEachKernel(t, func(t *testing.T) {
		// 50 batches of BatchLanes seeds: 12800 seeds per kernel.
		for _, first := range firsts {
			b.SeedRange(first)
			for l := range BatchLanes {
				requireStateEqual(t, b, l, first+uint64(l), &g)
			}
		}
		// Arbitrary lists mixing one- and two-word keys, full and short.
		for _, size := range []int{BatchLanes, 1, 77} {
			seeds := make([]uint64, size)
			for i := range seeds {
				switch i % 3 {
				case 0:
					seeds[i] = uint64(rng.Uint32())
				case 1:
					seeds[i] = rng.Uint64()
				default:
					seeds[i] = uint64(i)
				}
			}
			b.Seed(seeds)
			if b.Len() != size {
				t.Fatalf("Len after Seed of %d seeds = %d", size, b.Len())
			}
			for l, s := range seeds {
				requireStateEqual(t, b, l, s, &g)
			}
		}
	})
}

// TestLanesAreIndependent draws different numbers of outputs from the lanes
// in an interleaved order, past the 624-word boundary for some, and checks
// every lane against its own Gen: lanes share storage but not state.
func TestLanesAreIndependent(t *testing.T) {
	b := new(Batch)
	b.SeedRange(1<<32 - 100) // one- and two-word keys in one batch
	gens := make([]*Gen, BatchLanes)
	for l := range gens {
		gens[l] = New(1<<32 - 100 + uint64(l))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for step := range 40000 {
		l := rng.IntN(BatchLanes)
		ln, g := b.Lane(l), gens[l]
		var got, want int
		switch step % 3 {
		case 0:
			got, want = int(ln.Uint32()), int(g.Uint32())
		case 1:
			k := 1 + rng.IntN(32)
			got, want = int(ln.Bits(k)), int(g.Bits(k))
		default:
			m := 1 + rng.IntN(1000)
			got, want = ln.Below(m), g.Below(m)
		}
		if got != want {
			t.Fatalf("step %d lane %d: batch %d, Gen %d", step, l, got, want)
		}
	}
}

func TestBatchReseedRestartsLanes(t *testing.T) {
	b := new(Batch)
	b.SeedRange(5)
	first := b.Lane(0).Uint32()
	b.Lane(0).Uint32()
	b.SeedRange(5)
	if got := b.Lane(0).Uint32(); got != first {
		t.Fatalf("after reseeding, lane 0's first output is %d, want %d", got, first)
	}
	if got, want := first, New(5).Uint32(); got != want {
		t.Fatalf("seed 5 first output %d, Gen %d", got, want)
	}
}

func TestBatchPanicsOnMisuse(t *testing.T) {
	b := new(Batch)
	above := int64(1<<31 + 1) // wraps to a negative int on 32-bit platforms
	cases := map[string]func(){
		"Lane before seeding": func() { new(Batch).Lane(0) },
		"Seed of no seeds":    func() { b.Seed(nil) },
		"Seed of too many":    func() { b.Seed(make([]uint64, BatchLanes+1)) },
		"Lane beyond Seed":    func() { b.Seed([]uint64{1, 2}); b.Lane(2) },
		"negative Lane":       func() { b.SeedRange(0); b.Lane(-1) },
		"Lane(BatchLanes)":    func() { b.SeedRange(0); b.Lane(BatchLanes) },
		"SeedRange overflow":  func() { b.SeedRange(math.MaxUint64 - BatchLanes + 2) },
		"Bits(0)":             func() { b.SeedRange(0); b.Lane(0).Bits(0) },
		"Bits(33)":            func() { b.SeedRange(0); b.Lane(0).Bits(33) },
		"Below(0)":            func() { b.SeedRange(0); b.Lane(0).Below(0) },
		"Below(2^31+1)":       func() { b.SeedRange(0); b.Lane(0).Below(int(above)) },
	}
	for name, f := range cases {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestLaneDoesNotAllocate(t *testing.T) {
	b := new(Batch)
	b.SeedRange(0)
	allocs := testing.AllocsPerRun(100, func() {
		b.SeedRange(7)
		for l := range BatchLanes {
			sink += uint32(b.Lane(l).Choice(6))
		}
	})
	if allocs != 0 {
		t.Fatalf("SeedRange and Lane allocate %v times per batch", allocs)
	}
}

// FuzzLane compares a lane's outputs with Gen's for arbitrary seeds, lanes
// and output counts (up to 2000, crossing the 624-word boundary), on every
// kernel this processor runs.
func FuzzLane(f *testing.F) {
	f.Add(uint64(0), uint8(0), uint16(8))
	f.Add(uint64(1<<32-64), uint8(70), uint16(1500))
	f.Add(uint64(math.MaxUint64), uint8(127), uint16(625))
	ks := kernels()
	b := new(Batch)
	f.Fuzz(func(t *testing.T, first uint64, lane uint8, count uint16) {
		if first > math.MaxUint64-(BatchLanes-1) {
			first = math.MaxUint64 - (BatchLanes - 1)
		}
		l := int(lane) % BatchLanes
		count %= 2000
		for _, k := range ks {
			saved := seedKernel
			seedKernel = k.seed
			b.SeedRange(first)
			seedKernel = saved
			ln, g := b.Lane(l), New(first+uint64(l))
			for i := range int(count) {
				if got, want := ln.Uint32(), g.Uint32(); got != want {
					t.Fatalf("%s kernel, seed %d output %d: lane %d, Gen %d", k.name, first+uint64(l), i, got, want)
				}
			}
		}
	})
}

// reseedNs measures the single-chain baseline, Gen.Reseed, in ns per seed:
// the best of several rounds, so a briefly busy core does not inflate it.
var reseedNs = sync.OnceValue(func() float64 {
	var g Gen
	best := math.Inf(1)
	for round := range 7 {
		start := time.Now()
		for i := range 2000 {
			g.Reseed(uint64(round*2000 + i))
		}
		best = min(best, float64(time.Since(start).Nanoseconds())/2000)
	}
	sink += g.mt[1]
	return best
})

func reportPerSeed(b *testing.B, seeds int) {
	per := float64(b.Elapsed().Nanoseconds()) / float64(b.N*seeds)
	b.ReportMetric(per, "ns/seed")
	b.ReportMetric(reseedNs()/per, "x-Reseed")
}

// BenchmarkBatchSeedRange seeds BatchLanes generators per iteration with each
// kernel and reports ns/seed and the speed-up over Gen.Reseed (x-Reseed).
func BenchmarkBatchSeedRange(b *testing.B) {
	for _, k := range kernels() {
		b.Run(k.name, func(b *testing.B) {
			defer useKernel(b, k.name)()
			bt := new(Batch)
			reseedNs()
			for i := 0; b.Loop(); i++ {
				bt.SeedRange(uint64(i) * BatchLanes)
				sink += bt.Lane(0).Uint32()
			}
			reportPerSeed(b, BatchLanes)
		})
	}
}

// BenchmarkBatchTask is the sweep's use: seed a batch, then draw a task's
// worth of outputs (five choices among six) from every lane.
func BenchmarkBatchTask(b *testing.B) {
	for _, k := range kernels() {
		b.Run(k.name, func(b *testing.B) {
			defer useKernel(b, k.name)()
			bt := new(Batch)
			reseedNs()
			for i := 0; b.Loop(); i++ {
				bt.SeedRange(uint64(i) * BatchLanes)
				for l := range BatchLanes {
					ln := bt.Lane(l)
					for range 5 {
						sink += uint32(ln.Choice(6))
					}
				}
			}
			reportPerSeed(b, BatchLanes)
		})
	}
}
