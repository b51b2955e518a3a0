package export

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forklab/forklab/internal/duck"
)

// refusal checks that err is a refusal naming flag, with want in its
// message.
func refusal(t *testing.T, what string, err error, flag, want string) {
	t.Helper()
	var rf *Refused
	if !errors.As(err, &rf) || rf.Flag != flag || !BadInput(err) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), flag) {
		t.Errorf("%s: %v; want a refusal naming %s with %q", what, err, flag, want)
	}
}

// By default forklab sql only reads, and only its results directory
// (issue 12 A): the COPY that deleted the tasks part file is refused and
// the results stay whole; /etc/passwd is not readable.
func TestSandboxDefaultReadsOnly(t *testing.T) {
	db := seedResults(t)
	dir := db.Dir
	parts, _ := filepath.Glob(filepath.Join(dir, "tasks", "*", "*.parquet"))
	copyTasks := "COPY (SELECT 1 AS k, 2 AS v) TO " + quote(filepath.Join(dir, "tasks")) + " (FORMAT parquet, PARTITION_BY (k), OVERWRITE); SELECT 'ok'"
	for _, f := range []Format{Table, CSV, Parquet} {
		_, err := runSQL(t, db, copyTasks, Options{Format: f, Out: filepath.Join(t.TempDir(), "x")})
		refusal(t, "COPY over tasks/ as "+string(f), err, "--allow-writes", "statement 1 (COPY (SELECT 1 AS k, 2 AS v) TO")
	}
	after, _ := filepath.Glob(filepath.Join(dir, "tasks", "*", "*.parquet"))
	if len(parts) == 0 || strings.Join(after, " ") != strings.Join(parts, " ") {
		t.Fatalf("tasks part files before %v, after %v", parts, after)
	}
	if got, err := runSQL(t, db, "SELECT count(*) AS n FROM tasks", Options{Format: CSV}); err != nil || got != "n\n300\n" {
		t.Errorf("tasks after the refused COPY: %q, %v", got, err)
	}

	_, err := runSQL(t, db, "SELECT * FROM read_csv('/etc/passwd')", Options{})
	refusal(t, "read_csv('/etc/passwd')", err, "--allow-path", `Cannot access file "/etc/passwd"`)
	if !strings.Contains(err.Error(), "--allow-path /etc/passwd") {
		t.Errorf("the hint names the path: %v", err)
	}
	// Paths into the results directory, relative (as file_search_path
	// resolves them) or absolute, read its files.
	abs, _ := filepath.Abs(dir)
	if got, err := runSQL(t, db, "SELECT count(*) AS n FROM 'pairs/*/*/*.parquet'", Options{Format: CSV}); err != nil || got != "n\n300\n" {
		t.Errorf("relative path inside the results directory: %q, %v", got, err)
	}
	if got, err := runSQL(t, db, "SELECT count(*) AS n FROM "+quote(filepath.Join(abs, "pairs/*/*/*.parquet")), Options{Format: CSV}); err != nil || got != "n\n300\n" {
		t.Errorf("absolute path inside the results directory: %q, %v", got, err)
	}
	// Out of the directory by ..
	_, err = runSQL(t, db, "SELECT * FROM read_text("+quote(filepath.Join(abs, "..", "..", "etc", "passwd"))+")", Options{})
	refusal(t, "../ out of the directory", err, "--allow-path", "Permission Error")
}

// Every kind of statement that does not only read is refused with the
// flag that allows it; the statements that read all run.
func TestSandboxStatements(t *testing.T) {
	db := seedResults(t)
	for _, tc := range []struct{ q, flag string }{
		{"CREATE TEMP TABLE t AS SELECT 1", "--allow-writes"},
		{"CREATE MACRO m(x) AS x", "--allow-writes"},
		{"ATTACH ':memory:' AS m", "--allow-writes"},
		{"DETACH memory", "--allow-writes"},
		{"EXPORT DATABASE " + quote(filepath.Join(db.Dir, "exported")), "--allow-writes"},
		{"PREPARE p AS SELECT 1", "--allow-writes"},
		{"DROP VIEW pairs", "--allow-writes"},
		{"EXPLAIN ANALYZE COPY (SELECT 1) TO " + quote(filepath.Join(db.Dir, "a.csv")), "--allow-writes"},
		{"VACUUM", "--allow-writes"},
		{"SET threads = 1", "--setting"},
		{"RESET threads", "--setting"},
		{"SET file_search_path = '/'", "--setting"},
		{"PRAGMA threads = 1", "--setting"},
		{"INSTALL httpfs", "--allow-extensions"},
		{"LOAD httpfs", "--allow-extensions"},
		{"SELECT 1; CREATE TABLE t (x INTEGER)", "--allow-writes"},
	} {
		_, err := runSQL(t, db, tc.q, Options{})
		refusal(t, tc.q, err, tc.flag, "statement ")
	}
	for q, want := range map[string]string{
		"SELECT count(*) AS n FROM pairs":                                   "300",
		"WITH x AS (SELECT 2 AS n) SELECT n FROM x":                         "2",
		"FROM pairs SELECT count(*) AS n":                                   "300",
		"VALUES (7)":                                                        "7",
		"DESCRIBE pairs":                                                    "quadrant",
		"SHOW TABLES":                                                       "pairs",
		"SUMMARIZE SELECT seed FROM pairs":                                  "299",
		"PIVOT (SELECT label FROM pairs) ON label USING count(*)":           "142",
		"EXPLAIN SELECT * FROM pairs":                                       "physical_plan",
		"EXPLAIN ANALYZE SELECT count(*) FROM pairs":                        "analyzed_plan",
		"SET VARIABLE x = 41; SELECT getvariable('x') + 1 AS y":             "42",
		"BEGIN; SELECT 5 AS n; ":                                            "n\n5\n",
		"CALL pragma_version()":                                             "v1.5",
		"PRAGMA version":                                                    "v1.5",
		"USE memory; SELECT count(*) AS n FROM pairs":                       "300",
		"/* a comment */ -- and another\nSET VARIABLE v = 3; SELECT 1 AS n": "1",
	} {
		got, err := runSQL(t, db, q, Options{})
		if err != nil || !strings.Contains(got, want) {
			t.Errorf("%s: %v\n%s", q, err, got)
		}
	}
}

