package main

import (
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startLogServe runs `forklab log serve` on a free port and returns its URL.
func startLogServe(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(forklabBin, "log", "serve", "--addr", addr, "--data-dir", t.TempDir(), "--quiet")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	url := "http://" + addr
	for i := 0; i < 600; i++ {
		if res, err := http.Get(url + "/v1/stream/"); err == nil {
			res.Body.Close()
			return url
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("log serve did not come up")
	return ""
}

// The README's tour, as a user types it: start the log, run a session, stop
// it midway, resume it, read it from an offset, fork it, export it.
func TestSessionTour(t *testing.T) {
	url := startLogServe(t)
	// A worker stopped after 3 steps stands in for one killed midway
	// (pipeline/agent and pipeline/chaos kill real ones).
	out := mustRun(t, "agent", "run", "--log", url, "--session", "demo", "--seed", "5", "--until", "3")
	if !strings.HasPrefix(out, "session demo paused at step 3 after 7 events (epoch 0)") {
		t.Fatalf("paused run: %q", out)
	}
	cmd := exec.Command(forklabBin, "log", "read", "--log", url, "--stream", "demo")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	events, err := cmd.Output()
	if err != nil {
		t.Fatal(err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(events)), "\n")
	next := strings.TrimPrefix(strings.TrimSpace(stderr.String()), "next_offset=")
	if len(lines) != 8 || !strings.Contains(lines[0], `"type":"incarnation","epoch":0`) || !strings.HasPrefix(next, "0000000000000000_") {
		t.Fatalf("read %d lines, next offset %q", len(lines), next)
	}
	out = mustRun(t, "agent", "run", "--log", url, "--session", "demo", "--seed", "5")
	if !strings.HasPrefix(out, "session demo: failure (declared false, value 8, 8 steps) · 18 events, epoch 1") {
		t.Fatalf("resumed run: %q", out)
	}
	// Reading from the saved offset gives exactly the missing tail.
	tail := mustRun(t, "log", "read", "--log", url, "--stream", "demo", "--offset", next)
	tl := strings.Split(strings.TrimSpace(tail), "\n")
	if !strings.Contains(tl[0], `"type":"incarnation","epoch":1`) || !strings.Contains(tl[len(tl)-1], `"type":"outcome"`) || len(tl) != 12 {
		t.Fatalf("tail from %s: %d lines\n%s", next, len(tl), tail)
	}
	// A finished session: exit 0, says so, appends nothing.
	_, errs, code := run(t, "agent", "run", "--log", url, "--session", "demo", "--seed", "5")
	if code != 0 || !strings.Contains(errs, "already finished") {
		t.Fatalf("rerun: exit %d, %q", code, errs)
	}
	// Another task on the same session: refused with status 2.
	_, errs, code = run(t, "agent", "run", "--log", url, "--session", "demo", "--seed", "6")
	if code != 2 || !strings.Contains(errs, "stream holds another session") {
		t.Fatalf("foreign: exit %d, %q", code, errs)
	}
	// Fork the session where the paused run stopped: the seed's pair.
	on := mustRun(t, "fork", "--log", url, "--stream", "demo", "--offset", next, "--arm", "on")
	off := mustRun(t, "fork", "--log", url, "--stream", "demo", "--offset", next, "--arm", "off")
	if !strings.Contains(on, ": success (declared true, value 6, 8 steps)") || !strings.Contains(off, ": failure (declared false, value 8, 8 steps)") {
		t.Fatalf("forks:\n%s%s", on, off)
	}
	// Export the session and its forks beside a sweep; results.duckdb sees them.
	dir := t.TempDir()
	mustRun(t, "sweep", "--seeds", "0:20", "--out", dir, "-q", "--overwrite")
	mustRun(t, "log", "export", "--log", url, "--prefix", "demo", "--out", dir)
	files, _ := filepath.Glob(filepath.Join(dir, "events", "*.parquet"))
	if len(files) != 1 {
		t.Fatalf("exported files: %v", files)
	}
	mustRun(t, "db", dir)
	got := mustRun(t, "sql", dir, "SELECT count(DISTINCT stream), count(*) FILTER (WHERE type = 'outcome') FROM events", "--format", "csv")
	if !strings.Contains(got, "3,3") {
		t.Fatalf("events in results.duckdb: %q", got)
	}
	_, errs, code = run(t, "log", "export", "--log", url, "--prefix", "demo", "--out", dir)
	if code != 2 || !strings.Contains(errs, "--overwrite") {
		t.Fatalf("export over an existing file: exit %d, %q", code, errs)
	}
	_, errs, code = run(t, "log", "read", "--log", url, "--stream", "nope")
	if code != 2 || !strings.Contains(errs, "stream nope does not exist (404)") {
		t.Fatalf("read of a missing stream: exit %d, %q", code, errs)
	}
}
