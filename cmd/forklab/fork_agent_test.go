package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// agentCP is a file of testdata/checkpoints/agent.
func agentCP(name string) string {
	return filepath.Join("..", "..", "testdata", "checkpoints", "agent", name)
}

// A checkpoint of an agent's sweep, taken from its checkpoints table with
// forklab sql, is branched again by forklab fork --checkpoint --agent to
// the sweep's outcome for every seed, arm and replica (forklab fork
// decoded built-in worlds' checkpoints only). The served counter at
// temperature 0.3 with 3 replicas checks the noise keys: its outcomes
// differ by replica.
func TestForkAgentCheckpointsMatchSweep(t *testing.T) {
	for _, tc := range []struct {
		name, agent string
		sweepArgs   []string
		replicas    int
	}{
		{"seed_core", seedCore(t), nil, 1},
		{"served counter", forklabBin + " agent serve --world counter", []string{"--temperature", "0.3", "--replicas", "3"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sw")
			args := append([]string{"sweep", "--agent", tc.agent, "--seeds", "0:4", "--fork-at", "3", "--arms", "off,on", "--out", dir, "-q"}, tc.sweepArgs...)
			mustRun(t, args...)
			cps := mustRun(t, "sql", dir, "SELECT seed, fork_step, over, checkpoint FROM checkpoints ORDER BY seed", "--format", "ndjson")
			if n := strings.Count(cps, "\n"); n != 4 {
				t.Fatalf("%d checkpoints, want 4:\n%s", n, cps)
			}
			file := filepath.Join(t.TempDir(), "cps.jsonl")
			if err := os.WriteFile(file, []byte(cps), 0o644); err != nil {
				t.Fatal(err)
			}
			rows, err := csv.NewReader(strings.NewReader(mustRun(t, "sql", dir,
				"SELECT seed, arm, replica, success, cost_steps FROM branches ORDER BY seed", "--format", "csv"))).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{}
			for _, r := range rows[1:] {
				want[fmt.Sprintf("seed %s arm %s replica %s", r[0], r[1], r[2])] = "success " + r[3] + " steps " + r[4]
			}
			if len(want) != 4*2*tc.replicas {
				t.Fatalf("the sweep has %d branches, want %d", len(want), 4*2*tc.replicas)
			}
			got := map[string]string{}
			for _, arm := range []string{"on", "off"} {
				for rep := range tc.replicas {
					out := mustRun(t, "fork", "--checkpoint", file, "--agent", tc.agent, "--arm", arm, "--replica", fmt.Sprint(rep), "--json")
					var seeds []uint64
					for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
						var o struct {
							Seed     uint64 `json:"seed"`
							ForkStep int    `json:"fork_step"`
							Arm      string `json:"arm"`
							Replica  int    `json:"replica"`
							Success  bool   `json:"success"`
							Cost     struct{ Steps int }
							CP       json.RawMessage `json:"checkpoint"`
						}
						if err := json.Unmarshal([]byte(line), &o); err != nil {
							t.Fatalf("%s: %v", line, err)
						}
						if o.ForkStep != 3 || o.Arm != arm || o.Replica != rep || len(o.CP) == 0 || o.CP[0] != '{' {
							t.Errorf("outcome %s: want fork step 3, arm %s, replica %d and the checkpoint as JSON", line, arm, rep)
						}
						seeds = append(seeds, o.Seed)
						got[fmt.Sprintf("seed %d arm %s replica %d", o.Seed, arm, rep)] = fmt.Sprintf("success %t steps %d", o.Success, o.Cost.Steps)
					}
					if fmt.Sprint(seeds) != "[0 1 2 3]" {
						t.Errorf("arm %s replica %d: outcomes of seeds %v, want [0 1 2 3] in input order", arm, rep, seeds)
					}
				}
			}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("%s: fork --checkpoint --agent gives %q, the sweep %q", k, got[k], w)
				}
			}
		})
	}
}

// The text output, from standard input: one line per checkpoint, as fork
// --stream --agent prints it without "folded from".
func TestForkAgentCheckpointText(t *testing.T) {
	b, err := os.ReadFile(agentCP("seed_core-seed0-fork3.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ arm, want string }{
		{"on", "seed_core seed 0 · fork step 3 · arm on · replica 0: success (intervened true, cost 5 steps)\n"},
		{"off", "seed_core seed 0 · fork step 3 · arm off · replica 0: failure (intervened false, cost 6 steps)\n"},
	} {
		cmd := exec.Command(forklabBin, "fork", "--checkpoint", "-", "--agent", seedCore(t), "--arm", tc.arm)
		cmd.Stdin = bytes.NewReader(append(append([]byte{}, b...), b...))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("arm %s: %v", tc.arm, err)
		}
		if string(out) != tc.want+tc.want {
			t.Errorf("arm %s: got %q, want %q twice", tc.arm, out, tc.want)
		}
	}
}

