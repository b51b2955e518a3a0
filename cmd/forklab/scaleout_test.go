package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// sameSweep fails unless dir holds the single-process sweep want's Parquet
// files byte for byte, its manifest lists the same files (sizes, rows,
// checksums) and rows, and, with report, forklab report prints the same
// report (which identical files imply; the report of a large sweep takes
// a while).
func sameSweep(t *testing.T, want, dir string, report bool) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(want, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".parquet" {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs from the single-process sweep's (%v)", rel, err)
		}
		n++
		return nil
	})
	if err != nil || n < 5 {
		t.Fatalf("compared %d files: %v", n, err)
	}
	mw, err := sweep.ReadManifest(want)
	if err != nil {
		t.Fatal(err)
	}
	md, err := sweep.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(mw.Files) != len(md.Files) {
		t.Fatalf("manifests list %d and %d files", len(mw.Files), len(md.Files))
	}
	for i := range mw.Files {
		if mw.Files[i] != md.Files[i] {
			t.Errorf("manifest file %+v, single-process %+v", md.Files[i], mw.Files[i])
		}
	}
	for k, v := range mw.Rows {
		if md.Rows[k] != v {
			t.Errorf("manifest rows.%s = %d, single-process %d", k, md.Rows[k], v)
		}
	}
	mustRun(t, "verify", dir)
	if !report {
		return
	}
	rw := strings.ReplaceAll(mustRun(t, "report", want), want, "DIR")
	rd := strings.ReplaceAll(mustRun(t, "report", dir), dir, "DIR")
	if rw != rd {
		t.Errorf("report differs from the single-process one:\n%s\nwant:\n%s", rd, rw)
	}
}

// Three share processes at once, then finalize: the single-process sweep's
// files, manifest rows and report. A finalize before the last share names
// it; a share out of range or with --resume is refused with status 2.
func TestShardsThenFinalize(t *testing.T) {
	args := []string{"--seeds", "0:60000", "--unit-seeds", "15000", "--fork-at", "1-3", "--p-stall", "0.1", "-q"}
	single := filepath.Join(t.TempDir(), "single")
	mustRun(t, append([]string{"sweep", "--out", single}, args...)...)
	out := filepath.Join(t.TempDir(), "out")
	var procs []*exec.Cmd
	for _, i := range []string{"0", "2"} {
		c := exec.Command(forklabBin, append([]string{"sweep", "--out", out, "--shard", i + "/3", "--workers", "1"}, args...)...)
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, c)
	}
	for _, c := range procs {
		if err := c.Wait(); err != nil {
			t.Fatalf("%v: %v", c.Args, err)
		}
	}
	_, errs, code := run(t, "sweep", "finalize", out)
	if code != 1 || !strings.Contains(errs, "1 of 4 units is missing, of share 1/3 (c0-s000001 (config 0, seeds 15000:30000))") {
		t.Fatalf("finalize without share 1/3: exit %d, %s", code, errs)
	}
	mustRun(t, append([]string{"sweep", "--out", out, "--shard", "1/3"}, args...)...)
	mustRun(t, "sweep", "finalize", out, "-q")
	sameSweep(t, single, out, true)
	if _, errs, code := run(t, "sweep", "finalize", out); code != 2 || !strings.Contains(errs, "nothing to finalize") {
		t.Errorf("finalize again: exit %d, %s", code, errs)
	}
	for _, bad := range [][]string{{"--shard", "3/3"}, {"--shard", "1/3", "--resume"}, {"--shard", "x"}} {
		if _, errs, code := run(t, append([]string{"sweep", "--out", t.TempDir()}, bad...)...); code != 2 {
			t.Errorf("sweep %v: exit %d, %s", bad, code, errs)
		}
	}
}

