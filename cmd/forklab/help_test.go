package main

import (
	"testing"

	"github.com/spf13/cobra"
)

// Every subcommand's help has a one-line summary, a description and an
// example (issue 12 I).
func TestEveryCommandHasHelp(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "completion" || sub.Hidden {
				continue
			}
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
			walk(sub)
		}
	}
	walk(rootCmd)
	if n < 15 {
		t.Fatalf("walked only %d commands", n)
	}
}
