package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	interpOnce sync.Once
	python     string
)

// pythonBin is the Python 3 interpreter itself (not a version manager's
// shim, which costs a process start per agent): the examples need the
// standard library only.
func pythonBin(t *testing.T) string {
	t.Helper()
	interpOnce.Do(func() {
		out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
		if err == nil {
			python = strings.TrimSpace(string(out))
		}
	})
	if python == "" {
		t.Skip("python3 is not installed: the Python example agents cannot run")
	}
	return python
}

func nodeBin(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the Node example agent cannot run")
	}
	return p
}

func repoFile(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func seedCore(t *testing.T) string {
	return pythonBin(t) + " " + repoFile(t, "examples/agents/seed_core.py")
}

func faultyAgent(t *testing.T, flags string) string {
	return strings.TrimSpace(pythonBin(t) + " " + repoFile(t, "testdata/agents/faulty_agent.py") + " " + flags)
}

// parquetFiles maps each Parquet file under dir, of the tables given (all
// when none), to its bytes.
func parquetFiles(t *testing.T, dir string, tables ...string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".parquet" {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if len(tables) > 0 {
			keep := false
			for _, tb := range tables {
				keep = keep || strings.HasPrefix(rel, tb+string(filepath.Separator))
			}
			if !keep {
				return nil
			}
		}
		b, err := os.ReadFile(p)
		out[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameParquet(t *testing.T, what string, a, b map[string][]byte) {
	t.Helper()
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("%s: %d files against %d", what, len(a), len(b))
	}
	for name, x := range a {
		if !bytes.Equal(x, b[name]) {
			t.Errorf("%s: %s differs", what, name)
		}
	}
}

// The seed's table, through the protocol: the reference core in Python,
// its world logic unchanged, gives rescued 75, harmed 83, unchanged 142,
// net -8 on seeds 0:300 forked at step 3.
func TestAgentSeedCoreTable(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x")
	stdout := mustRun(t, "sweep", "--agent", seedCore(t), "--seeds", "0:300", "--fork-at", "3", "--out", out)
	want := "on vs off · fork step 3: rescued 75   harmed 83   unchanged 142   net -8\n"
	if stdout != want {
		t.Fatalf("sweep printed %q, want %q", stdout, want)
	}
	got := mustRun(t, "sql", out, "SELECT same_obs, label, count(*) FROM pairs GROUP BY ALL ORDER BY ALL", "--format", "csv")
	if !strings.Contains(got, "false,harmed,83\nfalse,unchanged,72\ntrue,rescued,75\ntrue,unchanged,70") {
		t.Fatalf("the seed's slice through DuckDB:\n%s", got)
	}
}

// Row for row, the Python reference core through the protocol and the
// built-in counter world make the same tasks, branches and pairs — the
// same Parquet bytes — for several seed ranges and fork steps (the
// checkpoints differ: they are each world's own JSON).
func TestAgentPairsEqualTheCounter(t *testing.T) {
	agent := seedCore(t)
	for _, tc := range []struct{ seeds, forkAt, units string }{
		{"0:300", "1", "0"},
		{"300:700", "2", "0"},
		{"1000:1300", "4", "100"},
		{"123456:123756", "1,2,3,5,9", "64"},
	} {
		dirA, dirB := filepath.Join(t.TempDir(), "agent"), filepath.Join(t.TempDir(), "counter")
		args := []string{"--seeds", tc.seeds, "--fork-at", tc.forkAt, "--arms", "off,on,aa", "--unit-seeds", tc.units, "-q"}
		mustRun(t, append([]string{"sweep", "--agent", agent, "--parallel", "2", "--out", dirA}, args...)...)
		mustRun(t, append([]string{"sweep", "--out", dirB}, args...)...)
		sameParquet(t, fmt.Sprintf("seeds %s fork at %s", tc.seeds, tc.forkAt),
			parquetFiles(t, dirB, "tasks", "branches", "pairs"), parquetFiles(t, dirA, "tasks", "branches", "pairs"))
	}
}

// Done-when of issue 11: an agent that crashes on some seeds, hangs on
// others and prints garbage on a third set gives a finished sweep whose
// error rows name each failure, whose labels count only the good pairs,
// and whose exit status (5) and manifest say it is incomplete; rerun with
// the fault removed and --resume, it completes with the files of a sweep
// that never failed, asking the agent only for the failed seeds.
func TestAgentFaultsThenResume(t *testing.T) {
	dir := t.TempDir()
	out, clean := filepath.Join(dir, "out"), filepath.Join(dir, "clean")
	count := filepath.Join(dir, "count")
	stdout, stderr, code := run(t, "sweep", "--agent", faultyAgent(t, "--crash 7 --hang 13 --garbage 21"), "--parallel", "2",
		"--timeout", "500ms", "--retries", "1", "--seeds", "0:100", "--out", out)
	if code != 5 || !strings.Contains(stderr, "INCOMPLETE: 6 of 100 pairs (6.00%) are errors, not labels; the table counts the other 94") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if stdout != "on vs off · fork step 3: rescued 24   harmed 28   unchanged 42   net -4   errors 6 (no label)\n" {
		t.Fatalf("counts: %q", stdout)
	}
	var m struct {
		Errors       int64   `json:"errors"`
		ErrorRate    float64 `json:"error_rate"`
		MaxErrorRate float64 `json:"max_error_rate"`
		Incomplete   bool    `json:"incomplete"`
	}
	b, _ := os.ReadFile(filepath.Join(out, "manifest.json"))
	if err := json.Unmarshal(b, &m); err != nil || m.Errors != 6 || m.ErrorRate != 0.06 || m.MaxErrorRate != 0.01 || !m.Incomplete {
		t.Fatalf("manifest errors: %+v (%v)", m, err)
	}
	rows := mustRun(t, "sql", out, `SELECT seed, error FROM pairs WHERE status = 'error' ORDER BY seed`, "--format", "csv")
	for _, want := range []string{
		`7,"start: agent process`, `exited with status 1 during start; its stderr ends ""faulty_agent: crashing on seed 7 (pid `, `)"" (agent-logs/agent-`,
		`13,"off replica 0: branch: agent process`, `timed out after 1s waiting for the branch reply; its stderr ends ""faulty_agent: hanging on seed 13""`,
		`21,"start: agent process`, `wrote a malformed start reply: the line is not JSON: ""Traceback (most recent call last): seed 21""`,
		"(2 attempts)",
	} {
		if !strings.Contains(rows, want) {
			t.Errorf("error rows lack %q:\n%s", want, rows)
		}
	}
	if got := mustRun(t, "sql", out, "SELECT count(label) FROM pairs WHERE status = 'ok'", "--format", "csv"); !strings.Contains(got, "94") {
		t.Errorf("labelled pairs: %s", got)
	}
	// The fault fixed, the same sweep resumed.
	stdout, stderr, code = run(t, "sweep", "--agent", faultyAgent(t, "--count "+count), "--parallel", "2", "--seeds", "0:100", "--out", out, "--resume")
	if code != 0 || stdout != "on vs off · fork step 3: rescued 26   harmed 28   unchanged 46   net -2\n" {
		t.Fatalf("resumed: exit %d, %q\n%s", code, stdout, stderr)
	}
	asked, _ := os.ReadFile(count)
	for _, l := range strings.Split(strings.TrimSpace(string(asked)), "\n") {
		var method string
		var seed int
		fmt.Sscanf(l, "%s %d", &method, &seed)
		if method == "initialize" {
			continue
		}
		if f := seed % 50; f != 7 && f != 13 && f != 21 {
			t.Errorf("the resumed sweep asked %q, a seed it had finished", l)
		}
	}
	mustRun(t, "sweep", "--agent", seedCore(t), "--seeds", "0:100", "--out", clean, "-q")
	sameParquet(t, "resumed against never failed", parquetFiles(t, clean), parquetFiles(t, out))
	mustRun(t, "verify", out)
}

// agent check passes both examples and a served built-in world, and fails
// a nondeterministic agent and one with a missing feature, naming the
// problem, with exit status 1.
func TestAgentCheck(t *testing.T) {
	for _, agent := range []string{seedCore(t), nodeBin(t) + " " + repoFile(t, "examples/agents/toolbot.mjs"), forklabBin + " agent serve --world toolloop"} {
		out, errs, code := run(t, "agent", "check", agent)
		if code != 0 || strings.Contains(out, "FAIL") || strings.Count(out, "\n") != 13 {
			t.Errorf("%s: exit %d\n%s%s", agent, code, out, errs)
		}
	}
	for _, tc := range []struct{ flags, check, want string }{
		{"--coin", "same request, same outcome", "declare \"nondeterministic\": true and sweep with --replicas"},
		{"--drop-feature repeat_run", "declared values", "result.forks[0].features.repeat_run is missing: the declaration lists it (int)"},
	} {
		out, errs, code := run(t, "agent", "check", faultyAgent(t, tc.flags))
		var line string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, tc.check+" ") {
				line = l
			}
		}
		if code != 1 || !strings.Contains(line, "FAIL") || !strings.Contains(line, tc.want) || !strings.Contains(errs, "checks failed") {
			t.Errorf("%s: exit %d, row %q\n%s%s", tc.flags, code, line, out, errs)
		}
	}
	if _, errs, code := run(t, "agent", "check", ""); code != 2 || !strings.Contains(errs, "the agent command is empty") {
		t.Errorf("empty command: exit %d, %s", code, errs)
	}
}

// A built-in world served over the protocol by forklab agent serve sweeps
// to Parquet byte-identical to the in-process sweep, noise, replicas and
// every arm included.
func TestAgentServeSweepIsByteIdentical(t *testing.T) {
	for _, world := range []string{"counter", "toolloop"} {
		args := []string{"--seeds", "0:600", "--fork-at", "1,2", "--arms", "off,on,placebo,aa", "--replicas", "3", "--temperature", "0.2", "--unit-seeds", "256", "-q"}
		in, served := filepath.Join(t.TempDir(), "in"), filepath.Join(t.TempDir(), "served")
		sweepTables(t, append([]string{"sweep", "--world", world, "--out", in}, args...)...)
		sweepTables(t, append([]string{"sweep", "--agent", forklabBin + " agent serve --world " + world, "--parallel", "2", "--out", served}, args...)...)
		sameParquet(t, world+" served against in process", parquetFiles(t, in), parquetFiles(t, served))
	}
}

// sweepTables runs a sweep that must write its tables; results.duckdb may
// fail (its views are not yet generic for every world: the tables are
// published before it is written).
func sweepTables(t *testing.T, args ...string) {
	t.Helper()
	_, errs, code := run(t, args...)
	if code != 0 && !strings.Contains(errs, "results.duckdb") {
		t.Fatalf("forklab %v: exit %d: %s", args, code, errs)
	}
}

// Sweeps killed with SIGKILL at random moments and resumed with --resume
// end with the files of an uninterrupted sweep — for a built-in world and
// for an external agent (whose kill orphans its processes: they exit at the
// end of their stdin).
func TestSweepKilledAndResumedIsByteIdentical(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("random kill points from seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"counter", []string{"--seeds", "0:200000", "--fork-at", "1,3", "--arms", "off,on,aa", "--unit-seeds", "5000"}},
		{"agent", []string{"--agent", seedCore(t), "--parallel", "2", "--seeds", "0:2000", "--unit-seeds", "200"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			want, out := filepath.Join(dir, "want"), filepath.Join(dir, "out")
			mustRun(t, append([]string{"sweep", "--out", want, "-q"}, tc.args...)...)
			kills := 0
			for attempt := 0; attempt < 6; attempt++ {
				if _, err := os.Stat(filepath.Join(out, "manifest.json")); err == nil {
					break // published (a kill may have come while results.duckdb was written)
				}
				args := append([]string{"sweep", "--out", out, "-q"}, tc.args...)
				if _, err := os.Stat(filepath.Join(dir, ".out.forklab-staging")); err == nil {
					args = append(args, "--resume")
				}
				cmd := exec.Command(forklabBin, args...)
				var errb bytes.Buffer
				cmd.Stderr = &errb
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("sweep: %v: %s", err, errb.String())
					}
					attempt = 99 // finished before the kill
				case <-time.After(time.Duration(150+rng.IntN(900)) * time.Millisecond):
					cmd.Process.Signal(syscall.SIGKILL)
					<-done
					kills++
				}
			}
			if _, err := os.Stat(filepath.Join(out, "manifest.json")); err != nil {
				// Every kill may have come before the sweep staged anything
				// (an agent slow to start on a busy machine): then there is
				// nothing to resume, and --resume is refused.
				args := append([]string{"sweep", "--out", out, "-q"}, tc.args...)
				if _, err := os.Stat(filepath.Join(dir, ".out.forklab-staging")); err == nil {
					args = append(args, "--resume")
				}
				mustRun(t, args...)
			}
			if kills == 0 {
				t.Log("every sweep finished before its kill: nothing was resumed")
			}
			sameParquet(t, fmt.Sprintf("%d kills and resumes against uninterrupted", kills), parquetFiles(t, want), parquetFiles(t, out))
			mustRun(t, "verify", out)
		})
	}
}

