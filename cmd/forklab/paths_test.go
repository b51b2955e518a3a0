package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResultsDirPathSpecials: a results directory whose path holds a
// character DuckDB gives a meaning (a comma splits file_search_path; * ? [ ]
// { } are globs) is refused before anything is written, with exit 2 and the
// character named — a sweep into "r[1]" exited 0 and forklab sql then failed
// on DuckDB's glob; "a,b" and "q?y" exited 1 after the whole sweep, at
// results.duckdb. Reading commands refuse such a directory the same way.
// The names are testdata/paths/special-dirs.txt.
func TestResultsDirPathSpecials(t *testing.T) {
	f, err := os.Open("../../testdata/paths/special-dirs.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Subtests' own TempDirs carry their names, these characters included.
	base := t.TempDir()
	good := filepath.Join(base, "good")
	mustRun(t, "sweep", "--seeds", "0:10", "--out", good, "-q")
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		char, name, _ := strings.Cut(line, " ")
		n++
		t.Run(name, func(t *testing.T) {
			parent, err := os.MkdirTemp(base, "parent")
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(parent, name)
			mustRefuse(t, "its path holds \""+char+"\"", "sweep", "--seeds", "0:10", "--out", out, "-q")
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Errorf("a refused sweep left %v in %s", entries, parent)
			}
			// A finished sweep moved to such a name.
			moved := filepath.Join(parent, "moved"+name)
			if err := os.Rename(good, moved); err != nil {
				t.Fatal(err)
			}
			defer os.Rename(moved, good)
			for _, args := range [][]string{
				{"sql", moved, "SELECT count(*) FROM pairs"},
				{"db", moved},
				{"report", moved},
			} {
				mustRefuse(t, "results directory "+moved+": its path holds \""+char+"\"", args...)
			}
		})
	}
	if n != 7 {
		t.Fatalf("read %d names from testdata/paths/special-dirs.txt, want 7", n)
	}
}
