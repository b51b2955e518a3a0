package report

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/forklab/forklab/pipeline/analysis/results"
)

// WriteTable prints t as an aligned text table with a header row, two
// spaces between columns.
func WriteTable(w io.Writer, t *results.Table) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.Columns, "\t"))
	for _, row := range t.Rows {
		cells := make([]string, len(row))
		for i, v := range row {
			cells[i] = Format(v)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// Format renders one value the way the report prints it: NULL for nil,
// floats with at most 4 decimals (more for very small magnitudes: the
// report rounds its rates and p-values for reading; forklab sql prints
// every digit), times in RFC 3339 with their fraction of a second, bytes
// (a BLOB, or a UUID as the duckdb driver gives it) as DuckDB prints a
// BLOB, \xAA for a byte that is not printable ASCII; NA for a NaN or an
// infinite float.
func Format(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case float64:
		return formatFloat(x)
	case float32:
		return formatFloat(float64(x))
	case []byte:
		var b strings.Builder
		for _, c := range x {
			if c >= 0x20 && c < 0x7f && c != '\\' {
				b.WriteByte(c)
			} else {
				fmt.Fprintf(&b, `\x%02X`, c)
			}
		}
		return b.String()
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case fmt.Stringer:
		return x.String()
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = Format(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}

func formatFloat(x float64) string {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return NA
	case x == 0:
		return "0"
	case x == math.Trunc(x) && math.Abs(x) < 1e15:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case math.Abs(x) < 1e-3:
		return strconv.FormatFloat(x, 'g', 4, 64)
	}
	return strconv.FormatFloat(x, 'f', 4, 64)
}
