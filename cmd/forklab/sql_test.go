package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/export"
)

// forklab sql, db and report --html as a user runs them: formats, query
// sources, files that exist, directories that are not results.
func TestSQLDBAndHTMLCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	mustRun(t, "sweep", "--seeds", "0:300", "--out", dir, "-q")
	files := t.TempDir()

	got := mustRun(t, "sql", dir, "--file", "../../queries/summary.sql", "--format", "csv")
	if !strings.HasPrefix(got, "config_id,fork_step,arm,pairs,rescued,harmed,unchanged,sure_thing,lost_cause,net,") ||
		!strings.Contains(got, "\n0,3,on,300,75,83,142,72,70,-8,") {
		t.Errorf("summary.sql as CSV:\n%s", got)
	}
	cmd := exec.Command(forklabBin, "sql", dir, "-", "--format", "ndjson")
	cmd.Stdin = strings.NewReader("-- labels\nSELECT label, count(*) AS n FROM pairs GROUP BY label ORDER BY label;\n")
	out, err := cmd.Output()
	if err != nil || string(out) != "{\"label\":\"harmed\",\"n\":83}\n{\"label\":\"rescued\",\"n\":75}\n{\"label\":\"unchanged\",\"n\":142}\n" {
		t.Errorf("query on stdin: %q, %v", out, err)
	}
	if got := mustRun(t, "sql", dir, "--", "-- after --\nSELECT getvariable('holdout') AS h"); got != "h\n0.3\n" {
		t.Errorf("query after --: %q", got)
	}
	if got := mustRun(t, "sql", dir, "SELECT getvariable('holdout') AS h", "--var", "holdout=0.5", "-f", "csv"); got != "h\n0.5\n" {
		t.Errorf("--var: %q", got)
	}

	pq := filepath.Join(files, "pairs.parquet")
	mustRun(t, "sql", dir, "SELECT * FROM pairs", "--format", "parquet", "--out", pq)
	if b, _ := os.ReadFile(pq); !bytes.HasPrefix(b, []byte("PAR1")) || !bytes.HasSuffix(b, []byte("PAR1")) {
		t.Errorf("%s is not a Parquet file", pq)
	}
	if export.ArrowAvailable {
		arrowFile := filepath.Join(files, "pairs.arrow")
		mustRun(t, "sql", dir, "SELECT * FROM pairs", "--format", "arrow", "--out", arrowFile)
		if b, _ := os.ReadFile(arrowFile); !bytes.HasPrefix(b, []byte("ARROW1")) || !bytes.HasSuffix(b, []byte("ARROW1")) {
			t.Errorf("%s is not an Arrow IPC file", arrowFile)
		}
	}

	mustRun(t, "db", dir)
	if _, err := os.Stat(filepath.Join(dir, "results.duckdb")); err != nil {
		t.Errorf("forklab db wrote no results.duckdb: %v", err)
	}
	mustRun(t, "db", dir) // rerunnable

	html := filepath.Join(files, "report.html")
	// It prints what it wrote, nothing more (issue 26: it printed the
	// whole 66-line text report too).
	if text, errs, code := run(t, "report", dir, "--html", html); code != 0 || text != "" || errs != "wrote "+html+"\n" {
		t.Errorf("report --html: exit %d, stdout %.300q, stderr %q; want only %q", code, text, errs, "wrote "+html)
	}
	if b, _ := os.ReadFile(html); !bytes.HasPrefix(b, []byte("<!DOCTYPE html>")) || !bytes.Contains(b, []byte("<svg class=\"chart wide ")) {
		t.Errorf("%s is not the HTML report", html)
	}
	mustRun(t, "report", dir, "--html", html, "--overwrite")

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"html exists", []string{"report", dir, "--html", html}, "--html: output " + html + " already exists; pass --overwrite to replace it"},
		{"html folder missing", []string{"report", dir, "--html", filepath.Join(files, "no", "r.html")}, "cannot write output"},
		{"out exists", []string{"sql", dir, "SELECT 1", "-f", "parquet", "-o", pq}, "already exists; pass --overwrite"},
		{"unknown format", []string{"sql", dir, "SELECT 1", "-f", "xml"}, `--format: unknown format "xml" (have: table, csv, json, ndjson, parquet, arrow, arrows)`},
		{"no query", []string{"sql", dir}, "no query: give it as the second argument, with --file FILE, or as - to read standard input"},
		{"query and file", []string{"sql", dir, "SELECT 1", "--file", "x.sql"}, "not both"},
		{"missing file", []string{"sql", dir, "--file", filepath.Join(files, "nope.sql")}, "read the query: open"},
		{"comment taken for a flag", []string{"sql", dir, "-- c\nSELECT 1"}, `the query starts with "--" and was taken for a flag`},
		{"bad var", []string{"sql", dir, "SELECT 1", "--var", "holdout"}, "--var: variable \"holdout\" is not NAME=VALUE"},
		{"csv of a statement", []string{"sql", dir, "CREATE TEMP TABLE t AS SELECT 1", "-f", "csv", "--allow-writes"}, "the last statement is not one"},
		{"not results", []string{"sql", files, "SELECT 1"}, "has no manifest.json"},
		{"db of nothing", []string{"db", files}, "has no manifest.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := run(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and %q", code, stdout, stderr, tc.want)
			}
		})
	}
	if b, _ := os.ReadFile(pq); !bytes.HasPrefix(b, []byte("PAR1")) {
		t.Error("a refused --out damaged the existing file")
	}
	if _, err := os.Stat(filepath.Join(files, "results.duckdb")); err == nil {
		t.Error("db of a non-results directory wrote results.duckdb")
	}
}

