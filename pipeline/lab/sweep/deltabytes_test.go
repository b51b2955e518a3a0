package sweep

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/parquet-go/parquet-go/encoding/delta"
)

// checkpoints returns the checkpoint JSON of seeds [0, n) of spec at its
// first fork step, as the sweep's runner makes it.
func checkpoints(t testing.TB, spec Spec, n uint64) [][]byte {
	t.Helper()
	spec.Seeds = Range{0, n}
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	ls, err := newLayouts(r.Decl, false)
	if err != nil {
		t.Fatal(err)
	}
	w := newUnitWriter(r, ls, t.TempDir(), Options{}, newSyncer(), func(ledgerEntry, error) {})
	defer w.close()
	rn, err := w.runner(r.Configs[0])
	if err != nil {
		t.Fatal(err)
	}
	var cps [][]byte
	err = rn.Run(context.Background(), 0, n, func(res *lab.SeedResult) error {
		cps = append(cps, bytes.Clone(res.Forks[0].Checkpoint))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return cps
}

// deltaPages are pages of byte-array values: checkpoints as the sweep
// writes them (greedy and noisy model), and edge cases for the prefix
// search (empty values, equal values, prefixes ending at every offset
// around the eight-byte steps, values that are prefixes of their
// neighbours, long shared prefixes, prefixes that grow and shrink from one
// value to the next).
func deltaPages(t *testing.T) [][][]byte {
	noisy := DefaultSpec()
	noisy.Model.Temperature = 0.2
	pages := [][][]byte{nil, {}, {{}}, {{}, {}}, {[]byte("a")}, checkpoints(t, DefaultSpec(), 2000), checkpoints(t, noisy, 2000)}
	base := []byte(strings.Repeat("0123456789abcdef", 20))
	var edge [][]byte
	for cut := 0; cut <= 140; cut++ {
		v := bytes.Clone(base)
		if cut < len(v) {
			v[cut] = 'X'
		}
		edge = append(edge, v, base[:cut], base, base[:cut], v, v)
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
	// Values sharing a long prefix that differ at random places, so that
	// the hint (the prefix the value before shared) is sometimes too long.
	var long [][]byte
	for range 3000 {
		v := bytes.Clone(base)
		v[r.IntN(len(v))] = 'Y'
		long = append(long, v[:r.IntN(len(v)+1)])
	}
	return append(pages, random, long)
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
	for i, page := range deltaPages(t) {
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
	long := strings.Repeat("0123456789abcdef", 5)
	for _, tc := range []struct {
		a, b string
		hint int
		want int
	}{
		{"", "", 0, 0}, {"", "abc", 0, 0}, {"abc", "abc", 0, 3}, {"abc", "abd", 0, 2},
		{"0123456789", "0123456789", 0, 10}, {"01234567", "01234568", 0, 7},
		{"0123456789abcdefX", "0123456789abcdefY", 0, 16}, {"0123456789abcdef", "0123456789abcdefg", 0, 16},
		// The hint is right, too short, too long, or past the end.
		{"0123456789abcdefX", "0123456789abcdefY", 16, 16}, {"0123456789abcdefX", "0123456789abcdefY", 9, 16},
		{"0123456789abcdefX", "0123456789abXdefY", 16, 12}, {"0123456789", "0123456789abc", 12, 10},
		{long + "X", long + "Y", 70, 80}, {long + "X", long[:40] + "Y", 70, 40}, {long, long, 80, 80},
	} {
		if got := commonPrefixFrom([]byte(tc.a), []byte(tc.b), tc.hint); got != tc.want {
			t.Errorf("commonPrefixFrom(%q, %q, %d) = %d, want %d", tc.a, tc.b, tc.hint, got, tc.want)
		}
		if tc.hint == 0 {
			if got := commonPrefix([]byte(tc.a), []byte(tc.b)); got != tc.want {
				t.Errorf("commonPrefix(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
			}
		}
	}
}

// BenchmarkDeltaByteArray encodes pages of checkpoint JSON as the sweep
// writes them (about 470 values a page).
func BenchmarkDeltaByteArray(b *testing.B) {
	cps := checkpoints(b, DefaultSpec(), 470*16)
	type page struct {
		src     []byte
		offsets []uint32
	}
	var pages []page
	for lo := 0; lo < len(cps); lo += 470 {
		src, offsets := flatten(cps[lo:min(lo+470, len(cps))])
		pages = append(pages, page{src, offsets})
	}
	var ours deltaByteArray
	var dst []byte
	for b.Loop() {
		for _, p := range pages {
			dst, _ = ours.EncodeByteArray(dst, p.src, p.offsets)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(cps)), "ns/value")
	b.ReportMetric(0, "ns/op")
}
