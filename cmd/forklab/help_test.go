package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every subcommand's help has a one-line summary, a description and an
// example (issue 12 I).
func TestEveryCommandHasHelp(t *testing.T) {
	n := 0
	for _, sub := range userCommands(rootCmd) {
		n++
		path := sub.CommandPath()
		if sub.Short == "" {
			t.Errorf("%s has no one-line summary (Short)", path)
		}
		if sub.Long == "" {
			t.Errorf("%s has no description (Long)", path)
		}
		if sub.Example == "" {
			t.Errorf("%s has no example (Example)", path)
		}
	}
	if n < 15 {
		t.Fatalf("walked only %d commands", n)
	}
}

// userCommands lists every command under c a user may type, depth first:
// all but help, completion and hidden ones.
func userCommands(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, sub := range c.Commands() {
		if sub.Name() == "help" || sub.Name() == "completion" || sub.Hidden {
			continue
		}
		out = append(out, sub)
		out = append(out, userCommands(sub)...)
	}
	return out
}

// commandMentionRe finds "forklab WORDS --flag" in text: a command path
// (and arguments, three words at most: more is prose) and the first flag
// given to it.
var commandMentionRe = regexp.MustCompile(`\bforklab((?: [a-z][a-z-]*){1,3}) --([a-z][a-z0-9-]*)`)

// quotedCommandRe finds a command named alone in quotes: `forklab log sink`.
var quotedCommandRe = regexp.MustCompile("[`']forklab((?: [a-z][a-z-]*){1,2})[`']")

// Every "forklab CMD --flag" that the help, the error messages, the README
// and the docs name is a command that exists, with that flag (issue 12 I:
// agent run's errors pointed to 'forklab run --help', which does not).
func TestCommandsNamedExist(t *testing.T) {
	var sources []string
	for _, pattern := range []string{"../../README.md", "../../docs/*.md", "../../schemas/README.md", "*.go",
		"../../pipeline/*/*.go", "../../pipeline/*/*/*.go", "../../stream/*/*.go", "../../internal/*/*.go", "../../mk/*.mk", "../../Makefile"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			if !strings.HasSuffix(f, "_test.go") {
				sources = append(sources, f)
			}
		}
	}
	if len(sources) < 100 {
		t.Fatalf("only %d files to read", len(sources))
	}
	checked := 0
	for _, f := range sources {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range commandMentionRe.FindAllStringSubmatch(string(b), -1) {
			if err := checkMention(m); err != nil {
				t.Errorf("%s: %v", f, err)
			}
			checked++
		}
		// `forklab WORDS` quoted whole, without flags: a command or a group.
		for _, m := range quotedCommandRe.FindAllStringSubmatch(string(b), -1) {
			if c, _, err := rootCmd.Find(strings.Fields(m[1])); err != nil || c == rootCmd {
				t.Errorf("%s: %q is not a command (%v)", f, m[0], err)
			}
			checked++
		}
	}
	if checked < 100 {
		t.Fatalf("checked only %d mentions", checked)
	}
	t.Logf("%d mentions of forklab commands in %d files", checked, len(sources))
	for _, bad := range []string{"see 'forklab run --help'", "forklab agent go --seed 1", "forklab checkpoint extra --seed 1", "forklab fork --offest 3"} {
		m := commandMentionRe.FindStringSubmatch(bad)
		if m == nil || checkMention(m) == nil {
			t.Errorf("%q passes the check", bad)
		}
	}
}

// checkMention checks one match of commandMentionRe.
func checkMention(m []string) error {
	words := strings.Fields(m[1])
	c, rest, err := rootCmd.Find(append(words, "--"+m[2]))
	switch {
	case err != nil:
		return fmt.Errorf("%q: %v", m[0], err)
	case !c.Runnable():
		return fmt.Errorf("%q: %s is a group of commands, not one", m[0], c.CommandPath())
	}
	// Words that are not subcommands must be the command's arguments.
	if len(rest) > 1 && c.Args != nil {
		if err := c.Args(c, rest[:len(rest)-1]); err != nil {
			return fmt.Errorf("%q: %s: %v", m[0], c.CommandPath(), err)
		}
	}
	if c.Flags().Lookup(m[2]) == nil && m[2] != "help" {
		return fmt.Errorf("%q: %s has no flag --%s", m[0], c.CommandPath(), m[2])
	}
	return nil
}
