package pyrand

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"
)

// golden holds outputs of CPython 3.11's random.Random, written by
// testdata/pyrand/gen.py.
type golden struct {
	First8  map[string][]uint32 `json:"first8"`
	Long    map[string][]uint32 `json:"long"`
	Choice4 map[string][]int    `json:"choice4"`
	Below   map[string][]int    `json:"below"`
}

func loadGolden(t testing.TB) golden {
	t.Helper()
	b, err := os.ReadFile("../../../testdata/pyrand/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.First8) < 70 || len(g.Long) != 3 {
		t.Fatalf("golden file incomplete: %d first8, %d long", len(g.First8), len(g.Long))
	}
	return g
}

func seedOf(t *testing.T, s string) uint64 {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMatchesCPython(t *testing.T) {
	g := loadGolden(t)
	for s, want := range g.First8 {
		r := New(seedOf(t, s))
		for i, w := range want {
			if got := r.Uint32(); got != w {
				t.Fatalf("seed %s output %d: got %d, CPython %d", s, i, got, w)
			}
		}
	}
	// 1500 outputs cross two twists of the 624-word state.
	for s, want := range g.Long {
		r := New(seedOf(t, s))
		for i, w := range want {
			if got := r.Uint32(); got != w {
				t.Fatalf("seed %s output %d: got %d, CPython %d", s, i, got, w)
			}
		}
	}
}

func TestChoiceMatchesCPython(t *testing.T) {
	g := loadGolden(t)
	for s, want := range g.Choice4 {
		r := New(seedOf(t, s))
		for i, w := range want {
			if got := r.Choice(4); got != w {
				t.Fatalf("seed %s choice %d: got %d, CPython %d", s, i, got, w)
			}
		}
	}
	// randrange(m) for these m, in this order, from one random.Random(42).
	r := New(42)
	for _, m := range []int{1, 2, 3, 5, 7, 100, 1000003} {
		for i, w := range g.Below[strconv.Itoa(m)] {
			if got := r.Below(m); got != w {
				t.Fatalf("randrange(%d) draw %d: got %d, CPython %d", m, i, got, w)
			}
		}
	}
}

func TestBelowPanicsOutsideRange(t *testing.T) {
	above := int64(1<<31 + 1) // not an int on 32-bit platforms
	for _, m := range []int{0, -1, int(above)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Below(%d) did not panic", m)
				}
			}()
			New(1).Below(m)
		}()
	}
}

var sink uint32

func BenchmarkReseed(b *testing.B) {
	var g Gen
	for i := 0; b.Loop(); i++ {
		g.Reseed(uint64(i))
		sink += g.Uint32()
	}
}