// forklab sql is read-only over its results directory by default, and runs
// in UTC whatever TZ the host has (issue 12 A): each refusal exits 2
// naming the flag that allows it, and the results stay whole.
func TestSQLSandboxCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	mustRun(t, "sweep", "--seeds", "0:300", "--out", dir, "-q")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"COPY (SELECT 1 AS k, 2 AS v) TO '" + dir + "/tasks' (FORMAT parquet, PARTITION_BY (k), OVERWRITE); SELECT 'ok'"}, "--allow-writes"},
		{[]string{"SELECT * FROM read_csv('/etc/passwd')"}, "--allow-path /etc/passwd"},
		{[]string{"SET threads = 1; SELECT 1"}, "--setting NAME=VALUE"},
		{[]string{"INSTALL httpfs"}, "--allow-extensions"},
		{[]string{"SELECT 1", "--setting", "enable_external_access=true"}, "--allow-external-access"},
	} {
		stdout, stderr, code := run(t, append([]string{"sql", dir}, tc.args...)...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("sql %q: exit %d, stdout %q, stderr %q; want exit 2 naming %s", tc.args, code, stdout, stderr, tc.want)
		}
	}
	if out := mustRun(t, "report", dir); !strings.Contains(out, "rescued 75   harmed 83   unchanged 142   net -8") {
		t.Errorf("report after the refused COPY:\n%.300s", out)
	}
	other := filepath.Join(t.TempDir(), "w.csv")
	if out := mustRun(t, "sql", dir, "--allow-writes", "--allow-path", filepath.Dir(other), "COPY (SELECT 42 AS n) TO '"+other+"'; SELECT 'ok' AS r"); out != "r\nok\n" {
		t.Errorf("--allow-writes --allow-path: %q", out)
	}
	if b, _ := os.ReadFile(other); string(b) != "n\n42\n" {
		t.Errorf("written by --allow-writes: %q", b)
	}

	// Exact output (issue 12 B): a UUID in the table format, a HUGEINT
	// sum in Parquet.
	if out := mustRun(t, "sql", dir, "SELECT '01936457-ab44-7710-bc9d-1f3414ac9deb'::UUID AS u"); out != "u\n01936457-ab44-7710-bc9d-1f3414ac9deb\n" {
		t.Errorf("UUID as a table: %q", out)
	}
	pq := filepath.Join(t.TempDir(), "s.parquet")
	mustRun(t, "sql", dir, "SELECT sum(seed) + 18014398509481987 - 44850 AS s FROM tasks", "--format", "parquet", "--out", pq)
	if out := mustRun(t, "sql", dir, "--allow-path", pq, "SELECT s::VARCHAR AS s, typeof(s) AS t FROM '"+pq+"'", "-f", "csv"); out != "s,t\n18014398509481987,\"DECIMAL(38,0)\"\n" {
		t.Errorf("HUGEINT sum through Parquet: %q", out)
	}

	// Two UTC timestamps of one day group into one date under any TZ.
	cmd := exec.Command(forklabBin, "sql", dir, "--format", "csv",
		"SELECT CAST(ts AS DATE) AS day, count(*) AS n FROM (VALUES (TIMESTAMPTZ '2024-03-01 01:00:00+00'), (TIMESTAMPTZ '2024-03-01 23:00:00+00')) AS v(ts) GROUP BY ALL")
	cmd.Env = append(os.Environ(), "TZ=America/Los_Angeles")
	if out, err := cmd.Output(); err != nil || string(out) != "day,n\n2024-03-01,2\n" {
		t.Errorf("TZ=America/Los_Angeles: %q, %v; want one day, 2024-03-01", out, err)
	}
}

