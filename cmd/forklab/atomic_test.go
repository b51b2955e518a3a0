package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/pipeline/analysis/export"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// tree lists every file and folder under dir with a digest of its bytes
// (or its link target, or "dir"), sorted: two trees are equal when nothing
// under dir changed.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		what := "dir"
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			what, _ = os.Readlink(p)
			what = "-> " + what
		case d.Type().IsRegular():
			b, _ := os.ReadFile(p)
			h := sha256.Sum256(b)
			what = hex.EncodeToString(h[:8])
		case !d.IsDir():
			what = d.Type().String()
		}
		out = append(out, rel+" "+what)
		return nil
	})
	sort.Strings(out)
	return out
}

// leftovers lists what forklab must never leave in dir (and below): its
// temporary files, its sql scratch folders, DuckDB's tmp_ copies.
func leftovers(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		n := d.Name()
		if atomicfile.IsTemp(n) || strings.HasPrefix(n, ".forklab-sql-") || strings.HasPrefix(n, "tmp_") || strings.Contains(n, ".tmp-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// start runs forklab in the background.
func start(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(forklabBin, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &errb
}

// waitFor polls until ok or the deadline, then fails.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// Issue 12 E, the first example: an overwrite interrupted by Ctrl-C (or
// SIGTERM) leaves the finished sweep it was replacing exactly as it was,
// and exits 130.
func TestOutputSweepOverwriteInterrupted(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ow")
	mustRun(t, "sweep", "--seeds", "0:300", "--out", out, "-q")
	mustRun(t, "report", out, "--html", filepath.Join(out, "report.html"))
	before := tree(t, out)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		// The interrupted sweep before is kept for --resume; this one
		// starts afresh.
		os.RemoveAll(sweep.StagingDir(out))
		cmd, stderr := start(t, "sweep", "--seeds", "0:50000000", "--out", out, "--overwrite", "-q")
		ledger := filepath.Join(sweep.StagingDir(out), ".forklab-units")
		waitFor(t, "a unit of the new sweep", func() bool {
			units, _ := filepath.Glob(filepath.Join(ledger, "c*-s*.json")) // a unit entry (beside spec.json and sweep_id)
			return len(units) > 0
		})
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		if code := exitCode(err); code != 130 || !strings.Contains(stderr.String(), "is as it was before") {
			t.Fatalf("%v: exit %d, %q; want 130", sig, code, stderr)
		}
		if got := tree(t, out); !slices.Equal(got, before) {
			t.Fatalf("after %v the old sweep changed:\n%s\nwas\n%s", sig, strings.Join(got, "\n"), strings.Join(before, "\n"))
		}
	}
	if !strings.Contains(mustRun(t, "report", out), "300 pairs") {
		t.Fatal("the old sweep does not report")
	}
}

// Issue 12 E, the second example: after sweep --overwrite nothing derived
// from the replaced sweep is left — report --html, policy --out, a nested
// sweep (make sweep's rerun), sql --out, a report written into a folder of
// the user's — while the user's own files and folders stay.
func TestOutputDerivedFilesGoWithTheSweep(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	mustRun(t, "sweep", "--seeds", "0:300", "--out", out, "-q")
	os.WriteFile(filepath.Join(out, "mine.txt"), []byte("mine"), 0o644)
	os.Mkdir(filepath.Join(out, "notes"), 0o755)
	os.WriteFile(filepath.Join(out, "notes", "n.txt"), []byte("mine too"), 0o644)
	mustRun(t, "report", out, "--html", filepath.Join(out, "report.html"))
	mustRun(t, "report", out, "--html", filepath.Join(out, "notes", "r.html"))
	mustRun(t, "policy", out, "--out", filepath.Join(out, "policy.json"))
	mustRun(t, "sweep", "--seeds", "0:300", "--arms", "off,on,policy", "--policy", filepath.Join(out, "policy.json"), "--out", filepath.Join(out, "rerun"), "-q")
	mustRun(t, "sql", out, "SELECT label, count(*) FROM pairs GROUP BY ALL", "--format", "csv", "--out", filepath.Join(out, "labels.csv"))
	mustRun(t, "policy", out, "--out-dir", filepath.Join(out, "policies"))
	mustRun(t, "sweep", "--seeds", "0:50", "--out", out, "--overwrite", "-q")
	got := entries(t, out)
	for _, gone := range []string{"report.html", "policy.json", "rerun", "labels.csv", "policies", sweep.DerivedName} {
		if slices.Contains(got, gone) {
			t.Errorf("after the overwrite %s is still there: %v", gone, got)
		}
	}
	for _, kept := range []string{"mine.txt", "notes", "results.duckdb", sweep.ManifestName} {
		if !slices.Contains(got, kept) {
			t.Errorf("after the overwrite %s is gone: %v", kept, got)
		}
	}
	if es := entries(t, filepath.Join(out, "notes")); !slices.Equal(es, []string{"n.txt"}) {
		t.Errorf("notes/ holds %v, want only the user's n.txt", es)
	}
	if !strings.Contains(mustRun(t, "report", out), "50 pairs") {
		t.Error("the new sweep does not report")
	}
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// Issue 12 E, the third example: Ctrl-C or SIGTERM during forklab sql …
// --out leaves neither forklab's temporary file nor DuckDB's tmp_ copy, an
// existing file stays as it was, and the exit status is 130 — also when a
// second signal ends it at once.
func TestOutputSQLInterruptedLeavesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	mustRun(t, "sweep", "--seeds", "0:20", "--out", dir, "-q")
	files := t.TempDir()
	query := "SELECT i, repeat('x', 40) AS s FROM range(5000000000) t(i)"
	for _, tc := range []struct {
		format string
		sigs   []syscall.Signal
	}{
		{"csv", []syscall.Signal{syscall.SIGINT}},
		{"csv", []syscall.Signal{syscall.SIGTERM}},
		{"parquet", []syscall.Signal{syscall.SIGINT}},
		{"table", []syscall.Signal{syscall.SIGTERM}},
		{"csv", []syscall.Signal{syscall.SIGINT, syscall.SIGINT}},
	} {
		// An existing file of the name the format takes (forklab sql
		// refuses a name that says another format).
		ext := tc.format
		if ext == "table" {
			ext = "txt"
		}
		big := filepath.Join(files, "big."+ext)
		os.WriteFile(big, []byte("old\n"), 0o644)
		cmd, stderr := start(t, "sql", dir, query, "--format", tc.format, "--out", big, "--overwrite")
		waitFor(t, "the temporary output", func() bool {
			for _, p := range leftovers(files) {
				if fi, err := os.Stat(p); err == nil && fi.Size() > 0 {
					return true
				}
			}
			return false
		})
		for _, s := range tc.sigs {
			cmd.Process.Signal(s)
		}
		err := cmd.Wait()
		if code := exitCode(err); code != 130 || strings.TrimSpace(stderr.String()) != "forklab: interrupted; nothing half-written was left" {
			t.Errorf("%s %v: exit %d, %q; want 130", tc.format, tc.sigs, code, stderr)
		}
		if left := leftovers(files); len(left) > 0 {
			t.Errorf("%s %v: left %v", tc.format, tc.sigs, left)
		}
		if b, _ := os.ReadFile(big); string(b) != "old\n" {
			t.Errorf("%s %v: %s changed", tc.format, tc.sigs, big)
		}
	}
}

// shLimited runs forklab under a file size limit of kib KiB (ulimit -f): a
// write past it fails as on a full disk.
func shLimited(t *testing.T, kib int, args ...string) (string, int) {
	t.Helper()
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	cmd := exec.Command("sh", "-c", "ulimit -f "+strconv.Itoa(kib)+" && exec "+forklabBin+" "+strings.Join(q, " "))
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	return errb.String(), exitCode(err)
}

// Issue 12 E, the third example's full disk (a file size limit fails the
// same way): every command that writes a file fails with exit 1 and one
// line naming what it could not write, leaves no temporary file, and
// leaves what it was replacing as it was — sql --out in every format,
// report --html, policy --out, db, sweep --overwrite.
func TestOutputWriteErrorsLeaveNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	mustRun(t, "sweep", "--seeds", "0:300", "--out", dir, "-q")
	mustRun(t, "db", dir)
	files := t.TempDir()
	query := "SELECT i, repeat('x', 30) AS s FROM range(3000000) t(i)"
	formats := []string{"csv", "json", "ndjson", "parquet", "table"}
	if export.ArrowAvailable {
		formats = append(formats, "arrow", "arrows")
	}
	for _, f := range formats {
		big := filepath.Join(files, "big."+f)
		os.WriteFile(big, []byte("old\n"), 0o644)
		stderr, code := shLimited(t, 500, "sql", dir, query, "--format", f, "--out", big, "--overwrite")
		if code != 1 || !strings.Contains(strings.ToLower(stderr), "file too large") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("sql --format %s: exit %d, %q; want 1 and one line saying the file is too large", f, code, stderr)
		}
		if f == "csv" && !strings.HasPrefix(stderr, "forklab: write "+big+": IO Error: Could not write file \""+big+"\": File too large") {
			t.Errorf("sql --format csv names %q", stderr)
		}
		if b, _ := os.ReadFile(big); string(b) != "old\n" {
			t.Errorf("sql --format %s: the existing file changed", f)
		}
	}
	before := tree(t, dir)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report", dir, "--html", filepath.Join(files, "r.html")}, "forklab: write " + filepath.Join(files, "r.html") + ": file too large"},
		{[]string{"policy", dir, "--out", filepath.Join(files, "p.json")}, "forklab: write policy: write " + filepath.Join(files, "p.json") + ": file too large"},
		{[]string{"db", dir}, "forklab: write " + filepath.Join(dir, "results.duckdb") + ": "},
		{[]string{"sweep", "--seeds", "0:2000000", "--out", dir, "--overwrite", "-q"}, "forklab: unit "},
	} {
		stderr, code := shLimited(t, 0, tc.args...)
		if tc.args[0] == "sweep" {
			stderr, code = shLimited(t, 200, tc.args...)
		}
		if code != 1 || !strings.HasPrefix(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("forklab %s: exit %d, %q; want 1 and one line starting %q", tc.args[0], code, stderr, tc.want)
		}
	}
	if left := leftovers(files); len(left) > 0 {
		t.Errorf("left %v", left)
	}
	if es := entries(t, files); len(es) != len(formats) {
		t.Errorf("%s holds %v", files, es)
	}
	if left := leftovers(dir); len(left) > 0 {
		t.Errorf("left in the results %v", left)
	}
	if got := tree(t, dir); !slices.Equal(got, before) {
		t.Errorf("the results changed:\n%s", strings.Join(got, "\n"))
	}
}

