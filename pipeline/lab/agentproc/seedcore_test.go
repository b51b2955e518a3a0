package agentproc_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// seedCoreGolden holds the digest of every reply examples/agents/seed_core.py
// gives to the exchange seedCoreExchange plays, as the agent gave them before
// it was rewritten on the Python SDK (sdk/python), and the first replies
// themselves. The results of a sweep are a function of these replies (the
// checkpoints table holds the checkpoints byte for byte), so equal replies
// mean byte-identical tables. Regenerate only for a change meant to change
// the agent's results: FORKLAB_SEEDCORE_GOLDEN=write go test -run
// TestSeedCoreRepliesUnchanged ./pipeline/lab/agentproc.
const seedCoreGolden = "../../../testdata/agents/seed_core-replies.txt"

// seedCoreExchange plays seeds 0:600 through a seed_core.py process, one
// request per line: initialize, then for each seed a start at fork steps
// 1, 2, 3, 5 and 9 (runs over before a fork step included) and a branch of
// every checkpoint it returned, arms off, on, aa and policy (fired, and not)
// with two replicas; the branch params carry sweep_id and branch_id, which
// the agent must ignore; then fold of a session's events at every step of
// seed 5's run. It returns the reply lines.
func seedCoreExchange(t *testing.T, python string) []string {
	t.Helper()
	cmd := exec.Command(python, "../../../examples/agents/seed_core.py")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	r := bufio.NewReaderSize(stdout, 1<<20)
	var replies []string
	id := 0
	ask := func(method string, params any) map[string]any {
		t.Helper()
		id++
		line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stdin.Write(append(line, '\n')); err != nil {
			t.Fatal(err)
		}
		reply, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		replies = append(replies, strings.TrimSuffix(reply, "\n"))
		var resp struct {
			Result map[string]any `json:"result"`
		}
		d := json.NewDecoder(strings.NewReader(reply))
		d.UseNumber()
		if err := d.Decode(&resp); err != nil || resp.Result == nil {
			t.Fatalf("%s: %q: %v", method, reply, err)
		}
		return resp.Result
	}
	ask("initialize", map[string]any{"protocol_versions": []string{"forklab-agent/1"}, "client": map[string]string{"name": "forklab", "version": "test"}})
	steps := []int{1, 2, 3, 5, 9}
	model := map[string]any{"temperature": 0, "no_tool": 0.5}
	for seed := 0; seed < 600; seed++ {
		res := ask("start", map[string]any{"seed": seed, "fork_steps": steps, "params": map[string]any{}, "model": model})
		for fi, f := range res["forks"].([]any) {
			cp := f.(map[string]any)["checkpoint"]
			var branches []map[string]any
			for _, arm := range []struct {
				name string
				iv   any
			}{{"off", nil}, {"on", "refresh"}, {"aa", nil}, {"policy", "refresh"}, {"policy", nil}} {
				for rep := range 2 {
					branches = append(branches, map[string]any{"arm": arm.name, "intervention": arm.iv, "replica": rep,
						"noise_key": fmt.Sprintf("%016x", seed*1000+fi*10+rep),
						"branch_id": fmt.Sprintf("golden/%d/%d/%s/%d", seed, steps[fi], arm.name, rep)})
				}
			}
			ask("branch", map[string]any{"sweep_id": "golden", "seed": seed, "fork_step": steps[fi], "checkpoint": cp, "branches": branches})
		}
	}
	events := []any{map[string]any{"type": "incarnation", "epoch": 0, "nonce": "4be3a1f9c07d2e55", "pid": 4242},
		map[string]any{"type": "start", "agent": "seed_core", "version": "1", "seed": 5}}
	obs := []int{0, 0, 0, 0, 0, 0, 0, 0} // seed 5's sensor sticks at 1: the observation stays 0
	for step := 1; step <= 8; step++ {
		ask("fold", map[string]any{"stream": "demo", "offset": fmt.Sprintf("o%d", step), "events": events})
		events = append(events, map[string]any{"type": "action", "step": step, "action": "increment", "obs": obs[step-1]})
	}
	ask("shutdown", map[string]any{})
	return replies
}

// The Python SDK's rewrite of the seed core gives, to the same requests,
// the replies the agent gave before it, byte for byte: the same tasks,
// checkpoints, features, hidden truth, outcomes and costs — so a sweep of
// it writes the same tables (TestAgentPairsEqualTheCounter in cmd/forklab
// holds its tasks, branches and pairs to the built-in counter's too).
func TestSeedCoreRepliesUnchanged(t *testing.T) {
	py, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skip("python3 is not installed")
	}
	replies := seedCoreExchange(t, strings.TrimSpace(string(py)))
	h := sha256.New()
	for _, l := range replies {
		io.WriteString(h, l+"\n")
	}
	digest := hex.EncodeToString(h.Sum(nil))
	const sample = 12
	if os.Getenv("FORKLAB_SEEDCORE_GOLDEN") == "write" {
		text := fmt.Sprintf("# sha256 of the %d reply lines of seedCoreExchange (pipeline/lab/agentproc/seedcore_test.go), then the first %d\n%s\n%s\n",
			len(replies), sample, digest, strings.Join(replies[:sample], "\n"))
		if err := os.WriteFile(seedCoreGolden, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(seedCoreGolden)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != sample+2 {
		t.Fatalf("%s: %d lines, want %d", seedCoreGolden, len(lines), sample+2)
	}
	for i, want := range lines[2:] {
		if replies[i] != want {
			t.Fatalf("reply %d differs from the golden one:\n got %s\nwant %s", i+1, replies[i], want)
		}
	}
	if digest != lines[1] {
		t.Fatalf("the %d replies hash to %s, the golden ones to %s: a reply after the first %d differs", len(replies), digest, lines[1], sample)
	}
}
