package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// An agent that declares a score: its sweep's summary has the mean paired
// score difference, its interval and the Wilcoxon test; a branch reply
// whose score is NaN, outside the declared range or missing, or whose
// success contradicts the declared threshold, is malformed: retried, then
// an error row naming the field, and the sweep is incomplete (exit 5).
// forklab agent check fails on it (exit 1).
func TestAgentScores(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	agent := "python3 " + filepath.Join("..", "..", "testdata", "agents", "faulty_agent.py") + " --score "
	dir := filepath.Join(t.TempDir(), "ok")
	mustRun(t, "sweep", "-q", "--agent", agent+"ok", "--seeds", "0:20", "--out", dir)
	got := mustRun(t, "sql", dir, "SELECT wilcoxon_n, mean_score_diff IS NOT NULL, score_diff_lo < score_diff_hi FROM summary")
	if !strings.Contains(got, "15") || strings.Count(got, "true") != 2 {
		t.Errorf("a scored agent's summary:\n%s", got)
	}
	for mode, want := range map[string]string{
		"nan":     "result.branches[0].score is NaN, which JSON does not allow: a score is a finite number within the declared range",
		"out":     "result.branches[0].score 1.5 is outside the declared range [0, 1]",
		"missing": "result.branches[0].score is missing: the world declares a score in [0, 1], which every branch reports",
		"against": "result.branches[0].success is false but its score 1 is at or above the declared threshold 1",
	} {
		out := filepath.Join(t.TempDir(), mode)
		_, errs, code := run(t, "sweep", "-q", "--agent", agent+mode, "--retries", "0", "--seeds", "0:20", "--out", out)
		if code != 5 || !strings.Contains(errs, "INCOMPLETE: 2 of 20 pairs") {
			t.Errorf("--score %s: exit %d, %q; want 5 and 2 error pairs", mode, code, errs)
			continue
		}
		if rows := mustRun(t, "sql", out, "SELECT DISTINCT error FROM branches WHERE status = 'error'"); !strings.Contains(rows, want) {
			t.Errorf("--score %s: error rows %q, want %q", mode, rows, want)
		}
	}
	if out, _, code := run(t, "agent", "check", agent+"out", "--seeds", "0:8"); code != 1 || !strings.Contains(out, "score 1.5 is outside the declared range [0, 1]") {
		t.Errorf("agent check of an agent scoring outside its range: exit %d\n%s", code, out)
	}
}
