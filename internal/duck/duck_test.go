package duck

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func one(t *testing.T, db *sql.DB, q string) (string, error) {
	t.Helper()
	var s sql.NullString
	err := db.QueryRow(q).Scan(&s)
	if !s.Valid {
		return "NULL", Message(err)
	}
	return s.String, Message(err)
}

// Two timestamps of one UTC day cast to one date whatever TZ the host has:
// the test reruns itself under TZ=America/Los_Angeles, where DuckDB would
// otherwise take the host's zone and split them over two days.
func TestUTCWhateverTheHostTZ(t *testing.T) {
	if os.Getenv("FORKLAB_DUCK_TZ_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestUTCWhateverTheHostTZ$", "-test.count=1")
		cmd.Env = append(os.Environ(), "FORKLAB_DUCK_TZ_CHILD=1", "TZ=America/Los_Angeles")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PASS") {
			t.Fatalf("under TZ=America/Los_Angeles: %v\n%s", err, out)
		}
	}
	for _, open := range []func() (*sql.DB, error){
		func() (*sql.DB, error) { return Open("") },
		func() (*sql.DB, error) { return Open(filepath.Join(t.TempDir(), "x.duckdb")) },
	} {
		db, err := open()
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		q := `SELECT count(DISTINCT CAST(ts AS DATE))::VARCHAR || ' ' || min(CAST(ts AS DATE))::VARCHAR
		      FROM (VALUES (TIMESTAMPTZ '2024-03-01 01:00:00+00'), (TIMESTAMPTZ '2024-03-01 23:00:00+00')) AS v(ts)`
		if got, err := one(t, db, q); err != nil || got != "1 2024-03-01" {
			t.Errorf("two UTC timestamps of 2024-03-01: %q days, %v; want 1 day, 2024-03-01", got, err)
		}
		if got, _ := one(t, db, "SELECT current_setting('TimeZone')"); got != "UTC" {
			t.Errorf("TimeZone = %q, want UTC", got)
		}
		// Still UTC on a second connection opened after the lock.
		if err := Lock(context.Background(), db, Sandbox{}); err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(2)
		c1, _ := db.Conn(context.Background())
		c2, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var tz string
		if err := c2.QueryRowContext(context.Background(), "SELECT current_setting('TimeZone')").Scan(&tz); err != nil || tz != "UTC" {
			t.Errorf("second connection: TimeZone %q, %v", tz, err)
		}
		c1.Close()
		c2.Close()
	}
}

// No extension is installed or loaded behind the caller's back: DuckDB
// would otherwise try to download httpfs for CREATE SECRET, or excel for
// read_xlsx.
func TestNoExtensionFromTheNetwork(t *testing.T) {
	db, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for q, want := range map[string]string{
		"SELECT current_setting('autoinstall_known_extensions')::VARCHAR": "false",
		"SELECT current_setting('autoload_known_extensions')::VARCHAR":    "false",
		"SELECT current_setting('allow_community_extensions')::VARCHAR":   "false",
		// Linked into the binary, so loaded without the network.
		"SELECT string_agg(extension_name, ',' ORDER BY extension_name) FROM duckdb_extensions() WHERE extension_name IN ('parquet', 'json', 'icu') AND loaded": "icu,json,parquet",
	} {
		if got, err := one(t, db, q); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", q, got, err, want)
		}
	}
	_, err = db.Exec("CREATE SECRET (TYPE s3)")
	if err == nil || strings.Contains(err.Error(), "download") || strings.Contains(err.Error(), "http://") {
		t.Errorf("CREATE SECRET tried the network or succeeded: %v", err)
	}
}

