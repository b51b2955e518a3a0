package export

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/forklab/forklab/pipeline/analysis/results/resultstest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/queries"
	"github.com/forklab/forklab/schemas"
	"github.com/parquet-go/parquet-go"
)

func openDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func queryAll(t *testing.T, db *sql.DB, text string) *results.Table {
	t.Helper()
	rows, err := db.Query(text)
	if err != nil {
		t.Fatalf("%s: %v", firstLine(text), err)
	}
	cols, vals, err := duck.ScanAll(rows)
	if err != nil {
		t.Fatalf("%s: %v", firstLine(text), err)
	}
	return &results.Table{Columns: cols, Rows: vals}
}

func scalar(t *testing.T, db *sql.DB, text string) any {
	t.Helper()
	tab := queryAll(t, db, text)
	if len(tab.Rows) != 1 || len(tab.Rows[0]) != 1 {
		t.Fatalf("%s: %d rows, want one value", text, len(tab.Rows))
	}
	return tab.Rows[0][0]
}

// results.duckdb, moved elsewhere with its directory and opened read-only
// from inside it, answers every file of queries/ exactly as the in-memory
// views of forklab report do.
func TestResultsDBMovedReadOnlyRunsEveryQuery(t *testing.T) {
	ctx := context.Background()
	dir := resultstest.Dir(t, resultstest.NoisySpec())
	writeEvents(t, filepath.Join(dir, EventsDir, "part-0.parquet"), 2)
	info, err := WriteDB(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	viewDefs, err := queries.ViewDefs(resultsManifest(t, dir).Declaration)
	if err != nil {
		t.Fatal(err)
	}
	var wantViews []string
	for _, v := range viewDefs {
		wantViews = append(wantViews, v.Name)
	}
	wantViews = append(wantViews, "manifest", "events")
	for _, name := range queries.Names() {
		if len(queries.Split(queries.MustGet(name))) == 1 {
			wantViews = append(wantViews, name)
		}
	}
	if !reflect.DeepEqual(info.Views, wantViews) || !info.Events || len(wantViews) < 13 {
		t.Fatalf("views %v (events %v), want %v", info.Views, info.Events, wantViews)
	}
	if want := []string{"z95", "wilson_lo", "wilson_hi", "mcnemar_p", "newcombe_phi", "newcombe_lo", "newcombe_hi", "t975", "wilcoxon_p"}; !reflect.DeepEqual(info.Macros, want) {
		t.Fatalf("macros %v, want %v", info.Macros, want)
	}
	if _, err := os.Stat(filepath.Join(dir, DBName+".wal")); err == nil {
		t.Error("a WAL file was left beside results.duckdb")
	}

	moved := filepath.Join(t.TempDir(), "moved results")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	ref, err := results.Open(ctx, moved)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close() // results.Open defines the events view itself
	t.Chdir(moved)
	// Moved, the database reads the directory named by file_search_path
	// (its views name the directory it was written in otherwise).
	db := openDB(t, DBName+"?access_mode=read_only&file_search_path="+moved)

	// The definitions are stored; nothing else is.
	tables := queryAll(t, db, "SELECT table_name FROM duckdb_tables()")
	if len(tables.Rows) != 0 {
		t.Errorf("results.duckdb holds tables %v; it should hold views only", tables.Rows)
	}

	ran := 0
	var defs []string
	for _, name := range queries.Names() {
		text := queries.MustGet(name)
		if len(queries.Split(text)) > 1 {
			defs = append(defs, name)
			continue
		}
		// A report query: same rows as through results.Open, and the same
		// as its view.
		want, err := ref.Run(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(want.Rows) == 0 {
			t.Fatalf("queries/%s.sql returns no rows on the test sweep", name)
		}
		got := queryAll(t, db, text)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("queries/%s.sql on results.duckdb differs from results.Open:\n got %v\nwant %v", name, got.Rows[:1], want.Rows[:1])
		}
		if view := queryAll(t, db, "SELECT * FROM "+name); !reflect.DeepEqual(view, want) {
			t.Errorf("view %s differs from queries/%s.sql", name, name)
		}
		ran++
	}

	// A file of definitions runs, as it is, into the in-memory catalog of
	// a session that attached results.duckdb read-only; results.duckdb
	// must have every object it defines, with the same contents.
	att := openDB(t, "")
	if _, err := att.Exec("ATTACH " + quote(DBName) + " AS results (READ_ONLY)"); err != nil {
		t.Fatal(err)
	}
	for _, name := range defs {
		text := queries.MustGet(name)
		if _, err := att.Exec("USE memory; " + text); err != nil {
			t.Fatalf("queries/%s.sql beside the read-only results.duckdb: %v", name, err)
		}
		for _, s := range queries.Split(text) {
			obj := createdName(s)
			if strings.Contains(s, " VIEW ") {
				a := scalar(t, att, "SELECT count(*) FROM results."+obj)
				b := scalar(t, att, "SELECT count(*) FROM memory."+obj)
				if a != b || a == int64(0) {
					t.Errorf("view %s: %v rows in results.duckdb, %v from queries/%s.sql", obj, a, b, name)
				}
				continue
			}
			n := scalar(t, att, "SELECT count(*) FROM duckdb_functions() WHERE database_name = 'results' AND function_name = "+quote(obj))
			if n != int64(1) {
				t.Errorf("macro %s: %v definitions in results.duckdb", obj, n)
			}
			// The macro evaluates the same in both catalogs.
			args := map[string]string{"z95": "", "wilson_lo": "3, 10", "wilson_hi": "3, 10",
				"mcnemar_p": "75, 83", "newcombe_phi": "70, 75, 83, 72", "newcombe_lo": "70, 75, 83, 72", "newcombe_hi": "70, 75, 83, 72",
				"t975": "12", "wilcoxon_p": "24, 7, 0"}[obj]
			a := scalar(t, att, "SELECT results."+obj+"("+args+")")
			b := scalar(t, att, "SELECT memory."+obj+"("+args+")")
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("macro %s(%s): %v in results.duckdb, %v from queries/%s.sql", obj, args, a, b, name)
			}
		}
		ran++
	}
	if ran != len(queries.Names()) || len(defs) != 1 {
		t.Fatalf("ran %d of %d query files (%d of definitions)", ran, len(queries.Names()), len(defs))
	}

	// The report views read the variables when queried.
	if _, err := db.Exec("SET VARIABLE holdout = 0.5"); err != nil {
		t.Fatal(err)
	}
	ref.SQL().Exec("SET VARIABLE holdout = 0.5")
	for _, v := range []string{"qini", "policy_search"} {
		want, err := ref.Run(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if got := queryAll(t, db, "SELECT * FROM "+v); !reflect.DeepEqual(got, want) {
			t.Errorf("view %s with holdout 0.5 differs from queries/%s.sql", v, v)
		}
	}
	// The search runs for each fork step on its own: 400 pairs of arm on
	// each.
	if got := fmt.Sprint(queryAll(t, db, "SELECT fork_step, min(search_pairs + holdout_pairs), max(search_pairs + holdout_pairs) FROM policy_search GROUP BY ALL ORDER BY ALL").Rows); got != "[[2 400 400] [3 400 400]]" {
		t.Errorf("policy_search splits %s pairs of arm on per fork step, want 400 at fork steps 2 and 3", got)
	}
	if got := fmt.Sprint(queryAll(t, db, "SELECT arm, side, turns, no_tool_turns, recoveries, final_steps, final_obs::JSON->>'obs', branch_success FROM session_events WHERE arm = 'on'").Rows); got != "[[on control 3 1 0 8 6 false] [on treatment 2 0 1 8 6 true]]" {
		t.Errorf("session_events of seed 5: %s", got)
	}
	if m := scalar(t, db, "SELECT spec.replicas FROM manifest"); m != int64(3) {
		t.Errorf("manifest view: replicas %v, want 3", m)
	}
	c := scalar(t, db, "SELECT comment FROM duckdb_views() WHERE view_name = 'summary'")
	if !strings.HasPrefix(c.(string), "What does each arm do, overall, against the control arm off, and how sure are we? (queries/summary.sql).") {
		t.Errorf("summary's comment is %q", c)
	}
}

// writeEvents writes session events as forklab log export does
// (schemas.SessionEvent): the branches off and on, replica 0, of seed 5
// forked at forkStep, each with its parent's events before the fork.
func writeEvents(t *testing.T, path string, forkStep int32) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	i64 := func(v int64) *int64 { return &v }
	i32 := func(v int32) *int32 { return &v }
	str := func(v string) *string { return &v }
	boo := func(v bool) *bool { return &v }
	var rows []schemas.SessionEvent
	for _, arm := range []string{"off", "on"} {
		stream := fmt.Sprintf("sweep/c0/s5/f%d/%s/r0", forkStep, arm)
		for i, typ := range []string{"model_turn", "model_turn", "fork", "model_turn", "recovery", "model_turn", "outcome"} {
			e := schemas.SessionEvent{Stream: stream, Index: int32(i), ReadOffset: fmt.Sprint(i), Type: typ, Domain: true,
				SessionSeed: i64(5), BranchForkStep: i32(forkStep), BranchArm: str(arm), BranchReplica: i32(0), Event: `{"type":"` + typ + `"}`}
			switch typ {
			case "model_turn":
				e.NoTool = boo(i == 5 && arm == "off")
			case "outcome":
				e.Obs, e.Steps, e.Success = str(`{"obs":6,"steps":8}`), i32(8), boo(arm == "on")
			}
			if typ == "recovery" && arm == "off" {
				e.Type = "model_turn"
				e.NoTool = boo(false)
			}
			rows = append(rows, e)
		}
	}
	if err := parquet.WriteFile(path, rows); err != nil {
		t.Fatal(err)
	}
}