// TestSQLOutNames writes a query's rows with forklab sql --out for every
// line of testdata/cli/sql-out-names.txt and reads back what the file
// holds: Parquet for --out rows.parquet (it used to be a text table under
// that name), gzip for rows.csv.gz; a refused name exits 2 and writes
// nothing.
func TestSQLOutNames(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	mustRun(t, "sweep", "-q", "--seeds", "0:4", "--out", dir)
	cases := cliCases(t, "sql-out-names.txt", 3)
	if len(cases) < 20 {
		t.Fatalf("read %d cases", len(cases))
	}
	for _, fields := range cases {
		tmp := t.TempDir()
		args := []string{"sql", dir, "SELECT 1 AS a, 2 AS b", "--out", filepath.Join(tmp, fields[0])}
		if fields[1] != "-" {
			args = append(args, "--format", fields[1])
		}
		if msg, refused := strings.CutPrefix(fields[2], "refused: "); refused {
			// The message names the whole path; the file, its name.
			mustRefuse(t, strings.TrimPrefix(msg, "--out "+fields[0]+" "), args...)
			if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
				t.Errorf("forklab %s: refused, but wrote %d files", strings.Join(args, " "), len(entries))
			}
			continue
		}
		mustRun(t, args...)
		got, err := os.ReadFile(filepath.Join(tmp, fields[0]))
		if err != nil {
			t.Fatal(err)
		}
		lower := strings.ToLower(fields[0])
		if gz := strings.HasSuffix(lower, ".gz"); gz != bytes.HasPrefix(got, []byte{0x1f, 0x8b}) {
			t.Errorf("%s: gzipped %v, want %v", fields[0], !gz, gz)
			continue
		}
		if strings.HasSuffix(lower, ".gz") || strings.HasSuffix(lower, ".zst") {
			continue
		}
		// What each format's file starts with (JSON without its white
		// space; an Arrow stream with its continuation marker).
		want := map[string]string{"csv": "a,b\n1,2\n", "json": `[{"a":1,"b":2}]`, "ndjson": `{"a":1,"b":2}` + "\n", "parquet": "PAR1", "arrow": "ARROW1", "arrows": "\xff\xff\xff\xff", "table": "a  b\n1  2\n"}[fields[2]]
		text := string(got)
		if fields[2] == "json" {
			text = strings.Join(strings.Fields(text), "")
		}
		if want == "" || !strings.HasPrefix(text, want) {
			t.Errorf("%s (--format %s): file starts %q, want %s output starting %q", fields[0], fields[1], got[:min(len(got), 20)], fields[2], want)
		}
	}
}

// TestSQLVarsRead runs testdata/cli/sql-vars.txt: a --var the query never
// reads (a typo: --var maxharm=2 for max_harm) was set and ignored, the
// query answering with the default; it is refused with exit 2, while a
// variable read by getvariable('NAME') (any case), by a computed
// getvariable argument, or by the views (max_harm, harm_scope, holdout)
// is set.
func TestSQLVarsRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	mustRun(t, "sweep", "-q", "--seeds", "0:100", "--out", dir)
	for _, f := range cliCases(t, "sql-vars.txt", 3) {
		args, err := shellWords(strings.ReplaceAll(f[2], "{dir}", dir))
		if err != nil {
			t.Fatal(err)
		}
		out, errs, code := run(t, args...)
		got := out
		if code != 0 {
			got = errs
		}
		if strconv.Itoa(code) != f[0] || !strings.Contains(got, f[1]) {
			t.Errorf("forklab %s: exit %d, stdout %q, stderr %q; want exit %s and %q", f[2], code, out, errs, f[0], f[1])
		}
	}
}
