package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docSQL is every SQL example the documents give against a sweep's tables
// and views: the statements of ```sql blocks, inline `SELECT …` code and
// the statements of `forklab sql DIR "…"` commands, with the file each
// came from. Examples that need inputs no sweep has (exported session
// events, files of the reader's own, another directory's Parquet) or that
// show a refusal on purpose are left out by docSQLSkip.
func docSQL(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "..", "README.md"), filepath.Join("..", "..", "schemas", "README.md"))
	block := regexp.MustCompile("(?s)```sql\n(.*?)```")
	inline := regexp.MustCompile("`((?:SELECT|SET VARIABLE) [^`]*)`")
	command := regexp.MustCompile(`forklab sql [^ "]+ (?:--[a-z-]+ [^ "]+ )*"([^"]+)"`)
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		var stmts []string
		for _, m := range block.FindAllStringSubmatch(text, -1) {
			for _, s := range strings.Split(m[1], ";\n") {
				stmts = append(stmts, s)
			}
		}
		for _, m := range inline.FindAllStringSubmatch(text, -1) {
			stmts = append(stmts, m[1])
		}
		for _, m := range command.FindAllStringSubmatch(text, -1) {
			stmts = append(stmts, m[1])
		}
		for _, s := range stmts {
			s = strings.TrimSpace(strings.Join(strings.Fields(s), " "))
			if s != "" && !docSQLSkip.MatchString(s) {
				out[s] = filepath.Base(f)
			}
		}
	}
	return out
}

// docSQLSkip matches the examples docSQL leaves out: session events
// (exported or sunk by the log, not by a sweep), read_parquet/read_csv of
// paths of the reader's own, a CSV joined with --allow-path, a DuckDB
// ATTACH of a path, the deliberate typo `lable` of bi.md's refusal, a
// bare `SELECT` (prose) and elided ones (`SELECT …`).
var docSQLSkip = regexp.MustCompile(`(?i)\bevents\b|read_parquet|read_csv|labels\.csv|ATTACH|\blable\b|^SELECT$|…|duckdb_views`)

// Every SQL example in the documents runs as written against a sweep of
// the world it is about (the counter's features, or toolloop's), and the
// join docs/agent-protocol.md gives to name each column of tasks and pairs
// once does (its claim that tasks JOIN pairs "names each value once" was
// false: status and error are in both).
func TestDocSQLRuns(t *testing.T) {
	tmp := t.TempDir()
	dirs := map[string]string{"counter": filepath.Join(tmp, "counter"), "toolloop": filepath.Join(tmp, "toolloop")}
	for w, dir := range dirs {
		if _, stderr, code := run(t, "sweep", "--world", w, "--seeds", "0:400", "--fork-at", "2", "--arms", "off,on,placebo,aa", "--out", dir, "-q"); code != 0 {
			t.Fatalf("sweep %s: exit %d\n%s", w, code, stderr)
		}
	}
	stmts := docSQL(t)
	if len(stmts) < 10 {
		t.Fatalf("found %d SQL examples in the documents; the extraction is broken", len(stmts))
	}
	for s, file := range stmts {
		var errs []string
		ok := false
		for w, dir := range dirs {
			_, stderr, code := run(t, "sql", dir, s)
			if code == 0 {
				ok = true
				break
			}
			errs = append(errs, w+": "+strings.TrimSpace(stderr))
		}
		if !ok {
			t.Errorf("%s: %q does not run:\n%s", file, s, strings.Join(errs, "\n"))
		}
	}
	// The joins docs/agent-protocol.md gives name each column once, and the
	// plain join repeats just what the doc says it does.
	const join = "SELECT p.*, t.* EXCLUDE (config_id, run_id, seed, status, error), t.status AS task_status, t.error AS task_error FROM tasks t JOIN pairs p USING (config_id, run_id)"
	const counterJoin = "SELECT p.*, t.* EXCLUDE (config_id, run_id, seed, status, error, slack, freeze_at), t.status AS task_status, t.error AS task_error, t.slack AS task_slack, t.freeze_at AS task_freeze_at FROM tasks t JOIN pairs p USING (config_id, run_id)"
	for _, q := range []string{join, counterJoin} {
		if stmts[q] != "agent-protocol.md" {
			t.Errorf("docs/agent-protocol.md no longer gives the join %q", q)
		}
	}
	for _, tc := range []struct{ world, q, want string }{
		{"toolloop", join, ""},
		{"counter", counterJoin, ""},
		{"toolloop", "SELECT * FROM tasks JOIN pairs USING (config_id, run_id)", "error,2\nseed,2\nstatus,2\n"},
		{"counter", "SELECT * FROM tasks JOIN pairs USING (config_id, run_id)", "error,2\nfreeze_at,2\nseed,2\nslack,2\nstatus,2\n"},
	} {
		stdout, stderr, code := run(t, "sql", dirs[tc.world], "SELECT column_name, count(*) AS n FROM (DESCRIBE "+tc.q+") GROUP BY ALL HAVING n > 1 ORDER BY ALL", "--format", "csv")
		if code != 0 {
			t.Fatalf("describe %s: exit %d\n%s", tc.q, code, stderr)
		}
		if want := "column_name,n\n" + tc.want; stdout != want {
			t.Errorf("%s: columns named more than once by %s:\n%s\nwant\n%s", tc.world, tc.q, stdout, want)
		}
	}
}

// docs/agent-protocol.md lists the flags forklab fork --agent takes and
// the one it lacks (a tester looked for --agent-env, --param and
// --timeout; --agent-env and --timeout are there now, and --checkpoint
// takes an agent sweep's checkpoints); the list is fork's flags, exactly.
func TestDocForkAgentFlags(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "agent-protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(b)), " ")
	_, rest, ok := strings.Cut(text, "`forklab fork --agent` takes these flags and no others: ")
	list, lacks, ok2 := strings.Cut(rest, ". It has **no** ")
	lacks, _, ok3 := strings.Cut(lacks, ":")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/agent-protocol.md no longer lists fork --agent's flags")
	}
	flag := regexp.MustCompile("`(--[a-z-]+)`")
	var doc []string
	for _, m := range flag.FindAllStringSubmatch(list, -1) {
		doc = append(doc, m[1])
	}
	out, _, _ := run(t, "fork", "--help")
	_, flags, _ := strings.Cut(out, "Flags:")
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-[a-z], )?(--[a-z-]+)`).FindAllStringSubmatch(flags, -1) {
		if m[1] != "--help" && m[1] != "--agent" {
			got = append(got, m[1])
		}
	}
	slices.Sort(doc)
	slices.Sort(got)
	if !slices.Equal(doc, got) {
		t.Errorf("the doc lists fork --agent's flags as %v; fork --help has %v", doc, got)
	}
	for _, m := range flag.FindAllStringSubmatch(lacks, -1) {
		if slices.Contains(got, m[1]) {
			t.Errorf("the doc says fork --agent has no %s, but it has", m[1])
		}
	}
}