// Issue 12 E, the fourth example: nothing that is not a regular file is
// replaced — a device node (./null, and /dev/null itself), a symbolic
// link, a directory — by any command that writes a file: refused with exit
// 2 and one line naming the path and what it is; the target, and what the
// link points to, stay as they were; nothing is left.
func TestOutputRefusesNonRegular(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	mustRun(t, "sweep", "--seeds", "0:300", "--out", dir, "-q")
	work := t.TempDir()
	target := filepath.Join(work, "target.txt")
	os.WriteFile(target, []byte("keep"), 0o644)
	link := filepath.Join(work, "link")
	os.Symlink(target, link)
	sub := filepath.Join(work, "sub")
	os.Mkdir(sub, 0o755)
	paths := map[string]string{link: "symbolic link", sub: "directory", "/dev/null": "device"}
	null := filepath.Join(work, "null")
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err == nil {
		paths[null] = "device"
	} else {
		t.Logf("mknod ./null: %v; checking /dev/null only", err)
	}
	// results.duckdb and a policy file in --out-dir as symbolic links, an
	// events file of log export, and --out of a sweep.
	dbLink := filepath.Join(dir, "results.duckdb")
	os.Remove(dbLink) // the sweep wrote one
	if err := os.Symlink(target, dbLink); err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(work, "rules")
	os.Mkdir(rules, 0o755)
	os.Symlink(target, filepath.Join(rules, "policy-config-0-fork-3.json"))
	events := filepath.Join(work, "ev", "events")
	os.MkdirAll(events, 0o755)
	os.Symlink(target, filepath.Join(events, "x.parquet"))
	dirLink := filepath.Join(work, "outlink")
	os.Symlink(dir, dirLink)
	before, beforeDir := tree(t, work), tree(t, dir)

	type refusal struct {
		args []string
		path string
		kind string
	}
	var cases []refusal
	for p, kind := range paths {
		cases = append(cases,
			refusal{[]string{"report", dir, "--html", p, "--overwrite"}, p, kind},
			refusal{[]string{"sql", dir, "SELECT 1", "--format", "csv", "--out", p, "--overwrite"}, p, kind},
			refusal{[]string{"policy", dir, "--out", p, "--overwrite"}, p, kind})
	}
	cases = append(cases,
		refusal{[]string{"db", dir}, dbLink, "symbolic link"},
		refusal{[]string{"log", "read", "--stream", "x", "--offset-file", link, "--log", "http://127.0.0.1:1"}, link, "symbolic link"},
		refusal{[]string{"kafka", "serve", "--brokers", "1", "--addr-file", "/dev/null"}, "/dev/null", "device"},
		refusal{[]string{"policy", dir, "--out-dir", rules, "--overwrite"}, filepath.Join(rules, "policy-config-0-fork-3.json"), "symbolic link"},
		refusal{[]string{"log", "export", "--stream", "x", "--out", filepath.Join(work, "ev"), "--name", "x.parquet", "--overwrite", "--log", "http://127.0.0.1:1"}, filepath.Join(events, "x.parquet"), "symbolic link"})
	for _, c := range cases {
		_, stderr, code := run(t, c.args...)
		want := c.path + " is not a regular file; forklab replaces only regular files (it is a " + c.kind + ")"
		if code != 2 || !strings.Contains(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("forklab %s: exit %d, %q; want 2 and %q", strings.Join(c.args, " "), code, stderr, want)
		}
	}
	_, stderr, code := run(t, "sweep", "--seeds", "0:10", "--out", dirLink, "--overwrite", "-q")
	if code != 2 || !strings.Contains(stderr, "output "+dirLink+" is a symbolic link (to "+dir+"); forklab publishes a sweep by swapping directories and does not replace a link: give --out "+dir) {
		t.Errorf("sweep --out a link: exit %d, %q", code, stderr)
	}
	if got := tree(t, work); !slices.Equal(got, before) {
		t.Errorf("refusals changed:\n%s\nwas\n%s", strings.Join(got, "\n"), strings.Join(before, "\n"))
	}
	if got := tree(t, dir); !slices.Equal(got, beforeDir) {
		t.Errorf("refusals changed the results:\n%s", strings.Join(got, "\n"))
	}
	if fi, err := os.Lstat("/dev/null"); err != nil || fi.Mode()&os.ModeDevice == 0 {
		t.Fatal("/dev/null is no longer a device")
	}
}

