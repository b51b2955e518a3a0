package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// textFlags lists, for every runnable command under c, the command's path
// (without "forklab") and its text flags (string and stringArray).
func textFlags(c *cobra.Command) map[string][]string {
	out := map[string][]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && c.Name() != "help" && c.Name() != "completion" && c.Parent() != nil {
			path := strings.Fields(c.CommandPath())[1:]
			key := strings.Join(path, " ")
			c.Flags().VisitAll(func(f *pflag.Flag) {
				if typ := f.Value.Type(); typ == "string" || typ == "stringArray" {
					out[key] = append(out[key], f.Name)
				}
			})
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(c)
	return out
}

// refusedQuickly runs forklab with args for at most a few seconds (a
// command that was not refused may serve or sweep for ever) and returns its
// stderr and exit status (-1 if it had to be stopped), in directory dir.
func refusedQuickly(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, forklabBin, args...)
	cmd.Dir = dir
	// A command that was not refused must not touch the user's data
	// (forklab log serve's default data directory).
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "HOME="+dir)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		return errb.String(), -1
	}
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("run forklab %v: %v", args, err)
	}
	return errb.String(), cmd.ProcessState.ExitCode()
}

// TestEmptyTextFlagsAreRefused gives every text flag of every command an
// empty value (--flag=) and expects exit 2 naming the flag, before anything
// runs. Before checkFlags, most of them were read as "not given": sweep
// --shard "" ran the whole sweep, --from-log "" ran it in memory, --spec ""
// ignored the spec, report --html "" and policy --out "" wrote nothing and
// exited 0, log serve --brokers "" started the embedded broker, and sweep
// --out "" failed after the sweep, leaving "...forklab-staging" behind.
func TestEmptyTextFlagsAreRefused(t *testing.T) {
	dir := t.TempDir()
	flags := textFlags(rootCmd)
	if len(flags["sweep"]) < 10 || len(flags["log serve"]) < 3 {
		t.Fatalf("found too few text flags to test: %v", flags)
	}
	checked := 0
	for cmd, names := range flags {
		for _, name := range names {
			if slices.Contains(emptyAllowed, name) {
				continue
			}
			// Commands with positional arguments get placeholders, as many
			// as it takes for cobra's argument check to pass.
			var stderr string
			var code int
			for n := 0; n <= 2; n++ {
				args := append(strings.Fields(cmd), "--"+name+"=")
				for i := 0; i < n; i++ {
					args = append(args, dir)
				}
				stderr, code = refusedQuickly(t, dir, args...)
				if !strings.Contains(stderr, ": usage: forklab ") { // not an argument error (usage.go)
					break
				}
			}
			if code != 2 || !strings.Contains(stderr, "--"+name+" is") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("forklab %s --%s=: exit %d, %q; want 2 and one line naming --%s", cmd, name, code, stderr, name)
			}
			checked++
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("a refused command left %d entries in %s", len(entries), dir)
	}
	t.Logf("%d empty flags refused", checked)
}

// TestLogURLFlags checks every command's --log and sweep's --from-log
// against testdata/cli/log-urls.txt: a malformed URL is refused up front
// (exit 2, naming the flag and the form wanted), where it used to fail on
// the first request with Go's URL parse error (exit 1) — after a sweep had
// started, or after fork and agent run retried it for ever.
func TestLogURLFlags(t *testing.T) {
	f, err := os.Open("../../testdata/cli/log-urls.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds [][]string
	for cmd, names := range textFlags(rootCmd) {
		if slices.Contains(names, "log") {
			cmds = append(cmds, append(strings.Fields(cmd), "--log"))
		}
		if slices.Contains(names, "from-log") {
			cmds = append(cmds, append(strings.Fields(cmd), "--from-log"))
		}
	}
	if len(cmds) < 5 {
		t.Fatalf("found %d commands with a log URL flag, want at least 5: %v", len(cmds), cmds)
	}
	s := bufio.NewScanner(f)
	cases := 0
	for s.Scan() {
		line := s.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		verdict, u, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("malformed line %q", line)
		}
		cases++
		if err := checkLogURL(u); (err == nil) != (verdict == "ok") {
			t.Errorf("checkLogURL(%q) = %v, want %s", u, err, verdict)
		}
		if verdict != "bad" {
			continue
		}
		for _, c := range cmds {
			// The URL flag alone: the check runs before the command's own.
			args := append(slices.Clone(c), u)
			stderr, code := refusedQuickly(t, t.TempDir(), args...)
			if code != 2 || !strings.Contains(stderr, "not a session log URL") && !strings.Contains(stderr, "no query or fragment") {
				t.Errorf("forklab %s: exit %d, %q; want 2, not a session log URL", strings.Join(args, " "), code, stderr)
			}
		}
	}
	if cases < 10 {
		t.Fatalf("read %d cases from testdata/cli/log-urls.txt", cases)
	}
}