// results.duckdb opened from another working directory, as a BI tool's
// file dialog opens it, with a plain DuckDB connection and no setting
// (issue 26: "IO Error: No files found that match the pattern
// "pairs/*/*/*.parquet""): its views read the directory by its absolute
// path. With file_search_path set (a moved directory), they read that;
// ATTACH works the same way.
func TestResultsDBFromElsewhere(t *testing.T) {
	ctx := context.Background()
	dir := resultstest.Dir(t, sweep.DefaultSpec())
	if _, err := WriteDB(ctx, dir); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	t.Chdir(t.TempDir())

	plain, err := sql.Open("duckdb", filepath.Join(abs, DBName)+"?access_mode=read_only")
	if err != nil {
		t.Fatal(err)
	}
	if n := scalar(t, plain, "SELECT count(*) FROM pairs"); n != int64(300) {
		t.Errorf("pairs from another directory: %v rows, want 300", n)
	}
	if got := fmt.Sprint(queryAll(t, plain, "SELECT rescued, harmed, unchanged, net FROM summary").Rows); got != "[[75 83 142 -8]]" {
		t.Errorf("summary from another directory: %s, want the seed's 75 rescued, 83 harmed, 142 unchanged, net -8", got)
	}
	plain.Close()

	// Moved: the recorded path finds nothing; file_search_path, or
	// forklab db in the new place, reads it again.
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(abs, moved); err != nil {
		t.Fatal(err)
	}
	lost := openDB(t, filepath.Join(moved, DBName)+"?access_mode=read_only")
	if _, err := lost.Exec("SELECT count(*) FROM pairs"); err == nil || !strings.Contains(err.Error(), abs+"/pairs/*/*/*.parquet") {
		t.Errorf("moved, without file_search_path: %v", err)
	}
	lost.Close()
	found := openDB(t, filepath.Join(moved, DBName)+"?access_mode=read_only&file_search_path="+moved)
	if n := scalar(t, found, "SELECT count(*) FROM pairs"); n != int64(300) {
		t.Errorf("moved, with file_search_path: %v rows, want 300", n)
	}
	found.Close()
	if err := os.Rename(moved, abs); err != nil {
		t.Fatal(err)
	}

	db := openDB(t, filepath.Join(abs, DBName)+"?access_mode=read_only&file_search_path="+abs)
	if n := scalar(t, db, "SELECT count(*) FROM pairs"); n != int64(300) {
		t.Errorf("pairs: %v rows, want 300", n)
	}
	if got := fmt.Sprint(queryAll(t, db, "SELECT rescued, harmed, unchanged, net, round(mcnemar_p, 3) FROM summary").Rows); got != "[[75 83 142 -8 0.578]]" {
		t.Errorf("summary: %s, want the seed's 75 rescued, 83 harmed, 142 unchanged, net -8, p 0.578", got)
	}

	mem := openDB(t, "")
	if _, err := mem.Exec("ATTACH " + quote(filepath.Join(abs, DBName)) + " AS r (READ_ONLY); SET file_search_path = " + quote(abs)); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(queryAll(t, mem, "SELECT trigger FROM r.policy_search WHERE chosen").Rows); got != "[[same_obs = true]]" {
		t.Errorf("attached policy_search chose %s, want same_obs = true", got)
	}
}

