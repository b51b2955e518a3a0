package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestRepeatedFlags runs testdata/cli/repeated-flags.txt. pflag keeps the
// last value of a flag given twice: sweep --seeds 0:10 --seeds 0:20 swept
// 0:20, report --html a.html --html b.html wrote only b.html, without a
// word. Such a repeat is refused now (exit 2, one line naming the flag and
// both values, nothing written), while repeatable flags, the same value
// given twice, and a flag over a --spec file's key still run.
func TestRepeatedFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	mustRun(t, "sweep", "-q", "--seeds", "0:20", "--out", dir)
	tmp := t.TempDir()
	testdata, err := filepath.Abs("../../testdata")
	if err != nil {
		t.Fatal(err)
	}
	// Absolute paths: a refused command runs in a directory of its own.
	r := strings.NewReplacer("{dir}", dir, "{tmp}", tmp, "{cp}", "../../testdata/checkpoints/seed0-fork3.json", "{forklab}", forklabBin, "../../testdata", testdata)
	var refused, ok [][]string
	var wants []string
	commands := map[string]bool{}
	for _, c := range cliCases(t, "repeated-flags.txt", 2) {
		want, argText := c[0], c[1]
		args, err := shellWords(r.Replace(argText))
		if err != nil {
			t.Fatal(err)
		}
		if want == "ok" {
			ok = append(ok, args)
			continue
		}
		refused = append(refused, args)
		wants = append(wants, r.Replace(want))
		cmd, _, _ := rootCmd.Find(args)
		commands[strings.TrimPrefix(cmd.CommandPath(), "forklab ")] = true
	}
	for _, c := range []string{"sweep", "report", "sql", "log read", "fork", "agent check"} {
		if !commands[c] {
			t.Errorf("no refused case for forklab %s", c)
		}
	}
	if len(refused) < 15 || len(ok) < 5 {
		t.Fatalf("read %d refused and %d ok cases", len(refused), len(ok))
	}
	cwd := t.TempDir()
	for i, args := range refused {
		// A command that was not refused may serve for ever.
		stderr, code := refusedQuickly(t, cwd, args...)
		if code != 2 || strings.TrimSpace(stderr) != "forklab: "+wants[i] {
			t.Errorf("forklab %s: exit %d, %q; want 2 and %q", strings.Join(args, " "), code, stderr, "forklab: "+wants[i])
		}
	}
	for _, d := range []string{tmp, cwd} {
		if entries, _ := os.ReadDir(d); len(entries) != 0 {
			t.Errorf("refused commands left %d entries in %s", len(entries), d)
		}
	}
	outs := map[string]string{}
	for _, args := range ok {
		out, stderr, code := run(t, args...)
		if code != 0 {
			t.Errorf("forklab %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		outs[args[0]] += out
	}
	// The repeatable and overriding flags took effect.
	if !strings.Contains(outs["sql"], "3") {
		t.Errorf("sql --var a=1 --var b=2: output %q, want 3", outs["sql"])
	}
	spec := func(name string) map[string]any {
		b, err := os.ReadFile(filepath.Join(tmp, name, "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		var m struct{ Spec map[string]any }
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m.Spec
	}
	if p := spec("params")["params"].(map[string]any); p["target"] != 5.0 || p["base_budget"] != 8.0 {
		t.Errorf("sweep --param target=5 --param base_budget=8 recorded %v", p)
	}
	if s := spec("same"); s["seeds"] != "0:4" {
		t.Errorf("sweep --seeds 0:4 --seeds=0:4 recorded seeds %v", s["seeds"])
	}
	if s := spec("spec"); s["seeds"] != "0:4" || s["replicas"] != 1.0 || len(s["arms"].([]any)) != 4 {
		t.Errorf("sweep --spec noisy.yaml --seeds 0:4 --replicas 1 recorded %v", s)
	}
}

// TestEverySingleValueFlagIsGuarded checks refuseRepeats over the whole
// command tree: every flag of every command that takes one value refuses a
// second, different one, and the repeatable ones (--param, --agent-env,
// --var, --stream of log export, …) are left as they are.
func TestEverySingleValueFlagIsGuarded(t *testing.T) {
	refuseRepeats(rootCmd)
	guarded, lists := 0, map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			switch f.Value.(type) {
			case *onceValue, onceBool:
				guarded++
				if _, ok := f.Value.(pflag.SliceValue); ok {
					t.Errorf("%s --%s: a list flag is guarded", c.CommandPath(), f.Name)
				}
			default:
				if !repeatable(f) {
					t.Errorf("%s --%s (%s) is not guarded", c.CommandPath(), f.Name, f.Value.Type())
				}
				lists[f.Name] = true
			}
			if f.Value.Type() == "bool" {
				if _, ok := f.Value.(onceBool); !ok {
					t.Errorf("%s --%s: a bool flag lost IsBoolFlag", c.CommandPath(), f.Name)
				}
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(rootCmd)
	for _, name := range []string{"param", "agent-env", "var", "setting", "allow-path", "stream", "pid"} {
		if !lists[name] {
			t.Errorf("--%s is not left repeatable", name)
		}
	}
	if guarded < 100 {
		t.Errorf("%d flags guarded; want every single-value flag", guarded)
	}

	var s string
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.StringVar(&s, "out", "", "")
	refuseOnce(fs)
	if err := fs.Parse([]string{"--out", "a", "--out=a"}); err != nil || s != "a" {
		t.Errorf("--out a --out=a: %v, %q; want accepted, a", err, s)
	}
	err := fs.Parse([]string{"--out", "b"})
	if r, ok := repeatedFlag(err); !ok || r.Error() != "--out given more than once (a, then b): give it once" || s != "a" {
		t.Errorf("--out a --out=a --out b: %v, %q; want refused, a kept", err, s)
	}
}
