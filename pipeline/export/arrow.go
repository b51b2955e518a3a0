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
	"github.com/forklab/forklab/pipeline/results"
)

// ArrowAvailable reports whether this build reads results through DuckDB's
// Arrow interface (build tag duckdb_arrow); without it the arrow formats
// fail with ErrNoArrow.
const ArrowAvailable = true

// writeArrow runs text through DuckDB's Arrow interface and writes the
// record batches, one at a time as DuckDB hands them over, with
// apache/arrow-go's ipc writer: the IPC file format when file is set, else
// the IPC stream format.
func writeArrow(ctx context.Context, conn *sql.Conn, text string, file bool, w io.Writer) error {
	return conn.Raw(func(dc any) error {
		dconn, ok := dc.(driver.Conn)
		if !ok {
			return fmt.Errorf("arrow: %T is not a database/sql driver connection", dc)
		}
		a, err := duckdb.NewArrowFromConn(dconn)
		if err != nil {
			return fmt.Errorf("arrow: %w", err)
		}
		rr, err := a.QueryContext(ctx, text)
		if err != nil {
			return &QueryFailed{results.QueryError(err)}
		}
		defer rr.Release()
		var iw interface {
			Write(arrow.RecordBatch) error
			Close() error
		}
		if file {
			if iw, err = ipc.NewFileWriter(w, ipc.WithSchema(rr.Schema())); err != nil {
				return fmt.Errorf("arrow ipc: %w", err)
			}
		} else {
			iw = ipc.NewWriter(w, ipc.WithSchema(rr.Schema()))
		}
		for rr.Next() {
			if err := iw.Write(rr.RecordBatch()); err != nil {
				return fmt.Errorf("arrow ipc: %w", err)
			}
		}
		if err := rr.Err(); err != nil {
			return &QueryFailed{results.QueryError(err)}
		}
		if err := iw.Close(); err != nil {
			return fmt.Errorf("arrow ipc: %w", err)
		}
		return nil
	})
}