// logEvents reads a stream with log read --offsets: offsets and events.
func logEvents(t *testing.T, url, stream string) (offsets, events []string) {
	t.Helper()
	out := mustRun(t, "log", "read", "--log", url, "--stream", stream, "--offsets")
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		o, e, _ := strings.Cut(l, "  ")
		offsets, events = append(offsets, o), append(events, e)
	}
	return offsets, events
}

// waitEvents waits until stream holds n events.
func waitEvents(t *testing.T, url, stream string, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		out, _, code := run(t, "log", "read", "--log", url, "--stream", stream)
		if code == 0 && strings.Count(out, "\n") >= n {
			return
		}
	}
	t.Fatalf("stream %s did not reach %d events", stream, n)
}

// domain drops the incarnation events: what a session's run wrote.
func domain(events []string) []string {
	var out []string
	for _, e := range events {
		if !strings.Contains(e, `"type":"incarnation"`) {
			out = append(out, e)
		}
	}
	return out
}

// Sessions of an external agent on the log, with plain HTTP and the
// idempotent-producer headers (seed_core.py run): a run killed midway
// resumes from the log and writes the events of an uninterrupted run; a
// frozen incarnation woken after its successor finished is fenced and
// writes nothing; forklab fork --stream --agent folds the events before an
// offset through the agent and branches them — seed 5 at step 2 is the
// seed's rescue.
func TestAgentSessionsOnTheLog(t *testing.T) {
	py, script := pythonBin(t), repoFile(t, "examples/agents/seed_core.py")
	url := startLogServe(t)
	session := func(name string, extra ...string) *exec.Cmd {
		return exec.Command(py, append([]string{script, "run", "--log", url, "--session", name, "--seed", "5"}, extra...)...)
	}
	if out, err := session("whole").CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted session: %v: %s", err, out)
	}
	_, whole := logEvents(t, url, "whole")
	if len(whole) != 11 || !strings.Contains(whole[len(whole)-1], `{"type":"outcome","success":false,"steps":8}`) {
		t.Fatalf("uninterrupted session:\n%s", strings.Join(whole, "\n"))
	}
	// Killed after its third event, resumed.
	killed := session("killed", "--delay", "0.2")
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, url, "killed", 3)
	killed.Process.Signal(syscall.SIGKILL)
	killed.Wait()
	if out, err := session("killed").CombinedOutput(); err != nil {
		t.Fatalf("resumed session: %v: %s", err, out)
	}
	_, resumed := logEvents(t, url, "killed")
	if got, want := strings.Join(domain(resumed), "\n"), strings.Join(domain(whole), "\n"); got != want {
		t.Fatalf("killed and resumed:\n%s\nuninterrupted:\n%s", got, want)
	}
	if n := len(resumed) - len(domain(resumed)); n != 2 {
		t.Fatalf("%d incarnations, want 2", n)
	}
	// A frozen incarnation woken after a newer one finished is fenced.
	zombie := session("zombie", "--delay", "0.3")
	var zerr bytes.Buffer
	zombie.Stderr = &zerr
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, url, "zombie", 3)
	zombie.Process.Signal(syscall.SIGSTOP)
	if out, err := session("zombie").CombinedOutput(); err != nil {
		t.Fatalf("successor: %v: %s", err, out)
	}
	_, before := logEvents(t, url, "zombie")
	zombie.Process.Signal(syscall.SIGCONT)
	err := zombie.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(zerr.String(), "fenced by a newer incarnation") {
		t.Fatalf("woken zombie: %v: %s", err, zerr.String())
	}
	if _, after := logEvents(t, url, "zombie"); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("the zombie wrote after it was fenced")
	}
	if got := strings.Join(domain(before), "\n"); got != strings.Join(domain(whole), "\n") {
		t.Fatalf("zombie's session:\n%s", got)
	}
	// Fork the session after step 2 through the agent's fold.
	offsets, events := logEvents(t, url, "whole")
	var at string
	for i, e := range events {
		if strings.Contains(e, `"step":2,`) {
			at = offsets[i]
		}
	}
	agent := py + " " + script
	on := mustRun(t, "fork", "--log", url, "--stream", "whole", "--offset", at, "--arm", "on", "--agent", agent)
	off := mustRun(t, "fork", "--log", url, "--stream", "whole", "--offset", at, "--arm", "off", "--agent", agent, "--json")
	if !strings.Contains(on, "seed_core seed 5 · fork step 2 (folded from whole at "+at+") · arm on · replica 0: success (intervened true, cost 6 steps)") {
		t.Errorf("fork on: %s", on)
	}
	if !strings.Contains(off, `"seed":5,"fork_step":2,`) || !strings.Contains(off, `"intervened":false,"success":false,"cost":{"steps":6}`) {
		t.Errorf("fork off: %s", off)
	}
	// The same pair from a sweep: seed 5 forked at step 2 is rescued.
	if got := mustRun(t, "sweep", "--agent", agent, "--seeds", "5:6", "--fork-at", "2", "--out", t.TempDir()+"/p", "--overwrite"); !strings.Contains(got, "rescued 1   harmed 0") {
		t.Errorf("sweep of seed 5: %s", got)
	}
	// Before the first action there is nothing to fork: fork steps are 1 or
	// more (the fold answers fork_step 0; no branch is asked with step 1's
	// noise key), and the exit status says bad input.
	var beforeFirst string
	for i, e := range events {
		if strings.Contains(e, `"type":"start"`) {
			beforeFirst = offsets[i]
		}
	}
	if _, errs, code := run(t, "fork", "--log", url, "--stream", "whole", "--offset", beforeFirst, "--arm", "on", "--agent", agent); code != 2 ||
		!strings.Contains(errs, "nothing to fork: fold whole at "+beforeFirst+": the run had taken no step before that offset (fold answered fork_step 0)") {
		t.Errorf("fork before the first action: exit %d, %s", code, errs)
	}
	// An agent without fold is refused with a clear message.
	_, errs, code := run(t, "fork", "--log", url, "--stream", "whole", "--offset", at, "--arm", "on", "--agent", nodeBin(t)+" "+repoFile(t, "examples/agents/toolbot.mjs"))
	if code != 2 || !strings.Contains(errs, "does not declare the fold capability") {
		t.Errorf("fork through an agent without fold: exit %d, %s", code, errs)
	}
	// The agent's own fold refusing the events before an offset (-32602:
	// here, a session with no start event) is bad input too: exit 2, its
	// message passed on (issue 12: user's input exits 2).
	for _, r := range []struct{ method, body string }{{"PUT", ""}, {"POST", `{"type":"action","step":1,"action":"increment","obs":0}`}} {
		req, _ := http.NewRequest(r.method, url+"/v1/stream/nostart", strings.NewReader(r.body))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode >= 300 {
			t.Fatalf("%s nostart: %v %v", r.method, res, err)
		}
		res.Body.Close()
	}
	tail, _ := logEvents(t, url, "nostart")
	for _, args := range [][]string{
		{"fork", "--log", url, "--stream", "nostart", "--offset", tail[0], "--arm", "on", "--agent", agent},
		{"fork", "--log", url, "--stream", "nostart", "--offset", tail[0], "--arm", "off", "--agent", agent, "--json"},
	} {
		_, errs, code = run(t, args...)
		if code != 2 || !strings.Contains(errs, "answered fold with an error: params.events[0]: an action before the start (code -32602)") ||
			strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("forklab %s: exit %d, want 2 and one line; %s", strings.Join(args, " "), code, errs)
		}
	}
}