// --agent-env reaches the agent's process: the command line names the
// agent's script through a variable only --agent-env sets.
func TestForkAgentEnv(t *testing.T) {
	agent := pythonBin(t) + ` "$FORKLAB_TEST_AGENT_SCRIPT"`
	cp := agentCP("seed_core-seed0-fork3.jsonl")
	out := mustRun(t, "fork", "--checkpoint", cp, "--agent", agent, "--agent-env", "FORKLAB_TEST_AGENT_SCRIPT="+repoFile(t, "examples/agents/seed_core.py"), "--arm", "on")
	if want := "seed_core seed 0 · fork step 3 · arm on · replica 0: success (intervened true, cost 5 steps)\n"; out != want {
		t.Errorf("got %q, want %q", out, want)
	}
	if out, stderr, code := run(t, "fork", "--checkpoint", cp, "--agent", agent, "--arm", "on"); code == 0 || out != "" {
		t.Errorf("without --agent-env: exit %d, %q (%s); want a failure to start the agent", code, out, stderr)
	}
}

// --timeout bounds each request: a branch that hangs fails (exit 1) once
// its three attempts have each waited --timeout, not the default minute.
func TestForkAgentTimeout(t *testing.T) {
	cp := agentCP("seed_core-seed13-fork3.jsonl")
	for _, tc := range []struct {
		name, flags string
		code        int
		want        string
	}{
		{"hangs", "--hang 13", 1, "timed out after 300ms waiting for the branch reply"},
		{"answers", "--hang 14", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			out, stderr, code := run(t, "fork", "--checkpoint", cp, "--agent", faultyAgent(t, tc.flags), "--arm", "on", "--timeout", "300ms")
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.want)
			}
			if el := time.Since(start); el > 20*time.Second {
				t.Errorf("took %s with --timeout 300ms", el)
			}
			if tc.code == 0 && out != "seed_core seed 13 · fork step 3 · arm on · replica 0: failure (intervened true, cost 4 steps)\n" {
				t.Errorf("stdout %q", out)
			}
			if tc.code != 0 && out != "" {
				t.Errorf("a failed fork printed %q", out)
			}
		})
	}
}

// Bad input to fork --checkpoint --agent exits 2 with a message saying
// what was wrong, and prints nothing.
func TestForkAgentCheckpointRefusals(t *testing.T) {
	agent := seedCore(t)
	good := agentCP("seed_core-seed0-fork3.jsonl")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"line not JSON", []string{"--checkpoint", agentCP("not-json.jsonl"), "--agent", agent}, "line 2: bad checkpoint: JSON ends early"},
		{"bare checkpoint", []string{"--checkpoint", agentCP("bare.jsonl"), "--agent", agent}, "line 1: bad checkpoint: no checkpoint field: with --agent each line is a JSON object with seed, fork_step and checkpoint"},
		{"checkpoint the agent refuses", []string{"--checkpoint", agentCP("forged.jsonl"), "--agent", agent}, "line 1 (seed 0, fork step 3): the agent refused it: agent process 1"},
		{"error row", []string{"--checkpoint", agentCP("error-row.jsonl"), "--agent", agent}, "checkpoint is null"},
		{"string without JSON", []string{"--checkpoint", agentCP("string-not-json.jsonl"), "--agent", agent}, "checkpoint is a string that holds no JSON"},
		{"seed not an integer", []string{"--checkpoint", agentCP("seed-not-integer.jsonl"), "--agent", agent}, `seed is "x", want an integer in [0, 2^63-2]`},
		{"fork step 0", []string{"--checkpoint", agentCP("fork-step-0.jsonl"), "--agent", agent}, "fork_step 0 is below 1"},
		{"another world", []string{"--checkpoint", agentCP("other-world.jsonl"), "--agent", agent}, "a checkpoint of world counter, but the agent plays world seed_core"},
		{"built-in checkpoint", []string{"--checkpoint", "../../testdata/checkpoints/seed0-fork3.json", "--agent", agent}, "a checkpoint of the built-in world counter (it names its world): fork it without --agent"},
		{"agent checkpoint without --agent", []string{"--checkpoint", good}, "give --agent CMD"},
		{"arm the agent lacks", []string{"--checkpoint", good, "--agent", agent, "--arm", "placebo"}, "--arm placebo: agent world seed_core declares no intervention for it"},
		{"policy arm", []string{"--checkpoint", good, "--agent", agent, "--arm", "policy", "--policy", "../../testdata/policy/same-obs.json"}, "--arm policy with --checkpoint and --agent"},
		{"agent-env without agent", []string{"--checkpoint", good, "--agent-env", "A=1"}, "--agent-env applies only with --agent"},
		{"timeout without agent", []string{"--checkpoint", good, "--timeout", "1s"}, "--timeout applies only with --agent"},
		{"timeout 0", []string{"--checkpoint", good, "--agent", agent, "--timeout", "0s"}, "must be a duration in [1ms, 24h]"},
		{"agent-env without =", []string{"--checkpoint", good, "--agent", agent, "--agent-env", "NOVALUE"}, `--agent-env "NOVALUE": want KEY=VALUE`},
		{"agent-env twice", []string{"--checkpoint", good, "--agent", agent, "--agent-env", "A=1", "--agent-env", "A=2"}, "agent-env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"fork"}, tc.args...)
			if !strings.Contains(strings.Join(tc.args, " "), "--arm") {
				args = append(args, "--arm", "on")
			}
			out, stderr, code := run(t, args...)
			if code != 2 || !strings.Contains(stderr, tc.want) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2, nothing printed, and %q", code, out, stderr, tc.want)
			}
		})
	}
}
