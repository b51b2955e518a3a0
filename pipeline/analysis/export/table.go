package export

import (
	"context"
	"database/sql"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/forklab/forklab/pipeline/analysis/report"
	"github.com/forklab/forklab/pipeline/analysis/results"
)

// tableBlock is the number of rows whose widths set the columns of a
// Table result; later rows print in the same columns, a longer cell
// pushing only its own line.
const tableBlock = 1000

// writeTable prints the result of text's last statement as
// report.WriteTable does (values formatted by report.Format, columns two
// spaces apart, the last column unpadded), holding at most tableBlock rows;
// the rows come through readBack (its temporary database in tmpDir).
func writeTable(ctx context.Context, conn *sql.Conn, text string, w io.Writer, tmpDir string) error {
	last, err := runAllButLast(ctx, conn, text)
	if err != nil {
		return err
	}
	queries, done, err := readBack(ctx, conn, last, tmpDir)
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
				cells[i] = report.Format(v)
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
