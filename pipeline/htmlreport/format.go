package htmlreport

import (
	"fmt"
	"math"
	"math/big"
	"strconv"

	"github.com/forklab/forklab/pipeline/results"
)

// row is a result row addressed by column name.
type row map[string]any

func rowsOf(t *results.Table) []row {
	if t == nil {
		return nil
	}
	out := make([]row, len(t.Rows))
	for i, r := range t.Rows {
		out[i] = row{}
		for j, c := range t.Columns {
			out[i][c] = r[j]
		}
	}
	return out
}

func (r row) i(c string) int64   { return int64(math.Round(toFloat(r[c]))) }
func (r row) f(c string) float64 { return toFloat(r[c]) }
func (r row) s(c string) string  { return fmt.Sprint(r[c]) }

// toFloat reads any numeric value the duckdb driver returns.
func toFloat(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case float32:
		return float64(x)
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case int16:
		return float64(x)
	case int8:
		return float64(x)
	case int:
		return float64(x)
	case uint64:
		return float64(x)
	case uint32:
		return float64(x)
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		return f
	case fmt.Stringer:
		f, _ := strconv.ParseFloat(x.String(), 64)
		return f
	}
	return 0
}

// pct formats a rate as forklab report does: a percentage with one
// decimal, two below 1% in magnitude, never "-0.0%". (A copy of the
// report package's own; TestNoisyReportMatchesText holds them equal.)
func pct(x float64) string {
	s := fmt.Sprintf("%.1f%%", 100*x)
	if x != 0 && math.Abs(x) < 0.01 {
		s = fmt.Sprintf("%.2f%%", 100*x)
	}
	if s == "-0.0%" {
		return "0.0%"
	}
	return s
}

// pval formats a p-value as forklab report does: "1" near one, three
// decimals down to 0.001, two significant digits below.
func pval(p float64) string {
	switch {
	case p >= 0.9995:
		return "1"
	case p >= 0.001:
		return fmt.Sprintf("%.3f", p)
	}
	return fmt.Sprintf("%.2g", p)
}

// signed formats a count with its sign, as the report prints nets.
func signed(n int64) string { return fmt.Sprintf("%+d", n) }
