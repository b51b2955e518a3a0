package export

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/internal/duck"
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

// WriteDB creates DIR/results.duckdb, or replaces the one there, so that
// BI tools and the duckdb CLI can query the results directory DIR:
//
//   - the views of queries.ViewDefs, generated from the world's
//     declaration in the manifest: configs, params, tasks, checkpoints,
//     branches, pairs (with the configuration's parameters as columns)
//     over the Parquet folders, features and hidden (long),
//     feature_catalog, and the helpers the report's queries read
//     (pair_groups, pair_counts, pair_cells, feature_bins,
//     feature_buckets);
//   - view manifest over manifest.json (one row: the spec, configurations,
//     row counts);
//   - the report tables as views (ReportViews), computed when queried;
//     session_events joins pairs with their events;
//   - the statistics macros of queries/stats.sql (wilson_lo, mcnemar_p,
//     newcombe_lo, …), each self-contained, so they work in a database
//     attached under any name;
//   - view events over the session events forklab log export wrote
//     (events/**/*.parquet) and those forklab log sink writes
//     (sink/event_date=*/*.parquet, Hive-partitioned), when any exist
//     (results.EventsView); a rerun adds it once they do, and drops it if
//     the files are gone. The sink's new files show in the view as they
//     come, without a rerun.
//
// The database holds no data, only definitions. Its views read DIR's files
// by DIR's absolute path, so a BI tool or the duckdb CLI opens it from any
// working directory; DuckDB's file_search_path, when set, takes the place
// of that path (dirExpr), so a moved directory is read by setting it, or
// by running forklab db there again (see docs/bi.md). Pointed at another
// results directory, those paths would find that directory's files: every
// view that reads files checks first that manifest.json is its own sweep's
// (ownSweep) and fails, naming both, if it is not.
//
// The new database is written under a temporary name beside the old one
// and renamed over it, so readers that hold the old file open (a BI tool,
// duckdb -readonly) never make a rebuild fail and keep reading the old one
// until they reopen. A rerun copies whatever else a user stored in the old
// file (tables, views, macros, …) into the new one. Errors: DIR not a
// finished results directory (wraps sweep.ErrNotResults); its files not
// those of its manifest, by size and rows (wraps sweep.ErrMismatch); the old file held
// open for writing by another program (DuckDB's lock error, with what to
// do), or not a DuckDB database; DIR taking no new file (read-only, not
// permitted: wraps atomicfile.ErrBadOutput).
func WriteDB(ctx context.Context, dir string) (DBInfo, error) {
	m, err := sweep.ReadManifest(dir)
	if err != nil {
		return DBInfo{}, err
	}
	if err := duck.CheckDir("results directory", dir); err != nil {
		return DBInfo{}, err
	}
	// A directory that does not match its manifest (a part file deleted,
	// truncated or added) is refused, as report, sql and policy refuse it:
	// its views would show BI tools partial data (sweep.ErrMismatch).
	if err := sweep.Verify(dir, m, false); err != nil {
		return DBInfo{}, err
	}
	if err := sweep.VerifyContent(dir, m); err != nil {
		return DBInfo{}, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return DBInfo{}, err
	}
	manifest, err := os.ReadFile(filepath.Join(abs, sweep.ManifestName))
	if err != nil {
		return DBInfo{}, fmt.Errorf("read manifest: %w", err)
	}
	info := DBInfo{Path: filepath.Join(dir, DBName)}
	final := filepath.Join(abs, DBName)
	// results.duckdb (and its log) must be forklab's own regular files: a
	// symbolic link or a device there is the user's, and stays.
	for _, p := range []string{final, final + ".wal"} {
		if err := atomicfile.CheckReplaceable(p); err != nil {
			return DBInfo{}, err
		}
	}
	// DuckDB creates the file itself: a temporary name beside the final
	// one, removed (with its write-ahead log) on error and on a signal.
	tmp, release, err := atomicfile.TempName(final, ".wal")
	if err != nil {
		if errors.Is(err, atomicfile.ErrInterrupted) {
			return DBInfo{}, fmt.Errorf("write %s: %w", info.Path, err)
		}
		// The directory takes no file (read-only, not permitted): the
		// user's to change, as every writer's output (exit 2).
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return DBInfo{}, fmt.Errorf("%w %s: %v", atomicfile.ErrBadOutput, info.Path, err)
	}
	defer release()

	db, err := duck.Open("")
	if err != nil {
		return DBInfo{}, err
	}
	defer db.Close()
	eventsView, events, err := results.EventsView(dir)
	if err != nil {
		return DBInfo{}, err
	}
	var stmts []string
	add := func(s string) { stmts = append(stmts, s) }
	add("ATTACH " + quote(tmp) + " AS forklab_new")
	if _, err := os.Stat(final); err == nil {
		// The user's own objects come along; forklab's are replaced below.
		if _, err := db.ExecContext(ctx, "ATTACH "+quote(final)+" AS forklab_old (READ_ONLY)"); err != nil {
			return DBInfo{}, openError(info.Path, err)
		}
		add("COPY FROM DATABASE forklab_old TO forklab_new")
		add("DETACH forklab_old")
	}
	add("USE forklab_new")
	add("SET file_search_path = " + quote(abs))
	add("BEGIN TRANSACTION")
	add(ownSweepView(manifest, abs))
	views, err := queries.ViewDefs(m.Declaration)
	if err != nil {
		return DBInfo{}, fmt.Errorf("%s: the world declared in %s: %v: %w", dir, sweep.ManifestName, err, sweep.ErrNotResults)
	}
	viewComments := map[string]string{}
	for _, v := range views {
		stmt := "CREATE OR REPLACE VIEW " + v.Name + " AS\n" + v.Select
		if v.Base {
			// Only the views that read files need the check; the others
			// read them.
			stmt = ownSweep(stmt)
		}
		add(stmt)
		info.Views = append(info.Views, v.Name)
		viewComments[v.Name] = v.Comment
	}
	for _, s := range queries.Split(queries.MustGet("stats")) {
		add(s)
		info.Macros = append(info.Macros, createdName(s))
	}
	add(ownSweep("CREATE OR REPLACE VIEW manifest AS SELECT * FROM read_json(" + quote(manifestGlob) + ")"))
	info.Views = append(info.Views, "manifest")
	if events {
		add(ownSweep(eventsView))
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
	// Macros of earlier versions of stats.sql, now written out in the ones
	// that called them.
	for _, old := range []string{"wilson_center", "wilson_half", "mcnemar_tail", "newcombe_parts"} {
		add("DROP MACRO IF EXISTS " + old)
	}
	for _, name := range queries.ReportViews(events) {
		text := queries.MustGet(name)
		add("CREATE OR REPLACE VIEW " + name + " AS\n" + queries.Split(text)[0])
		info.Views = append(info.Views, name)
	}
	comments := map[string]string{
		"manifest":   "the sweep's manifest.json: spec, configurations, row counts, version (one row)",
		"events":     "session events written by forklab log export and forklab log sink, one row per event",
		ownSweepName: "true when manifest.json is the sweep this database was written for; an error naming both directories otherwise (every view that reads files checks it)",
	}
	for name, c := range viewComments {
		comments[name] = c
	}
	for _, name := range queries.ReportViews(events) {
		comments[name] = Question(queries.MustGet(name)) + " (queries/" + name + ".sql)"
	}
	for _, v := range append([]string{ownSweepName}, info.Views...) {
		add("COMMENT ON VIEW " + v + " IS " + quote(comments[v]+". It reads the results directory "+abs+" (moved? run forklab db in its new place, or SET file_search_path to it)."))
	}
	add("COMMIT")
	add("CHECKPOINT forklab_new")
	add("USE memory")
	add("DETACH forklab_new")
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, results.DirPaths(s, dirExpr(abs))); err != nil {
			db.ExecContext(ctx, "ROLLBACK")
			return DBInfo{}, fmt.Errorf("write %s: %s: %w", info.Path, firstLine(s), results.QueryError(err))
		}
	}
	if err := db.Close(); err != nil {
		return DBInfo{}, fmt.Errorf("write %s: %w", info.Path, err)
	}
	if _, err := os.Stat(tmp + ".wal"); err == nil {
		return DBInfo{}, fmt.Errorf("write %s: DuckDB left a write-ahead log beside the new database", info.Path)
	}
	if err := syncFile(tmp); err != nil {
		return DBInfo{}, fmt.Errorf("write %s: %w", info.Path, err)
	}
	// A log left by a writer that crashed belongs to the old file; beside
	// the new one DuckDB would replay it.
	if err := os.Remove(final + ".wal"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return DBInfo{}, fmt.Errorf("write %s: remove the old write-ahead log: %w", info.Path, err)
	}
	// The database describes the sweep read above: if another sweep was
	// published meanwhile, it does not go beside it.
	if now, err := sweep.ReadManifest(dir); err != nil || now.SweepID != m.SweepID {
		return DBInfo{}, fmt.Errorf("write %s: %s was replaced by another sweep meanwhile; run forklab db again", info.Path, dir)
	}
	if err := atomicfile.CheckReplaceable(final); err != nil {
		return DBInfo{}, err
	}
	if err := os.Rename(tmp, final); err != nil {
		return DBInfo{}, fmt.Errorf("write %s: %w", info.Path, err)
	}
	if d, err := os.Open(abs); err == nil {
		d.Sync()
		d.Close()
	}
	return info, nil
}

