package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// JSON that people read — worlds --json, a sweep's manifest.json with its
// guard rule, forklab policy's rule file — keeps <, > and & as written:
// encoding/json's default HTML escaping wrote a rule's ">=" as "\u003e=".
func TestJSONForPeopleIsNotHTMLEscaped(t *testing.T) {
	escaped := []string{`\u003c`, `\u003e`, `\u0026`}
	worlds := mustRun(t, "worlds", "--json")
	var decls []map[string]any
	if err := json.Unmarshal([]byte(worlds), &decls); err != nil || len(decls) < 2 {
		t.Fatalf("worlds --json: %v (%d worlds)", err, len(decls))
	}
	out := filepath.Join(t.TempDir(), "rerun")
	mustRun(t, "sweep", "-q", "--seeds", "0:20", "--arms", "off,on,policy", "--policy", "../../testdata/policy/every-op.json", "--out", out)
	manifest, err := os.ReadFile(filepath.Join(out, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, "verify", out)
	for _, c := range []struct{ what, text, want string }{
		{"worlds --json", worlds, "> 0"},
		{"manifest.json", string(manifest), `"op": ">="`},
	} {
		for _, e := range escaped {
			if strings.Contains(c.text, e) {
				t.Errorf("%s holds %s", c.what, e)
			}
		}
		if !strings.Contains(c.text, c.want) {
			t.Errorf("%s does not hold %s", c.what, c.want)
		}
	}
}
