package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// A --resume whose spec differs from the staged sweep's (issue 12, a
// finding of the QA pass): exit 2 with one line naming what differs and
// what to do, and nothing lost or left behind. An interrupted sweep's
// staging directory is its only copy of the finished work: it stays, and
// a --resume with the original spec then finishes it. A finished sweep
// with error rows is staged as links to itself: that copy goes, the sweep
// stays as it was.
func TestResumeOfAnotherSpec(t *testing.T) {
	// A finished sweep with error rows: an agent that crashes on seed 7,
	// within a max error rate of 100%.
	withErrors := filepath.Join(t.TempDir(), "errs")
	agent := faultyAgent(t, "--crash 7")
	mustRun(t, "sweep", "--agent", agent, "--retries", "0", "--seeds", "0:10", "--max-error-rate", "1", "--out", withErrors, "-q")
	// An interrupted sweep: killed once its ledger holds its spec.
	interrupted := filepath.Join(t.TempDir(), "int")
	big := []string{"sweep", "--seeds", "0:400000", "--unit-seeds", "1000", "--out", interrupted, "-q"}
	cmd := exec.Command(forklabBin, big...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(sweep.StagingDir(interrupted), ".forklab-units", "spec.json")); err == nil {
			break
		}
		if i == 1000 {
			t.Fatal("the sweep wrote no ledger in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()

	for _, c := range []struct {
		name        string
		args        []string
		want        []string
		stagingKept bool
	}{
		{"interrupted, other seeds", []string{"sweep", "--seeds", "0:20", "--unit-seeds", "1000", "--out", interrupted, "--resume", "-q"},
			[]string{`seeds: "0:400000" then, "0:20" now`, "resume it with the spec it was started with"}, true},
		{"interrupted, other parameter", []string{"sweep", "--seeds", "0:400000", "--unit-seeds", "1000", "--p-stall", "0.1", "--out", interrupted, "--resume", "-q"},
			[]string{"params.p_stall: 0 then, 0.1 now", "start over without --resume"}, true},
		{"finished with errors, other fork step", []string{"sweep", "--agent", agent, "--retries", "0",
			"--seeds", "0:10", "--fork-at", "2", "--max-error-rate", "1", "--out", withErrors, "--resume", "-q"},
			[]string{"fork_at: [3] then, [2] now", "--overwrite"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := c.args[len(c.args)-3]
			before := listFiles(t, out)
			_, stderr, code := run(t, c.args...)
			if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Fatalf("exit %d, want 2 and one line; stderr:\n%s", code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
			_, err := os.Stat(sweep.StagingDir(out))
			if kept := err == nil; kept != c.stagingKept {
				t.Errorf("staging directory kept: %v, want %v", kept, c.stagingKept)
			}
			if after := listFiles(t, out); after != before {
				t.Errorf("%s changed:\n%s\nnow:\n%s", out, before, after)
			}
		})
	}
	// With its own spec, the interrupted sweep resumes and finishes; the
	// sweep with error rows is still resumable.
	mustRun(t, append(big, "--resume")...)
	if _, err := sweep.ReadManifest(interrupted); err != nil {
		t.Errorf("resumed with its own spec: %v", err)
	}
	mustRun(t, "sweep", "--agent", agent, "--retries", "0", "--seeds", "0:10", "--max-error-rate", "1", "--out", withErrors, "--resume", "-q")
}

// listFiles lists the files under dir with their sizes, one a line ("" if
// dir does not exist).
func listFiles(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			b.WriteString(rel + " " + fi.ModTime().String() + "\n")
		}
		return nil
	})
	return b.String()
}
