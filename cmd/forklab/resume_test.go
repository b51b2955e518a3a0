package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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

// forklab sweep --resume --out DIR alone, as report, sql and verify advise
// for an interrupted sweep, was refused as "--resume of another spec":
// the flags' defaults were compared with the spec the sweep was started
// with. It now takes the spec stored with the interrupted sweep, says so,
// and ends byte-identical to an uninterrupted sweep of that spec; a spec
// flag that differs is still refused, and an external agent's sweep,
// whose command is not stored, is refused naming what to do.
func TestResumeAloneTakesTheStoredSpec(t *testing.T) {
	spec := []string{"--seeds", "0:200000", "--unit-seeds", "1000", "--fork-at", "2", "--arms", "off,on,aa"}
	interrupted := filepath.Join(t.TempDir(), "int")
	cmd, stderr := start(t, append(append([]string{"sweep"}, spec...), "--out", interrupted, "-q")...)
	ledger := filepath.Join(sweep.StagingDir(interrupted), ".forklab-units")
	waitFor(t, "a unit of the sweep", func() bool {
		units, _ := filepath.Glob(filepath.Join(ledger, "c*-s*.json")) // a unit entry (beside spec.json and sweep_id)
		return len(units) > 0
	})
	cmd.Process.Signal(syscall.SIGINT)
	if code := exitCode(cmd.Wait()); code != 130 {
		t.Fatalf("interrupted sweep: exit %d, want 130 (it may have finished first); stderr: %s", code, stderr)
	}

	// A spec flag given is still compared with the stored spec.
	before := listFiles(t, ledger) // the units kept, and their spec
	_, errs, code := run(t, "sweep", "--resume", "--out", interrupted, "--seeds", "0:40", "-q")
	if code != 2 || strings.Count(strings.TrimSpace(errs), "\n") != 0 ||
		!strings.Contains(errs, `seeds: "0:200000" then, "0:40" now`) ||
		!strings.Contains(errs, "forklab sweep --resume --out "+interrupted+" with no spec flags takes it") {
		t.Fatalf("--resume --seeds 0:40: exit %d, stderr %q; want 2 and one line naming the seeds", code, errs)
	}
	if after := listFiles(t, ledger); after != before {
		t.Fatalf("the refused --resume changed the ledger of the interrupted sweep:\n%s\nnow:\n%s", before, after)
	}

	// --resume alone (and a free flag, --workers) takes the stored spec.
	_, errs, code = run(t, "sweep", "--resume", "--out", interrupted, "--workers", "2")
	if code != 0 {
		t.Fatalf("--resume --out alone: exit %d: %s", code, errs)
	}
	want := "forklab: resuming the interrupted sweep of " + interrupted + ": world counter, seeds 0:200000, fork at 2, arms off,on,aa, 1 replica(s), 1000 seeds per unit (the spec stored with it)\n"
	if !strings.HasPrefix(errs, want) || !strings.Contains(errs, "units kept from the interrupted sweep") {
		t.Errorf("stderr %q; want it to begin %q and count the units kept", errs, want)
	}
	whole := filepath.Join(t.TempDir(), "whole")
	mustRun(t, append(append([]string{"sweep"}, spec...), "--out", whole, "-q")...)
	sameParquet(t, "resumed against uninterrupted", parquetFiles(t, interrupted), parquetFiles(t, whole))
	got, err := sweep.ReadManifest(interrupted)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := sweep.ReadManifest(whole)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(got.Spec)
	r, _ := json.Marshal(ref.Spec)
	if string(g) != string(r) {
		t.Errorf("the resumed sweep's manifest spec is\n%s\nthe uninterrupted one's\n%s", g, r)
	}

	// An agent's sweep (here a finished one with error rows, which
	// --resume plays again): its command is not stored, so --resume alone
	// cannot run it, and says what to do.
	withErrors := filepath.Join(t.TempDir(), "errs")
	mustRun(t, "sweep", "--agent", faultyAgent(t, "--crash 7"), "--retries", "0", "--seeds", "0:10", "--max-error-rate", "1", "--out", withErrors, "-q")
	before = listFiles(t, withErrors)
	_, errs, code = run(t, "sweep", "--resume", "--out", withErrors, "-q")
	if code != 2 || !strings.Contains(errs, "ran an external agent") || !strings.Contains(errs, "its --agent CMD or --spec") {
		t.Errorf("--resume alone of an agent's sweep: exit %d, stderr %q; want 2 saying to give its --agent command again", code, errs)
	}
	if after := listFiles(t, withErrors); after != before {
		t.Errorf("%s changed:\n%s\nnow:\n%s", withErrors, before, after)
	}
}
