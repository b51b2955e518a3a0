package htmlreport

import (
	"fmt"
	"github.com/forklab/forklab/pipeline/report"
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

// pct and pval format as the text report does.
var (
	pct  = report.Pct
	pval = report.PValue
)

// signed formats a count with its sign, as the report prints nets.
func signed(n int64) string { return fmt.Sprintf("%+d", n) }