// An external agent's sweep split in three: each share starts the agent,
// the finishing step does not (it resolves the sweep through the
// declaration the units were written with); the files are the
// single-process agent sweep's.
func TestAgentShardsThenFinalize(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	args := []string{"--agent", "python3 ../../examples/agents/seed_core.py", "--seeds", "0:1200", "--unit-seeds", "200", "--fork-at", "2,3", "-q"}
	single := filepath.Join(t.TempDir(), "single")
	mustRun(t, append([]string{"sweep", "--out", single}, args...)...)
	out := filepath.Join(t.TempDir(), "out")
	for i := range 3 {
		mustRun(t, append([]string{"sweep", "--out", out, "--shard", strconv.Itoa(i) + "/3"}, args...)...)
	}
	mustRun(t, "sweep", "finalize", out, "-q")
	sameSweep(t, single, out, false)
	logs, _ := os.ReadDir(filepath.Join(out, sweep.AgentLogs))
	if len(logs) != 3 {
		t.Fatalf("agent logs: %d folders, want one per share", len(logs))
	}
}

// Flags of spread sweeps that do not fit are refused with status 2 and a
// line saying what to do.
func TestScaleOutFlagRefusals(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "--distributed", "--out", out}, "--distributed needs --brokers"},
		{[]string{"sweep", "--brokers", "x:1", "--out", out}, "--brokers applies only with --distributed"},
		{[]string{"sweep", "--distributed", "--brokers", "x:1", "--shard", "0/2", "--out", out}, "--shard and --distributed do not go together"},
		{[]string{"sweep", "--distributed", "--brokers", "x:1", "--resume", "--out", out}, "run the same command again"},
		{[]string{"sweep", "--distributed", "--brokers", "x:1", "--workers", "2", "--out", out}, "start forklab worker processes"},
		{[]string{"sweep", "--distributed", "--brokers", "x:1", "--max-attempts", "0", "--out", out}, `invalid argument "0" for "--max-attempts" flag: must be an integer in [1, 100]`},
		{[]string{"sweep", "finalize", out, "--wait", "-1s"}, `invalid argument "-1s" for "--wait" flag: must be a duration in [0s, 720h]`},
		{[]string{"sweep", "finalize", out}, "nothing to finalize"},
		{[]string{"worker"}, "--brokers is required"},
		{[]string{"worker", "--brokers", "x:1", "--session-timeout", "1s"}, `invalid argument "1s" for "--session-timeout" flag: must be a duration in [6s, 30m]`},
		{[]string{"worker", "--brokers", "x:1", "--agent-env", "NOEQUALS"}, "want KEY=VALUE"},
	} {
		_, errs, code := run(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("forklab %v: exit %d, %q; want 2 and one line saying %q", c.args, code, errs, c.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused command created the output directory")
	}
}

// A share run with another spec than the shares already in the directory
// is bad input (exit 2, as a --resume of another spec), naming the key that
// differs; it exited 1 and said "run it again to go on", which cannot help.
// The shares of the right spec then finish the sweep as usual.
func TestShardOfAnotherSpecIsBadInput(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	mustRun(t, "sweep", "-q", "--seeds", "0:3000", "--unit-seeds", "1000", "--shard", "0/3", "--out", out)
	for _, other := range [][]string{{"--seeds", "0:2000"}, {"--seeds", "0:3000", "--fork-at", "2"}} {
		args := append([]string{"sweep", "-q", "--unit-seeds", "1000", "--shard", "1/3", "--out", out}, other...)
		_, errs, code := run(t, args...)
		if code != 2 || !strings.Contains(errs, "holds units of a sweep of another spec (") || strings.Contains(errs, "run it again to go on") {
			t.Errorf("forklab %s: exit %d, %q; want 2, another spec", strings.Join(args, " "), code, errs)
		}
	}
	for _, sh := range []string{"1/3", "2/3"} {
		mustRun(t, "sweep", "-q", "--seeds", "0:3000", "--unit-seeds", "1000", "--shard", sh, "--out", out)
	}
	mustRun(t, "sweep", "finalize", "-q", out)
	mustRun(t, "verify", out)
}
