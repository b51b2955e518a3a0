package sweep

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/parquet-go/parquet-go/encoding/delta"
)

// deltaPages are pages of byte-array values: checkpoints as the sweep
// writes them, and edge cases for the prefix search (empty values, equal
// values, prefixes ending at every offset around the eight-byte steps,
// values that are prefixes of their neighbours, long shared prefixes).
func deltaPages() [][][]byte {
	lab := &counter.Lab{World: counter.World{P: counter.Default()}, Model: fork.Model{Temperature: 0.2, NoTool: 0.5}}
	enc, _ := fork.NewEncoder[counter.State](counter.Name, lab.World.P, lab.Model)
	enc.StateJSON(counter.State.AppendJSON)
	var cps [][]byte
	for seed := uint64(0); seed < 2000; seed++ {
		var hist []fork.Turn
		s := lab.World.Start(seed)
		lab.Advance(&s, fork.PrefixKey(seed), 3, &hist)
		b, _ := enc.Append(nil, 3, hist, s)
		cps = append(cps, b)
	}
	pages := [][][]byte{nil, {}, {{}}, {{}, {}}, {[]byte("a")}, cps}
	base := []byte(strings.Repeat("0123456789abcdef", 20))
	var edge [][]byte
	for cut := 0; cut <= 40; cut++ {
		v := bytes.Clone(base)
		if cut < len(v) {
			v[cut] = 'X'
		}
		edge = append(edge, v, base[:cut], base, base[:cut])
	}
	pages = append(pages, edge)
	r := rand.New(rand.NewPCG(1, 2))
	var random [][]byte
	for range 3000 {
		v := make([]byte, r.IntN(90))
		for i := range v {
			v[i] = "ab"[r.IntN(2)]
		}
		random = append(random, v)
	}
	return append(pages, random)
}

func flatten(values [][]byte) ([]byte, []uint32) {
	var src []byte
	offsets := []uint32{0}
	for _, v := range values {
		src = append(src, v...)
		offsets = append(offsets, uint32(len(src)))
	}
	return src, offsets
}

// The sweep's DELTA_BYTE_ARRAY encoder writes parquet-go's bytes, and
// parquet-go decodes them back to the values.
func TestDeltaByteArrayMatchesParquetGo(t *testing.T) {
	var ours deltaByteArray
	var theirs delta.ByteArrayEncoding
	for i, page := range deltaPages() {
		src, offsets := flatten(page)
		if page == nil {
			offsets = nil
		}
		want, err := theirs.EncodeByteArray(nil, src, offsets)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ours.EncodeByteArray([]byte("stale bytes to overwrite"), src, offsets)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("page %d (%d values): encoded %d bytes (%v), parquet-go %d", i, len(page), len(got), err, len(want))
		}
		values, offs, err := theirs.DecodeByteArray(nil, got, nil)
		if err != nil {
			t.Fatalf("page %d: decode: %v", i, err)
		}
		for j, v := range page {
			if d := values[offs[j]:offs[j+1]]; !bytes.Equal(d, v) {
				t.Fatalf("page %d value %d: decoded %q, want %q", i, j, d, v)
			}
		}
	}
}

func TestCommonPrefix(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 0}, {"abc", "abc", 3}, {"abc", "abd", 2},
		{"0123456789", "0123456789", 10}, {"01234567", "01234568", 7},
		{"0123456789abcdefX", "0123456789abcdefY", 16}, {"0123456789abcdef", "0123456789abcdefg", 16},
	} {
		if got := commonPrefix([]byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("commonPrefix(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}

}
