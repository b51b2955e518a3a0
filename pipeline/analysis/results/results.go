// Package results opens a finished results directory in an in-process
// DuckDB and runs the embedded queries (package queries) over its Parquet
// tables. Paths in the views are relative to the directory, resolved through
// DuckDB's file_search_path, so the same SQL runs from the duckdb CLI
// started in the directory.
package results

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/big"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/queries"
)

// DB is a results directory opened for queries. It is safe for use by one
// goroutine at a time.
type DB struct {
	Dir      string
	Manifest sweep.Manifest
	db       *sql.DB
	events   bool // the directory has session events (exported or sunk)
}

// Open checks that dir is a finished results directory (it has a manifest;
// the error wraps sweep.ErrNotResults if not) and opens it, with the views of
// queries/views.sql, the macros of queries/stats.sql and, when session
// events were exported or sunk into it, the view events (EventsView). The
// database is in memory and sandboxed (duck.Lock): SQL run on it reads only
// dir, writes no file, and cannot change a setting.
func Open(ctx context.Context, dir string) (*DB, error) {
	return OpenSandboxed(ctx, dir, duck.Sandbox{})
}

// OpenSandboxed is Open with a wider sandbox: sb's directories and files
// (forklab sql's output and scratch files, its --allow-path), external
// access, extensions and settings, besides dir itself.
func OpenSandboxed(ctx context.Context, dir string, sb duck.Sandbox) (*DB, error) {
	m, err := sweep.ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := checkFiles(abs, m); err != nil {
		return nil, err
	}
	db, err := duck.Open("")
	if err != nil {
		return nil, fmt.Errorf("open duckdb: %w", err)
	}
	r := &DB{Dir: dir, Manifest: m, db: db}
	if _, err := db.ExecContext(ctx, "SET file_search_path = "+quote(abs)); err != nil {
		db.Close()
		return nil, fmt.Errorf("set file_search_path: %w", err)
	}
	for _, setup := range []string{"views", "stats"} {
		if _, err := db.ExecContext(ctx, AbsPaths(queries.MustGet(setup), abs)); err != nil {
			db.Close()
			return nil, fmt.Errorf("%s: queries/%s.sql: %w", dir, setup, QueryError(err))
		}
	}
	view, events, err := EventsView(abs)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if events {
		if _, err := db.ExecContext(ctx, AbsPaths(view, abs)); err != nil {
			db.Close()
			return nil, fmt.Errorf("%s: events view: %w", dir, QueryError(err))
		}
	}
	r.events = events
	sb.Dirs = append([]string{abs}, sb.Dirs...)
	if err := duck.Lock(ctx, db, sb); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return r, nil
}

// fileArg is a relative path given to one of DuckDB's file readers.
var fileArg = regexp.MustCompile(`(?i)\b(read_(?:parquet|json|json_auto|ndjson|csv|csv_auto|text|blob)\s*\(\s*)'([^'/][^']*)'`)

// AbsPaths returns SQL text with the relative paths its file readers
// (read_parquet('pairs/…'), read_json, …) take made absolute under dir.
// The sandbox (duck.Lock) checks a path before DuckDB resolves it against
// file_search_path, so the views forklab runs in process read absolute
// paths; the text of queries/ keeps relative ones, for the duckdb CLI and
// results.duckdb.
func AbsPaths(text, dir string) string {
	prefix := strings.ReplaceAll(strings.TrimSuffix(dir, "/")+"/", "'", "''")
	return fileArg.ReplaceAllString(text, "${1}'"+strings.ReplaceAll(prefix, "$", "$$")+"${2}'")
}

// AddReportViews defines every report query as a view named as its file
// (queries.ReportViews), as results.duckdb has them, for ad hoc SQL (forklab
// sql). Binding them takes a few tens of milliseconds, so Open leaves it out.
func (r *DB) AddReportViews(ctx context.Context) error {
	for _, name := range queries.ReportViews(r.events) {
		text := queries.Split(queries.MustGet(name))[0]
		if _, err := r.db.ExecContext(ctx, "CREATE OR REPLACE VIEW "+name+" AS\n"+text); err != nil {
			return fmt.Errorf("%s: queries/%s.sql: %w", r.Dir, name, QueryError(err))
		}
	}
	return nil
}

// checkFiles checks dir against its manifest (sweep.Verify, without
// reading every file): an edited manifest, a file added, removed or
// resized since the sweep would change every number.
func checkFiles(dir string, m sweep.Manifest) error { return sweep.Verify(dir, m, false) }

// Close releases the database.
func (r *DB) Close() error { return r.db.Close() }

// SQL returns the underlying database handle, limited to one connection.
func (r *DB) SQL() *sql.DB { return r.db }

// Table is a fully read query result: column names and rows of Go values as
// the duckdb driver returns them.
type Table struct {
	Columns []string
	Rows    [][]any
}

// Query runs SQL text (one or more statements; the last one's rows are
// returned) and reads every row.
func (r *DB) Query(ctx context.Context, text string) (*Table, error) {
	rows, err := r.db.QueryContext(ctx, text)
	if err != nil {
		return nil, QueryError(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	t := &Table{Columns: cols}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		t.Rows = append(t.Rows, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, QueryError(err)
	}
	return t, nil
}

// Run runs the embedded query file name (e.g. "summary").
func (r *DB) Run(ctx context.Context, name string) (*Table, error) {
	text, err := queries.Get(name)
	if err != nil {
		return nil, err
	}
	t, err := r.Query(ctx, text)
	if err != nil {
		return nil, fmt.Errorf("queries/%s.sql: %w", strings.TrimSuffix(name, ".sql"), err)
	}
	return t, nil
}

// QueryError returns DuckDB's own message for a failed query (which names
// the error type and, for parser and binder errors, the position), without
// the driver's wrapping.
func QueryError(err error) error { return duck.Message(err) }

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Row is a result row addressed by column name.
type Row map[string]any

// Records returns t's rows addressed by column name; nil for a nil table.
func (t *Table) Records() []Row {
	if t == nil {
		return nil
	}
	out := make([]Row, len(t.Rows))
	for i, r := range t.Rows {
		out[i] = Row{}
		for j, c := range t.Columns {
			out[i][c] = r[j]
		}
	}
	return out
}

// Int returns column c as an integer (see Int).
func (r Row) Int(c string) int64 { return Int(r[c]) }

// Float returns column c as a float (see Float).
func (r Row) Float(c string) float64 { return Float(r[c]) }

// Str returns column c as text.
func (r Row) Str(c string) string { return fmt.Sprint(r[c]) }

// Float reads any numeric value the duckdb driver returns: integers of any
// width, floats, HUGEINT (a *big.Int, as sum() of BIGINT gives) and DECIMAL
// (a fmt.Stringer); 0 for anything else.
func Float(v any) float64 {
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

// Int reads an integer column value: exact for integer types, rounded for
// floats, 0 for anything else.
func Int(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	case int:
		return int64(x)
	case *big.Int:
		return x.Int64()
	}
	return int64(math.Round(Float(v)))
}
