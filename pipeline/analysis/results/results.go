// Package results opens a finished results directory in an in-process
// DuckDB and runs the embedded queries (package queries) over its Parquet
// tables. The views are generated from the world's declaration the
// manifest carries (queries.Views), so the same queries read any world;
// each is created when a query first names it, so that a query binds only
// the views it reads.
// Paths in the views are relative to the directory, resolved through
// DuckDB's file_search_path, so the same SQL runs in any DuckDB session
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
	"slices"
	"strconv"
	"strings"
	"time"

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
	// holdout is the held-out share pair_cells was materialised with
	// (Materialize); 0 when the views are live.
	holdout float64
	abs     string // Dir, absolute
	// files are the files SQL on the database may read, relative to abs
	// (slash-separated): the manifest's table files and the session
	// events found when it was opened. The views read them by name.
	files []string
	// materializing is set while Materialize replaces the views of
	// Materialized by tables.
	materializing bool
	// views are the views of queries.ViewDefs, created when a query first
	// names them (ensure).
	views []lazyView
	// macros: the macros of queries/stats.sql exist, created with the
	// first view or for the first query that calls one (ensureMacros).
	macros bool
	// Trace, when set, is told the wall time of every step Open, Materialize
	// and Run take (forklab report --timing): what is the step's name
	// ("open: views", "materialize: pair_groups", "queries/slices.sql").
	Trace func(what string, d time.Duration)
}

type traceKey struct{}

// WithTrace returns ctx carrying fn as the Trace of the databases Open
// opens with it, so that opening is traced too ("open: …" steps).
func WithTrace(ctx context.Context, fn func(what string, d time.Duration)) context.Context {
	return context.WithValue(ctx, traceKey{}, fn)
}

// trace reports what took since start to r.Trace, if set.
func (r *DB) trace(what string, start time.Time) {
	if r.Trace != nil {
		r.Trace(what, time.Since(start))
	}
}

// Open checks that dir is a finished results directory (it has a manifest;
// the error wraps sweep.ErrNotResults if not) and opens it, with the views
// generated from its world's declaration (queries.ViewDefs; each is
// created when a query first names it, see ensure), the macros of
// queries/stats.sql (created with the first view or the first query that
// calls one) and, when session events were exported or sunk into
// it, the view events (EventsView). The database is in memory and
// sandboxed (duck.Lock): SQL run on it reads only dir's table and event
// files, writes no file, and cannot change a setting.
func Open(ctx context.Context, dir string) (*DB, error) {
	return OpenSandboxed(ctx, dir, duck.Sandbox{})
}

