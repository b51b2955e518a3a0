package main

import (
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The report of an incomplete sweep (more error pairs than
// --max-error-rate: forklab sweep exited 5, manifest.json says
// "incomplete": true) says so at its top, in text and in HTML, as the
// manifest's documentation and docs/exit-status.md promise; it only
// counted the error pairs beside the headline, as for a complete sweep
// with a few errors within the rate, which gets no such line.
func TestReportSaysIncomplete(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	// --retries 1: a batch that fails as a whole counts as a try, and the
	// requests sent again one per line are the second: seeds 3 and 7 error.
	agent := "python3 ../../testdata/agents/faulty_agent.py --crash 3,7"
	dir := t.TempDir()
	for _, c := range []struct {
		name, rate string
		exit       int
		want       string
	}{
		{"incomplete", "1%", 5, "INCOMPLETE: 2 of 50 pairs (4.00%) are errors, not labels, above the sweep's --max-error-rate 1%: the numbers below count only the other 48; fix the cause and run the same sweep with --resume"},
		{"within", "10%", 0, ""},
	} {
		out := filepath.Join(dir, c.name)
		if _, errs, code := run(t, "sweep", "-q", "--agent", agent, "--retries", "1", "--seeds", "0:50", "--max-error-rate", c.rate, "--out", out); code != c.exit {
			t.Fatalf("%s: sweep exit %d, want %d: %s", c.name, code, c.exit, errs)
		}
		text := mustRun(t, "report", out)
		brief := mustRun(t, "report", out, "--brief")
		page := filepath.Join(dir, c.name+".html")
		mustRun(t, "report", out, "--html", page)
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for what, got := range map[string]string{"report": text, "report --brief": brief, "report --html": html.UnescapeString(string(b))} {
			if c.want == "" {
				if strings.Contains(got, "INCOMPLETE") {
					t.Errorf("%s: %s says INCOMPLETE", c.name, what)
				}
				continue
			}
			if !strings.Contains(got, c.want) {
				t.Errorf("%s: %s lacks %q", c.name, what, c.want)
			}
		}
		if c.want != "" && strings.Index(text, "INCOMPLETE") > strings.Index(text, "rescued") {
			t.Errorf("%s: the report says INCOMPLETE after its numbers", c.name)
		}
	}
}
