// Package sdk holds the SDKs an agent imports to speak forklab-agent/1
// (docs/agent-protocol.md): sdk/node, the Node package @forklab/agent and
// its LangGraph adapter (docs/sdk-node.md). Its Go tests run the SDKs' own
// test suites.
package sdk

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// npmReady returns node's path once dir's npm packages are installed as its
// package-lock.json says (npm ci when stale says they are not). Without
// node and npm the test is skipped, unless FORKLAB_REQUIRE_TOOLS is set
// (CI sets it).
func npmReady(t *testing.T, dir string, stale func() bool) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("FORKLAB_REQUIRE_TOOLS") != "" {
				t.Fatalf("%s is not installed and FORKLAB_REQUIRE_TOOLS is set", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
	if stale() {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	node, _ := exec.LookPath("node")
	return node
}

// nodeTest runs node --test on dir's files matching pattern and fails with
// its report if any test fails.
func nodeTest(t *testing.T, node, dir, pattern string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil || len(files) == 0 {
		t.Fatalf("no tests %s in %s (%v)", pattern, dir, err)
	}
	for i, f := range files {
		files[i], _ = filepath.Rel(dir, f)
	}
	cmd := exec.Command(node, append([]string{"--test", "--test-reporter=tap"}, files...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test in %s: %v\n%s", dir, err, out)
	}
	t.Logf("node --test in %s:\n%s", dir, tail(out, 10))
}

func tail(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	return bytes.Join(lines[max(0, len(lines)-n):], []byte("\n"))
}

// The Node SDK's tests (sdk/node/test): the transport, JSON-RPC errors and
// batches, exact integers, the checks of declarations, params and replies,
// stdout kept for replies, and its TypeScript types compiled with tsc.
func TestNodeSDK(t *testing.T) {
	node := npmReady(t, "node", func() bool {
		_, err := os.Stat("node/node_modules/typescript/package.json")
		return err != nil
	})
	nodeTest(t, node, "node", "test/*.test.js")
}

// The LangGraph adapter's tests, run in examples/agents/langgraph, whose
// packages hold LangGraph.js (pinned in its package-lock.json) and a copy
// of the SDK: npm ci again when the copy differs from sdk/node.
func TestLangGraphAdapter(t *testing.T) {
	dir := filepath.Join("..", "examples", "agents", "langgraph")
	node := npmReady(t, dir, func() bool { return copyStale("node", filepath.Join(dir, "node_modules", "@forklab", "agent")) })
	nodeTest(t, node, dir, "test/*.test.mjs")
}

// copyStale says whether installed lacks a file of the SDK's src and
// schemas, or holds it otherwise.
func copyStale(sdk, installed string) bool {
	stale := false
	for _, sub := range []string{"src", "schemas", "package.json"} {
		filepath.WalkDir(filepath.Join(sdk, sub), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(sdk, path)
			want, _ := os.ReadFile(path)
			got, err := os.ReadFile(filepath.Join(installed, rel))
			if err != nil || !bytes.Equal(got, want) {
				stale = true
			}
			return nil
		})
	}
	return stale
}

// The example's recorded store (examples/agents/langgraph/recorded.json)
// swept with --runs agent:: each ticket is a thread of its checkpointer,
// its run_id the thread id, its metadata the ticket's, and its labels
// those --seeds gives the seed it was recorded from. The seed sweep's
// checkpoints in a file without features fork so too, through inspect.
func TestLangGraphRecordedThreads(t *testing.T) {
	dir := filepath.Join("..", "examples", "agents", "langgraph")
	npmReady(t, dir, func() bool { return copyStale("node", filepath.Join(dir, "node_modules", "@forklab", "agent")) })
	forklab := buildForklab(t)
	out := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(forklab, args...)
		cmd.Dir = dir
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("forklab %v: %v\n%s", args, err, stderr.Bytes())
		}
		return stdout.String()
	}
	threads, seeds := filepath.Join(out, "threads"), filepath.Join(out, "seeds")
	got := run("sweep", "--agent", "node agent.mjs", "--runs", "agent:", "--fork-at", "2", "--out", threads)
	if want := "on vs off · fork step 2: rescued 1   harmed 1   unchanged 10   net +0\n"; got != want {
		t.Errorf("sweep --runs agent: printed %q, want %q", got, want)
	}
	run("sweep", "--agent", "node agent.mjs", "--seeds", "0:12", "--fork-at", "2", "--out", seeds, "-q")
	got = run("sql", threads, "SELECT run_id, seed IS NULL AS no_seed, label, orders_found, picked, hidden_wrong_order FROM pairs ORDER BY run_id", "--format", "csv")
	want := "run_id,no_seed,label,orders_found,picked,hidden_wrong_order\n" +
		"ticket-1001,true,unchanged,2,true,false\n" +
		"ticket-1002,true,unchanged,4,true,false\n" +
		"ticket-1003,true,unchanged,1,true,false\n" +
		"ticket-1004,true,unchanged,4,true,true\n" +
		"ticket-1005,true,unchanged,1,true,false\n" +
		"ticket-1006,true,harmed,1,false,false\n" +
		"ticket-1007,true,unchanged,1,true,false\n" +
		"ticket-1008,true,rescued,2,true,true\n" +
		"ticket-1009,true,unchanged,2,true,false\n" +
		"ticket-1010,true,unchanged,3,true,false\n" +
		"ticket-1011,true,unchanged,2,true,false\n" +
		"ticket-1012,true,unchanged,0,false,false\n"
	if got != want {
		t.Errorf("pairs of the recorded threads:\n%s\nwant\n%s", got, want)
	}
	// Ticket 1001+S was recorded from seed S: the same labels, features and
	// costs as the seed sweep's.
	q := "SELECT label, orders_found, picked, item_named, turns_left, tool_errors, hidden_wrong_order, extra_steps, extra_tokens FROM pairs ORDER BY "
	if a, b := run("sql", threads, q+"run_id", "--format", "csv"), run("sql", seeds, q+"seed", "--format", "csv"); a != b {
		t.Errorf("the threads recorded from seeds 0..11 and --seeds 0:12 differ:\n%s\nagainst\n%s", a, b)
	}
	// The seed sweep's checkpoints, as a file without features: the
	// adapter's inspect computes them, and the labels are the seeds'.
	file := filepath.Join(out, "checkpoints.jsonl")
	if err := os.WriteFile(file, []byte(run("sql", seeds, "SELECT 'r' || seed AS run_id, fork_step, checkpoint FROM checkpoints", "--format", "ndjson")), 0o644); err != nil {
		t.Fatal(err)
	}
	fromFile := filepath.Join(out, "file")
	run("sweep", "--agent", "node agent.mjs", "--runs", file, "--out", fromFile, "-q")
	if a, b := run("sql", fromFile, q+"CAST(substr(run_id, 2) AS INT)", "--format", "csv"), run("sql", seeds, q+"seed", "--format", "csv"); a != b {
		t.Errorf("the seed sweep's checkpoints swept from a file without features and --seeds 0:12 differ:\n%s\nagainst\n%s", a, b)
	}
	if got, want := run("sql", threads, "SELECT run_id, metadata FROM tasks WHERE run_id = 'ticket-1008'", "--format", "csv"), "run_id,metadata\nticket-1008,\"{\"\"customer\"\":\"\"Farah\"\",\"\"day\"\":\"\"2026-03-06\"\"}\"\n"; got != want {
		t.Errorf("tasks of ticket-1008: %q, want %q", got, want)
	}
	// A branch's thread is named after its branch_id, the run by its thread id.
	if got := run("sql", threads, "SELECT details->>'thread_id' AS thread FROM branches WHERE run_id = 'ticket-1008' AND arm = 'on'", "--format", "csv"); !strings.HasSuffix(got, "/ticket-1008/2/on/0\n") {
		t.Errorf("ticket-1008's on branch ran in thread %q, want one named …/ticket-1008/2/on/0", got)
	}
}

// buildForklab builds cmd/forklab into a temporary directory.
func buildForklab(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "forklab")
	cmd := exec.Command("go", "build", "-tags=duckdb_arrow", "-o", bin, "../cmd/forklab")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/forklab: %v\n%s", err, out)
	}
	return bin
}
