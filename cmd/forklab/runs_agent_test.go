package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// An agent's own recorded runs — the threads of its store, listed by its
// runs method and handed back by load — sweep with --runs agent:, keyed by
// their ids, without seeds, their metadata kept; a file of its checkpoints
// sweeps too, inspect computing their features (a record whose features
// disagree with inspect's is an error row, never a label); an agent without
// the capability a source needs is refused; a recorded run's checkpoint
// forks again with fork --checkpoint --agent.
func TestRecordedAgent(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	agent := "python3 ../../testdata/agents/recorded_agent.py"
	threads := filepath.Join(t.TempDir(), "threads")
	out := mustRun(t, "sweep", "--agent", agent, "--runs", "agent:", "--fork-at", "2", "--out", threads)
	if want := "on vs off · fork step 2: rescued 2   harmed 1   unchanged 3   net +1\n"; out != want {
		t.Errorf("sweep --runs agent: printed %q, want %q", out, want)
	}
	got := mustRun(t, "sql", threads, "SELECT run_id, p.seed IS NULL AS no_seed, label, p.last_stale, p.fresh, p.hidden_poisoned, over FROM pairs AS p JOIN checkpoints AS c USING (config_id, fork_step, run_id) ORDER BY run_id", "--format", "csv")
	want := "run_id,no_seed,label,last_stale,fresh,hidden_poisoned,over\n" +
		"thread-a,true,rescued,true,0,true,false\n" +
		"thread-b,true,unchanged,false,2,false,false\n" +
		"thread-c,true,rescued,true,1,true,false\n" +
		"thread-d,true,harmed,false,2,false,false\n" +
		"thread-e,true,unchanged,true,0,true,false\n" +
		"thread-f,true,unchanged,false,1,false,true\n"
	if got != want {
		t.Errorf("pairs of the agent's threads:\n%s\nwant\n%s", got, want)
	}
	if got := mustRun(t, "sql", threads, "SELECT run_id, budget, metadata FROM tasks WHERE run_id IN ('thread-d', 'thread-e') ORDER BY run_id", "--format", "csv"); got != "run_id,budget,metadata\nthread-d,3,\"{\"\"user\"\":\"\"cy\"\",\"\"tags\"\":[\"\"vip\"\"]}\"\nthread-e,3,\n" {
		t.Errorf("tasks: %q", got)
	}
	// Each branch is sent its identity, the run named by its run id.
	m, err := sweep.ReadManifest(threads)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mustRun(t, "sql", threads, "SELECT details->>'branch_id' AS id FROM branches WHERE run_id = 'thread-a' AND arm = 'on'", "--format", "csv"), "id\n"+m.SweepID+"/thread-a/2/on/0\n"; got != want {
		t.Errorf("thread-a's on branch was sent branch_id %q, want %q", got, want)
	}
	if got := manifestRuns(t, threads); got != "agent: agent 6" {
		t.Errorf("manifest records runs %s, want agent: agent 6", got)
	}

	file := filepath.Join(t.TempDir(), "file")
	mustRun(t, "sweep", "--agent", agent, "--runs", "../../testdata/agents/recorded_checkpoints.jsonl", "--max-error-rate", "0.5", "--out", file, "-q")
	got = mustRun(t, "sql", file, "SELECT run_id, coalesce(label, status) AS label, error FROM pairs ORDER BY run_id", "--format", "csv")
	for _, w := range []string{"file-a,rescued,\n", "file-b,unchanged,\n", "file-d,harmed,\n", "file-e,unchanged,\n", "file-f,unchanged,\n",
		"file-c,error,", "recorded_checkpoints.jsonl line 3 (run file-c): features disagree with what agent world cache_loop's inspect computes from its checkpoint: features.last_stale is false in the record, true from inspect"} {
		if !strings.Contains(got, w) {
			t.Errorf("pairs of the file's runs do not hold %q:\n%s", w, got)
		}
	}
	if got := mustRun(t, "sql", file, "SELECT metadata FROM tasks WHERE run_id = 'file-b'", "--format", "csv"); !strings.Contains(got, `source`) {
		t.Errorf("metadata of file-b: %q", got)
	}
	o := filepath.Join(t.TempDir(), "o")
	mustRefuse(t, "(run file-a): no features, and agent world cache_loop does not declare the inspect capability", "sweep", "--agent", agent+" --no-inspect", "--runs", "../../testdata/agents/recorded_checkpoints.jsonl", "--out", o, "-q")
	mustRefuse(t, "agent world cache_loop does not declare the runs capability", "sweep", "--agent", agent+" --no-runs", "--runs", "agent:", "--out", o, "-q")

	// A thread's checkpoint, without a seed, forks again as the sweep forked
	// it: with its run key.
	rows := mustRun(t, "sql", threads, "SELECT run_id, seed, fork_step, over, checkpoint FROM checkpoints WHERE run_id = 'thread-a'", "--format", "ndjson")
	cp := filepath.Join(t.TempDir(), "cp.jsonl")
	if err := os.WriteFile(cp, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, "fork", "--checkpoint", cp, "--arm", "on", "--agent", agent, "--json"); !strings.Contains(got, `"success":true`) {
		t.Errorf("fork --checkpoint of thread-a on: %s", got)
	}
}