// OpenSandboxed is Open with a wider sandbox: sb's directories and files
// (forklab sql's output and scratch files, its --allow-path), external
// access, extensions and settings, besides dir's files.
//
// The sandbox grants dir's files one by one (DuckDB's allowed_paths), never
// dir itself: a directory DuckDB may read it may also write, and a
// statement that only reads by DuckDB's own parse can still write files
// where the sandbox reaches (CALL enable_logging(storage = 'file', …)
// writes CSV files into any directory it is given). So no statement can
// create, replace or remove a file in dir; the views read the granted
// files by name (ReadFiles), and the checksums of the table files are
// checked first (sweep.VerifyContent).
func OpenSandboxed(ctx context.Context, dir string, sb duck.Sandbox) (*DB, error) {
	r := &DB{Dir: dir}
	r.Trace, _ = ctx.Value(traceKey{}).(func(string, time.Duration))
	start := time.Now()
	m, err := sweep.ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	if err := duck.CheckDir("results directory", dir); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	r.trace("open: manifest", start)
	start = time.Now()
	if err := checkFiles(abs, m); err != nil {
		return nil, err
	}
	files, err := eventFiles(abs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	for _, f := range m.Files {
		files = append(files, f.Path)
	}
	r.files = files
	r.trace("open: check files", start)
	start = time.Now()
	defs, err := queries.ViewDefs(m.Declaration)
	if err != nil {
		return nil, fmt.Errorf("%s: the world declared in %s: %v: %w", dir, sweep.ManifestName, err, sweep.ErrNotResults)
	}
	db, err := duck.Open("")
	if err != nil {
		return nil, fmt.Errorf("open duckdb: %w", err)
	}
	r.Manifest, r.db, r.abs = m, db, abs
	r.views = lazyViews(defs)
	if _, err := db.ExecContext(ctx, "SET file_search_path = "+quote(abs)); err != nil {
		db.Close()
		return nil, fmt.Errorf("set file_search_path: %w", err)
	}
	// Every query that reads a view over the files binds it again, and with
	// union_by_name that reads every file's footer: keep them (DuckDB checks
	// a file's modification time before it reuses one).
	if _, err := db.ExecContext(ctx, "SET parquet_metadata_cache = true"); err != nil {
		db.Close()
		return nil, fmt.Errorf("set parquet_metadata_cache: %w", err)
	}
	r.trace("open: duckdb", start)
	view, events, err := EventsView(abs)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if events {
		if _, err := db.ExecContext(ctx, ReadFiles(view, abs, files)); err != nil {
			db.Close()
			return nil, fmt.Errorf("%s: events view: %w", dir, QueryError(err))
		}
	}
	r.events = events
	for _, f := range files {
		sb.Files = append(sb.Files, filepath.Join(abs, filepath.FromSlash(f)))
	}
	start = time.Now()
	err = duck.Lock(ctx, db, sb)
	r.trace("open: lock", start)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	// The report's questions as views too (created when named), so that
	// a query file may read another's: summary_by_config reads summary.
	if err := r.AddReportViews(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return r, nil
}

// Materialized lists the views Materialize computes once, in order: the
// one pass over the pairs (pair_groups) and what every report query reads
// from it (score_counts and score_cells are empty for a pass/fail world).
var Materialized = []string{"pair_groups", "pair_counts", "feature_values", "feature_bins", "pair_cells", "score_counts", "score_cells"}

// Materialize reads the pairs once, with holdout as the held-out share of
// the split (in (0, 1)), and keeps pair_groups, pair_counts (from
// pair_groups), feature_values, feature_bins and pair_cells as temporary
// tables that shadow their views for the rest of the connection: the report's queries then read a table
// of a few hundred rows instead of every pair. Calling it again with the
// same holdout does nothing; another holdout recomputes them.
func (r *DB) Materialize(ctx context.Context, holdout float64) error {
	if r.holdout == holdout {
		return nil
	}
	if !(holdout > 0 && holdout < 1) {
		return fmt.Errorf("holdout %v: want a share strictly between 0 and 1", holdout)
	}
	// Which int features are narrow decides how the pass groups them:
	// asked first, it lets the pass group their integers as they are.
	narrow := map[string]bool{}
	start := time.Now()
	t, err := r.Query(ctx, "SELECT c.feature FROM feature_ranges AS r JOIN feature_catalog AS c USING (feature_order) WHERE r.small")
	r.trace("materialize: feature_ranges", start)
	if err != nil {
		return fmt.Errorf("%s: feature_ranges: %w", r.Dir, err)
	}
	for _, row := range t.Rows {
		narrow[fmt.Sprint(row[0])] = true
	}
	groups, err := queries.PairGroups(r.Manifest.Declaration, narrow)
	if err != nil {
		return err
	}
	stmts := []string{fmt.Sprintf("SET VARIABLE holdout = %s", strconv.FormatFloat(holdout, 'g', -1, 64))}
	for _, v := range Materialized {
		stmts = append(stmts, "DROP TABLE IF EXISTS temp."+v)
	}
	for _, v := range Materialized {
		switch v {
		case "pair_groups":
			stmts = append(stmts, "CREATE TEMP TABLE pair_groups AS\n"+groups)
			continue
		case "pair_counts":
			stmts = append(stmts, "CREATE TEMP TABLE pair_counts AS\n"+queries.PairCounts("pair_groups", "sum(n)"))
			continue
		case "score_counts":
			stmts = append(stmts, "CREATE TEMP TABLE score_counts AS\n"+queries.ScoreCounts(r.Manifest.Declaration, "pair_groups", "sum(n)"))
			continue
		}
		// The view's own query, which reads the tables made before it.
		for _, lv := range r.views {
			if lv.Name == v {
				stmts = append(stmts, "CREATE TEMP TABLE "+v+" AS\n"+lv.Select)
			}
		}
	}
	r.materializing = true
	defer func() { r.materializing = false }()
	for _, s := range stmts {
		if err := r.ensure(ctx, s); err != nil {
			r.holdout = 0
			return err
		}
		start := time.Now()
		_, err := r.db.ExecContext(ctx, s)
		r.trace("materialize: "+strings.SplitN(s, "\n", 2)[0], start)
		if err != nil {
			r.holdout = 0
			return fmt.Errorf("%s: %s: %w", r.Dir, s, QueryError(err))
		}
	}
	r.holdout = holdout
	return nil
}

// AddReportViews adds every report query as a view named as its file
// (queries.ReportViews), as results.duckdb has them, for ad hoc SQL (forklab
// sql). Like the others, each is created when a query first names it
// (ensure): binding them all takes a few hundred milliseconds.
func (r *DB) AddReportViews(ctx context.Context) error {
	defs := make([]queries.View, 0, len(r.views))
	for _, v := range r.views {
		defs = append(defs, v.View)
	}
	for _, name := range queries.ReportViews(r.events) {
		if slices.ContainsFunc(defs, func(v queries.View) bool { return v.Name == name }) {
			continue
		}
		defs = append(defs, queries.View{Name: name, Select: queries.Split(queries.MustGet(name))[0]})
	}
	views := lazyViews(defs)
	for i := range r.views {
		views[i].created = r.views[i].created
	}
	r.views = views
	return nil
}

// everyView matches what needs every view to exist: the table functions
// that run SQL text built at run time, where a view's name need not appear
// in the query's own text, and the catalog's listings (SHOW TABLES,
// duckdb_views(), information_schema, …).
var everyView = regexp.MustCompile(`(?i)\bquery(?:_table)?\s*\(|\bSHOW\s+(?:ALL\s+)?TABLES\b|\bshow_tables|\bduckdb_(?:views|tables|columns|dependencies)\b|\binformation_schema\b|\bpg_catalog\b|\bsqlite_master\b|\bpg_(?:views|tables|class)\b`)

// SQLFor creates the views SQL text names (ensure; a name inside a string,
// as in PRAGMA table_info('pairs'), counts too), and the views they read,
// and returns the database handle to run text on: a query binds only the
// views it reads (forklab sql "SELECT 1" binds none). Text that builds SQL
// at run time (query(…), query_table(…)) or lists the catalog (SHOW
// TABLES, duckdb_views(), information_schema) gets every view.
func (r *DB) SQLFor(ctx context.Context, text string) (*sql.DB, error) {
	text = strings.ReplaceAll(text, "'", " ")
	var err error
	if everyView.MatchString(stripComments(text)) {
		err = r.ensureAll(ctx)
	} else {
		err = r.ensure(ctx, text)
	}
	return r.db, err
}

// checkFiles checks dir against its manifest: an edited manifest, a file
// added, removed, resized (sweep.Verify) or changed (sweep.VerifyContent,
// every file's CRC-32C) since the sweep would change every number.
func checkFiles(dir string, m sweep.Manifest) error {
	if err := sweep.Verify(dir, m, false); err != nil {
		return err
	}
	return sweep.VerifyContent(dir, m)
}

// Close releases the database.
func (r *DB) Close() error { return r.db.Close() }

// SQL returns the underlying database handle, limited to one connection.
// Every view is created first (CreateViews); one that fails to bind is
// left out, and a query naming it fails with DuckDB's error.
func (r *DB) SQL() *sql.DB {
	_ = r.CreateViews(context.Background())
	return r.db
}

// CreateViews creates every view of queries.ViewDefs not created yet (Open
// creates none: Query, Run and Exec create those their SQL names). It
// fails if one does not bind, naming it.
func (r *DB) CreateViews(ctx context.Context) error { return r.ensureAll(ctx) }

// Exec runs SQL statements for their effect (SET VARIABLE, …), creating
// the views they name first.
func (r *DB) Exec(ctx context.Context, text string) error {
	if err := r.ensure(ctx, text); err != nil {
		return err
	}
	if _, err := r.db.ExecContext(ctx, text); err != nil {
		return QueryError(err)
	}
	return nil
}

// Table is a fully read query result: column names and rows of Go values as
// the duckdb driver returns them.
type Table struct {
	Columns []string
	Rows    [][]any
}

// Query runs SQL text (one or more statements; the last one's rows are
// returned) and reads every row.
func (r *DB) Query(ctx context.Context, text string) (*Table, error) {
	if err := r.ensure(ctx, text); err != nil {
		return nil, err
	}
	rows, err := r.db.QueryContext(ctx, text)
	if err != nil {
		return nil, QueryError(err)
	}
	cols, vals, err := duck.ScanAll(rows)
	if err != nil {
		return nil, QueryError(err)
	}
	return &Table{Columns: cols, Rows: vals}, nil
}

// Run runs the embedded query file name (e.g. "summary").
func (r *DB) Run(ctx context.Context, name string) (*Table, error) {
	text, err := queries.Get(name)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	t, err := r.Query(ctx, text)
	r.trace("queries/"+strings.TrimSuffix(name, ".sql")+".sql", start)
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

// lazyView is one view of queries.ViewDefs and the earlier views its query
// names.
type lazyView struct {
	queries.View
	deps    []int          // indexes of the views its query names
	name    *regexp.Regexp // its name as a word
	main    *regexp.Regexp // main.name: the view, not a table shadowing it
	created bool
}

// lazyViews indexes defs (in creation order) by the views each one's
// query names.
func lazyViews(defs []queries.View) []lazyView {
	vs := make([]lazyView, len(defs))
	for i, d := range defs {
		vs[i] = lazyView{View: d, name: regexp.MustCompile(`(?i)\b` + regexp.QuoteMeta(d.Name) + `\b`),
			main: regexp.MustCompile(`(?i)\bmain\s*\.\s*` + regexp.QuoteMeta(d.Name) + `\b`)}
		text := stripComments(d.Select)
		for j := range i {
			if vs[j].name.MatchString(text) {
				vs[i].deps = append(vs[i].deps, j)
			}
		}
	}
	return vs
}

// ensure creates the views text names, and the views they read, that do
// not exist yet. Binding a view over the Parquet folders reads every
// file's footer, and the analysis views are long queries: Open creates
// none, so that a query pays only for the views it reads (the summary of
// a sweep binds pair_groups and pair_rows, not the twelve others). A view
// a name could only reach through text built at run time would not be
// created: every caller that hands SQL on (SQL, AddReportViews) creates
// them all first.
func (r *DB) ensure(ctx context.Context, text string) error {
	need := make([]bool, len(r.views))
	any := false
	text = stripComments(text)
	if macroCall.MatchString(text) {
		if err := r.ensureMacros(ctx); err != nil {
			return err
		}
	}
	for i := len(r.views) - 1; i >= 0; i-- {
		v := &r.views[i]
		if v.created || (r.materialized(v.Name) && !v.main.MatchString(text)) {
			// A table shadows it, unless the text asks for the view.
			need[i] = false
			continue
		}
		if !need[i] && !v.name.MatchString(text) {
			continue
		}
		need[i], any = true, true
		for _, j := range v.deps {
			need[j] = true
		}
	}
	if !any {
		return nil
	}
	return r.create(ctx, need)
}

// ensureAll creates every view not created yet.
func (r *DB) ensureAll(ctx context.Context) error {
	need := make([]bool, len(r.views))
	for i := range need {
		need[i] = !r.views[i].created
	}
	return r.create(ctx, need)
}

// macroCall matches a call of a macro of queries/stats.sql.
var macroCall = func() *regexp.Regexp {
	var names []string
	for _, m := range queries.Macros() {
		names = append(names, m.Name)
	}
	return regexp.MustCompile(`(?i)\b(?:` + strings.Join(names, "|") + `)\s*\(`)
}()

// ensureMacros creates the macros of queries/stats.sql unless they exist:
// the views call them, and so may any query. Open leaves them out, so that
// a query that calls none (forklab sql "SELECT 1") does not pay for them.
func (r *DB) ensureMacros(ctx context.Context) error {
	if r.macros {
		return nil
	}
	start := time.Now()
	if _, err := r.db.ExecContext(ctx, queries.MustGet("stats")); err != nil {
		return fmt.Errorf("%s: queries/stats.sql: %w", r.Dir, QueryError(err))
	}
	r.trace("queries/stats.sql", start)
	r.macros = true
	return nil
}

// create creates the views marked in need, in order, and the macros
// first.
func (r *DB) create(ctx context.Context, need []bool) error {
	if err := r.ensureMacros(ctx); err != nil {
		return err
	}
	for i := range r.views {
		v := &r.views[i]
		if !need[i] || v.created {
			continue
		}
		start := time.Now()
		_, err := r.db.ExecContext(ctx, "CREATE OR REPLACE VIEW main."+v.Name+" AS\n"+ReadFiles(v.Select, r.abs, r.files))
		r.trace("view: "+v.Name, start)
		if err != nil {
			return fmt.Errorf("%s: view %s (queries.Views): %w", r.Dir, v.Name, QueryError(err))
		}
		v.created = true
	}
	return nil
}

// materialized reports whether view name is shadowed by a temporary
// table (Materialize).
func (r *DB) materialized(name string) bool {
	return (r.holdout != 0 || r.materializing) && slices.Contains(Materialized, name)
}

// stripComments returns SQL text without its comments (-- to the end of
// the line, /* … */) and with its string literals emptied, so that a view
// named only in a query's header comment or in a path
// (parquet_metadata('pairs/…')) is not created. Quoted names ("…") stay.
func stripComments(text string) string {
	var b strings.Builder
	for i := 0; i < len(text); {
		switch c := text[i]; {
		case c == '\'' || c == '"':
			end := len(text)
			if j := strings.IndexByte(text[i+1:], c); j >= 0 {
				end = i + 1 + j + 1
			}
			if c == '"' {
				b.WriteString(text[i:end]) // a quoted name
			} else {
				b.WriteString("''") // a string names no view
			}
			i = end
		case strings.HasPrefix(text[i:], "--"):
			j := strings.IndexByte(text[i:], '\n')
			if j < 0 {
				return b.String()
			}
			i += j
		case strings.HasPrefix(text[i:], "/*"):
			j := strings.Index(text[i+2:], "*/")
			if j < 0 {
				return b.String()
			}
			b.WriteByte(' ')
			i += j + 4
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}
