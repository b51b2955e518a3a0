package agentproc_test

import (
	"context"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/lab/agentproc"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

func openAgent(t testing.TB, cmd agentproc.Command, parallel int, timeout time.Duration, retries int) *agentproc.Definition {
	t.Helper()
	def, err := agentproc.Open(context.Background(), agentproc.Config{Command: cmd, Parallel: parallel, Timeout: timeout, Retries: retries, Backoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { def.Close() })
	return def
}

// A built-in world served over the protocol sweeps to the same Parquet
// files, byte for byte, as in process: every value a sweep needs crosses
// the protocol intact — checkpoints, features, hidden truth, costs, noise
// keys of every arm and replica, the policy arm's intervention where its
// rule fires — and the runner's concurrency does not change the order of
// rows.
func TestServeSweepIsByteIdentical(t *testing.T) {
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: 100, End: 2600}
	spec.ForkAt = []int{1, 3}
	spec.Arms = []fork.Arm{fork.Off, fork.On, fork.Placebo, fork.AA, fork.Policy}
	rule, err := policy.ReadFile("../../../testdata/policy/same-obs.json")
	if err != nil {
		t.Fatal(err)
	}
	spec.Policy = &rule
	spec.Replicas = 3
	spec.Model = fork.Model{Temperature: 0.2, NoTool: 0.5}
	spec.Params = map[string]any{"p_stall": 0.1}
	spec.UnitSeeds = 1000
	want, _, err := sweepWith(t, spec, nil, "", false, sweep.Options{})
	if err != nil {
		t.Fatal(err)
	}
	def := openAgent(t, agent("counter", ""), 2, 10*time.Second, 0)
	got, res, err := sweepWith(t, spec, def, "", false, sweep.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 {
		t.Fatalf("%d error pairs", res.Errors)
	}
	sameFiles(t, "served against in-process", tableFiles(t, want), tableFiles(t, got))
	st := def.Pool().Stats()
	if st.Requests["start"] == 0 || st.Requests["branch"] < st.Requests["start"] {
		t.Fatalf("requests %v", st.Requests)
	}
	// Two processes for --parallel 2: the one Open started to learn the
	// declaration serves the sweep too (no probe process), and the
	// initialize of each is the only one it gets.
	if st.Processes != 2 || st.Requests["initialize"] != 2 {
		t.Fatalf("%d processes, %d initialize requests: want 2 and 2", st.Processes, st.Requests["initialize"])
	}
}

// An agent's transcripts (here a served built-in world's, sent with every
// branch result entry) are kept: the sweep's files are, byte for byte, the
// in-process sweep's with --transcripts, which records the same steps.
func TestServeSweepKeepsTranscripts(t *testing.T) {
	spec := sweep.DefaultSpec()
	spec.Seeds, spec.ForkAt, spec.Replicas, spec.UnitSeeds = sweep.Range{Start: 100, End: 700}, []int{1, 3}, 3, 256
	spec.Arms = []fork.Arm{fork.Off, fork.On, fork.AA}
	spec.Model = fork.Model{Temperature: 0.2, NoTool: 0.5}
	kept := spec
	kept.Transcripts = true
	want, _, err := sweepWith(t, kept, nil, "", false, sweep.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := agent("counter", "")
	cmd.Env["AGENTPROC_TEST_TRANSCRIPTS"] = "1"
	got, res, err := sweepWith(t, spec, openAgent(t, cmd, 2, 10*time.Second, 0), "", false, sweep.Options{Workers: 2})
	if err != nil || res.Errors != 0 {
		t.Fatalf("%v, %d error pairs", err, res.Errors)
	}
	sameFiles(t, "served with transcripts against in-process with --transcripts", tableFiles(t, want), tableFiles(t, got))
}
