package export

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/forklab/forklab/internal/atomicfile"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/pipeline/analysis/report"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/analysis/results/resultstest"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

var (
	seedOnce sync.Once
	seedDir  string
)

// seedResults opens the seed's sweep (300 seeds, fork step 3: 75 rescued,
// 83 harmed, 142 unchanged), made once for all tests of the package.
func seedResults(t testing.TB) *results.DB {
	t.Helper()
	seedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "forklab-export-test-")
		if err != nil {
			t.Fatal(err)
		}
		seedDir = filepath.Join(dir, "out")
		resultstest.Run(t, sweep.DefaultSpec(), seedDir)
	})
	db, err := results.Open(context.Background(), seedDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// duckText runs q on a DuckDB outside any sandbox and returns its rows,
// every value as DuckDB's text, columns joined by |, rows by newlines.
func duckText(t testing.TB, q string) string {
	t.Helper()
	var lines []string
	for _, r := range duckRows(t, q) {
		lines = append(lines, strings.Join(r, "|"))
	}
	return strings.Join(lines, "\n")
}

// duckRows runs q on a DuckDB outside any sandbox and returns its rows,
// every value as DuckDB's text (NULL as NULL).
func duckRows(t testing.TB, q string) [][]string {
	t.Helper()
	db, err := duck.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT COLUMNS(*)::VARCHAR FROM (" + q + ")")
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		cells := make([]string, len(cols))
		for i, v := range vals {
			cells[i] = v.String
			if !v.Valid {
				cells[i] = "NULL"
			}
		}
		out = append(out, cells)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

func TestMain(m *testing.M) {
	code := m.Run()
	if seedDir != "" {
		os.RemoveAll(filepath.Dir(seedDir))
	}
	os.Exit(code)
}

func runSQL(t *testing.T, db *results.DB, text string, o Options) (string, error) {
	t.Helper()
	var buf bytes.Buffer
	o.Stdout = &buf
	err := Run(context.Background(), db.Dir, text, o)
	return buf.String(), err
}

const byLabel = "SELECT label, count(*) AS n FROM pairs GROUP BY label ORDER BY label"

// Every text format, to stdout, byte for byte.
func TestQueryTextFormats(t *testing.T) {
	db := seedResults(t)
	for _, tc := range []struct {
		format Format
		want   string
	}{
		{Table, "label      n\nharmed     83\nrescued    75\nunchanged  142\n"},
		{CSV, "label,n\nharmed,83\nrescued,75\nunchanged,142\n"},
		{JSON, "[\n\t{\"label\":\"harmed\",\"n\":83},\n\t{\"label\":\"rescued\",\"n\":75},\n\t{\"label\":\"unchanged\",\"n\":142}\n]\n"},
		{NDJSON, "{\"label\":\"harmed\",\"n\":83}\n{\"label\":\"rescued\",\"n\":75}\n{\"label\":\"unchanged\",\"n\":142}\n"},
	} {
		got, err := runSQL(t, db, byLabel, Options{Format: tc.format})
		if err != nil {
			t.Fatalf("%s: %v", tc.format, err)
		}
		if got != tc.want {
			t.Errorf("%s:\n%q\nwant\n%q", tc.format, got, tc.want)
		}
	}
}

// Statements that are not queries still print as tables.
func TestQueryTableOfStatements(t *testing.T) {
	db := seedResults(t)
	for q, want := range map[string]string{
		"DESCRIBE pairs":             "\nlabel ",
		"SHOW TABLES":                "\npairs\n",
		"PRAGMA table_info('pairs')": " label ",
	} {
		got, err := runSQL(t, db, q, Options{})
		if err != nil || !strings.Contains(got, want) {
			t.Errorf("%s: %v\n%s", q, err, got)
		}
	}
}

// The table format prints every value as DuckDB's own text (CAST AS
// VARCHAR), aligned as forklab report aligns its tables.
func TestQueryTableIsDuckDBText(t *testing.T) {
	db := seedResults(t)
	got, err := runSQL(t, db, "SELECT * FROM pairs ORDER BY seed", Options{})
	if err != nil {
		t.Fatal(err)
	}
	tab, err := db.Query(context.Background(), "SELECT COLUMNS(*)::VARCHAR FROM (FROM pairs ORDER BY seed)")
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	report.WriteTable(&want, tab)
	if got != want.String() {
		t.Errorf("table differs from DuckDB's text:\n%s\nwant\n%s", got[:300], want.String()[:300])
	}
	if !strings.Contains(got, "  0.0  ") || !strings.Contains(got, "  false  ") {
		t.Errorf("p_stall 0 should print as DuckDB prints a DOUBLE 0 (0.0), booleans as false:\n%s", got[:600])
	}
}

// Past the first block of rows, columns keep the first block's widths and
// a longer cell pushes only its own line.
func TestQueryTableStreamsBlocks(t *testing.T) {
	db := seedResults(t)
	got, err := runSQL(t, db, "SELECT range AS n, CASE WHEN range = 1500 THEN 'wide-cell' ELSE 'x' END AS s, 1 AS k FROM range(2000)", Options{})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 2001 {
		t.Fatalf("%d lines, want 2001", len(lines))
	}
	for i, want := range map[int]string{0: "n    s  k", 1: "0    x  1", 1001: "1000  x  1", 1501: "1500  wide-cell  1", 2000: "1999  x  1"} {
		if lines[i] != want {
			t.Errorf("line %d = %q, want %q", i, lines[i], want)
		}
	}
}

// A result far larger than a pipe's buffer streams through COPY to stdout.
func TestQueryCSVStreamsLargeResult(t *testing.T) {
	db := seedResults(t)
	got, err := runSQL(t, db, "SELECT range AS i, range * 2 AS j FROM range(300000)", Options{Format: CSV})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(got, "\n"); n != 300001 || !strings.HasSuffix(got, "299999,599998\n") {
		t.Errorf("%d lines ending %q", n, got[len(got)-20:])
	}
}

func TestQueryVariables(t *testing.T) {
	db := seedResults(t)
	q := "SELECT getvariable('max_harm') AS m, getvariable('harm_scope') AS s, getvariable('holdout') AS h"
	got, err := runSQL(t, db, q, Options{Format: CSV})
	if err != nil {
		t.Fatal(err)
	}
	if got != "m,s,h\n0,clean,0.3\n" {
		t.Errorf("defaults: %q", got)
	}
	var vars []Var
	for _, s := range []string{"holdout=0.5", "harm_scope=all", "note=it's"} {
		v, err := ParseVar(s)
		if err != nil {
			t.Fatal(err)
		}
		vars = append(vars, v)
	}
	got, err = runSQL(t, db, q+", getvariable('note') AS n", Options{Format: CSV, Vars: vars})
	if err != nil {
		t.Fatal(err)
	}
	if got != "m,s,h,n\n0,all,0.5,it's\n" {
		t.Errorf("with --var: %q", got)
	}
	// A statement before the last one runs first, in every format.
	for _, f := range []Format{Table, CSV} {
		got, err = runSQL(t, db, "SET VARIABLE holdout = 0.25;\nSELECT getvariable('holdout') AS h;", Options{Format: f})
		if err != nil || !strings.Contains(got, "0.25") {
			t.Errorf("%s: two statements: %q, %v", f, got, err)
		}
	}
	for _, bad := range []string{"holdout", "1x=2", "=3", "a b=1"} {
		if _, err := ParseVar(bad); err == nil || !BadInput(err) {
			t.Errorf("ParseVar(%q): %v", bad, err)
		}
	}
}

// Parquet and CSV files through --out: complete, renamed into place,
// gzip when the name asks, no temporary file left.
func TestQueryOutFiles(t *testing.T) {
	db := seedResults(t)
	dir := t.TempDir()
	pq := filepath.Join(dir, "pairs.parquet")
	if _, err := runSQL(t, db, "SELECT * FROM pairs ORDER BY seed", Options{Format: Parquet, Out: pq}); err != nil {
		t.Fatal(err)
	}
	if got := duckText(t, "SELECT count(*), count(*) FILTER (WHERE label = 'rescued'), min(seed), max(seed) FROM read_parquet("+quote(pq)+")"); got != "300|75|0|299" {
		t.Errorf("pairs.parquet read back: %s", got)
	}
	gz := filepath.Join(dir, "labels.csv.gz")
	if _, err := runSQL(t, db, byLabel, Options{Format: CSV, Out: gz}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(gz)
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("labels.csv.gz is not gzip: % x", b[:min(len(b), 8)])
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("files left in the output folder: %v", entries)
	}
	if fi, _ := os.Stat(pq); fi.Mode().Perm() != 0o644 {
		t.Errorf("pairs.parquet has mode %v, want 0644", fi.Mode().Perm())
	}
}

// Bad input: DuckDB's message with the position, in every format; an
// existing file is refused without Overwrite and survives a failed query
// with it; nothing half-written appears.
func TestQueryBadInput(t *testing.T) {
	db := seedResults(t)
	dir := t.TempDir()
	for _, f := range []Format{Table, CSV, Parquet} {
		_, err := runSQL(t, db, "SELECT label FROM pairs WHERE lable = 'rescued'", Options{Format: f, Out: filepath.Join(dir, "x."+string(f))})
		var qf *QueryFailed
		if !errors.As(err, &qf) || !BadInput(err) ||
			!strings.Contains(err.Error(), `Referenced column "lable" not found in FROM clause!`) ||
			!strings.Contains(err.Error(), "LINE 1: SELECT label FROM pairs WHERE lable = 'rescued'\n"+strings.Repeat(" ", 38)+"^") {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := runSQL(t, db, "SELEC 1", Options{Format: CSV}); err == nil || !strings.Contains(err.Error(), "syntax error at or near \"SELEC\"\n\nLINE 1: SELEC 1\n        ^") {
		t.Errorf("syntax error: %v", err)
	}
	for _, empty := range []string{"  ;  ", ";", " ; ; "} {
		for _, f := range []Format{Table, CSV} {
			if _, err := runSQL(t, db, empty, Options{Format: f}); err == nil || !BadInput(err) || err.Error() != "the query is empty" {
				t.Errorf("%q as %s: %v", empty, f, err)
			}
		}
	}
	if _, err := runSQL(t, db, "-- nothing\n", Options{}); err == nil || !BadInput(err) || err.Error() != "the query is empty" {
		t.Errorf("empty query: %v", err)
	}
	if _, err := runSQL(t, db, "CREATE TEMP TABLE t AS SELECT 1", Options{Format: CSV, Allow: Allow{Writes: true}}); err == nil || !BadInput(err) || !strings.Contains(err.Error(), "the last statement is not one") {
		t.Errorf("CSV of a CREATE: %v", err)
	}

	old := filepath.Join(dir, "old.csv")
	os.WriteFile(old, []byte("keep me\n"), 0o644)
	if _, err := runSQL(t, db, byLabel, Options{Format: CSV, Out: old}); !errors.Is(err, ErrExists) || !BadInput(err) ||
		err.Error() != "--out: output "+old+" already exists; pass --overwrite to replace it" {
		t.Errorf("existing output: %v", err)
	}
	// A query that fails while running (after the COPY started).
	for _, f := range []Format{CSV, Table} {
		_, err := runSQL(t, db, "SELECT CAST(CASE WHEN seed < 250 THEN '1' ELSE 'x' || seed END AS INTEGER) AS n FROM pairs", Options{Format: f, Out: old, Overwrite: true})
		if err == nil || !strings.Contains(err.Error(), "Conversion Error") {
			t.Errorf("%s: failing query: %v", f, err)
		}
	}
	if b, _ := os.ReadFile(old); string(b) != "keep me\n" {
		t.Errorf("a failed query changed the existing file: %q", b)
	}
	if _, err := runSQL(t, db, byLabel, Options{Format: CSV, Out: old, Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(old); !strings.HasPrefix(string(b), "label,n\n") {
		t.Errorf("overwrite: %q", b)
	}
	if _, err := runSQL(t, db, byLabel, Options{Format: CSV, Out: dir}); !errors.Is(err, atomicfile.ErrNotRegular) || !BadInput(err) ||
		!strings.Contains(err.Error(), "(it is a directory)") {
		t.Errorf("output is a directory: %v", err)
	}
	if _, err := runSQL(t, db, byLabel, Options{Format: CSV, Out: filepath.Join(dir, "no", "such", "x.csv")}); !errors.Is(err, ErrBadOutput) || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("output folder missing: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("files left in the output folder: %v", entries)
	}
}

// Arrow IPC, file and stream, read back with arrow-go: DuckDB's types and
// every row.
func TestQueryArrow(t *testing.T) {
	db := seedResults(t)
	q := "SELECT seed, label, same_obs, budget_left, p_stall FROM pairs ORDER BY seed"
	if !ArrowAvailable {
		out := filepath.Join(t.TempDir(), "x.arrow")
		if _, err := runSQL(t, db, q, Options{Format: Arrow, Out: out}); !errors.Is(err, ErrNoArrow) {
			t.Errorf("arrow without the duckdb_arrow tag: %v", err)
		}
		if _, err := os.Stat(out); err == nil {
			t.Error("a failed arrow export left a file")
		}
		t.Skip("built without the duckdb_arrow tag (make test sets it): checked the error only")
	}
	for _, f := range []Format{Arrow, ArrowStream} {
		out := filepath.Join(t.TempDir(), "pairs."+string(f))
		if _, err := runSQL(t, db, q, Options{Format: f, Out: out}); err != nil {
			t.Fatal(err)
		}
		fh, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		var schema *arrow.Schema
		var recs []arrow.RecordBatch
		if f == Arrow {
			r, err := ipc.NewFileReader(fh)
			if err != nil {
				t.Fatal(err)
			}
			schema = r.Schema()
			for i := 0; i < r.NumRecords(); i++ {
				rec, err := r.RecordBatch(i)
				if err != nil {
					t.Fatal(err)
				}
				recs = append(recs, rec)
			}
		} else {
			r, err := ipc.NewReader(fh)
			if err != nil {
				t.Fatal(err)
			}
			schema = r.Schema()
			for r.Next() {
				rec := r.RecordBatch()
				rec.Retain()
				recs = append(recs, rec)
			}
		}
		var types []string
		for _, fl := range schema.Fields() {
			types = append(types, fl.Name+":"+fl.Type.String())
		}
		if got := strings.Join(types, " "); got != "seed:int64 label:utf8 same_obs:bool budget_left:int64 p_stall:float64" {
			t.Errorf("%s schema: %s", f, got)
		}
		rows, rescued := 0, 0
		for _, rec := range recs {
			seeds := rec.Column(0).(*array.Int64)
			labels := rec.Column(1).(*array.String)
			for i := 0; i < int(rec.NumRows()); i++ {
				if seeds.Value(i) != int64(rows) {
					t.Fatalf("%s row %d has seed %d", f, rows, seeds.Value(i))
				}
				if labels.Value(i) == "rescued" {
					rescued++
				}
				rows++
			}
			rec.Release()
		}
		if rows != 300 || rescued != 75 {
			t.Errorf("%s: %d rows, %d rescued; want 300 and 75", f, rows, rescued)
		}
	}
	// More rows than one slice, in the query's order, with DuckDB's own
	// types (a HUGEINT sum stays a 38-digit decimal); an empty result keeps
	// its schema; a result that cannot be a table (a repeated name) is read
	// directly.
	for _, tc := range []struct {
		q      string
		schema string
		rows   int64
		first  string
	}{
		{"SELECT 300000 - range AS n, sum(range) OVER (ORDER BY range) AS total FROM range(300000) ORDER BY n", "n:int64 total:decimal(38, 0)", 300000, "1"},
		{"FROM pairs WHERE seed < 0", "", 0, ""},
		{"SELECT 1 AS a, 2 AS a", "a:int32 a:int32", 1, "1"},
	} {
		out := filepath.Join(t.TempDir(), "x.arrows")
		if _, err := runSQL(t, db, tc.q, Options{Format: ArrowStream, Out: out}); err != nil {
			t.Fatalf("%s: %v", tc.q, err)
		}
		fh, _ := os.Open(out)
		r, err := ipc.NewReader(fh)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, fl := range r.Schema().Fields() {
			types = append(types, fl.Name+":"+fl.Type.String())
		}
		var n int64
		first := ""
		for r.Next() {
			rec := r.RecordBatch()
			if n == 0 && rec.NumRows() > 0 {
				first = fmt.Sprint(rec.Column(0).GetOneForMarshal(0))
			}
			n += rec.NumRows()
		}
		fh.Close()
		if got := strings.Join(types, " "); (tc.schema != "" && got != tc.schema) || n != tc.rows || first != tc.first {
			t.Errorf("%s: schema %s, %d rows, first %s; want %s, %d, %s", tc.q, got, n, first, tc.schema, tc.rows, tc.first)
		}
		if left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".forklab-*")); len(left) != 0 {
			t.Errorf("temporary files left: %v", left)
		}
	}
	// A failing query leaves no file.
	out := filepath.Join(t.TempDir(), "bad.arrow")
	if _, err := runSQL(t, db, "SELECT nope FROM pairs", Options{Format: Arrow, Out: out}); !BadInput(err) {
		t.Errorf("bad arrow query: %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a failed arrow export left a file")
	}
}

// A grid's summary carries its parameter values by name (issue 26: SELECT
// p_stall … FROM summary JOIN configs USING (config_id) failed; the values
// were in config_params only): summary_by_config is summary with them.
// testdata/specs/grid-stall.yaml's two configurations over 2,000 seeds.
func TestSummaryByConfig(t *testing.T) {
	spec, err := sweep.ReadSpecFile("../../../testdata/specs/grid-stall.yaml", sweep.DefaultSpec())
	if err != nil {
		t.Fatal(err)
	}
	db := resultstest.Open(t, spec)
	got, err := runSQL(t, db, "SELECT p_stall, arm, rescued, harmed, net FROM summary_by_config", Options{Format: CSV})
	if want := "p_stall,arm,rescued,harmed,net\n0.0,on,505,502,3\n0.2,on,201,235,-34\n"; err != nil || got != want {
		t.Errorf("summary_by_config: %q, %v; want %q", got, err, want)
	}
	same, err := runSQL(t, db, "SELECT count(*) AS n FROM (SELECT * EXCLUDE (p_stall, target, base_budget, slack, freeze_at, p_obs_noise, p_refresh_fail) FROM summary_by_config EXCEPT ALL SELECT * FROM summary)", Options{Format: CSV})
	if err != nil || same != "n\n0\n" {
		t.Errorf("summary_by_config without the parameters differs from summary: %q, %v", same, err)
	}
}
