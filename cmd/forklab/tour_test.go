package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
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
	// (pipeline/sessions/agent and pipeline/sessions/chaos kill real ones).
	out := mustRun(t, "agent", "run", "--log", url, "--session", "demo", "--seed", "5", "--until", "3")
	// It counts the events as log read lists them (QA item 12: 7 domain
	// events and the incarnation read as 8 lines but were said to be 7).
	if !strings.HasPrefix(out, "session demo paused at step 3 after 8 events (1 incarnation), epoch 0;") {
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
	if !strings.HasPrefix(out, `session demo: failure (8 steps; final {"obs":0,"steps":8}) · 20 events (2 incarnations), epoch 1`) {
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
	if !strings.Contains(on, `: success (8 steps; final {"obs":6,"steps":8})`) || !strings.Contains(off, `: failure (8 steps; final {"obs":0,"steps":8})`) {
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

// Each event's offset, as log read --offsets prints it, is the tail agent
// run -v printed after appending it; forking there (fork --stream --json)
// finishes the same branch as forking the checkpoint of that fork step from
// a file (issue 12 I: nothing showed how to get a fork offset, and fork
// --stream --json printed text).
func TestReadOffsetsAndForkFromThem(t *testing.T) {
	url := startLogServe(t)
	_, verbose, code := run(t, "agent", "run", "--log", url, "--session", "off", "--seed", "5", "--until", "3", "-v")
	if code != 0 {
		t.Fatalf("agent run: exit %d: %s", code, verbose)
	}
	cmd := exec.Command(forklabBin, "log", "read", "--log", url, "--stream", "off", "--offsets")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatal(err, stderr.String())
	}
	read := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	var tails []string
	for _, l := range strings.Split(strings.TrimSpace(verbose), "\n") {
		if strings.Contains(l, "  {") {
			tails = append(tails, l)
		}
	}
	// The incarnation event, then the 7 domain events -v printed, each with
	// the same offset.
	if len(read) != 8 || len(tails) != 7 || strings.Join(read[1:], "\n") != strings.Join(tails, "\n") {
		t.Fatalf("log read --offsets:\n%s\nagent run -v:\n%s", stdout, strings.Join(tails, "\n"))
	}
	last, _, _ := strings.Cut(read[len(read)-1], "  ")
	if next := strings.TrimPrefix(strings.TrimSpace(stderr.String()), "next_offset="); next != last {
		t.Fatalf("next_offset %s, last event's offset %s", next, last)
	}
	// Fork after turn 2's tool result (read[5]: incarnation, start,
	// model_turn 1, tool_result 1, model_turn 2, tool_result 2).
	at, ev, _ := strings.Cut(read[5], "  ")
	if !strings.Contains(ev, `"type":"tool_result","turn":2`) {
		t.Fatalf("line 5: %s", read[5])
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, "fork", "--log", url, "--stream", "off", "--offset", at, "--arm", "on", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "cp.json")
	os.WriteFile(cp, []byte(mustRun(t, "checkpoint", "--seed", "5", "--fork-at", "2")), 0o644)
	var want map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, "fork", "--checkpoint", cp, "--arm", "on", "--json")), &want); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"world", "arm", "replica", "seed", "fork_step", "intervened", "success", "cost", "final"} {
		if fmt.Sprint(got[k]) != fmt.Sprint(want[k]) {
			t.Errorf("%s: fork from the log %v, from the checkpoint file %v", k, got[k], want[k])
		}
	}
	if got["stream"] != "off/fork-on-r0-"+at || got["fork_step"] != 2.0 || got["intervened"] != true {
		t.Errorf("fork --stream --json: %v", got)
	}
	// A guard rule for another world is refused before the fork writes.
	rule := filepath.Join(t.TempDir(), "rule.json")
	os.WriteFile(rule, []byte(`{"policy_version":2,"world":"toolloop","world_version":"1","all":[]}`), 0o644)
	if _, errs, code := run(t, "fork", "--log", url, "--stream", "off", "--offset", at, "--arm", "policy", "--policy", rule); code != 2 || !strings.Contains(errs, "guard rule does not fit") {
		t.Errorf("fork --arm policy with another world's rule: exit %d, %q", code, errs)
	}
	if _, errs, code := run(t, "log", "read", "--log", url, "--stream", "off/fork-policy-r0-"+at); code != 2 || !strings.Contains(errs, "does not exist") {
		t.Errorf("the refused fork left its child stream: exit %d, %q", code, errs)
	}
	// --offsets is for JSON streams.
	req, _ := http.NewRequest("PUT", url+"/v1/stream/bytes", nil)
	req.Header.Set("Content-Type", "text/plain")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 201 {
		t.Fatalf("create a byte stream: %v %v", res, err)
	}
	http.Post(url+"/v1/stream/bytes", "text/plain", strings.NewReader("hello"))
	if _, errs, code := run(t, "log", "read", "--log", url, "--stream", "bytes", "--offsets"); code != 2 || !strings.Contains(errs, "--offsets prints JSON messages") {
		t.Errorf("--offsets on a byte stream: exit %d, %q", code, errs)
	}
}

