package export

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/forklab/forklab/pipeline/analysis/results"
)

// tableBlock is the number of rows whose widths set the columns of a
// Table result; later rows print in the same columns, a longer cell
// pushing only its own line.
const tableBlock = 1000

// writeTable prints the result of stmt (of shape sh) as an aligned table:
// a header row, columns two spaces apart, the last column unpadded, every
// value as DuckDB's own text rendering (CAST AS VARCHAR, as the duckdb CLI
// prints it: a UUID as 01936457-…, a BLOB as \xAA…, a double to the last
// digit that tells it apart), NULL as NULL. It holds at most tableBlock
// rows; the rows come through readBack (its temporary database in dir).
func writeTable(ctx context.Context, conn *sql.Conn, stmt string, sh shape, w io.Writer, dir string) error {
	ex, err := exactColumns(Table, sh.cols, sh.types)
	if err != nil {
		return err
	}
	queries, done, err := readBack(ctx, conn, stmt, sh, ex, dir)
	defer done()
	if err != nil {
		return err
	}
	var cols []string
	var block [][]string
	var widths []int
	line := make([]byte, 0, 256)
	emit := func(cells []string) error {
		line = line[:0]
		for i, c := range cells {
			line = append(line, c...)
			if i < len(cells)-1 {
				pad := widths[i] + 2 - utf8.RuneCountInString(c)
				line = append(line, strings.Repeat(" ", max(pad, 2))...)
			}
		}
		line = append(line, '\n')
		_, err := w.Write(line)
		return err
	}
	flush := func() error {
		if widths == nil {
			widths = make([]int, len(cols))
			for _, r := range block {
				for i, c := range r {
					widths[i] = max(widths[i], utf8.RuneCountInString(c))
				}
			}
		}
		for _, r := range block {
			if err := emit(r); err != nil {
				return err
			}
		}
		block = block[:0]
		return nil
	}
	for _, q := range queries {
		rows, err := conn.QueryContext(ctx, q)
		if err != nil {
			return &QueryFailed{results.QueryError(err)}
		}
		if cols == nil {
			if cols, err = rows.Columns(); err != nil {
				rows.Close()
				return err
			}
			block = append(block, cols)
		}
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return err
			}
			cells := make([]string, len(cols))
			for i, v := range vals {
				cells[i] = text(v)
			}
			block = append(block, cells)
			if len(block) > tableBlock {
				if err := flush(); err != nil {
					rows.Close()
					return err
				}
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return &QueryFailed{results.QueryError(err)}
		}
	}
	return flush()
}

// text renders a value: for the VARCHAR rendering of writeTable's queries,
// the string itself and NULL; for a statement that could not be wrapped
// (PRAGMA, whose columns are text, numbers and booleans), the value as
// DuckDB renders those types.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int8:
		return strconv.FormatInt(int64(x), 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case uint32:
		return strconv.FormatUint(uint64(x), 10)
	case uint16:
		return strconv.FormatUint(uint64(x), 10)
	case uint8:
		return strconv.FormatUint(uint64(x), 10)
	case *big.Int:
		return x.String()
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case time.Time:
		return x.Format("2006-01-02 15:04:05.999999999")
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
	}
	return fmt.Sprint(v)
}
