package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// goldenRuns is the first equivalence test's population (issue 23): the
// checkpoints forklab checkpoint --seed S --fork-at 3 prints for S in
// 0..299, as records {"run_id":"rS","checkpoint":…}.
const goldenRuns = "../../testdata/runs/counter-0-300-at-3.jsonl"

// The 300 checkpoints of seeds 0..299 at fork step 3, swept as recorded
// runs, give exactly the seed sweep's numbers: 75 rescued, 83 harmed, 142
// unchanged, every pair's label and same_obs slice the seed's, and the
// report says it swept a recorded population, not a random sample. The
// file holds what forklab checkpoint prints.
func TestRecordedFileEquivalence(t *testing.T) {
	b, err := os.ReadFile(goldenRuns)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for _, seed := range []int{0, 137, 299} {
		cp := strings.TrimSpace(mustRun(t, "checkpoint", "--seed", fmt.Sprint(seed), "--fork-at", "3"))
		if want := fmt.Sprintf(`{"run_id":"r%d","checkpoint":%s}`, seed, cp); lines[seed] != want {
			t.Fatalf("%s line %d is not forklab checkpoint --seed %d's:\n%s\nwant\n%s", goldenRuns, seed+1, seed, lines[seed], want)
		}
	}
	runs, seeds := filepath.Join(t.TempDir(), "runs"), filepath.Join(t.TempDir(), "seeds")
	out := mustRun(t, "sweep", "--runs", goldenRuns, "--out", runs)
	if want := "on vs off · fork step 3: rescued 75   harmed 83   unchanged 142   net -8\n"; out != want {
		t.Fatalf("sweep --runs printed %q, want %q", out, want)
	}
	mustRun(t, "sweep", "--seeds", "0:300", "--fork-at", "3", "--out", seeds, "-q")
	for _, q := range []string{
		"SELECT same_obs, label, count(*) FROM pairs GROUP BY ALL ORDER BY ALL",
		"SELECT feature, value, pairs, rescued, harmed, unchanged, net, mcnemar_p FROM slices ORDER BY ALL",
		"SELECT seed, label, quadrant, same_obs, repeat_run, obs_value, hidden_fault, extra_steps FROM pairs ORDER BY seed",
		"SELECT seed, fork_step, over, checkpoint, cost_steps FROM checkpoints ORDER BY seed",
		"SELECT seed, arm, replica, success, intervened, cost_steps FROM branches ORDER BY seed, arm",
		"SELECT seed, budget, slack, freeze_at FROM tasks ORDER BY seed",
	} {
		if a, b := mustRun(t, "sql", runs, q), mustRun(t, "sql", seeds, q); a != b {
			t.Errorf("%s:\n--runs:\n%.600s\n--seeds:\n%.600s", q, a, b)
		}
	}
	// Rows keyed by run: the record's run_id, the seed's decimal text.
	if got := mustRun(t, "sql", runs, "SELECT string_agg(run_id, ',' ORDER BY seed) FROM (SELECT * FROM pairs WHERE seed < 3)", "--format", "csv"); !strings.Contains(got, "r0,r1,r2") {
		t.Errorf("recorded run ids: %q", got)
	}
	if got := mustRun(t, "sql", seeds, "SELECT string_agg(run_id, ',' ORDER BY seed) FROM (SELECT * FROM pairs WHERE seed < 3)", "--format", "csv"); !strings.Contains(got, "0,1,2") {
		t.Errorf("seed run ids: %q", got)
	}
	rep := mustRun(t, "report", runs)
	for _, want := range []string{"· 300 recorded runs (jsonl ", "These are 300 recorded runs", "not a random sample", "30% of runs held out",
		"▶ same_obs = true (chosen)  ok    101           53       0       0             +53  44              22       0       0             +22"} {
		if !strings.Contains(rep, want) {
			t.Errorf("report of the recorded sweep does not say %q:\n%.1500s", want, rep)
		}
	}
	var m struct {
		Spec struct {
			Seeds *string `json:"seeds"`
			Runs  struct {
				Source, Format, CRC32C string
				Runs                   int
				Bytes                  int64
			} `json:"runs"`
			ForkAt []int `json:"fork_at"`
		} `json:"spec"`
	}
	mb, err := os.ReadFile(filepath.Join(runs, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(goldenRuns)
	if r := m.Spec.Runs; m.Spec.Seeds != nil || r.Source != abs || r.Format != "jsonl" || r.Runs != 300 || r.Bytes != int64(len(b)) || len(r.CRC32C) != 8 || fmt.Sprint(m.Spec.ForkAt) != "[3]" {
		t.Errorf("manifest spec: seeds %v, runs %+v, fork_at %v", m.Spec.Seeds, r, m.Spec.ForkAt)
	}
	// The downstream commands work unchanged: the guard policy, its
	// rerun as a policy arm over the same runs, the HTML report.
	policy := filepath.Join(t.TempDir(), "policy.json")
	mustRun(t, "policy", runs, "--max-harm", "0", "--out", policy)
	rerun := mustRun(t, "sweep", "--runs", goldenRuns, "--arms", "off,on,policy", "--policy", policy, "--out", filepath.Join(t.TempDir(), "rerun"))
	if !strings.Contains(rerun, "policy vs off · fork step 3: rescued 75   harmed 0   unchanged 225   net +75") ||
		!strings.Contains(rerun, "in-sample: the rule was searched on about 210 of these 300 recorded runs") {
		t.Errorf("policy rerun over the runs: %s", rerun)
	}
	mustRun(t, "report", runs, "--html", filepath.Join(t.TempDir(), "r.html"))
	mustRun(t, "verify", runs)
}

// A recorded population sweeps the same in shares of a static split,
// finalized, as in one process: the same bytes.
func TestRecordedShards(t *testing.T) {
	one, split := filepath.Join(t.TempDir(), "one"), filepath.Join(t.TempDir(), "split")
	mustRun(t, "sweep", "--runs", goldenRuns, "--unit-seeds", "64", "--out", one, "-q")
	mustRun(t, "sweep", "--runs", goldenRuns, "--unit-seeds", "64", "--shard", "1/2", "--out", split, "-q")
	mustRun(t, "sweep", "--runs", goldenRuns, "--unit-seeds", "64", "--shard", "0/2", "--out", split, "-q")
	mustRun(t, "sweep", "finalize", split, "-q")
	sameTables(t, one, split)
}

// sameTables fails t unless a and b hold the same table files, byte for
// byte.
func sameTables(t *testing.T, a, b string) {
	t.Helper()
	n := 0
	for _, table := range []string{"tasks", "checkpoints", "branches", "pairs"} {
		filepath.WalkDir(filepath.Join(a, table), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(a, p)
			x, _ := os.ReadFile(p)
			y, err := os.ReadFile(filepath.Join(b, rel))
			if err != nil || string(x) != string(y) {
				t.Errorf("%s differs (%v)", rel, err)
			}
			n++
			return nil
		})
	}
	if n == 0 {
		t.Fatalf("%s holds no table file", a)
	}
}

// Every bad population of testdata/runs/bad.txt is refused with its exit
// status and one line naming the record, and nothing is published.
func TestRunsBadInput(t *testing.T) {
	f, err := os.Open("../../testdata/runs/bad.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sc.Text() == "" || strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		c := strings.Split(sc.Text(), "\t")
		t.Run(c[0], func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "o")
			_, stderr, code := run(t, "sweep", "--runs", "../../testdata/runs/bad/"+c[0], "--out", out, "-q")
			if fmt.Sprint(code) != c[2] || !strings.Contains(stderr, c[3]) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("exit %d, %q; want %s and one line with %q", code, stderr, c[2], c[3])
			}
			if _, err := os.Stat(filepath.Join(out, "manifest.json")); err == nil {
				t.Error("a manifest was published")
			}
		})
	}
}

