package agentproc_test

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// examples/agents/toolbot.mjs, rewritten on the Node SDK (sdk/node), answers
// testdata/agents/toolbot.requests.jsonl — starts of 22 seeds (two beyond
// 2^53) at fork steps 1 and 3 under two parameter sets, and branches of
// every fork on every arm, two replicas each — with exactly the lines the
// version before the SDK wrote (toolbot.replies.jsonl, recorded from it):
// the same tasks, checkpoints, features, outcomes, costs and details.
func TestToolbotReplies(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("FORKLAB_REQUIRE_TOOLS") != "" {
			t.Fatal("node is not installed and FORKLAB_REQUIRE_TOOLS is set")
		}
		t.Skip("node is not installed")
	}
	in, err := os.ReadFile("../../../testdata/agents/toolbot.requests.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../../testdata/agents/toolbot.replies.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "../../../examples/agents/toolbot.mjs")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("toolbot: %v\n%s", err, stderr.Bytes())
	}
	gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range min(len(gotLines), len(wantLines)) {
		if gotLines[i] != wantLines[i] {
			t.Fatalf("reply %d differs:\n got %.300s\nwant %.300s", i+1, gotLines[i], wantLines[i])
		}
	}
	if len(gotLines) != len(wantLines) {
		t.Fatalf("%d reply lines, want %d", len(gotLines), len(wantLines))
	}
}
