package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReportOneConvergencePoint renders the HTML report of a sweep whose
// convergence table has one number of seeds and one interval width (0.854)
// for every number of replicas voted (testdata/specs/one-convergence-point.yaml).
// The width chart's log axis had a one-value range, which gonum/plot widens
// by 1 each way, below zero, and forklab report --html panicked; now it is
// widened by a factor of 2 and both charts are drawn.
func TestReportOneConvergencePoint(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "r")
	mustRun(t, "sweep", "-q", "--spec", "../../testdata/specs/one-convergence-point.yaml", "--out", out)
	page := filepath.Join(dir, "r.html")
	if _, errs, code := run(t, "report", out, "--html", page); code != 0 {
		t.Fatalf("report --html: exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, chart := range []string{
		`aria-label="net rate with its 95% interval by number of seeds, one line per number of replicas voted"`,
		`aria-label="width of the net rate&#39;s 95% interval by number of seeds, one line per number of replicas voted"`,
	} {
		if !strings.Contains(string(b), chart) {
			t.Errorf("the page lacks the chart %s", chart)
		}
	}
}
