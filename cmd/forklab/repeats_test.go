package main

import (
	"path/filepath"
	"testing"
)

// A list-valued input that names an item twice is refused with exit 2 and
// one line naming the repeated item and what to do, as --arms off,on,on
// always was: --fork-at 3,3 (and a spec file's fork_at) used to be kept
// once without a word, --agent-env, --var, --setting, --target and --pid
// kept the last value, --max-cost usd=5,usd=6 the last amount, and
// --stream a --stream a exported the stream's events twice. Found in the
// previous session's QA pass ("noticed, not fixed" 1).
func TestRepeatedListItemsRefused(t *testing.T) {
	tmp := t.TempDir()
	out := filepath.Join(tmp, "out")
	td := func(p string) string { return repoFile(t, "testdata/"+p) }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "--seeds", "0:10", "--arms", "off,on,on", "--out", out}, `--arms: arm "on" listed twice`},
		{[]string{"sweep", "--seeds", "0:10", "--fork-at", "3,3", "--out", out}, `--fork-at: fork step 3 is listed twice in "3,3": list each step once (e.g. 3, 1,2,3 or 1-4)`},
		{[]string{"sweep", "--seeds", "0:10", "--fork-at", "1-4,3", "--out", out}, `--fork-at: fork step 3 is listed twice in "1-4,3"`},
		{[]string{"sweep", "--spec", td("specs/fork-at-twice.yaml"), "--out", out}, `fork_at: step 3 is listed twice: list each fork step once (e.g. [1, 2, 3])`},
		{[]string{"sweep", "--spec", td("specs/fork-at-twice-text.yaml"), "--out", out}, `fork_at: fork step 3 is listed twice in "1-4,3"`},
		{[]string{"sweep", "--seeds", "0:10", "--param", "target=6", "--param", "target=7", "--out", out}, `--param target=6 and --param target=7 both set parameter target, to different values: give it once`},
		{[]string{"sweep", "--seeds", "0:10", "--agent", "true", "--agent-env", "K=1", "--agent-env", "K=2", "--out", out}, `--agent-env gives K twice (K=1 and K=2): give it once, with the value you mean`},
		{[]string{"sweep", "--seeds", "0:10", "--agent", "true", "--max-cost", "usd=5,tokens=9,usd=6", "--out", out}, `--max-cost: usd is limited twice in "usd=5,tokens=9,usd=6": give each cost field once`},
		{[]string{"worker", "--brokers", "127.0.0.1:1", "--agent-env", "K=1", "--agent-env", "K=1"}, `--agent-env K=1 is given twice: give it once`},
		{[]string{"agent", "check", "true", "--agent-env", "K=1", "--agent-env", "K=2"}, `--agent-env gives K twice (K=1 and K=2)`},
		{[]string{"sql", tmp, "SELECT getvariable('a')", "--var", "a=1", "--var", "a=2"}, `--var gives a twice (a=1 and a=2): give it once, with the value you mean`},
		{[]string{"sql", tmp, "SELECT 1", "--setting", "threads=1", "--setting", "threads=2"}, `--setting gives threads twice (threads=1 and threads=2)`},
		{[]string{"log", "export", "--log", "http://127.0.0.1:1", "--stream", "a", "--stream", "b", "--stream", "a", "--out", out}, `--stream a is given twice: give it once`},
		{[]string{"log", "bench", "--target", "x=http://127.0.0.1:1", "--target", "x=http://127.0.0.1:2"}, `--target gives x twice (x=http://127.0.0.1:1 and x=http://127.0.0.1:2)`},
		{[]string{"log", "bench", "--target", "x=http://127.0.0.1:1", "--pid", "x=1", "--pid", "x=2"}, `--pid gives x twice (x=1 and x=2)`},
	} {
		mustRefuse(t, tc.want, tc.args...)
	}
	// One value given twice is the same setting (documented in --param's
	// help): the sweep runs.
	mustRun(t, "sweep", "--seeds", "0:4", "--param", "target=6", "--param", "target=6", "--out", filepath.Join(tmp, "same"), "-q")
}
