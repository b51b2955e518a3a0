package duck

import (
	"fmt"
	"path/filepath"
	"strings"
)

// PathSpecials are the characters DuckDB gives a meaning inside a file
// path, so that a directory whose path holds one cannot be a results
// directory: a comma separates the directories of file_search_path (the
// setting the views of results.duckdb and forklab sql resolve their
// relative globs against); * ? [ ] { } make DuckDB's globs match other
// files or none, also in the directory part of a pattern; and ? starts the
// options of a database's DSN in duckdb-go. Found by sweeping into
// "a,b", "r[1]", "q?y" and "br{1,2}" (testdata/paths).
const PathSpecials = ",*?[]{}"

// PathError is CheckDir's refusal: the directory Dir (as given), in the
// role What ("output", "results directory"), whose absolute path holds
// Char, one of PathSpecials. It is the user's input to change.
type PathError struct {
	What, Dir, Char string
}

func (e *PathError) Error() string {
	why := "DuckDB reads it as part of a glob pattern, so the views would read other files or none"
	if e.Char == "," {
		why = "DuckDB's file_search_path splits directories at commas, so the views would not find the files"
	}
	return fmt.Sprintf("%s %s: its path holds %q, and %s; use a directory whose path has none of %s (rename it or give another one)",
		e.What, e.Dir, e.Char, why, strings.Join(strings.Split(PathSpecials, ""), " "))
}

// CheckDir returns nil when DuckDB reads dir's absolute path as written,
// and otherwise a *PathError naming the first special character; what
// names the directory's role in the message. An error from filepath.Abs
// (no working directory) is returned wrapped.
func CheckDir(what, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, dir, err)
	}
	if i := strings.IndexAny(abs, PathSpecials); i >= 0 {
		return &PathError{What: what, Dir: dir, Char: abs[i : i+1]}
	}
	return nil
}