// The flags around --runs: it excludes --seeds and --from-log, and
// agent: needs --agent.
func TestRunsUsage(t *testing.T) {
	out := filepath.Join(t.TempDir(), "o")
	mustRefuse(t, "--seeds and --runs exclude each other", "sweep", "--runs", goldenRuns, "--seeds", "0:10", "--out", out)
	mustRefuse(t, "--runs and --from-log exclude each other", "sweep", "--runs", goldenRuns, "--from-log", "http://127.0.0.1:1", "--out", out)
	mustRefuse(t, "--runs agent: lists an external agent's runs: give the agent with --agent CMD", "sweep", "--runs", "agent:", "--out", out)
	mustRefuse(t, "want a .jsonl, .ndjson or .parquet file", "sweep", "--runs", "runs.csv", "--out", out)
	mustRefuse(t, "its checkpoint is at fork step 3, and the sweep forks at 2 (--fork-at)", "sweep", "--runs", goldenRuns, "--fork-at", "2", "--out", out)
	grid := filepath.Join(t.TempDir(), "grid.yaml")
	if err := os.WriteFile(grid, []byte("grid: {p_stall: [0, 0.1]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, "grid: a recorded population's runs were played with one configuration each", "sweep", "--runs", goldenRuns, "--spec", grid, "--out", out)
}

// Sessions recorded on the log with forklab agent run --session prod/sS
// --seed S, swept with --runs URL/v1/stream/prod/ --fork-at 3, give the
// seeds' labels run by run (issue 23's second equivalence test); a prefix
// without streams, a stream that is no session and a log that does not
// answer are refused with their exit statuses.
func TestRecordedLogEquivalence(t *testing.T) {
	url := startLogServe(t)
	const n = 24
	for s := range n {
		mustRun(t, "agent", "run", "--log", url, "--session", fmt.Sprintf("prod/s%d", s), "--seed", fmt.Sprint(s))
	}
	runs, seeds := filepath.Join(t.TempDir(), "runs"), filepath.Join(t.TempDir(), "seeds")
	mustRun(t, "sweep", "--runs", url+"/v1/stream/prod/", "--fork-at", "3", "--out", runs, "-q")
	mustRun(t, "sweep", "--seeds", fmt.Sprintf("0:%d", n), "--fork-at", "3", "--out", seeds, "-q")
	for _, q := range []string{
		"SELECT seed, label, quadrant, same_obs, repeat_run, hidden_fault, extra_steps FROM pairs ORDER BY seed",
		"SELECT seed, checkpoint FROM checkpoints ORDER BY seed",
		"SELECT same_obs, label, count(*) FROM pairs GROUP BY ALL ORDER BY ALL",
	} {
		if a, b := mustRun(t, "sql", runs, q), mustRun(t, "sql", seeds, q); a != b {
			t.Errorf("%s:\n--runs:\n%.600s\n--seeds:\n%.600s", q, a, b)
		}
	}
	if got := mustRun(t, "sql", runs, "SELECT run_id FROM pairs WHERE seed = 7", "--format", "csv"); got != "run_id\nprod/s7\n" {
		t.Errorf("run_id of seed 7's session: %q", got)
	}
	if got, want := manifestRuns(t, runs), fmt.Sprintf("%s/v1/stream/prod/ log %d", url, n); got != want {
		t.Errorf("manifest records runs %s, want %s", got, want)
	}
	for _, s := range []string{`{"type":"bogus"}`} {
		for _, r := range []struct{ method, body string }{{"PUT", ""}, {"POST", s}} {
			req, _ := http.NewRequest(r.method, url+"/v1/stream/mixed/junk", strings.NewReader(r.body))
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil || res.StatusCode >= 300 {
				t.Fatalf("%s junk: %v %v", r.method, res, err)
			}
			res.Body.Close()
		}
	}
	out := filepath.Join(t.TempDir(), "o")
	for _, c := range []struct {
		url  string
		code int
		want string
	}{
		{url + "/v1/stream/none/", 2, `no stream's name begins with "none/"`},
		{url + "/v1/stream/mixed/", 2, `stream mixed/junk: is not a session: message 0: not a session event: unknown type "bogus"`},
		{"http://127.0.0.1:1/v1/stream/prod/", 1, "the session log did not answer"},
	} {
		_, stderr, code := run(t, "sweep", "--runs", c.url, "--out", out, "-q")
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("--runs %s: exit %d, %q; want %d and %q", c.url, code, stderr, c.code, c.want)
		}
	}
}

// A recorded population sweeps the same with forklab worker processes
// taking its units from Kafka (--distributed) as in one process.
func TestRecordedDistributed(t *testing.T) {
	broker := startBroker(t)
	one, dist := filepath.Join(t.TempDir(), "one"), filepath.Join(t.TempDir(), "dist")
	mustRun(t, "sweep", "--runs", goldenRuns, "--unit-seeds", "64", "--out", one, "-q")
	w := startProc(t, "w0", "worker", "--brokers", broker, "--queue", "recorded", "--id", "w0", "--parallel", "1", "-q")
	defer func() { w.cmd.Process.Kill(); <-w.done }()
	mustRun(t, "sweep", "--distributed", "--brokers", broker, "--queue", "recorded", "--runs", goldenRuns, "--unit-seeds", "64", "--out", dist, "-q")
	sameTables(t, one, dist)
}

// manifestRuns reads the recorded population the manifest of dir records:
// "SOURCE FORMAT RUNS".
func manifestRuns(t *testing.T, dir string) string {
	t.Helper()
	var m struct {
		Spec struct {
			Runs struct {
				Source, Format string
				Runs           int
			} `json:"runs"`
		} `json:"spec"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		t.Fatal(err)
	}
	r := m.Spec.Runs
	return fmt.Sprintf("%s %s %d", r.Source, r.Format, r.Runs)
}

// A file written to while the sweep reads it is refused, exit 2, naming
// the lines that changed (or the file's new size and time, found before
// publishing), and nothing is published: here a record near the end is
// edited in place once the sweep has finished its first unit.
func TestRunsFileChangedWhileRead(t *testing.T) {
	b, err := os.ReadFile(goldenRuns)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var text strings.Builder
	const n = 60000
	for i := range n {
		l := lines[i%len(lines)]
		fmt.Fprintf(&text, `{"run_id":"x%06d",%s`+"\n", i, l[strings.Index(l, `"checkpoint"`):])
	}
	path := filepath.Join(t.TempDir(), "runs.jsonl")
	if err := os.WriteFile(path, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "o")
	p := startProc(t, "sweep", "sweep", "--runs", path, "--unit-seeds", "500", "--workers", "1", "--out", out, "-q")
	for i := 0; ; i++ {
		if m, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".o.forklab-staging", ".forklab-units", "c0-s*.json")); len(m) > 0 {
			break
		}
		if i == 6000 || p.exited() {
			t.Fatalf("the sweep wrote no unit (exited %t): %s", p.exited(), p.errb)
		}
		time.Sleep(10 * time.Millisecond)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := strings.Index(text.String(), `"run_id":"x059990"`)
	if _, err := f.WriteAt([]byte(`"run_id":"y059990"`), int64(at)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	<-p.done
	code := p.cmd.ProcessState.ExitCode()
	if stderr := p.errb.String(); code != 2 || !strings.Contains(stderr, "changed while the sweep read it") || !strings.Contains(stderr, "nothing was published") {
		t.Errorf("exit %d, %q; want 2 and the change named", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "manifest.json")); err == nil {
		t.Error("a manifest was published")
	}
}
