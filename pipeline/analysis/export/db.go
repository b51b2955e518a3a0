package export

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/queries"
)

// DBName is the DuckDB database WriteDB writes into a results directory.
const DBName = "results.duckdb"

// EventsDir is the folder of session-event Parquet files (written by
// forklab log export) that WriteDB exposes as the view events.
const EventsDir = "events"

// DBInfo says what WriteDB wrote.
type DBInfo struct {
	// Path is the database file.
	Path string
	// Views are the views forklab defines in it, in creation order.
	Views []string
	// Macros are the statistics macros of queries/stats.sql.
	Macros []string
	// Events reports whether the events view exists (DIR/events/ holds
	// Parquet files).
	Events bool
}

// WriteDB creates DIR/results.duckdb, or refreshes the one there, so that
// BI tools and the duckdb CLI can query the results directory DIR:
//
//   - the views of queries.ViewDefs, generated from the world's
//     declaration in the manifest: configs, params, tasks, checkpoints,
//     branches, pairs (with the configuration's parameters as columns)
//     over the Parquet folders, features and hidden (long),
//     feature_catalog, and the helpers the report's queries read
//     (pair_groups, pair_cells, feature_bins, feature_buckets);
//   - view manifest over manifest.json (one row: the spec, configurations,
//     row counts);
//   - the report tables as views (ReportViews), computed when queried;
//     session_events joins pairs with their events;
//   - the statistics macros of queries/stats.sql (wilson_lo, mcnemar_p,
//     newcombe_lo, …);
//   - view events over the session events forklab log export wrote
//     (events/**/*.parquet) and those forklab log sink writes
//     (sink/event_date=*/*.parquet, Hive-partitioned), when any exist
//     (results.EventsView); a rerun adds it once they do, and drops it if
//     the files are gone. The sink's new files show in the view as they
//     come, without a rerun.
//
// The database holds no data, only definitions, with paths relative to
// DIR: DuckDB resolves them against its working directory or its
// file_search_path setting, so `cd DIR && duckdb results.duckdb` works
// wherever DIR has been moved (see docs/bi.md).
//
// A rerun replaces forklab's own views and macros in one transaction and
// keeps whatever else a user stored in the file. Errors: DIR not a
// finished results directory (wraps sweep.ErrNotResults); the file held
// open by another program (DuckDB's lock error, with what to do); a file
// that is not a DuckDB database.
func WriteDB(ctx context.Context, dir string) (DBInfo, error) {
	m, err := sweep.ReadManifest(dir)
	if err != nil {
		return DBInfo{}, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return DBInfo{}, err
	}
	info := DBInfo{Path: filepath.Join(dir, DBName)}
	db, err := sql.Open("duckdb", filepath.Join(abs, DBName))
	if err == nil {
		err = db.PingContext(ctx)
	}
	if err != nil {
		if db != nil {
			db.Close()
		}
		return DBInfo{}, openError(info.Path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	eventsView, events, err := results.EventsView(dir)
	if err != nil {
		return DBInfo{}, err
	}
	var stmts []string
	add := func(s string) { stmts = append(stmts, s) }
	add("SET file_search_path = " + quote(abs))
	add("BEGIN TRANSACTION")
	views, err := queries.ViewDefs(m.Declaration)
	if err != nil {
		return DBInfo{}, fmt.Errorf("%s: the world declared in %s: %v: %w", dir, sweep.ManifestName, err, sweep.ErrNotResults)
	}
	viewComments := map[string]string{}
	for _, v := range views {
		add("CREATE OR REPLACE VIEW " + v.Name + " AS\n" + v.Select)
		info.Views = append(info.Views, v.Name)
		viewComments[v.Name] = v.Comment
	}
	for _, s := range queries.Split(queries.MustGet("stats")) {
		add(s)
		info.Macros = append(info.Macros, createdName(s))
	}
	add(`CREATE OR REPLACE VIEW manifest AS SELECT * FROM read_json('manifest.json')`)
	info.Views = append(info.Views, "manifest")
	if events {
		add(eventsView)
		info.Views = append(info.Views, "events")
		info.Events = true
	} else {
		for _, name := range queries.Names() {
			if text := queries.MustGet(name); len(queries.Split(text)) == 1 && queries.ReadsEvents(text) {
				add("DROP VIEW IF EXISTS " + name)
			}
		}
		add("DROP VIEW IF EXISTS events")
	}
	for _, name := range queries.ReportViews(events) {
		text := queries.MustGet(name)
		add("CREATE OR REPLACE VIEW " + name + " AS\n" + queries.Split(text)[0])
		info.Views = append(info.Views, name)
	}
	comments := map[string]string{
		"manifest": "the sweep's manifest.json: spec, configurations, row counts, version (one row)",
		"events":   "session events written by forklab log export and forklab log sink, one row per event",
	}
	for name, c := range viewComments {
		comments[name] = c
	}
	for _, name := range queries.ReportViews(events) {
		comments[name] = Question(queries.MustGet(name)) + " (queries/" + name + ".sql)"
	}
	for _, v := range info.Views {
		add("COMMENT ON VIEW " + v + " IS " + quote(comments[v]+". Paths are relative to the results directory: run duckdb from it, or SET file_search_path to it."))
	}
	add("COMMIT")
	add("CHECKPOINT")
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			db.ExecContext(ctx, "ROLLBACK")
			return DBInfo{}, fmt.Errorf("write %s: %s: %w", info.Path, firstLine(s), results.QueryError(err))
		}
	}
	return info, nil
}

// Question returns the question a query file's header comment asks: its
// first comment paragraph, joined into one line.
func Question(text string) string {
	var words []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "--") {
			break
		}
		line = strings.TrimSpace(strings.TrimPrefix(line, "--"))
		if line == "" {
			break
		}
		words = append(words, line)
	}
	return strings.TrimSuffix(strings.Join(words, " "), ".")
}

// createdName is the object a CREATE [OR REPLACE] VIEW|MACRO statement
// creates.
func createdName(stmt string) string {
	f := strings.Fields(stmt[strings.Index(stmt, "CREATE "):])
	for i, w := range f {
		if (w == "VIEW" || w == "MACRO") && i+1 < len(f) {
			name, _, _ := strings.Cut(f[i+1], "(")
			return name
		}
	}
	return ""
}

func openError(path string, err error) error {
	err = results.QueryError(err)
	msg := err.Error()
	switch {
	case strings.Contains(msg, "lock"):
		return fmt.Errorf("open %s: %w; another program has it open: close it (or its connection) and rerun", path, err)
	case strings.Contains(msg, "not a valid DuckDB database"), strings.Contains(msg, "version"):
		return fmt.Errorf("open %s: %w; forklab rebuilds this file from the results directory: remove it and rerun", path, err)
	}
	return fmt.Errorf("open %s: %w", path, err)
}

func firstLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "--") {
			if len(line) > 60 {
				line = line[:60] + "…"
			}
			return line
		}
	}
	return ""
}
