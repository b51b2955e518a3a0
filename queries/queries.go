// Package queries holds forklab's SQL, one file per question, embedded so
// the binary carries them. Every file reads like a report: a header comment
// with the question, its inputs and its output columns, then CTEs named for
// what they hold.
//
// views.sql defines the views the other files read (tasks, checkpoints,
// branches, pairs) over a results directory with paths relative to it, so
// the files also run unchanged from the duckdb command-line tool started in
// the results directory:
//
//	cd out && cat ../queries/views.sql ../queries/summary.sql | duckdb
package queries

import (
	"embed"
	"fmt"
	"io/fs"
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
