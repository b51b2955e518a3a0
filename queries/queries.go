// Package queries holds forklab's SQL, one file per question, embedded so
// the binary carries them. Every file reads like a report: a header comment
// with the question, its inputs and its output columns, then CTEs named for
// what they hold.
//
// The files read views, never a world's own columns: Views generates, from
// a world's declaration, the views over a results directory (tasks,
// checkpoints, branches, pairs, features, …) and the small helper views the
// queries share (pair_cells: every pair counted once per bucket of every
// feature). stats.sql defines the statistics macros. With both defined, the
// files run unchanged in any DuckDB session opened in the results
// directory; forklab sql and results.duckdb expose them as views.
package queries

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
)

//go:embed *.sql
var files embed.FS

// Get returns the SQL text of the named file ("summary" or "summary.sql").
func Get(name string) (string, error) {
	if !strings.HasSuffix(name, ".sql") {
		name += ".sql"
	}
	b, err := files.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("no query %q (have: %s)", name, strings.Join(Names(), ", "))
	}
	return string(b), nil
}

// MustGet is Get for names known at compile time; it panics if missing.
func MustGet(name string) string {
	s, err := Get(name)
	if err != nil {
		panic(err)
	}
	return s
}

// Names lists the embedded files without their .sql suffix, sorted.
func Names() []string {
	entries, _ := fs.ReadDir(files, ".")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".sql"))
	}
	slices.Sort(names)
	return names
}

// ReportViews lists the query files results.duckdb (forklab db) and forklab
// sql expose as views, named as the files: every file of queries/ that is
// one query (not stats.sql, which defines macros), in name order; those that read the
// events view (session_events) only when the directory has events. The
// views are computed when queried: policy_search and qini read their
// variables then (SET VARIABLE holdout = 0.2 changes them).
func ReportViews(events bool) []string {
	var names []string
	for _, name := range Names() {
		text := MustGet(name)
		if len(Split(text)) != 1 || (ReadsEvents(text) && !events) {
			continue
		}
		names = append(names, name)
	}
	return names
}

var readsEvents = regexp.MustCompile(`(?i)\b(FROM|JOIN)\s+events\b`)

// ReadsEvents reports whether SQL text reads the events view.
func ReadsEvents(text string) bool { return readsEvents.MatchString(text) }
