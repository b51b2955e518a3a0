//go:build duckdb_arrow

package export

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/duckdb/duckdb-go/v2"
	"github.com/forklab/forklab/pipeline/analysis/results"
)

// ArrowAvailable reports whether this build reads results through DuckDB's
// Arrow interface (build tag duckdb_arrow); without it the arrow formats
// fail with ErrNoArrow.
const ArrowAvailable = true

// writeArrow writes the result of stmt (of shape sh) with apache/arrow-go's
// ipc writer (the IPC file format when file is set, else the stream
// format), exactly (exactColumns), read through DuckDB's Arrow interface a
// row group at a time (readBack; its temporary database goes in dir).
func writeArrow(ctx context.Context, conn *sql.Conn, stmt string, sh shape, file bool, w io.Writer, dir string) error {
	format := ArrowStream
	if file {
		format = Arrow
	}
	ex, err := exactColumns(format, sh.cols, sh.types)
	if err != nil {
		return err
	}
	queries, done, err := readBack(ctx, conn, stmt, sh, ex, dir)
	defer done()
	if err != nil {
		return err
	}
	return arrowQueries(ctx, conn, file, w, queries...)
}

// arrowQueries runs each query through DuckDB's Arrow interface and writes
// their record batches as one IPC file or stream, with the first query's
// schema.
func arrowQueries(ctx context.Context, conn *sql.Conn, file bool, w io.Writer, queries ...string) error {
	return conn.Raw(func(dc any) error {
		dconn, ok := dc.(driver.Conn)
		if !ok {
			return fmt.Errorf("arrow: %T is not a database/sql driver connection", dc)
		}
		a, err := duckdb.NewArrowFromConn(dconn)
		if err != nil {
			return fmt.Errorf("arrow: %w", err)
		}
		var iw interface {
			Write(arrow.RecordBatch) error
			Close() error
		}
		for _, q := range queries {
			rr, err := a.QueryContext(ctx, q)
			if err != nil {
				return &QueryFailed{results.QueryError(err)}
			}
			if iw == nil {
				if file {
					if iw, err = ipc.NewFileWriter(w, ipc.WithSchema(rr.Schema())); err != nil {
						rr.Release()
						return fmt.Errorf("arrow ipc: %w", err)
					}
				} else {
					iw = ipc.NewWriter(w, ipc.WithSchema(rr.Schema()))
				}
			}
			for rr.Next() {
				if err := iw.Write(rr.RecordBatch()); err != nil {
					rr.Release()
					return fmt.Errorf("arrow ipc: %w", err)
				}
			}
			err = rr.Err()
			rr.Release()
			if err != nil {
				return &QueryFailed{results.QueryError(err)}
			}
		}
		if err := iw.Close(); err != nil {
			return fmt.Errorf("arrow ipc: %w", err)
		}
		return nil
	})
}