// Issue 12 E, the fifth example and its kind: a refusal leaves no trace —
// not the sweep's lock or staging directory beside a directory of someone
// else's files, not a temporary file or an empty folder of a command that
// refuses to replace an existing file.
func TestOutputRefusalsLeaveNoTrace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	mustRun(t, "sweep", "--seeds", "0:300", "--out", dir, "-q")
	work := t.TempDir()
	u := filepath.Join(work, "u")
	os.Mkdir(u, 0o755)
	os.WriteFile(filepath.Join(u, "thesis.tex"), []byte("\\documentclass{article}"), 0o644)
	existing := filepath.Join(work, "existing")
	os.WriteFile(existing, []byte("keep"), 0o644)
	rules := filepath.Join(work, "rules")
	os.Mkdir(rules, 0o755)
	os.WriteFile(filepath.Join(rules, "policy-config-0-fork-3.json"), []byte("keep"), 0o644)
	os.MkdirAll(filepath.Join(work, "ev", "events"), 0o755)
	os.WriteFile(filepath.Join(work, "ev", "events", "x.parquet"), []byte("keep"), 0o644)
	before, beforeDir := tree(t, work), tree(t, dir)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "--out", u}, "output " + u + " is not empty and holds no forklab sweep (it holds thesis.tex)"},
		{[]string{"sweep", "--out", existing}, "output " + existing + " exists and is not a directory"},
		{[]string{"sweep", "--seeds", "0:10", "--out", dir}, "holds a finished sweep (manifest.json); pass --overwrite"},
		{[]string{"report", dir, "--html", existing}, "output " + existing + " already exists; pass --overwrite to replace it"},
		{[]string{"sql", dir, "SELECT 1", "--out", existing}, "output " + existing + " already exists; pass --overwrite to replace it"},
		{[]string{"policy", dir, "--out", existing}, "output " + existing + " already exists; pass --overwrite to replace it"},
		{[]string{"policy", dir, "--out-dir", rules}, "already exists; pass --overwrite to replace it"},
		{[]string{"policy", dir, "--out-dir", filepath.Join(work, "new-rules"), "--max-harm", "-1"}, `invalid argument "-1" for "--max-harm" flag`},
		{[]string{"log", "export", "--stream", "x", "--out", filepath.Join(work, "ev"), "--name", "x.parquet", "--log", "http://127.0.0.1:1"}, "already exists; pass --overwrite to replace it"},
		{[]string{"report", filepath.Join(work, "nope"), "--html", filepath.Join(work, "r.html")}, "does not exist"},
		{[]string{"sql", u, "SELECT 1", "--out", filepath.Join(work, "q.csv")}, "has no manifest.json"},
	} {
		_, stderr, code := run(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("forklab %s: exit %d, %q; want 2 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
	if got := tree(t, work); !slices.Equal(got, before) {
		t.Errorf("refusals left a trace:\n%s\nwas\n%s", strings.Join(got, "\n"), strings.Join(before, "\n"))
	}
	if got := tree(t, dir); !slices.Equal(got, beforeDir) {
		t.Errorf("refusals changed the results:\n%s", strings.Join(got, "\n"))
	}
}
