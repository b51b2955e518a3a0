package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forklab/forklab/internal/caplog"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"golang.org/x/sys/unix"
)

// An agent writing to its stderr without pause (issue 25 F: 2.8 GB in
// OUT/agent-logs/agent-1.log in 25 s, and its lines on forklab's stderr
// despite -q): with -q forklab prints nothing, and the agent's logs take
// at most caplog.MaxBytes.
func TestAgentStderrBoundedAndQuiet(t *testing.T) {
	out := filepath.Join(t.TempDir(), "spew")
	stdout, stderr, code := run(t, "sweep", "--agent", faultyAgent(t, "--spew"), "--seeds", "0:100", "--out", out, "-q")
	if code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("sweep -q of a spewing agent: exit %d, stdout %.200q, stderr %.200q; want 0 and nothing", code, stdout, stderr)
	}
	// Each agent process's log (agent-N.log and its backups
	// agent-N-TIMESTAMP.log) is capped on its own: --parallel defaults to
	// the CPU count. Before the cap was enforced on rotation, 17 backups of
	// one log were left on disk.
	byAgent := map[string]int64{}
	err := filepath.WalkDir(filepath.Join(out, sweep.AgentLogs), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			name := strings.TrimSuffix(d.Name(), ".log")
			if i := strings.Index(name[len("agent-"):], "-"); i >= 0 {
				name = name[:len("agent-")+i]
			}
			byAgent[name] += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(byAgent) == 0 {
		t.Fatal("no agent log")
	}
	for name, total := range byAgent {
		if total == 0 || total > caplog.MaxBytes {
			t.Errorf("%s's logs take %d bytes; want some, at most %d", name, total, caplog.MaxBytes)
		}
	}
}

// Under a memory limit (ulimit -v; issue 25 F: at 2 GiB every sweep
// published its manifest, then exited 1 because results.duckdb ran out of
// memory) a sweep's exit status and its published state agree at every
// limit: exit 0 with a manifest (and results.duckdb, or a warning saying
// it was not written and how to write it), or a failure without one.
func TestExitAgreesWithPublishedUnderMemoryLimit(t *testing.T) {
	for _, kib := range []string{"1800000", "2097152", "2400000"} {
		out := filepath.Join(t.TempDir(), "out")
		sh := exec.Command("sh", "-c", `ulimit -v `+kib+`; exec "$@"`, "sh", forklabBin, "sweep", "--seeds", "0:10", "--out", out, "-q")
		b, err := sh.CombinedOutput()
		_, merr := os.Stat(filepath.Join(out, sweep.ManifestName))
		_, derr := os.Stat(filepath.Join(out, "results.duckdb"))
		switch {
		case err == nil && merr != nil:
			t.Errorf("ulimit -v %s: exit 0 without a manifest: %s", kib, b)
		case err != nil && merr == nil:
			t.Errorf("ulimit -v %s: published, yet %v: %s", kib, err, b)
		case err == nil && derr != nil && !strings.Contains(string(b), "is published, but its results.duckdb was not written") &&
			!strings.Contains(string(b), "forklab db "+out+" writes it"):
			t.Errorf("ulimit -v %s: no results.duckdb and no warning: %s", kib, b)
		}
		t.Logf("ulimit -v %s: %v, manifest %v, results.duckdb %v", kib, err, merr == nil, derr == nil)
	}
}

// Every writer given a directory on a read-only file system exits 2 with
// one line naming it (issue 25 F: forklab db exited 1 there). Needs a
// tmpfs it can remount read-only (root); skipped otherwise.
func TestReadOnlyOutputsExitTwo(t *testing.T) {
	ro := filepath.Join(t.TempDir(), "ro")
	os.Mkdir(ro, 0o755)
	if err := unix.Mount("tmpfs", ro, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v)", err)
	}
	t.Cleanup(func() { unix.Unmount(ro, unix.MNT_DETACH) })
	out := filepath.Join(ro, "out")
	mustRun(t, "sweep", "--seeds", "0:10", "--out", out, "-q")
	if err := unix.Mount("", ro, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Skipf("cannot remount read-only (%v)", err)
	}
	for _, args := range [][]string{
		{"db", out},
		{"sql", out, "SELECT 1", "--out", filepath.Join(out, "q.csv")},
		{"report", out, "--html", filepath.Join(out, "r.html")},
		{"sweep", "--seeds", "0:10", "--out", out, "--overwrite", "-q"},
		{"sweep", "--seeds", "0:10", "--out", filepath.Join(ro, "new"), "-q"},
		{"log", "sink", "--out", out, "--brokers", "127.0.0.1:1"},
		{"agent", "check", "--log-dir", filepath.Join(ro, "logs"), forklabBin + " agent serve"},
		{"log", "serve", "--data-dir", filepath.Join(ro, "data"), "--addr", "127.0.0.1:0"},
	} {
		mustRefuse(t, "read-only file system", args...)
	}
}
