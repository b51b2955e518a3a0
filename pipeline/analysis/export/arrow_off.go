//go:build !duckdb_arrow

package export

import (
	"context"
	"database/sql"
	"io"
)

// ArrowAvailable reports whether this build reads results through DuckDB's
// Arrow interface (build tag duckdb_arrow); without it the arrow formats
// fail with ErrNoArrow.
const ArrowAvailable = false

func writeArrow(ctx context.Context, conn *sql.Conn, stmt string, sh shape, file bool, w io.Writer, dir string) error {
	return ErrNoArrow
}
