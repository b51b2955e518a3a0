package results

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/stats"
	"github.com/forklab/forklab/queries"
)

// The SQL macros of queries/stats.sql give the reference values of
// testdata/stats/golden.json, and the Go functions of pipeline/analysis/stats, to
// 1e-9.
func TestStatsMacros(t *testing.T) {
	b, err := os.ReadFile("../../../testdata/stats/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		McNemar  [][]float64 `json:"mcnemar"`
		Wilson   [][]float64 `json:"wilson"`
		Newcombe [][]float64 `json:"newcombe"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(queries.MustGet("stats")); err != nil {
		t.Fatal(err)
	}
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
