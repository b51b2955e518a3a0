package agentproc

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// quirky is the command that runs testdata/quirky.py, a small agent whose
// protocol faults the QUIRK_* variables in env turn on.
func quirky(t testing.TB, env map[string]string) Command {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	path, err := filepath.Abs(filepath.Join("testdata", "quirky.py"))
	if err != nil {
		t.Fatal(err)
	}
	return Command{Line: "python3 " + path, Env: env}
}

// agent check gives initialize StartupTimeout, or --timeout if longer, as a
// sweep does (docs/agent-protocol.md, "initialize"): an agent that takes
// 1.5 s to load passes the handshake under a 1 s per-request timeout (the
// other checks are not this test's: quirky.py is no model agent).
func TestCheckGivesInitializeTheStartupTimeout(t *testing.T) {
	rows := Check(context.Background(), CheckOptions{Command: quirky(t, map[string]string{"QUIRK_INIT_SLEEP": "1.5"}),
		Timeout: time.Second, Seeds: []uint64{0, 1}, LogDir: t.TempDir()})
	if len(rows) == 0 || rows[0].Name != "handshake" || rows[0].Status != Pass {
		t.Fatalf("rows %+v, want a passed handshake first", rows)
	}
}
