package queries

import (
	"regexp"
	"strings"
)

// Macro is one statistics macro of stats.sql: its name and its arguments
// as declared ("x, n").
type Macro struct{ Name, Args string }

var macroDef = regexp.MustCompile(`(?m)^CREATE OR REPLACE MACRO (\w+)\(([^)]*)\) AS`)

// Macros lists the macros stats.sql defines, in order.
func Macros() []Macro {
	var out []Macro
	for _, m := range macroDef.FindAllStringSubmatch(MustGet("stats"), -1) {
		out = append(out, Macro{Name: m[1], Args: m[2]})
	}
	return out
}

// MacrosHelp is the table of stats.sql's header, one macro (or pair) per
// entry with its arguments and what it computes, as forklab sql --help
// prints it: the header's lines after "Inputs:" up to its first blank
// comment line, without the comment marks.
func MacrosHelp() string {
	var lines []string
	on := false
	for _, l := range strings.Split(MustGet("stats"), "\n") {
		if !strings.HasPrefix(l, "--") {
			break
		}
		body := strings.TrimPrefix(strings.TrimPrefix(l, "--"), " ")
		switch {
		case strings.HasPrefix(body, "Inputs:"):
			on = true
		case on && strings.TrimSpace(body) == "":
			return strings.Join(lines, "\n")
		case on:
			lines = append(lines, body)
		}
	}
	return strings.Join(lines, "\n")
}
