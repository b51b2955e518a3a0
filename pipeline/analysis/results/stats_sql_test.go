package results

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/pipeline/analysis/analysistest"
	"github.com/forklab/forklab/pipeline/analysis/stats"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/queries"
)

// statsDB is an in-memory DuckDB with the macros of queries/stats.sql.
func statsDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := duck.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(queries.MustGet("stats")); err != nil {
		t.Fatal(err)
	}
	return db
}

// sqlFloats runs a query of float columns over VALUES rows and returns
// its rows.
func sqlFloats(t *testing.T, db *sql.DB, q string, ncol int) [][]float64 {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%.200s: %v", q, err)
	}
	defer rows.Close()
	var out [][]float64
	for rows.Next() {
		r := make([]float64, ncol)
		ptrs := make([]any, ncol)
		for i := range r {
			ptrs[i] = &r[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func values(rows [][]int64) string {
	parts := make([]string, len(rows))
	for i, r := range rows {
		cells := make([]string, len(r))
		for j, v := range r {
			cells[j] = fmt.Sprintf("%d::BIGINT", v)
		}
		parts[i] = "(" + fmt.Sprint(i) + ", " + strings.Join(cells, ", ") + ")"
	}
	return strings.Join(parts, ", ")
}

// The macros are exact at their boundaries, as the Go functions are
// (issue 12 C: wilson_lo(0, 17) was 1.39e-17).
func TestStatsMacroBoundaries(t *testing.T) {
	db := statsDB(t)
	for q, want := range map[string]float64{
		"wilson_lo(0, 17)":                        0,
		"wilson_hi(17, 17)":                       1,
		"wilson_lo(0, 0)":                         0,
		"wilson_hi(0, 0)":                         1,
		"wilson_lo(0, 1000000000000)":             0,
		"wilson_hi(1000000000000, 1000000000000)": 1,
		"mcnemar_p(0, 0)":                         1,
		"mcnemar_p(4, 3)":                         1,
		"mcnemar_p(1000000000, 1000000001)":       1,
		"mcnemar_p(4000000000000, 4000000000000)": 1,
		"mcnemar_p(0, 12)":                        math.Ldexp(1, -11),
		"mcnemar_p(12, 0)":                        math.Ldexp(1, -11),
		"mcnemar_p(0, 1074)":                      math.Ldexp(1, -1073),
		"mcnemar_p(0, 2000000)":                   0,
		"newcombe_lo(0, 0, 0, 0)":                 -1,
		"newcombe_hi(0, 0, 0, 0)":                 1,
		"newcombe_hi(0, 17, 0, 0)":                1,
		"newcombe_lo(0, 0, 17, 0)":                -1,
		"newcombe_hi(0, 1, 0, 0)":                 1,
		"z95()":                                   stats.Z95,
	} {
		var got float64
		if err := db.QueryRow("SELECT " + q).Scan(&got); err != nil || got != want {
			t.Errorf("%s = %.17g, %v; want exactly %.17g", q, got, err, want)
		}
	}
}

// Over a wide range of counts the macros equal the Go functions (the same
// formulas, so to the last bits for Wilson and Newcombe; McNemar sums its
// tail in SQL and through gonum's incomplete beta in Go), and are ordered
// around their estimates in SQL itself.
func TestStatsMacrosAgainstGo(t *testing.T) {
	db := statsDB(t)
	var xn [][]int64
	for _, n := range []int64{1, 2, 3, 5, 10, 17, 100, 299, 1000, 12345, 1e6, 1e9, 1e12, 1e15} {
		for _, x := range []int64{0, 1, 2, n / 3, n / 2, n - 2, n - 1, n} {
			if x >= 0 && x <= n {
				xn = append(xn, []int64{x, n})
			}
		}
	}
	r := rand.New(rand.NewPCG(21, 0))
	for i := 0; i < 300; i++ {
		n := int64(math.Exp(r.Float64() * math.Log(1e13)))
		xn = append(xn, []int64{r.Int64N(n + 1), n})
	}
	got := sqlFloats(t, db, "SELECT wilson_lo(x, n), wilson_hi(x, n), x / n, (wilson_lo(x, n) <= x / n AND x / n <= wilson_hi(x, n))::DOUBLE FROM (VALUES "+values(xn)+") AS v(i, x, n) ORDER BY i", 4)
	for i, r := range xn {
		iv := stats.Wilson(r[0], r[1], stats.Z95)
		if g := got[i]; g[0] != iv.Lo || g[1] != iv.Hi || g[3] != 1 {
			t.Errorf("wilson(%d, %d) = [%.17g, %.17g] (ordered: %v), Go [%.17g, %.17g]", r[0], r[1], g[0], g[1], g[3] == 1, iv.Lo, iv.Hi)
		}
	}

	var bc [][]int64
	for b := int64(0); b <= 40; b++ {
		for c := int64(0); c <= 40; c++ {
			bc = append(bc, []int64{b, c})
		}
	}
	bc = append(bc, []int64{75, 83}, []int64{400, 500}, []int64{1000, 1100}, []int64{3, 20000}, []int64{100000, 101000},
		[]int64{249746, 250019}, []int64{5e8, 5e8 + 40000})
	got = sqlFloats(t, db, "SELECT mcnemar_p(b, c) FROM (VALUES "+values(bc)+") AS v(i, b, c) ORDER BY i", 1)
	for i, r := range bc {
		p := stats.McNemarExact(r[0], r[1])
		if g := got[i][0]; math.Abs(g-p) > 1e-13*p || g < 0 || g > 1 {
			t.Errorf("mcnemar_p(%d, %d) = %.17g, Go %.17g", r[0], r[1], g, p)
		}
	}

	var tables [][]int64
	for _, n := range []int64{3, 17, 300, 1e6, 1e12} {
		tables = append(tables, []int64{0, n, 0, 0}, []int64{0, 0, n, 0}, []int64{n, 0, 0, 0}, []int64{0, 0, 0, n},
			[]int64{n, n, 0, 0}, []int64{0, n, n, 0}, []int64{n, 1, 0, n}, []int64{n / 2, n / 3, n / 5, n / 7})
	}
	for i := 0; i < 300; i++ {
		tb := make([]int64, 4)
		scale := math.Exp(r.Float64() * math.Log(1e9))
		for j := range tb {
			if r.IntN(4) > 0 {
				tb[j] = int64(r.Float64() * scale)
			}
		}
		if tb[0]+tb[1]+tb[2]+tb[3] > 0 {
			tables = append(tables, tb)
		}
	}
	got = sqlFloats(t, db, "SELECT newcombe_lo(a, b, c, d), newcombe_hi(a, b, c, d), (newcombe_lo(a, b, c, d) <= (b - c) / (a + b + c + d) AND (b - c) / (a + b + c + d) <= newcombe_hi(a, b, c, d))::DOUBLE FROM (VALUES "+values(tables)+") AS v(i, a, b, c, d) ORDER BY i", 3)
	for i, tb := range tables {
		iv := stats.NewcombePaired(tb[0], tb[1], tb[2], tb[3], stats.Z95)
		if g := got[i]; math.Abs(g[0]-iv.Lo) > 1e-15 || math.Abs(g[1]-iv.Hi) > 1e-15 || g[2] != 1 {
			t.Errorf("newcombe%v = [%.17g, %.17g] (ordered: %v), Go [%.17g, %.17g]", tb, g[0], g[1], g[2] == 1, iv.Lo, iv.Hi)
		}
	}
}

// The SQL macros of queries/stats.sql give the reference values of
// testdata/stats/golden.json, and the Go functions of pipeline/analysis/stats, to
// 1e-9.
func TestStatsMacros(t *testing.T) {
	b, err := os.ReadFile("../../../testdata/stats/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		McNemar      [][]float64 `json:"mcnemar"`
		McNemarLarge [][]float64 `json:"mcnemar_large"`
		Wilson       [][]float64 `json:"wilson"`
		Newcombe     [][]float64 `json:"newcombe"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	db := statsDB(t)
	one := func(q string, args ...any) []float64 {
		t.Helper()
		row := db.QueryRow(fmt.Sprintf(q, args...))
		var a, b float64
		if err := row.Scan(&a, &b); err != nil {
			t.Fatalf("%s: %v", fmt.Sprintf(q, args...), err)
		}
		return []float64{a, b}
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9 }
	n := 0
	for _, r := range g.McNemar {
		got := one("SELECT mcnemar_p(%d::BIGINT, %d::BIGINT), 0", int(r[0]), int(r[1]))[0]
		if !near(got, r[2]) || !near(got, stats.McNemarExact(int64(r[0]), int64(r[1]))) {
			t.Errorf("mcnemar_p(%v, %v) = %.17g, want %.17g", r[0], r[1], got, r[2])
		}
		n++
	}
	for _, r := range g.McNemarLarge {
		if r[0]+r[1] > 2e9 {
			continue // pipeline/stats checks it; 1.3 million terms are slow in SQL
		}
		got := one("SELECT mcnemar_p(%d::BIGINT, %d::BIGINT), 0", int64(r[0]), int64(r[1]))[0]
		if math.Abs(got-r[2]) > 1e-12*r[2] {
			t.Errorf("mcnemar_p(%v, %v) = %.17g, want %.17g", r[0], r[1], got, r[2])
		}
		n++
	}
	for _, r := range g.Wilson {
		got := one("SELECT wilson_lo(%d::BIGINT, %d::BIGINT), wilson_hi(%d::BIGINT, %d::BIGINT)", int(r[0]), int(r[1]), int(r[0]), int(r[1]))
		if !near(got[0], r[2]) || !near(got[1], r[3]) {
			t.Errorf("wilson(%v, %v) = %v, want [%v, %v]", r[0], r[1], got, r[2], r[3])
		}
		n++
	}
	for _, r := range g.Newcombe {
		a, b, c, d := int(r[0]), int(r[1]), int(r[2]), int(r[3])
		got := one("SELECT newcombe_lo(%d::BIGINT, %d::BIGINT, %d::BIGINT, %d::BIGINT), newcombe_hi(%d::BIGINT, %d::BIGINT, %d::BIGINT, %d::BIGINT)", a, b, c, d, a, b, c, d)
		iv := stats.NewcombePaired(int64(a), int64(b), int64(c), int64(d), stats.Z95)
		if !near(got[0], r[4]) || !near(got[1], r[5]) || !near(got[0], iv.Lo) || !near(got[1], iv.Hi) {
			t.Errorf("newcombe(%v) = %v, want [%v, %v]", r[:4], got, r[4], r[5])
		}
		n++
	}
	// The tail sum is cut to the terms that matter: the same p for the
	// discordant pairs of a million seeds, and 1 (not 0.9999999999999991)
	// where the two counts are as close as they can be.
	for _, bc := range [][2]int64{{249746, 250019}, {4, 3}, {100000, 101000}, {3, 20000}} {
		got := one("SELECT mcnemar_p(%d::BIGINT, %d::BIGINT), 0", bc[0], bc[1])[0]
		if want := stats.McNemarExact(bc[0], bc[1]); !near(got, want) {
			t.Errorf("mcnemar_p(%d, %d) = %.17g, Go %.17g", bc[0], bc[1], got, want)
		}
	}
	if got := one("SELECT mcnemar_p(4::BIGINT, 3::BIGINT), 0")[0]; got != 1 {
		t.Errorf("mcnemar_p(4, 3) = %.17g, want exactly 1", got)
	}
	// Large counts stay finite: no BIGINT overflow in the products.
	got := one("SELECT newcombe_lo(2500000::BIGINT, 2500000::BIGINT, 2500000::BIGINT, 2500000::BIGINT), newcombe_hi(2500000::BIGINT, 2500000::BIGINT, 2500000::BIGINT, 2500000::BIGINT)")
	iv := stats.NewcombePaired(2500000, 2500000, 2500000, 2500000, stats.Z95)
	if !near(got[0], iv.Lo) || !near(got[1], iv.Hi) {
		t.Errorf("newcombe at 10M pairs: SQL %v, Go %v", got, iv)
	}
	if n < 20 {
		t.Fatalf("checked only %d values", n)
	}
}

// wilcoxonParts returns what the wilcoxon_p macro takes for differences d:
// the rank sum of the positive ones (tied |d| at their mean rank), the
// number of nonzero ones, and Σ(t³ − t) over the tie groups.
func wilcoxonParts(d []float64) (tPlus float64, n int64, ties float64) {
	counts := map[float64][2]int64{} // |d| -> all, positive
	for _, x := range d {
		if x == 0 {
			continue
		}
		c := counts[math.Abs(x)]
		c[0]++
		if x > 0 {
			c[1]++
		}
		counts[math.Abs(x)] = c
		n++
	}
	keys := make([]float64, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var before int64
	for _, k := range keys {
		c := counts[k]
		tPlus += float64(c[1]) * (float64(before) + float64(c[0]+1)/2)
		ties += float64(c[0]*c[0]*c[0] - c[0])
		before += c[0]
	}
	return tPlus, n, ties
}

// The graded-outcome macros give the reference values of
// testdata/stats/scores.json and the Go functions: t975 to 1e-12 (the
// table below df 101, Cornish–Fisher above), wilcoxon_p to 1e-12
// relative, for p down to 1e-11 and z far in the tail.
func TestScoreMacros(t *testing.T) {
	g := analysistest.LoadScores(t)
	db := statsDB(t)
	for _, r := range g.T975 {
		var got float64
		if err := db.QueryRow(fmt.Sprintf("SELECT t975(%d)", int64(r[0]))).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-r[1]) > 1e-12 || math.Abs(got-stats.T975(r[0])) > 1e-10 {
			t.Errorf("t975(%v) = %.17g, want %.17g (Go %.17g)", r[0], got, r[1], stats.T975(r[0]))
		}
	}
	var null sql.NullFloat64
	if err := db.QueryRow("SELECT t975(0)").Scan(&null); err != nil || null.Valid {
		t.Errorf("t975(0) = %v, %v; want NULL", null, err)
	}
	for _, w := range g.Wilcoxon {
		tp, n, ties := wilcoxonParts(w.D)
		var got sql.NullFloat64
		if err := db.QueryRow(fmt.Sprintf("SELECT wilcoxon_p(%v, %d::BIGINT, %v)", tp, n, ties)).Scan(&got); err != nil {
			t.Fatal(err)
		}
		goP, _ := stats.Wilcoxon(w.D)
		switch {
		case w.P == nil && got.Valid:
			t.Errorf("%s: wilcoxon_p = %v, want NULL", w.Name, got.Float64)
		case w.P != nil && (!got.Valid || relErr(got.Float64, *w.P) > 1e-12 || relErr(got.Float64, goP) > 1e-12):
			t.Errorf("%s: wilcoxon_p = %v, want %.17g (Go %.17g)", w.Name, got, *w.P, goP)
		}
	}
	// Across z, against Go's math.Erfc: both branches of the macro's erfc
	// and the tail where p underflows.
	for _, n := range []int64{1, 2, 5, 10, 40, 300, 5000, 1000000} {
		nf := float64(n)
		mean, sd := nf*(nf+1)/4, math.Sqrt(nf*(nf+1)*(2*nf+1)/24)
		for _, z := range []float64{0, 0.3, 1, 1.96, 2.8, 2.83, 2.9, 4, 8, 12, 38, 40} {
			tp := math.Round(2*(mean+z*sd)) / 2
			if tp > nf*(nf+1)/2 {
				continue
			}
			var got float64
			if err := db.QueryRow(fmt.Sprintf("SELECT wilcoxon_p(%v, %d::BIGINT, 0)", tp, n)).Scan(&got); err != nil {
				t.Fatal(err)
			}
			want := math.Erfc(math.Abs(tp-mean) / sd / math.Sqrt2)
			if relErr(got, want) > 1e-12 && math.Abs(got-want) > 1e-300 {
				t.Errorf("wilcoxon_p(%v, %d, 0) = %.17g, want %.17g", tp, n, got, want)
			}
		}
	}
}

func relErr(got, want float64) float64 {
	if got == want {
		return 0
	}
	return math.Abs(got-want) / math.Abs(want)
}

// summary.sql's score statistics, computed from the frequency table of
// the differences (score_counts: mean and spread summed in the order of
// d, tie groups' mean ranks by a running sum), give SciPy's values for the
// samples of testdata/stats/scores.json loaded as pairs whose control
// scores 0 and whose treated side scores d; an all-zero sample has no
// Wilcoxon p (NULL), and one pair no interval.
func TestSummaryScoresAgainstSciPy(t *testing.T) {
	g := analysistest.LoadScores(t)
	d := world.Declaration{Name: "graded", Version: "1", Features: []world.Field{{Name: "x", Kind: world.Bool}},
		Cost:  world.CostModel{Fields: []string{world.CostSteps}},
		Score: &world.ScoreSpec{Min: -10, Max: 10}}
	var pairs []analysistest.Pair
	for fs, w := range g.Wilcoxon {
		for i, x := range w.D {
			pairs = append(pairs, analysistest.Pair{ForkStep: fs + 1, Seed: int64(i), Arm: "on",
				Features: []world.Value{world.BoolValue(i%2 == 0)}, Score: &[3]float64{0, x, x}})
		}
	}
	db := analysistest.Open(t, d, pairs)
	rows := analysistest.Query(t, db, queries.MustGet("summary"))
	if len(rows) != len(g.Wilcoxon) {
		t.Fatalf("%d summary rows for %d samples", len(rows), len(g.Wilcoxon))
	}
	null := func(v any) bool { return v == nil }
	for i, r := range rows {
		w, pt := g.Wilcoxon[i], g.PairedT[i]
		if Int(r["wilcoxon_n"]) != w.N {
			t.Errorf("%s: wilcoxon_n %v, want %d", w.Name, r["wilcoxon_n"], w.N)
		}
		switch {
		case w.P == nil && !null(r["wilcoxon_p"]):
			t.Errorf("%s: wilcoxon_p %v, want NULL", w.Name, r["wilcoxon_p"])
		case w.P != nil && (null(r["wilcoxon_p"]) || relErr(Float(r["wilcoxon_p"]), *w.P) > 1e-11):
			t.Errorf("%s: wilcoxon_p %v, want %.17g", w.Name, r["wilcoxon_p"], *w.P)
		}
		if math.Abs(Float(r["mean_score_diff"])-pt.Mean) > 1e-12 {
			t.Errorf("%s: mean_score_diff %v, want %v", w.Name, r["mean_score_diff"], pt.Mean)
		}
		if pt.Lo == nil {
			if !null(r["score_diff_lo"]) {
				t.Errorf("%s: an interval from one pair: %v", w.Name, r["score_diff_lo"])
			}
		} else if math.Abs(Float(r["score_diff_lo"])-*pt.Lo) > 1e-9 || math.Abs(Float(r["score_diff_hi"])-*pt.Hi) > 1e-9 {
			t.Errorf("%s: interval [%v, %v], want [%v, %v]", w.Name, r["score_diff_lo"], r["score_diff_hi"], *pt.Lo, *pt.Hi)
		}
	}
}
