package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An agent sweep whose every pair errored (the faulty agent crashes on
// both seeds) reports n/a for its rates, in the text and HTML reports
// alike, never "NaN%" (the report once printed "net rate NaN% (95% CI
// -100.0% to 100.0%)" and "rescue rate NaN%").
func TestReportOfEveryPairErrored(t *testing.T) {
	out := filepath.Join(t.TempDir(), "allerr")
	_, stderr, code := run(t, "sweep", "--agent", faultyAgent(t, "--crash 0,1"), "--seeds", "0:2", "--fork-at", "2",
		"--retries", "0", "--out", out)
	if code != 5 {
		t.Fatalf("sweep exited %d, want 5 (every pair an error)\n%s", code, stderr)
	}
	stdout, stderr, code := run(t, "report", out)
	if code != 0 {
		t.Fatalf("report exited %d\n%s", code, stderr)
	}
	for _, want := range []string{
		"on vs off · fork step 2 · 0 pairs (and 2 pairs that errored, not labelled)\n  no labelled pair: rates, intervals and McNemar's test are n/a (every pair errored)\n",
		"Recovery at fork step 2 has no labelled pair: every one of its 2 pairs errored,",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
	html := filepath.Join(t.TempDir(), "r.html")
	if _, stderr, code := run(t, "report", out, "--html", html); code != 0 {
		t.Fatalf("report --html exited %d\n%s", code, stderr)
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"report": stdout, "report --html": string(page)} {
		for _, bad := range []string{"NaN", "Inf"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s prints %q", name, bad)
			}
		}
	}
}
