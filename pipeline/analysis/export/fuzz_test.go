package export

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/pipeline/analysis/results/resultstest"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// corpusDir holds FuzzSQLSandbox's seeds, in Go's corpus format, with DIR
// standing for the results directory (issue 25 C and G).
const corpusDir = "../../../testdata/fuzz/FuzzSQLSandbox"

// FuzzSQLSandbox runs any text through forklab sql's default sandbox (Run
// with no Allow) over a small results directory, and checks with DuckDB
// itself that the directory is unchanged: every file's name, size,
// modification time and MD5 as read_blob sees them, and every entry's
// name, size and time as the file system lists it. DIR in the text is the
// directory's absolute path. Errors are fine; a changed directory, a
// panic or a crash of the process is not. The seeds (corpusDir) are the
// bypasses found so far: the split disagreement of issue 25 ($$ in an
// identifier hiding a COPY … OVERWRITE into pairs/), logging into the
// directory, and the other writing statements.
//
//	make fuzz (bounded), or go test -run '^$' -fuzz FuzzSQLSandbox ./pipeline/analysis/export
func FuzzSQLSandbox(f *testing.F) {
	seeds, err := os.ReadDir(corpusDir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range seeds {
		text, err := readCorpusString(filepath.Join(corpusDir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(text)
	}
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: 0, End: 20}
	dir := resultstest.Dir(f, spec)
	abs, _ := filepath.Abs(dir)
	before := dirState(f, abs)
	f.Fuzz(func(t *testing.T, text string) {
		text = strings.ReplaceAll(text, "DIR", abs)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		o := Options{Stdout: io.Discard, Settings: []duck.Setting{{Name: "memory_limit", Value: "'512MB'"}, {Name: "threads", Value: "1"}}}
		Run(ctx, abs, text, o)
		if after := dirState(t, abs); after != before {
			t.Fatalf("forklab sql %q changed the results directory:\nbefore:\n%s\nafter:\n%s", text, before, after)
		}
	})
}

// dirState describes everything under dir: each file as DuckDB's read_blob
// reads it (name, size, time, MD5 of the content), then each entry, hidden
// ones and folders too, as the file system lists it.
func dirState(t testing.TB, dir string) string {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT filename, size, last_modified, md5(content) FROM read_blob(" + quote(dir+"/**") + ") ORDER BY filename")
	if err != nil {
		t.Fatal(err)
	}
	_, vals, err := duck.ScanAll(rows)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range vals {
		fmt.Fprintln(&b, r...)
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintln(&b, p, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// readCorpusString reads a corpus file of one string value in Go's format
// ("go test fuzz v1", then string("…")).
func readCorpusString(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	lines := strings.SplitN(strings.TrimSpace(string(b)), "\n", 2)
	if len(lines) != 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "string(") || !strings.HasSuffix(lines[1], ")") {
		return "", fmt.Errorf("%s: not a corpus file of one string", path)
	}
	return strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "string("), ")"))
}
