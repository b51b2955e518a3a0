package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// anyValue is a flag value that takes any text: an example's flags are
// checked for existence here, their world parameters by the world.
type anyValue struct{ typ, v string }

func (a *anyValue) String() string     { return a.v }
func (a *anyValue) Type() string       { return a.typ }
func (a *anyValue) Set(s string) error { a.v = s; return nil }

// cliCases reads testdata/cli/NAME, a table of test cases: one case per
// line, its fields separated by tabs, blank lines and lines starting with
// # skipped. Every case must have n fields; it fails the test otherwise,
// and when the file holds no case.
func cliCases(t *testing.T, name string, n int) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../testdata/cli", name))
	if err != nil {
		t.Fatal(err)
	}
	var cases [][]string
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.SplitN(line, "\t", n)
		if len(f) != n {
			t.Fatalf("testdata/cli/%s: malformed line %q: want %d tab-separated fields", name, line, n)
		}
		cases = append(cases, f)
	}
	if len(cases) == 0 {
		t.Fatalf("testdata/cli/%s holds no case", name)
	}
	return cases
}

// shellWords splits one shell command line into words, honouring single
// and double quotes (enough for the examples: no escapes inside quotes).
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unbalanced %c", quote)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// exampleCommands finds the forklab invocations in one example line: the
// line up to a comment, cut at shell separators, each part that starts
// with "forklab".
func exampleCommands(line string) []string {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	line = strings.TrimSuffix(strings.TrimSpace(line), "\\")
	var out []string
	for _, part := range regexp.MustCompile(`&&|\|\||[;|&]|^\s*\$ `).Split(line, -1) {
		part = strings.TrimSpace(part)
		part = strings.TrimPrefix(part, "wait; ")
		if strings.HasPrefix(part, "forklab ") {
			out = append(out, part)
		}
	}
	return out
}

// startsWithCommand says whether inv names a forklab subcommand after
// "forklab".
func startsWithCommand(inv string) bool {
	words := strings.Fields(inv)
	if len(words) < 2 {
		return false
	}
	for _, c := range rootCmd.Commands() {
		if c.Name() == words[1] {
			return true
		}
	}
	return false
}

// checkExample parses one forklab invocation as its command would: the
// command path exists, every flag is one of its flags, and the world, its
// parameter flags and every --param are ones the world declares, with
// values of the declared types. It runs nothing.
func checkExample(inv string) error {
	words, err := shellWords(inv)
	if err != nil {
		return err
	}
	cmd, rest, err := rootCmd.Find(words[1:])
	if err != nil {
		return err
	}
	fs := pflag.NewFlagSet(cmd.CommandPath(), pflag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	var wf *worldFlags
	if cmd.Flags().Lookup("world") != nil && cmd.Flags().Lookup("param") != nil {
		wf = addWorldFlags(fs)
	}
	add := func(f *pflag.Flag) {
		if fs.Lookup(f.Name) == nil {
			nf := fs.VarPF(&anyValue{typ: f.Value.Type()}, f.Name, f.Shorthand, "")
			nf.NoOptDefVal = f.NoOptDefVal
		}
	}
	cmd.Flags().VisitAll(add)
	cmd.InheritedFlags().VisitAll(add)
	if err := fs.Parse(rest); err != nil {
		return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	if wf != nil && !fs.Changed("agent") {
		spec := sweep.DefaultSpec()
		if err := wf.apply(&spec); err != nil {
			return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
		}
	}
	return nil
}

// TestHelpExamplesParse checks every example of every subcommand's --help,
// and every forklab line of the README's and the docs' shell blocks: each
// names an existing command, only its flags, and world parameters the
// world has (checkpoint's help showed --param p_stale=0.3, which toolloop
// does not declare: the example exited 2).
func TestHelpExamplesParse(t *testing.T) {
	type example struct{ where, inv string }
	var examples []example
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, line := range strings.Split(c.Example, "\n") {
			for _, inv := range exampleCommands(line) {
				examples = append(examples, example{c.CommandPath() + " --help", inv})
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(rootCmd)
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(docs, "../../README.md") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		open, lang := false, ""
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "```") {
				open, lang = !open, strings.TrimPrefix(line, "```")
				continue
			}
			// Shell blocks, cron lines, and plain blocks of commands.
			if !open || (lang != "sh" && lang != "cron" && lang != "") {
				continue
			}
			for _, inv := range exampleCommands(line) {
				if lang == "" && !startsWithCommand(inv) {
					continue // a plain block's output line: "forklab vs reference …"
				}
				examples = append(examples, example{fmt.Sprintf("%s:%d", filepath.Base(f), i+1), inv})
			}
		}
	}
	if len(examples) < 100 {
		t.Fatalf("found only %d examples", len(examples))
	}
	for _, e := range examples {
		if err := checkExample(e.inv); err != nil {
			t.Errorf("%s: %s: %v", e.where, e.inv, err)
		}
	}
	t.Logf("%d examples parsed", len(examples))
}
