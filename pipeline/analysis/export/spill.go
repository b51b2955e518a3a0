package export

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"github.com/forklab/forklab/queries"
	"os"
	"path/filepath"
	"strings"

	"github.com/duckdb/duckdb-go/v2"
	"github.com/forklab/forklab/pipeline/analysis/results"
)

// spillSlice is the number of rows read back at a time: one DuckDB row
// group.
const spillSlice = 122880

// runAllButLast runs every statement of text but the last and returns the
// last.
func runAllButLast(ctx context.Context, conn *sql.Conn, text string) (string, error) {
	stmts := queries.Split(text)
	for _, s := range stmts[:len(stmts)-1] {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return "", &QueryFailed{results.QueryError(err)}
		}
	}
	return stmts[len(stmts)-1], nil
}

// describe prepares stmt (DuckDB's syntax and binder errors come back with
// their position in stmt) and reports whether it is a query (a statement
// COPY and CREATE TABLE AS take: SELECT, WITH, FROM, VALUES, …) and its
// column names.
func describe(ctx context.Context, conn *sql.Conn, stmt string) (query bool, cols []string, err error) {
	err = conn.Raw(func(dc any) error {
		p, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("duckdb connection %T cannot prepare", dc)
		}
		st, err := p.PrepareContext(ctx, stmt)
		if err != nil {
			return &QueryFailed{results.QueryError(err)}
		}
		defer st.Close()
		ds, ok := st.(*duckdb.Stmt)
		if !ok {
			return fmt.Errorf("duckdb statement is a %T", st)
		}
		t, err := ds.StatementType()
		if err != nil {
			return err
		}
		query = t == duckdb.STATEMENT_TYPE_SELECT
		n, err := ds.ColumnCount()
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			name, err := ds.ColumnName(i)
			if err != nil {
				return err
			}
			cols = append(cols, name)
		}
		return nil
	})
	return query, cols, err
}

// readBack returns the queries that give the rows of stmt, in order, in
// bounded memory: duckdb-go materializes a whole result before its first
// row, so a query's rows first go into table forklab_result.r of a
// temporary on-disk DuckDB database in tmpDir ("" is the system's
// temporary folder) — CREATE TABLE AS streams into storage, keeping the
// query's order and DuckDB's types — read back a row group at a time by
// rowid. A statement that is not a query, or whose columns cannot be a
// table's (a repeated name, a column named rowid), or that CREATE TABLE AS
// does not take (DESCRIBE, SHOW, PRAGMA), is returned as it is.
// done detaches and removes the temporary database.
func readBack(ctx context.Context, conn *sql.Conn, stmt, tmpDir string) (queries []string, done func(), err error) {
	done = func() {}
	query, cols, err := describe(ctx, conn, stmt)
	if err != nil {
		return nil, done, err
	}
	if !query || !tableable(cols) {
		return []string{stmt}, done, nil
	}
	dir, err := os.MkdirTemp(tmpDir, ".forklab-result-")
	if err != nil {
		return nil, done, fmt.Errorf("temporary database: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "ATTACH "+quote(filepath.Join(dir, "result.duckdb"))+" AS forklab_result"); err != nil {
		os.RemoveAll(dir)
		return nil, done, fmt.Errorf("temporary database: %w", results.QueryError(err))
	}
	done = func() {
		conn.ExecContext(context.WithoutCancel(ctx), "DETACH forklab_result")
		os.RemoveAll(dir)
	}
	if _, err := conn.ExecContext(ctx, "CREATE TABLE forklab_result.r AS (\n"+stmt+"\n)"); err != nil {
		done()
		if err = results.QueryError(err); strings.HasPrefix(err.Error(), "Parser Error") {
			// A query that CREATE TABLE AS does not take (DESCRIBE, SHOW,
			// PRAGMA): small results, read directly.
			return []string{stmt}, func() {}, nil
		}
		return nil, func() {}, &QueryFailed{err}
	}
	var n int64
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM forklab_result.r").Scan(&n); err != nil {
		done()
		return nil, func() {}, results.QueryError(err)
	}
	for off := int64(0); off < n || off == 0; off += spillSlice {
		queries = append(queries, fmt.Sprintf("SELECT * FROM forklab_result.r WHERE rowid >= %d AND rowid < %d", off, off+spillSlice))
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