// dirExpr is the directory results.duckdb's views read their files in, as
// a SQL expression DuckDB folds when it binds a view: DuckDB's
// file_search_path when it is set (one directory: the results directory,
// wherever it moved), else dir, the absolute path of the directory the
// database was written for. DuckDB resolves a relative path against its
// working directory, never against the database file (duckdb/duckdb#2342),
// so relative paths would fail in a BI tool, whose working directory is
// its own; an absolute one works from anywhere until the directory moves,
// and forklab db (or the next sweep into it) writes it again.
func dirExpr(dir string) string {
	return "coalesce(nullif(current_setting('file_search_path'), ''), " + quote(dir) + ")"
}

// ownSweepName is the view that says whether manifest.json is the sweep a
// results.duckdb was written for.
const ownSweepName = "forklab_sweep"

// manifestGlob finds manifest.json as the views find their Parquet files:
// DuckDB looks for a glob in file_search_path's directories (all of them)
// when it is set, and in the working directory when not, but for a plain
// name in the working directory first. A glob that matches only
// manifest.json gives the check the files the views read.
const manifestGlob = "manifes[t].json"

// ownSweepView defines the view forklab_sweep: one row, true when DuckDB
// finds exactly one manifest.json where the views look for their files and
// it is byte for byte the one the database was written for (its SHA-256);
// otherwise an error naming the database's own directory and sweep (its
// start time) and what was found instead. manifest is that manifest's
// content, dir its directory.
func ownSweepView(manifest []byte, dir string) string {
	sum := sha256.Sum256(manifest)
	var m struct {
		StartedAt string `json:"started_at"`
	}
	json.Unmarshal(manifest, &m)
	started := m.StartedAt
	if started == "" {
		started = "at an unknown time"
	}
	own := "results.duckdb holds the views of the sweep in " + dir + " (started " + started + ")"
	where := "run forklab db in that directory (or the one it moved to), or SET file_search_path to it alone"
	found := "CASE WHEN filename LIKE '/%' THEN filename ELSE filename || ' in DuckDB''s working directory' END"
	return "CREATE OR REPLACE VIEW " + ownSweepName + " AS\n" +
		"SELECT CASE\n" +
		"    WHEN count(*) = 1 AND bool_and(sha256(content) = " + quote(hex.EncodeToString(sum[:])) + ") THEN true\n" +
		"    WHEN count(*) = 0 THEN error(" + quote(own+", but finds no manifest.json: "+where) + " || '')\n" +
		"    WHEN count(*) > 1 THEN error(" + quote(own+", but finds a manifest.json in several directories (") + " || string_agg(" + found + ", ', ') || " + quote("): "+where) + ")\n" +
		"    ELSE error(" + quote(own+", but the manifest.json it reads, ") + " || string_agg(" + found + ", ', ')\n" +
		"        || ', is another sweep''s (started ' || coalesce(string_agg(json_extract_string(content, '$.started_at'), ', '), 'at an unknown time')\n" +
		"        || " + quote("), and its views would show that sweep's data: "+where) + ")\n" +
		"END AS own_sweep\n" +
		"FROM read_text(" + quote(manifestGlob) + ")"
}

// createView matches a CREATE OR REPLACE VIEW statement: its head up to AS,
// and its query.
var createView = regexp.MustCompile(`(?is)^(.*?CREATE\s+OR\s+REPLACE\s+VIEW\s+\S+\s+AS)\s+(.*)$`)

// ownSweep returns a CREATE OR REPLACE VIEW statement with its query read
// only once forklab_sweep says manifest.json is the database's own sweep
// (the condition fails the query otherwise; it never drops a row).
// Other statements are returned as they are.
func ownSweep(stmt string) string {
	m := createView.FindStringSubmatch(stmt)
	if m == nil {
		return stmt
	}
	return m[1] + "\nSELECT * FROM (\n" + m[2] + "\n) WHERE (SELECT own_sweep FROM " + ownSweepName + ")"
}

// syncFile flushes a file to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
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
			if r := []rune(line); len(r) > 60 {
				line = string(r[:60]) + "…"
			}
			return line
		}
	}
	return ""
}
