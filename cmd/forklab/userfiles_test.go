package main

import (
	"bytes"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// runIn runs forklab with args in directory dir ("" the test's own):
// stdout, stderr and the exit status.
func runIn(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(forklabBin, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	}
	t.Fatalf("run forklab %v: %v", args, err)
	return "", "", -1
}

// A directory holding a user's a.txt and sub/ (issue 25 E: forklab sweep
// --seeds 0:10 --out . --overwrite there exited 1, "swap … device or
// resource busy", after moving both into a hidden folder): every command
// that publishes or replaces into --out . — sweep, sweep again, the
// shares of a split and sweep finalize, db, log export, log sink — leaves
// them where they are (same inode) and as they are, and ends with exit 0.
func TestOutDotNeverMovesUserFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "work")
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("mine"), 0o644)
	os.WriteFile(filepath.Join(dir, "sub", "b.txt"), []byte("also mine"), 0o644)
	var before []fs.FileInfo
	for _, p := range []string{"a.txt", "sub", "sub/b.txt"} {
		fi, _ := os.Stat(filepath.Join(dir, p))
		before = append(before, fi)
	}
	unmoved := func(after string) {
		t.Helper()
		for i, p := range []string{"a.txt", "sub", "sub/b.txt"} {
			fi, err := os.Stat(filepath.Join(dir, p))
			if err != nil || !os.SameFile(fi, before[i]) {
				t.Fatalf("after %s: %s was moved or removed (%v)", after, p, err)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "mine" {
			t.Fatalf("after %s: a.txt changed", after)
		}
		// Only the shares of a split leave their staging directory
		// beside it, for finalize.
		if es, _ := os.ReadDir(filepath.Dir(dir)); len(es) != 1 && !strings.Contains(after, "--shard") {
			t.Fatalf("after %s: beside the directory: %v", after, es)
		}
	}
	mustIn := func(args ...string) string {
		t.Helper()
		_, errs, code := runIn(t, dir, args...)
		if code != 0 {
			t.Fatalf("forklab %s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		unmoved("forklab " + strings.Join(args, " "))
		return errs
	}
	_, errs, code := runIn(t, dir, "sweep", "--seeds", "0:10", "--out", ".", "-q")
	if code != 2 || !strings.Contains(errs, "(it holds a.txt)") || !strings.Contains(errs, "--overwrite") {
		t.Fatalf("without --overwrite: exit %d, %q", code, errs)
	}
	unmoved("the refusal")
	mustIn("sweep", "--seeds", "0:10", "--out", ".", "--overwrite", "-q")
	mustIn("sweep", "--seeds", "0:20", "--out", ".", "--overwrite", "-q")
	mustIn("db", ".")
	mustIn("sweep", "--seeds", "0:30", "--shard", "0/2", "--out", ".", "--overwrite", "-q")
	mustIn("sweep", "--seeds", "0:30", "--shard", "1/2", "--out", ".", "--overwrite", "-q")
	mustIn("sweep", "finalize", ".", "--overwrite", "-q")
	if m, err := sweep.ReadManifest(dir); err != nil || m.Rows["tasks"] != 30 {
		t.Fatalf("after finalize: %d tasks, %v; want 30", m.Rows["tasks"], err)
	}
	url, kafka := startLogServeKafka(t)
	mustRun(t, "agent", "run", "--log", url, "--session", "demo/s1", "--seed", "1")
	mustIn("log", "export", "--log", url, "--stream", "demo/s1", "--out", ".")
	mustIn("log", "sink", "--out", ".", "--brokers", kafka, "--prefix", "demo/")
	mustIn("verify", ".")
}

// startLogServeKafka runs forklab log serve with its Kafka port open and
// returns its URL and Kafka address.
func startLogServeKafka(t *testing.T) (url, kafka string) {
	t.Helper()
	addr, kafka := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
	serve := exec.Command(forklabBin, "log", "serve", "--addr", addr, "--data-dir", t.TempDir(), "--quiet",
		"--kafka-port", strings.TrimPrefix(kafka, "127.0.0.1:"))
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	url = "http://" + addr
	for i := 0; ; i++ {
		if res, err := http.Get(url + "/v1/stream/"); err == nil {
			res.Body.Close()
			return url, kafka
		}
		if i > 600 {
			t.Fatal("log serve did not come up")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A sweep whose first write, its spec, fails (here on a file-size limit of
// 0, ulimit -f 0, which ends the process with SIGXFSZ; on a full disk the
// write fails with ENOSPC) leaves a staging directory without a spec.
// forklab sweep --resume --out DIR published the default spec there, exit
// 0 (issue 25 E): it is refused, saying what to run, and the sweep run
// again without --resume is the one asked.
func TestResumeWithoutRecordedSpec(t *testing.T) {
	out := filepath.Join(t.TempDir(), "tiny2")
	spec := []string{"--seeds", "0:50", "--fork-at", "2", "--arms", "off,on,placebo", "--out", out, "-q"}
	sh := exec.Command("sh", "-c", `ulimit -f 0; exec "$@"`, "sh", forklabBin)
	sh.Args = append(sh.Args, append([]string{"sweep"}, spec...)...)
	if err := sh.Run(); err == nil {
		t.Fatal("the sweep under ulimit -f 0 succeeded")
	}
	if _, err := os.Stat(sweep.StagingDir(out)); err != nil {
		t.Fatalf("no staging directory left: %v", err)
	}
	mustRefuse(t, "--resume: the interrupted sweep of "+out+" recorded no spec", "sweep", "--resume", "--out", out)
	if _, err := os.Stat(filepath.Join(out, sweep.ManifestName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused --resume published %s: %v", out, err)
	}
	mustRun(t, append([]string{"sweep"}, spec...)...)
	m, err := sweep.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := specSummary(m.Spec); !strings.HasPrefix(got, "world counter, seeds 0:50, fork at 2, arms off,on,placebo,") {
		t.Fatalf("published spec: %s", got)
	}
}