func TestSandbox(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	inside := filepath.Join(dir, "in")
	os.Mkdir(inside, 0o755)
	os.WriteFile(filepath.Join(inside, "a.csv"), []byte("x\n1\n2\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "out.csv"), []byte("x\n3\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "one.csv"), []byte("x\n4\n"), 0o644)
	// A sibling whose name starts with the allowed one.
	os.Mkdir(inside+"2", 0o755)
	os.WriteFile(filepath.Join(inside+"2", "b.csv"), []byte("x\n5\n"), 0o644)

	db, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = Lock(ctx, db, Sandbox{
		Dirs:     []string{inside},
		Files:    []string{filepath.Join(dir, "one.csv")},
		Settings: []Setting{{"threads", "1"}, {"memory_limit", "'500MB'"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ q, want, err string }{
		{q: "SELECT sum(x)::VARCHAR FROM read_csv(" + Quote(filepath.Join(inside, "a.csv")) + ")", want: "3"},
		{q: "SELECT sum(x)::VARCHAR FROM read_csv(" + Quote(filepath.Join(dir, "one.csv")) + ")", want: "4"},
		{q: "SELECT sum(x)::VARCHAR FROM read_csv(" + Quote(filepath.Join(dir, "out.csv")) + ")", err: "Permission Error"},
		{q: "SELECT sum(x)::VARCHAR FROM read_csv(" + Quote(filepath.Join(inside, "..", "out.csv")) + ")", err: "Permission Error"},
		{q: "SELECT sum(x)::VARCHAR FROM read_csv(" + Quote(filepath.Join(inside+"2", "b.csv")) + ")", err: "Permission Error"},
		{q: "SELECT count(*)::VARCHAR FROM read_csv('/etc/passwd')", err: "Permission Error"},
		{q: "SELECT current_setting('threads')::VARCHAR", want: "1"},
	} {
		got, err := one(t, db, tc.q)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s = %q, %v; want %q", tc.q, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s = %q, %v; want an error with %q", tc.q, got, err, tc.err)
		}
	}
	for _, stmt := range []string{"SET enable_external_access = true", "SET allowed_directories = ['/']", "SET threads = 2", "SET autoload_known_extensions = true"} {
		if _, err := db.Exec(stmt); err == nil || !strings.Contains(err.Error(), "the configuration has been locked") {
			t.Errorf("%s after the lock: %v", stmt, err)
		}
	}
	if _, err := db.Exec("SET VARIABLE v = 1"); err != nil {
		t.Errorf("variables stay free: %v", err)
	}
	if _, err := db.Exec("COPY (SELECT 1) TO " + Quote(filepath.Join(dir, "w.csv"))); err == nil || !strings.Contains(err.Error(), "Permission Error") {
		t.Errorf("COPY outside the sandbox: %v", err)
	}

	other, _ := Open("")
	defer other.Close()
	if err := Lock(ctx, other, Sandbox{Settings: []Setting{{"Enable_External_Access", "true"}}}); !errors.Is(err, ErrReserved) {
		t.Errorf("a setting the sandbox owns: %v", err)
	}
	if err := Lock(ctx, other, Sandbox{Extensions: true}); err == nil {
		t.Error("Extensions without ExternalAccess was accepted")
	}
}

func TestOpenPathWithQuestionMark(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "a?b.duckdb")); err == nil {
		t.Error("a path with '?' was opened")
	}
}

// Every DuckDB the project opens comes through this package, so that each
// runs in UTC and fetches no extension: no other non-test file opens one
// itself.
func TestOnlyThisPackageOpensDuckDB(t *testing.T) {
	root := filepath.Join("..", "..")
	var found []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "node_modules" || d.Name() == "testdata") && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, s := range []string{`sql.Open("duckdb"`, "duckdb.NewConnector("} {
			if strings.Contains(string(b), s) {
				found = append(found, p+": "+s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) == 0 || !strings.HasSuffix(found[0], "internal/duck/duck.go: duckdb.NewConnector(") || len(found) != 1 {
		t.Errorf("DuckDB opened outside internal/duck (use duck.Open): %v", found)
	}
}

func TestScanAll(t *testing.T) {
	db, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT * FROM (VALUES (1, 'ok'), (2, NULL)) AS v(n, s) ORDER BY n")
	if err != nil {
		t.Fatal(err)
	}
	cols, vals, err := ScanAll(rows)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cols, ",") != "n,s" || len(vals) != 2 ||
		vals[0][0] != int32(1) || vals[0][1] != "ok" || vals[1][0] != int32(2) || vals[1][1] != nil {
		t.Errorf("ScanAll = %v %#v", cols, vals)
	}
	rows, err = db.Query("SELECT 1 AS n WHERE false")
	if err != nil {
		t.Fatal(err)
	}
	if cols, vals, err := ScanAll(rows); err != nil || len(cols) != 1 || vals != nil {
		t.Errorf("no rows: %v %v %v", cols, vals, err)
	}
}
