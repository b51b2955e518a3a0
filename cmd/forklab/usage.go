package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/forklab/forklab/internal/plural"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Wrong arguments are said in words, with the command's usage line (issue
// 26: `forklab report` said only "accepts 1 arg(s), received 0"):
//
//	forklab: report needs DIR: usage: forklab report DIR [flags]
//	forklab: report takes 1 argument, and got 2 (out, x): usage: forklab report DIR [flags]
//	forklab: sweep takes no argument, and got 1 (x): usage: forklab sweep [flags] (its command: finalize)
//	forklab: log has no command "x"; its commands: bench, export, read, serve, sink: usage: forklab log COMMAND
//
// rewordArgs wraps the argument check of every command under root;
// unknownSubcommand catches a group of commands (forklab log) given a
// command it lacks, which cobra would answer with its help and exit 0.

// rewordArgs makes every command under root answer wrong arguments with
// argsError instead of cobra's wording.
func rewordArgs(root *cobra.Command) {
	for _, c := range root.Commands() {
		if check := c.Args; check != nil {
			c.Args = func(cmd *cobra.Command, args []string) error {
				if err := check(cmd, args); err != nil {
					return argsError(cmd, args, err)
				}
				return nil
			}
		}
		rewordArgs(c)
	}
}

// cobraCounts reads the fewest (for a range) and the most arguments a
// cobra argument check allowed from its message: "accepts 1 arg(s),
// received 2", "accepts between 1 and 2 arg(s), …", "accepts at most 1
// arg(s), …"; NoArgs's "unknown command …" allows none.
var cobraCounts = regexp.MustCompile(`accepts (?:between (\d+) and |at most )?(\d+) arg`)

// argsError says what cmd takes, what it got, and its usage line.
func argsError(cmd *cobra.Command, args []string, err error) error {
	name := strings.TrimPrefix(cmd.CommandPath(), "forklab ")
	usage := "usage: " + cmd.UseLine()
	if subs := subcommands(cmd); len(subs) > 0 {
		usage += " (its " + plural.Word(len(subs), "command", "commands") + ": " + strings.Join(subs, ", ") + ")"
	}
	if len(args) == 0 {
		return usageErr("%s needs %s: %s", name, required(cmd), usage)
	}
	least, most := 0, 0
	if m := cobraCounts.FindStringSubmatch(err.Error()); m != nil {
		least, _ = strconv.Atoi(m[1])
		most, _ = strconv.Atoi(m[2])
	}
	if len(args) <= most {
		// Too few, but some: name what is missing.
		return usageErr("%s needs %s, and got %s (%s): %s", name, required(cmd), plural.Count(len(args), "argument"), strings.Join(args, ", "), usage)
	}
	takes := "no argument"
	switch {
	case least > 0 && least+1 == most:
		takes = fmt.Sprintf("%d or %d arguments", least, most)
	case least > 0:
		takes = fmt.Sprintf("%d to %d arguments", least, most)
	case most > 0:
		takes = plural.Count(most, "argument")
	}
	hint := ""
	if most > 0 {
		hint = "; quote an argument that holds spaces"
	}
	if s := suggest(cmd, args[0]); len(s) > 0 {
		hint = "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageErr("%s takes %s, and got %d (%s): %s%s", name, takes, len(args), strings.Join(args, ", "), usage, hint)
}

// required is the part of cmd's usage line that names its required
// arguments: "DIR" of "report DIR", "DIR" of "sql DIR [QUERY | -]".
func required(cmd *cobra.Command) string {
	_, rest, _ := strings.Cut(cmd.Use, " ")
	if i := strings.IndexAny(rest, "[-("); i >= 0 {
		rest = rest[:i]
	}
	if rest = strings.TrimSpace(rest); rest == "" {
		return "an argument"
	}
	return rest
}

// subcommands lists the names of cmd's commands a user may type.
func subcommands(cmd *cobra.Command) []string {
	var names []string
	for _, s := range cmd.Commands() {
		if s.IsAvailableCommand() && s.Name() != "help" && s.Name() != "completion" {
			names = append(names, s.Name())
		}
	}
	return names
}

// unknownSubcommand is the error for args that name a command a group
// (forklab log, agent, kafka) does not have; nil when args are fine.
// cobra runs no argument check for a group: it prints the group's help and
// exits 0, so a mistyped `forklab log sevre` looked like success.
func unknownSubcommand(root *cobra.Command, args []string) error {
	c, rest, err := root.Find(args)
	if err != nil || c == root || c.Runnable() || !c.HasSubCommands() {
		return nil
	}
	for _, a := range rest {
		if strings.HasPrefix(a, "-") {
			continue
		}
		name := strings.TrimPrefix(c.CommandPath(), "forklab ")
		msg := fmt.Sprintf("%s has no command %q; its commands: %s", name, a, strings.Join(subcommands(c), ", "))
		if s := suggest(c, a); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return usageErr("%s: usage: %s COMMAND", msg, c.CommandPath())
	}
	return nil
}

// aliasFlags makes each old name of fs read as its new one: one name per
// concept across the commands (issue 26: policy's --fork-step is --fork-at,
// as everywhere else), and scripts written with the old name go on working.
// --help shows the new name only; a message names the new one; the old and
// the new name given together count as the same flag given twice.
func aliasFlags(fs *pflag.FlagSet, oldToNew map[string]string) {
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if n, ok := oldToNew[name]; ok {
			return pflag.NormalizedName(n)
		}
		return pflag.NormalizedName(name)
	})
}

// suggest is cobra's "did you mean" for a mistyped command of c's: its
// commands within two edits of typed, or starting with it.
func suggest(c *cobra.Command, typed string) []string {
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	return c.SuggestionsFor(typed)
}