// TestLonelyFlagsAreRefused runs testdata/cli/lonely-flags.txt: a flag that
// only means something beside another (report --overwrite beside --html,
// fork --child beside --stream, fork --policy beside --arm policy) was
// accepted and ignored when given alone; it is refused with exit 2.
func TestLonelyFlagsAreRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	mustRun(t, "sweep", "-q", "--seeds", "0:200", "--out", dir)
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cases := cliCases(t, "lonely-flags.txt", 2)
	if len(cases) < 9 {
		t.Fatalf("read %d cases", len(cases))
	}
	for _, c := range cases {
		want, argText := c[0], c[1]
		args, err := shellWords(strings.NewReplacer("{dir}", dir, "{cp}", "../../testdata/checkpoints/seed0-fork3.json").Replace(argText))
		if err != nil {
			t.Fatal(err)
		}
		// A command that was not refused may serve for ever (log serve).
		if stderr, code := refusedQuickly(t, cwd, args...); code != 2 || !strings.Contains(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("forklab %s: exit %d, %q; want 2 and one line with %q", strings.Join(args, " "), code, stderr, want)
		}
	}
	// With their companions they run.
	mustRun(t, "report", dir, "--html", filepath.Join(dir, "r.html"), "--overwrite")
	mustRun(t, "fork", "--checkpoint", "../../testdata/checkpoints/seed0-fork3.json", "--arm", "policy", "--policy", "../../testdata/policy/same-obs.json")
}

// TestWithFlagsNeedTheirCompanion checks every flag whose help begins
// "with --X" (log serve's "--dial-timeout: with --brokers: …", sweep
// finalize's "--poll: with --wait, …"): it means something only beside
// --X, so it must be marked with markNeeds (refused alone) or be refused
// by its command's own check (listed here, each with a case in
// testdata/cli/lonely-flags.txt or its command's tests). Without the mark
// log serve --dial-timeout and sweep finalize --poll were accepted and
// ignored.
func TestWithFlagsNeedTheirCompanion(t *testing.T) {
	// Refused by their commands: --rotate-interval without --follow, and
	// --max-cost and --fail-on-error for a built-in world (an agent may come
	// from --spec too).
	checkedInCode := map[string]bool{"forklab log sink --rotate-interval": true, "forklab sweep --max-cost": true, "forklab sweep --fail-on-error": true}
	with := regexp.MustCompile(`^with --([a-z-]+)[,:]`)
	found := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			m := with.FindStringSubmatch(f.Usage)
			if m == nil {
				return
			}
			found++
			if checkedInCode[c.CommandPath()+" --"+f.Name] {
				return
			}
			if !slices.Contains(f.Annotations[needsKey], m[1]) {
				t.Errorf("%s --%s says %q but is not marked as needing --%s (markNeeds)", c.CommandPath(), f.Name, m[0], m[1])
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(rootCmd)
	if found < 4 {
		t.Errorf("found %d flags whose help begins \"with --\"; want log serve --dial-timeout, sweep finalize --poll, fork --retry-for, log sink --rotate-interval at least", found)
	}
}