// The flags let through what they name, and no more.
func TestSandboxFlags(t *testing.T) {
	db := seedResults(t)
	other := t.TempDir()
	csv := filepath.Join(other, "labels.csv")
	os.WriteFile(csv, []byte("seed,note\n0,first\n1,second\n"), 0o644)

	// --allow-path: one more file, or a directory.
	join := "SELECT seed, note FROM pairs JOIN read_csv(" + quote(csv) + ") USING (seed) ORDER BY seed"
	_, err := runSQL(t, db, join, Options{Format: CSV})
	refusal(t, "a file outside", err, "--allow-path", "--allow-path "+csv)
	for _, p := range []string{csv, other} {
		got, err := runSQL(t, db, join, Options{Format: CSV, Allow: Allow{Paths: []string{p}}})
		if err != nil || got != "seed,note\n0,first\n1,second\n" {
			t.Errorf("--allow-path %s: %q, %v", p, got, err)
		}
	}
	// --allow-writes: writes inside the sandbox, not beyond it.
	target := filepath.Join(other, "w.csv")
	q := "COPY (SELECT 1 AS n) TO " + quote(target) + "; SELECT 'ok' AS r"
	if _, err := runSQL(t, db, q, Options{Allow: Allow{Writes: true}}); err == nil || !strings.Contains(err.Error(), "--allow-path") {
		t.Errorf("--allow-writes without the path: %v", err)
	}
	if got, err := runSQL(t, db, q, Options{Format: CSV, Allow: Allow{Writes: true, Paths: []string{other}}}); err != nil || got != "r\nok\n" {
		t.Errorf("--allow-writes --allow-path: %q, %v", got, err)
	}
	if b, _ := os.ReadFile(target); string(b) != "n\n1\n" {
		t.Errorf("written: %q", b)
	}
	// --allow-external-access: any file.
	if got, err := runSQL(t, db, "SELECT count(*) AS n FROM read_csv("+quote(csv)+")", Options{Format: CSV, Allow: Allow{ExternalAccess: true}}); err != nil || got != "n\n2\n" {
		t.Errorf("--allow-external-access: %q, %v", got, err)
	}
	// --setting: before the lock.
	st, err := ParseSetting("threads=1")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := runSQL(t, db, "SELECT current_setting('threads') AS t", Options{Format: CSV, Settings: []duck.Setting{st}}); err != nil || got != "t\n1\n" {
		t.Errorf("--setting threads=1: %q, %v", got, err)
	}
	for _, s := range []string{"enable_external_access=true", "allowed_directories=/", "lock_configuration=false", "autoload_known_extensions=true", "file_search_path=/"} {
		_, err := ParseSetting(s)
		refusal(t, "--setting "+s, err, "--allow-external-access", "forklab sql sets")
	}
	if _, err := runSQL(t, db, "SELECT 1", Options{Settings: []duck.Setting{{Name: "threads", Value: "'lots'"}}}); err == nil || !BadInput(err) {
		t.Errorf("a setting DuckDB refuses: %v", err)
	}
	// No extension comes from the network: DuckDB would install excel
	// for read_xlsx.
	_, err = runSQL(t, db, "SELECT * FROM read_xlsx("+quote(csv)+")", Options{})
	refusal(t, "read_xlsx", err, "--allow-extensions", "excel")
	if strings.Contains(err.Error(), "download") {
		t.Errorf("tried the network: %v", err)
	}
}

// Every connection runs in UTC whatever the host's TZ: two UTC timestamps
// of one day are one date (issue 12 A). The test reruns itself under
// TZ=America/Los_Angeles.
func TestSandboxUTC(t *testing.T) {
	if os.Getenv("FORKLAB_EXPORT_TZ_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSandboxUTC$", "-test.count=1")
		cmd.Env = append(os.Environ(), "FORKLAB_EXPORT_TZ_CHILD=1", "TZ=America/Los_Angeles")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PASS") {
			t.Fatalf("under TZ=America/Los_Angeles: %v\n%s", err, out)
		}
	}
	db := seedResults(t)
	q := "SELECT CAST(ts AS DATE) AS day, count(*) AS n FROM (VALUES (TIMESTAMPTZ '2024-03-01 01:00:00+00'), (TIMESTAMPTZ '2024-03-01 23:00:00+00')) AS v(ts) GROUP BY ALL ORDER BY day"
	for _, f := range []Format{Table, CSV} {
		got, err := runSQL(t, db, q, Options{Format: f})
		want := map[Format]string{Table: "day         n\n2024-03-01  2\n", CSV: "day,n\n2024-03-01,2\n"}[f]
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", f, got, err, want)
		}
	}
	if got, err := runSQL(t, db, "SELECT TIMESTAMPTZ '2024-03-01 01:00:00+00' AS ts", Options{Format: CSV}); err != nil || got != "ts\n2024-03-01 01:00:00+00\n" {
		t.Errorf("a TIMESTAMPTZ prints in UTC: %q, %v", got, err)
	}
}
