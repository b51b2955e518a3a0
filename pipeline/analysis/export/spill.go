package export

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/duckdb/duckdb-go/v2"
	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/pipeline/analysis/results"
)

// ErrSeveral reports text that DuckDB's parser reads as more than one
// statement where forklab's split of the query found one.
var ErrSeveral = errors.New("DuckDB reads it as more than one statement")

// spillSlice is the number of rows read back at a time: one DuckDB row
// group.
const spillSlice = 122880

// shape is what preparing a statement tells: its kind, and for a query
// its columns' names and types.
type shape struct {
	kind  duckdb.StmtType
	cols  []string
	types []duckdb.TypeInfo
}

// query reports whether the statement is a query: one COPY and CREATE
// TABLE AS take (SELECT, WITH, FROM, VALUES, …).
func (s shape) query() bool { return s.kind == duckdb.STATEMENT_TYPE_SELECT }

// describe prepares stmt (DuckDB's syntax and binder errors come back with
// their position in stmt) and returns its shape. DuckDB itself extracts the
// statements of stmt, and unless it finds exactly one, describe fails
// (ErrSeveral) having prepared and run none: what describe returns is the
// shape of the one statement DuckDB runs for stmt, whatever forklab's own
// split of the text made of it. (duckdb-go's PrepareContext would run
// every statement but the last one to prepare it.)
func describe(ctx context.Context, conn *sql.Conn, stmt string) (sh shape, err error) {
	if err := ctx.Err(); err != nil {
		return sh, err
	}
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("duckdb connection is a %T", dc)
		}
		st, err := c.Prepare(stmt)
		if err != nil {
			var de *duckdb.Error
			if !errors.As(err, &de) && strings.Contains(err.Error(), "multi-statement") {
				return ErrSeveral
			}
			return &QueryFailed{results.QueryError(err)}
		}
		defer st.Close()
		ds, ok := st.(*duckdb.Stmt)
		if !ok {
			return fmt.Errorf("duckdb statement is a %T", st)
		}
		sh, err = shapeOf(ds)
		return err
	})
	return sh, err
}

// shapeOf is a prepared statement's shape.
func shapeOf(ds *duckdb.Stmt) (sh shape, err error) {
	if sh.kind, err = ds.StatementType(); err != nil {
		return sh, err
	}
	n, err := ds.ColumnCount()
	if err != nil {
		return sh, err
	}
	for i := 0; i < n; i++ {
		name, err := ds.ColumnName(i)
		if err != nil {
			return sh, err
		}
		// A type duckdb-go cannot describe is left to DuckDB's own
		// writers (nil); the table format still renders it as text.
		var t duckdb.TypeInfo
		if ti, err := ds.ColumnTypeInfo(i); err == nil {
			t = ti
		}
		sh.cols = append(sh.cols, name)
		sh.types = append(sh.types, t)
	}
	return sh, nil
}

// describeLast is describe for a statement DuckDB parses into several
// (a PIVOT over the data's values): it runs all but the last, as
// duckdb-go's PrepareContext does, and returns the last one's shape.
func describeLast(ctx context.Context, conn *sql.Conn, stmt string) (sh shape, err error) {
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("duckdb connection is a %T", dc)
		}
		st, err := c.PrepareContext(ctx, stmt)
		if err != nil {
			return &QueryFailed{results.QueryError(err)}
		}
		defer st.Close()
		sh, err = shapeOf(st.(*duckdb.Stmt))
		return err
	})
	return sh, err
}

// readBack returns the queries that give the rows of stmt (of shape sh),
// in order, in bounded memory, each selecting the columns as ex says:
// duckdb-go materializes a whole result before its first row,
// so a query's rows first go into table forklab_result.r of a temporary
// on-disk DuckDB database in dir — CREATE TABLE AS streams into storage,
// keeping the query's order and DuckDB's types — read back a row group at
// a time by rowid. A statement that is not a query, or whose columns
// cannot be a table's (a repeated name, a column named rowid), or that
// CREATE TABLE AS does not take (DESCRIBE, SHOW, PRAGMA), is read directly
// (wrapped to select exact when it can be a subquery). done detaches and
// removes the temporary database.
func readBack(ctx context.Context, conn *sql.Conn, stmt string, sh shape, ex exact, dir string) (queries []string, done func(), err error) {
	done = func() {}
	direct := func() ([]string, func(), error) {
		if !ex.none() && sh.query() {
			// Statements that cannot be a subquery (PRAGMA) are read as
			// they are.
			wrapped := ex.query("(\n"+stmt+"\n) AS forklab_q", "")
			if _, err := describe(ctx, conn, wrapped); err == nil {
				return []string{wrapped}, func() {}, nil
			}
		}
		return []string{stmt}, func() {}, nil
	}
	if !sh.query() || !tableable(sh.cols) {
		return direct()
	}
	db := filepath.Join(dir, "result.duckdb")
	if _, err := conn.ExecContext(ctx, "ATTACH "+quote(db)+" AS forklab_result (STORAGE_VERSION 'latest')"); err != nil {
		return nil, done, fmt.Errorf("temporary database: %w", results.QueryError(err))
	}
	done = func() {
		conn.ExecContext(context.WithoutCancel(ctx), "DETACH forklab_result")
		duck.RemoveFiles(db)
	}
	if _, err := conn.ExecContext(ctx, "CREATE TABLE forklab_result.r AS (\n"+stmt+"\n)"); err != nil {
		done()
		if err = results.QueryError(err); strings.HasPrefix(err.Error(), "Parser Error") {
			// A query that CREATE TABLE AS does not take (DESCRIBE, SHOW,
			// PRAGMA): small results, read directly.
			return direct()
		}
		return nil, func() {}, &QueryFailed{err}
	}
	// Row ids count from 0, or, inside a transaction the query opened
	// (BEGIN), from where DuckDB numbers rows not yet committed.
	var n, base int64
	if err := conn.QueryRowContext(ctx, "SELECT count(*), coalesce(min(rowid), 0) FROM forklab_result.r").Scan(&n, &base); err != nil {
		done()
		return nil, func() {}, results.QueryError(err)
	}
	for off := int64(0); off < n || off == 0; off += spillSlice {
		queries = append(queries, ex.query("forklab_result.r", fmt.Sprintf("rowid >= %d AND rowid < %d", base+off, base+off+spillSlice)))
	}
	return queries, done, nil
}

// tableable reports whether columns can be those of a table.
func tableable(cols []string) bool {
	seen := map[string]bool{}
	for _, c := range cols {
		c = strings.ToLower(c)
		if seen[c] || c == "rowid" {
			return false
		}
		seen[c] = true
	}
	return true
}
