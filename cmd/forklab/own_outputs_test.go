package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// listing is every entry under dir with its size and modification time.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil // its time changes when a case writes beside its entries
		}
		b.WriteString(p + " " + strconv.FormatInt(fi.Size(), 10) + " " + fi.ModTime().String() + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Every writer refuses an output inside a results directory's own files
// or partitions (testdata/cli/own-outputs.txt), among them the two of
// issue 25 C: sql --out lab/manifest.json --overwrite replaced the
// manifest with the query's rows. The directory is left as it was.
func TestOutputsNeverIntoResults(t *testing.T) {
	dir := smallLab(t)
	defer unchanged(t, dir)()
	for _, c := range cliCases(t, "own-outputs.txt", 3) {
		args := strings.Split(strings.ReplaceAll(c[2], "DIR", dir), "|")
		_, stderr, code := run(t, args...)
		want := strings.ReplaceAll(c[1], "DIR", dir)
		if strconv.Itoa(code) != c[0] || (c[1] != "-" && !strings.Contains(stderr, want)) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("forklab %s: exit %d, %q; want %s and one line with %q", strings.Join(args, " "), code, stderr, c[0], want)
		}
		if code == 0 {
			for _, a := range args {
				if strings.HasPrefix(a, dir+"/") {
					os.Remove(a)
				}
			}
			os.Remove(filepath.Join(dir, ".forklab-derived"))
		}
	}
}

// smallLab is a finished results directory of four seeds.
func smallLab(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "lab")
	mustRun(t, "sweep", "-q", "--seeds", "0:4", "--fork-at", "2", "--out", dir)
	return dir
}

// unchanged lists dir now; the function it returns fails the test unless
// dir lists the same then and still matches its manifest.
func unchanged(t *testing.T, dir string) func() {
	before := listing(t, dir)
	return func() {
		if after := listing(t, dir); after != before {
			t.Errorf("the results directory changed:\nbefore\n%s\nafter\n%s", before, after)
		}
		mustRun(t, "verify", dir)
	}
}

// A default forklab sql changes nothing in the results directory, whatever
// the text (testdata/cli/sql-sandbox.txt): the quoted bypass of issue 25 C
// ($$ in an identifier made the split and DuckDB disagree, and a COPY …
// OVERWRITE the check never saw deleted the pairs file) is refused, with
// the statement named.
func TestSQLSandboxLeavesResults(t *testing.T) {
	dir := smallLab(t)
	defer unchanged(t, dir)()
	for _, c := range cliCases(t, "sql-sandbox.txt", 3) {
		q := strings.ReplaceAll(c[2], "DIR", dir)
		stdout, stderr, code := run(t, "sql", dir, q)
		if strconv.Itoa(code) != c[0] || !strings.Contains(stdout+stderr, c[1]) {
			t.Errorf("forklab sql %q: exit %d, %q %q; want %s with %q", q, code, stdout, stderr, c[0], c[1])
		}
		if strings.Contains(stderr, "goroutine") || strings.Contains(stderr, "terminate called") {
			t.Errorf("forklab sql %q crashed: %s", q, stderr)
		}
	}
}

// A crash inside DuckDB is a failure, exit 1, in one line (issue 25 F: a
// log in a file the sandbox refuses aborted with a C++ exception and a Go
// stack dump, exit 2).
func TestSQLLibraryCrashIsOneLine(t *testing.T) {
	dir := smallLab(t)
	elsewhere := filepath.Join(t.TempDir(), "x")
	_, stderr, code := run(t, "sql", dir, "--allow-writes", "CALL enable_logging(level='trace', storage='file', storage_path='"+elsewhere+"'); SELECT 1")
	if code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 ||
		!strings.HasPrefix(stderr, `forklab: DuckDB failed: Permission Error: Cannot access directory "`+elsewhere+`"`) {
		t.Errorf("exit %d, %q; want 1 and one line naming DuckDB's error", code, stderr)
	}
	if _, err := os.Stat(elsewhere); err == nil {
		t.Errorf("%s was written", elsewhere)
	}
}

// What is served was checked (issue 25 D): one byte flipped inside a pairs
// file, its size unchanged, answered 73 rescued instead of 75 with exit 0;
// every command that reads the directory now exits 4 naming the file.
func TestFlippedByteIsNotServed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lab")
	mustRun(t, "sweep", "-q", "--seeds", "0:40", "--fork-at", "2", "--out", dir)
	parts, _ := filepath.Glob(filepath.Join(dir, "pairs", "*", "*", "*.parquet"))
	if len(parts) != 1 {
		t.Fatalf("pairs files %v", parts)
	}
	b, err := os.ReadFile(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(parts[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(dir, parts[0])
	for _, args := range [][]string{
		{"sql", dir, "SELECT label, count(*) FROM pairs GROUP BY label"},
		{"sql", dir, "SELECT 1"},
		{"report", dir},
		{"policy", dir},
		{"db", dir},
	} {
		stdout, stderr, code := run(t, args...)
		if code != 4 || stdout != "" || !strings.Contains(stderr, rel+" has CRC-32C ") {
			t.Errorf("forklab %s: exit %d, %q %q; want 4 naming %s's checksum", strings.Join(args, " "), code, stdout, stderr, rel)
		}
	}
}
