package agentproc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// The "(pid N of /bin/sh running it)" label is true: a compound line whose
// shell exec's the agent (`cd dir && exec python3 agent.py`, as
// docs/agent-protocol.md recommends) reports the agent's pid plainly; one
// whose shell stays the parent says so.
func TestPidLabelIsTrue(t *testing.T) {
	cmd := quirky(t, nil)
	dir := filepath.Join("testdata")
	for _, tc := range []struct {
		line     string
		viaShell bool
	}{
		{"cd " + dir + " && exec python3 quirky.py", false},
		{"cd " + dir + " && python3 quirky.py; true", true},
		{cmd.Line, false},
	} {
		c, err := start(Command{Line: tc.line}, "agent process 1", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := initialize(context.Background(), c, []string{Version}, ClientInfo{Name: "test"}, 30*time.Second); err != nil {
			t.Fatalf("%s: %v", tc.line, err)
		}
		want := fmt.Sprintf("agent process 1 (pid %d)", c.pid)
		if tc.viaShell {
			want = fmt.Sprintf("agent process 1 (pid %d of /bin/sh running it)", c.pid)
		}
		if got := c.who(); got != want {
			t.Errorf("%s: named %q, want %q", tc.line, got, want)
		}
		c.kill()
		if got := c.who(); got != want {
			t.Errorf("%s, once killed: named %q, want %q", tc.line, got, want)
		}
	}
}

// What the first process writes to its stderr before its initialize reply
// goes to forklab's own stderr, every line of it, and none to agent-1.log
// once the sweep points it there (docs/agent-protocol.md, "Transport"):
// the relay drains the pipe before it switches, so the split does not
// depend on when its goroutine ran. forklab's stderr is read slowly here,
// so that much of what the agent wrote is still in its pipe when the sweep
// points the process at its log.
func TestInitializeStderrGoesToForklabsStderr(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	var got bytes.Buffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	defer func() { os.Stderr = saved }()
	dir := t.TempDir()
	const runs, lines = 3, 2000
	for i := range runs {
		def, err := Open(context.Background(), Config{Command: quirky(t, map[string]string{
			"QUIRK_INIT_STDERR": "init line " + strings.Repeat("x", 80), "QUIRK_INIT_STDERR_LINES": strconv.Itoa(lines)})})
		if err != nil {
			t.Fatal(err)
		}
		logs := filepath.Join(dir, strconv.Itoa(i))
		def.SetLogDir(logs)
		def.Close()
		b, err := os.ReadFile(filepath.Join(logs, "agent-1.log"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte("--- forklab: agent process 1 (pid ")) || bytes.Contains(b, []byte("init line")) {
			t.Errorf("run %d: agent-1.log holds\n%s\nwant its header first and no line written during initialize", i, b)
		}
	}
	os.Stderr = saved
	w.Close()
	<-copied
	if n := strings.Count(got.String(), "init line "); n != runs*lines {
		t.Errorf("forklab's stderr got %d lines written during initialize, want %d", n, runs*lines)
	}
}
