package main

import (
	"path/filepath"
	"testing"
)

// A key written twice in a JSON file a user writes — a spec, a policy, a
// checkpoint — is refused naming the key (encoding/json kept the last
// value without a word: {"seeds":"0:10","seeds":"0:20"} swept 0:20), as
// YAML specs already were, now on one line (and a grid value listed
// twice, refused since core's ef79d65, through a spec file).
// Found in the QA pass (issue 12's kinds: silently wrong input).
func TestDuplicateKeysRefused(t *testing.T) {
	tmp := t.TempDir()
	out := filepath.Join(tmp, "out")
	td := func(p string) string { return repoFile(t, "testdata/"+p) }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "--spec", td("specs/duplicate-key.json"), "--out", out}, `duplicate-key.json: key "seeds" appears twice (JSON keeps the last without a word: remove one)`},
		{[]string{"sweep", "--spec", td("specs/duplicate-key.yaml"), "--out", out}, `duplicate-key.yaml: yaml: line 2: mapping key "seeds" already defined at line 1`},
		{[]string{"sweep", "--spec", td("specs/grid-value-twice.yaml"), "--out", out}, `grid: p_stall lists 0.1 twice: two configurations would be the same`},
		{[]string{"sweep", "--seeds", "0:10", "--arms", "off,policy", "--policy", td("policy/duplicate-key.json"), "--out", out}, `key "all[0].value" appears twice`},
		{[]string{"fork", "--checkpoint", td("checkpoints/duplicate-key.json"), "--arm", "on"}, `key "fork_step" appears twice`},
	} {
		mustRefuse(t, tc.want, tc.args...)
	}
}
