package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPolicyScope runs testdata/cli/policy-scope.txt: a rerun under a
// rule says under the policy arm's headline whether its seeds are those
// the rule was searched on (forklab sweep and the report); a rule applied
// at another fork step, other parameters or another model is refused
// (exit 2, naming what differs), or applied with --policy-anywhere, which
// the sweep warns of and the manifest and the report record.
func TestPolicyScope(t *testing.T) {
	dir, tmp := filepath.Join(t.TempDir(), "out"), t.TempDir()
	mustRun(t, "sweep", "-q", "--out", dir)
	if _, errs, code := run(t, "policy", dir, "--max-harm", "0", "--out", filepath.Join(dir, "policy.json")); code != 0 {
		t.Fatalf("forklab policy: exit %d: %s", code, errs)
	}
	for _, f := range cliCases(t, "policy-scope.txt", 3) {
		line := strings.NewReplacer("{dir}", dir, "{tmp}", tmp).Replace(f[2])
		args, err := shellWords(line)
		if err != nil {
			t.Fatal(err)
		}
		out, errs, code := run(t, args...)
		if strconv.Itoa(code) != f[0] || !strings.Contains(out+errs, f[1]) {
			t.Errorf("forklab %s: exit %d, stdout %q, stderr %q; want exit %s and %q", line, code, out, errs, f[0], f[1])
		}
	}
	for name, want := range map[string]bool{"anywhere": true, "same": false} {
		b, err := os.ReadFile(filepath.Join(tmp, name, "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(b), `"policy_anywhere": true`); got != want {
			t.Errorf("%s: the manifest records policy_anywhere: %v, want %v", name, got, want)
		}
	}
}
