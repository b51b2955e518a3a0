package agentproc_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/agentproc"
)

// python3 returns the Python 3 interpreter itself (not a version
// manager's shim); a test without one is skipped, or fails when
// FORKLAB_REQUIRE_TOOLS is set (.ci/run sets it).
func python3(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		missing(t, "python3 is not installed")
	}
	return strings.TrimSpace(string(out))
}

func missing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("FORKLAB_REQUIRE_TOOLS") != "" {
		t.Fatalf("%s, and FORKLAB_REQUIRE_TOOLS is set", why)
	}
	t.Skip(why)
}

// The Python SDK (sdk/python): its unit tests pass; pip installs it into a
// fresh venv without a network (its build backend is in the tree: pip's
// build isolation downloads nothing); and an agent that imports the
// installed package — not the tree's — passes forklab agent check: the
// smallest agent of docs/sdk-python.md.
func TestPythonSDK(t *testing.T) {
	py := python3(t)
	ut := exec.Command(py, "-m", "unittest", "discover", "-s", "../../../sdk/python/tests")
	if out, err := ut.CombinedOutput(); err != nil {
		t.Fatalf("the SDK's unit tests: %v\n%s", err, out)
	}
	// A venv without pip of its own (ensurepip is slow), installed into by
	// this Python's pip (pip --python, pip 22.3 and later).
	if exec.Command(py, "-m", "pip", "--version").Run() != nil {
		missing(t, "python3 has no pip (Debian: apt-get install python3-pip)")
	}
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(py, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		missing(t, "python3 -m venv failed (Debian: apt-get install python3-venv): "+strings.TrimSpace(string(out)))
	}
	sdk, err := filepath.Abs("../../../sdk/python")
	if err != nil {
		t.Fatal(err)
	}
	pip := exec.Command(py, "-m", "pip", "--python", filepath.Join(venv, "bin", "python"), "install", "--no-index", "--no-cache-dir", sdk)
	// No index, and no proxy that would reach one: an install that needs
	// the network fails.
	pip.Env = append(os.Environ(), "PIP_NO_INDEX=1", "http_proxy=http://127.0.0.1:1", "https_proxy=http://127.0.0.1:1")
	if out, err := pip.CombinedOutput(); err != nil {
		t.Fatalf("pip install %s: %v\n%s", sdk, err, out)
	}
	agent := filepath.Join(t.TempDir(), "coin.py")
	if err := os.WriteFile(agent, []byte(coinAgent(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	where, err := exec.Command(filepath.Join(venv, "bin", "python"), "-c", "import forklab_agent, sys; sys.stderr.write(forklab_agent.__file__)").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(where), venv) {
		t.Fatalf("the venv's forklab_agent is %s (%v), want one under %s", where, err, venv)
	}
	rows, err := agentproc.Check(context.Background(), agentproc.CheckOptions{
		Command: agentproc.Command{Line: filepath.Join(venv, "bin", "python") + " " + agent}, LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Status == agentproc.Fail {
			t.Errorf("%s: %s", r.Name, r.Detail)
		}
	}
}

// coinAgent is docs/sdk-python.md's smallest agent: the first python
// block under "## The smallest agent".
func coinAgent(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../../docs/sdk-python.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "## The smallest agent")
	_, block, ok2 := strings.Cut(sec, "```python\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("no python block under \"## The smallest agent\" in docs/sdk-python.md")
	}
	return block
}