// agent run needs --seed to start a session, resumes one without it, and
// refuses world flags that could not reach the session; its errors point to
// its own help (issue 12 I: they pointed to 'forklab run --help', and a
// missing --seed silently meant seed 0).
func TestAgentRunSeedAndHelp(t *testing.T) {
	url := startLogServe(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--session", "new"}, 2, "session new does not exist; start it with --seed N"},
		{[]string{"--session", "new", "--p-stall", "0.2"}, 2, "--p-stall describe the session's task and need --seed N"},
		{[]string{"--session", "new", "--world", "counter", "--temperature", "0.1"}, 2, "--temperature, --world describe"},
		{[]string{"--session", "new", "--bogus"}, 2, "see 'forklab agent run --help'"},
		{[]string{"--session", "new", "--seed", "3", "--world", "chess"}, 2, `unknown world "chess" (known: counter`},
		{[]string{"--session", "new", "--seed", "3", "--target", "0"}, 2, "target"},
		{[]string{"--session", "new", "--seed", "3", "--until", "2"}, 0, ""},
		{[]string{"--session", "new"}, 0, "no --seed: resuming session new as its session_start describes it"},
		{[]string{"--session", "new", "--seed", "4"}, 2, "stream holds another session"},
	} {
		_, errs, code := run(t, append([]string{"agent", "run", "--log", url}, tc.args...)...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("agent run %v: exit %d, %q; want %d and %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
	if _, errs, code := run(t, "log", "read", "--bogus"); code != 2 || !strings.Contains(errs, "see 'forklab log read --help'") {
		t.Errorf("log read --bogus: exit %d, %q", code, errs)
	}
}

// forklab sweep --from-log writes the in-memory sweep's tables byte for
// byte, with the world's flags (here a noisy counter, several arms,
// replicas and fork steps); its log flags are refused without it.
func TestSweepFromLogCommand(t *testing.T) {
	url := startLogServe(t)
	args := []string{"--seeds", "0:40", "--fork-at", "2,3", "--arms", "off,on,aa", "--replicas", "3", "--temperature", "0.2", "--p-stall", "0.1", "-q"}
	fromLog, inMemory := filepath.Join(t.TempDir(), "log"), filepath.Join(t.TempDir(), "mem")
	mustRun(t, append([]string{"sweep", "--from-log", url, "--log-prefix", "cli", "--out", fromLog}, args...)...)
	mustRun(t, append([]string{"sweep", "--out", inMemory}, args...)...)
	n := 0
	filepath.WalkDir(inMemory, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".parquet" {
			return err
		}
		rel, _ := filepath.Rel(inMemory, p)
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(filepath.Join(fromLog, rel))
		if err != nil || string(a) != string(b) {
			t.Errorf("%s differs between sweep --from-log and the in-memory sweep (%v)", rel, err)
		}
		n++
		return nil
	})
	if n < 6 {
		t.Fatalf("compared %d files", n)
	}
	mustRun(t, "log", "export", "--log", url, "--prefix", "cli/", "--out", fromLog)
	got := mustRun(t, "sql", fromLog, "SELECT count(DISTINCT stream) FROM events", "--format", "csv")
	if got != "count(DISTINCT stream)\n760\n" { // 40 runs + 40 seeds × 2 fork steps × 3 arms × 3 replicas
		t.Errorf("exported streams: %q", got)
	}
	if _, errs, code := run(t, "sweep", "--log-prefix", "x", "--out", t.TempDir()); code != 2 || !strings.Contains(errs, "--log-prefix applies only with --from-log") {
		t.Errorf("--log-prefix without --from-log: exit %d, %q", code, errs)
	}
}

// forklab chaos gives every worker process the world's flags (issue 12 I:
// with --base-budget 20 --target 15 every session differed from its
// uninterrupted run and readers saw 1,430 gaps), delivers the faults asked,
// and refuses up front a plan its sessions cannot host.
func TestChaosFlagsReachEveryWorker(t *testing.T) {
	out, errs, code := run(t, "chaos", "--sessions", "3", "--kills", "4", "--zombies", "1", "--restarts", "0", "--seed", "7",
		"--base-budget", "20", "--target", "15", "--parallel", "3", "--delay", "5ms")
	if code != 0 {
		t.Fatalf("chaos: exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{`"base_budget":20`, `"target":15`, "sessions completed                                 3 / 3",
		"workers killed (SIGKILL)                           4\n", "zombies (SIGSTOP, successor, SIGCONT)              1\n",
		"gaps seen by readers                               0", "sessions differing from an uninterrupted run       0", "verdict: OK"} {
		if !strings.Contains(out, want) {
			t.Errorf("chaos report lacks %q:\n%s", want, out)
		}
	}
	_, errs, code = run(t, "chaos", "--sessions", "2", "--kills", "500")
	if code != 2 || !strings.Contains(errs, "room for at most") {
		t.Errorf("chaos with more kills than events: exit %d, %q", code, errs)
	}
}
