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
