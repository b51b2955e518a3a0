package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestGateCases runs testdata/cli/gate.txt: forklab gate's conditions,
// point estimates and interval ends, its thresholds from flags, a spec
// file or the sweep's manifest, and its refusals of bad input (exit 2,
// nothing written), on a pass/fail sweep and a scored one; a --junit file
// exists exactly when the gate ran.
func TestGateCases(t *testing.T) {
	tmp := t.TempDir()
	dir, tool, gated := filepath.Join(tmp, "out"), filepath.Join(tmp, "tool"), filepath.Join(tmp, "gated")
	mustRun(t, "sweep", "-q", "--out", dir)
	mustRun(t, "sweep", "-q", "--world", "toolloop", "--fork-at", "2", "--arms", "off,on,placebo", "--out", tool)
	mustRun(t, "sweep", "-q", "--spec", "../../testdata/specs/gate.yaml", "--out", gated)
	cases := t.TempDir()
	if err := os.WriteFile(filepath.Join(cases, "exists.xml"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range cliCases(t, "gate.txt", 3) {
		line := strings.NewReplacer("{dir}", dir, "{tool}", tool, "{gated}", gated, "{tmp}", cases).Replace(f[2])
		args, err := shellWords(line)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.ReplaceAll(f[1], "{dir}", dir)
		out, errs, code := run(t, args...)
		if strconv.Itoa(code) != f[0] || !strings.Contains(out+errs, want) {
			t.Errorf("forklab %s: exit %d, stdout %q, stderr %q; want exit %s and %q", line, code, out, errs, f[0], want)
		}
		if code == 2 && (out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0) {
			t.Errorf("forklab %s: refused, but stdout %q and stderr %q (want one line)", line, out, errs)
		}
		if i := slices.Index(args, "--junit"); i >= 0 && !strings.HasSuffix(args[i+1], "exists.xml") {
			_, err := os.Stat(args[i+1])
			if (err == nil) != (code != 2) {
				t.Errorf("forklab %s: exit %d, and --junit %s: %v", line, code, args[i+1], err)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(cases, "exists.xml")); string(b) != "mine" {
		t.Errorf("an existing --junit file was replaced without --overwrite: %q", b)
	}
}