// A rerun picks up session events, keeps the user's own objects, and
// drops the events view when the files are gone.
func TestWriteDBRerunEvents(t *testing.T) {
	ctx := context.Background()
	dir := resultstest.Dir(t, sweep.DefaultSpec())
	if _, err := WriteDB(ctx, dir); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	db, err := sql.Open("duckdb", filepath.Join(abs, DBName))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("SET file_search_path = " + quote(abs) + "; CREATE VIEW my_rescues AS SELECT seed FROM pairs WHERE label = 'rescued'"); err != nil {
		t.Fatal(err)
	}
	// Two event files of different schema versions, Hive-partitioned by
	// export: the second lacks most columns and has one the first lacks.
	writeEvents(t, filepath.Join(abs, EventsDir, "export=1", "part-0.parquet"), 3)
	part := filepath.Join(abs, EventsDir, "export=2")
	os.MkdirAll(part, 0o755)
	if _, err := db.Exec("COPY (SELECT 'sweep/c0/s6/f2/on/r0' AS stream, range::INTEGER AS index, 'model_turn' AS type, true AS domain, 7 AS producer_epoch FROM range(2)) TO " +
		quote(filepath.Join(part, "part-0.parquet")) + " (FORMAT parquet)"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	info, err := WriteDB(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Events || !slices.Contains(info.Views, "events") || !slices.Contains(info.Views, "session_events") {
		t.Fatalf("rerun with events: %+v", info)
	}
	t.Chdir(dir)
	ro := openDB(t, DBName+"?access_mode=read_only")
	if got := fmt.Sprint(queryAll(t, ro, "SELECT export, count(*), count(producer_epoch), count(session_seed), max(index) FROM events GROUP BY ALL ORDER BY ALL").Rows); got != "[[1 14 0 14 6] [2 2 2 0 1]]" {
		t.Errorf("events by export: %s", got)
	}
	if n := scalar(t, ro, "SELECT count(*) FROM session_events"); n != int64(2) {
		t.Errorf("session_events: %v rows, want 2 (seed 5's control and treatment)", n)
	}
	if n := scalar(t, ro, "SELECT count(*) FROM my_rescues"); n != int64(75) {
		t.Errorf("the user's view lost: %v", n)
	}
	ro.Close()

	os.RemoveAll(filepath.Join(abs, EventsDir))
	info, err = WriteDB(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	ro = openDB(t, DBName+"?access_mode=read_only")
	views := queryAll(t, ro, "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY view_name")
	var names []string
	for _, r := range views.Rows {
		names = append(names, r[0].(string))
	}
	if info.Events || slices.Contains(names, "events") || slices.Contains(names, "session_events") || !slices.Contains(names, "my_rescues") {
		t.Errorf("after the events are gone: views %v", names)
	}
}

func TestWriteDBNotResults(t *testing.T) {
	dir := t.TempDir()
	_, err := WriteDB(context.Background(), dir)
	if !errors.Is(err, sweep.ErrNotResults) || !strings.Contains(err.Error(), "has no manifest.json") {
		t.Errorf("WriteDB of an empty directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, DBName)); err == nil {
		t.Error("WriteDB of an empty directory created results.duckdb")
	}
	// A file that is not a DuckDB database says what to do.
	res := resultstest.Dir(t, sweep.DefaultSpec())
	os.WriteFile(filepath.Join(res, DBName), []byte("not a database, just text that is long enough to have a header"), 0o644)
	_, err = WriteDB(context.Background(), res)
	if err == nil || !strings.Contains(err.Error(), "remove it and rerun") {
		t.Errorf("WriteDB over a text file: %v", err)
	}
}

// The macros and views work in a database attached under any name, as
// docs/bi.md tells Python users to attach it (issue 12 D: mcnemar_p called
// mcnemar_tail, which DuckDB looked for in the default database).
func TestResultsDBAttachedUnderAnyName(t *testing.T) {
	ctx := context.Background()
	dir := resultstest.Dir(t, sweep.DefaultSpec())
	info, err := WriteDB(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	args := map[string]string{"z95": "", "wilson_lo": "3, 10", "wilson_hi": "3, 10", "mcnemar_p": "75, 83",
		"newcombe_phi": "70, 75, 83, 72", "newcombe_lo": "70, 75, 83, 72", "newcombe_hi": "70, 75, 83, 72",
		"t975": "12", "wilcoxon_p": "24, 7, 0"}
	direct := openDB(t, "")
	if _, err := direct.Exec(queries.MustGet("stats")); err != nil {
		t.Fatal(err)
	}
	for _, alias := range []string{"forklab", "x", `"my results"`} {
		db := openDB(t, "")
		if _, err := db.Exec("ATTACH " + quote(filepath.Join(abs, DBName)) + " AS " + alias + " (READ_ONLY); SET file_search_path = " + quote(abs)); err != nil {
			t.Fatal(err)
		}
		if p := scalar(t, db, "SELECT "+alias+".mcnemar_p(75, 83)"); p != 0.5777428358653729 {
			t.Errorf("%s.mcnemar_p(75, 83) = %v, want 0.5777428358653729", alias, p)
		}
		for _, m := range info.Macros {
			a, ok := args[m]
			if !ok {
				t.Fatalf("no arguments for macro %s", m)
			}
			if got, want := scalar(t, db, "SELECT "+alias+"."+m+"("+a+")"), scalar(t, direct, "SELECT "+m+"("+a+")"); got != want {
				t.Errorf("%s.%s(%s) = %v, want %v", alias, m, a, got, want)
			}
		}
		for _, v := range info.Views {
			queryAll(t, db, "SELECT * FROM "+alias+"."+v+" LIMIT 1")
		}
		if got := fmt.Sprint(queryAll(t, db, "SELECT rescued, harmed FROM "+alias+".summary").Rows); got != "[[75 83]]" {
			t.Errorf("%s.summary: %s", alias, got)
		}
	}
}

// Opened from inside another results directory, or with file_search_path
// set to one, the views refuse to read that sweep's files, naming both
// directories (issue 12 D: a 12,000-pair sweep's database reported the 300
// pairs of the directory it was opened from).
func TestResultsDBRefusesAnotherSweep(t *testing.T) {
	ctx := context.Background()
	own := resultstest.Dir(t, sweep.DefaultSpec())
	small := sweep.DefaultSpec()
	small.Seeds = sweep.Range{Start: 0, End: 50}
	other := resultstest.Dir(t, small)
	if _, err := WriteDB(ctx, own); err != nil {
		t.Fatal(err)
	}
	ownAbs, _ := filepath.Abs(own)
	otherAbs, _ := filepath.Abs(other)
	path := filepath.Join(ownAbs, DBName)

	t.Chdir(other)
	// From inside the other directory, it reads its own sweep by its
	// absolute path.
	inside := openDB(t, path+"?access_mode=read_only")
	if n := scalar(t, inside, "SELECT count(*) FROM pairs"); n != int64(300) {
		t.Errorf("opened inside another results directory: %v pairs, want its own 300", n)
	}
	inside.Close()
	// Pointed at both: no directory is read.
	both := openDB(t, path+"?access_mode=read_only&file_search_path="+ownAbs+","+otherAbs)
	if _, err := both.Exec("SELECT count(*) FROM pairs"); err == nil {
		t.Errorf("file_search_path of two directories: no error")
	}
	both.Close()
	for _, tc := range []struct{ dsn, found string }{
		// Pointed at it.
		{path + "?access_mode=read_only&file_search_path=" + otherAbs, "the manifest.json it reads, " + filepath.Join(otherAbs, "manifest.json") + ", is another sweep's"},
	} {
		db := openDB(t, tc.dsn)
		for _, v := range []string{"pairs", "tasks", "configs", "checkpoints", "branches", "manifest", "summary", "slices", "policy_search"} {
			_, err := db.Exec("SELECT count(*) FROM " + v)
			if err == nil || !strings.Contains(err.Error(), "results.duckdb holds the views of the sweep in "+ownAbs+" (started ") || !strings.Contains(err.Error(), tc.found) {
				t.Errorf("%s with %s: %v", v, tc.dsn, err)
			}
		}
		db.Close()
	}
	// With file_search_path set to its own directory, it reads that one,
	// wherever DuckDB runs.
	db := openDB(t, path+"?access_mode=read_only&file_search_path="+ownAbs)
	if n := scalar(t, db, "SELECT count(*) FROM pairs"); n != int64(300) {
		t.Errorf("own sweep: %v pairs", n)
	}
	if ok := scalar(t, db, "SELECT own_sweep FROM forklab_sweep"); ok != true {
		t.Errorf("forklab_sweep = %v", ok)
	}
	if r := scalar(t, db, "SELECT spec.seeds FROM manifest"); r != "0:300" {
		t.Errorf("manifest view: seeds %v", r)
	}
}

// A reader in another process holding results.duckdb open read-only does
// not stop a rebuild (issue 12 D: forklab db exited 1); the reader keeps
// the old file, a new reader gets the new one, and no temporary file is
// left.
func TestWriteDBWhileAReaderHoldsIt(t *testing.T) {
	ctx := context.Background()
	dir := resultstest.Dir(t, sweep.DefaultSpec())
	if _, err := WriteDB(ctx, dir); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	cmd := exec.Command(os.Args[0], "-test.run=^TestDBReaderProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FORKLAB_DB_READER="+filepath.Join(abs, DBName))
	cmd.Dir = abs
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	lines := bufio.NewScanner(outPipe)
	next := func() string {
		for lines.Scan() {
			if l := lines.Text(); strings.HasPrefix(l, "reader ") {
				return l
			}
		}
		t.Fatalf("the reader process ended: %v", lines.Err())
		return ""
	}
	if l := next(); l != "reader 300" {
		t.Fatalf("reader: %q", l)
	}

	// The rebuild adds a view the old file lacks.
	writeEvents(t, filepath.Join(abs, EventsDir, "part-0.parquet"), 3)
	info, err := WriteDB(ctx, dir)
	if err != nil {
		t.Fatalf("forklab db while a reader holds results.duckdb: %v", err)
	}
	if !info.Events {
		t.Error("the rebuild has no events view")
	}
	fmt.Fprintln(in, "again")
	if l := next(); l != "reader 300" {
		t.Errorf("the reader after the rebuild: %q", l)
	}
	t.Chdir(abs)
	db := openDB(t, DBName+"?access_mode=read_only")
	if n := scalar(t, db, "SELECT count(*) FROM events"); n != int64(14) {
		t.Errorf("a new reader sees %v events, want 14", n)
	}
	left, _ := filepath.Glob(filepath.Join(abs, "."+DBName+".forklab.tmp-*"))
	if _, err := os.Stat(filepath.Join(abs, DBName+".wal")); err == nil || len(left) > 0 {
		t.Errorf("files left: %v, wal: %v", left, err)
	}
}

// TestDBReaderProcess is TestWriteDBWhileAReaderHoldsIt's reader: it opens
// $FORKLAB_DB_READER read-only in its working directory, prints the pairs
// it counts, and again for every line on standard input.
func TestDBReaderProcess(t *testing.T) {
	path := os.Getenv("FORKLAB_DB_READER")
	if path == "" {
		t.Skip("run by TestWriteDBWhileAReaderHoldsIt")
	}
	db, err := duck.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func() {
		var n int64
		if err := db.QueryRow("SELECT count(*) FROM pairs").Scan(&n); err != nil {
			fmt.Println("reader error", err)
			return
		}
		fmt.Println("reader", n)
	}
	count()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		count()
	}
}

func resultsManifest(t *testing.T, dir string) sweep.Manifest {
	t.Helper()
	m, err := sweep.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
