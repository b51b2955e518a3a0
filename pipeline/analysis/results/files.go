package results

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// fileArg is a relative path, or a glob of them, given to one of DuckDB's
// file readers: the reader's head and the path.
var fileArg = regexp.MustCompile(`(?i)\b((?:read_(?:parquet|json|json_auto|ndjson|csv|csv_auto|text|blob)|parquet_metadata)\s*\(\s*)'([^'/][^']*)'`)

// ReadFiles returns SQL text whose file readers (read_parquet('pairs/…'),
// read_json, …, parquet_metadata) read, instead of a relative path or
// glob, the list of the files of files (relative to dir, slash-separated)
// it matches, as absolute paths: read_parquet(['/abs/pairs/config_id=0/…',
// …]). A glob that matches none of them becomes its absolute path (DuckDB
// then says it finds no file). A results directory opened in process is
// sandboxed file by file (OpenSandboxed), and DuckDB expands a glob only in
// a directory it may read; the text of queries/ keeps relative globs, for
// the duckdb CLI and results.duckdb (DirPaths).
func ReadFiles(text, dir string, files []string) string {
	dir = strings.TrimSuffix(dir, "/")
	return replaceFileArgs(text, func(glob string) string {
		var list []string
		for _, f := range files {
			if globMatch(glob, f) {
				list = append(list, quote(dir+"/"+f))
			}
		}
		if len(list) == 0 {
			return quote(dir + "/" + glob)
		}
		return "[" + strings.Join(list, ", ") + "]"
	})
}

// DirPaths returns SQL text whose file readers read their relative path
// under dirExpr, a SQL string expression DuckDB folds to a constant when it
// binds the reader (results.duckdb's views: the file_search_path setting,
// or the directory the database was written for).
func DirPaths(text, dirExpr string) string {
	return replaceFileArgs(text, func(glob string) string { return dirExpr + " || " + quote("/"+glob) })
}

// replaceFileArgs replaces the relative path of every file reader in text
// by what arg makes of it (SQL).
func replaceFileArgs(text string, arg func(glob string) string) string {
	return fileArg.ReplaceAllStringFunc(text, func(m string) string {
		sub := fileArg.FindStringSubmatch(m)
		return sub[1] + arg(strings.ReplaceAll(sub[2], "''", "'"))
	})
}

// globMatch reports whether the slash-separated path name matches glob,
// as DuckDB expands it: each * ? [ ] within one segment, ** any number of
// segments.
func globMatch(glob, name string) bool {
	g, n := strings.Split(glob, "/"), strings.Split(name, "/")
	var match func(g, n []string) bool
	match = func(g, n []string) bool {
		for len(g) > 0 {
			if g[0] == "**" {
				for i := 0; i <= len(n); i++ {
					if match(g[1:], n[i:]) {
						return true
					}
				}
				return false
			}
			if len(n) == 0 {
				return false
			}
			if ok, err := path.Match(g[0], n[0]); err != nil || !ok {
				return false
			}
			g, n = g[1:], n[1:]
		}
		return len(n) == 0
	}
	return match(g, n)
}

// eventFiles lists the session-event files in results directory dir
// (ExportGlob, SinkGlob), relative to it and slash-separated.
func eventFiles(dir string) ([]string, error) {
	var out []string
	for _, top := range []string{"events", "sink"} {
		err := filepath.WalkDir(filepath.Join(dir, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return filepath.SkipAll
				}
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			rel = filepath.ToSlash(rel)
			if !d.IsDir() && (globMatch(ExportGlob, rel) || globMatch(SinkGlob, rel)) {
				out = append(out, rel)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("look for session events: %w", err)
		}
	}
	return out, nil
}

// userFileArg is a quoted path in ad hoc SQL: a file reader's first
// argument (read_parquet('…'), parquet_metadata('…'), …) or a file named
// in FROM or JOIN (DuckDB's replacement scan, FROM 'pairs/*/*/*.parquet').
var userFileArg = regexp.MustCompile(`(?i)(\b(?:read_[a-z_]+|parquet_[a-z_]+)\s*\(\s*|\b(?:FROM|JOIN)\s+)'((?:[^']|'')*)'`)

// OwnFiles returns a statement of ad hoc SQL in which every path into the
// results directory — absolute, or relative as DuckDB would resolve it
// against the directory (file_search_path) — that a file reader or a FROM
// takes is the list of the directory's table and event files it matches:
// the sandbox grants those files one by one (OpenSandboxed), and DuckDB
// expands a glob only in a directory it may read (and so write). A FROM
// of Parquet files becomes read_parquet of the list. Other paths, and
// paths that match none of the files, stay as they are (DuckDB's sandbox
// then decides).
func (r *DB) OwnFiles(stmt string) string {
	return userFileArg.ReplaceAllStringFunc(stmt, func(m string) string {
		sub := userFileArg.FindStringSubmatch(m)
		p := strings.ReplaceAll(sub[2], "''", "'")
		rel := p
		if filepath.IsAbs(p) {
			var err error
			if rel, err = filepath.Rel(r.abs, p); err != nil {
				return m
			}
		}
		rel = filepath.ToSlash(filepath.Clean(rel))
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return m
		}
		var list []string
		for _, f := range r.files {
			if globMatch(rel, f) {
				list = append(list, quote(r.abs+"/"+f))
			}
		}
		if len(list) == 0 {
			return m
		}
		files := "[" + strings.Join(list, ", ") + "]"
		if head := strings.ToUpper(strings.TrimSpace(sub[1])); head == "FROM" || head == "JOIN" {
			if !strings.HasSuffix(rel, ".parquet") {
				return m
			}
			return sub[1] + "read_parquet(" + files + ")"
		}
		return sub[1] + files
	})
}
