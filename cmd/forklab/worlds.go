package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/spf13/cobra"
)

func init() {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "worlds [NAME...]",
		Short: "List the built-in worlds: parameters, features, hidden truth, interventions, cost",
		Long: `worlds prints each built-in world's declaration: what everything downstream
of the world (the sweep, the tables, the SQL, the policy search, the report)
knows about it. Its parameters (type, default, valid range), what a seed
draws, the pre-decision features slices and policies are built from, the
hidden truth recorded beside them (and the flag that marks a run with a
fault), the arms it supports and what their interventions do, and its cost
model. With --json it prints the declarations as a JSON array, as
manifest.json holds them and as an agent's initialize reply gives them
(docs/agent-protocol.md).`,
		Example: `  forklab worlds
  forklab worlds toolloop
  forklab worlds --json | jq '.[0].features'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var decls []world.Declaration
			if len(args) == 0 {
				for _, d := range lab.Definitions() {
					decls = append(decls, d.Declaration())
				}
			}
			for _, name := range args {
				d, err := lab.Lookup(name)
				if err != nil {
					return asInput(err)
				}
				decls = append(decls, d.Declaration())
			}
			if asJSON {
				// Descriptions keep their < > & as written (not \u003e).
				enc := json.NewEncoder(os.Stdout)
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				return enc.Encode(decls)
			}
			for i, d := range decls {
				if i > 0 {
					fmt.Println()
				}
				printWorld(os.Stdout, d)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the declarations as JSON")
	rootCmd.AddCommand(cmd)
}

// printWorld writes a declaration for people.
func printWorld(out io.Writer, d world.Declaration) {
	fmt.Fprintf(out, "%s (version %s)\n  %s\n", d.Name, d.Version, d.Description)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	section := func(title string) { fmt.Fprintf(tw, "\n%s\n", title) }
	section("PARAMETERS (--param NAME=VALUE, or --NAME)")
	fmt.Fprintln(tw, "  name\ttype\tdefault\tvalid\tmeaning")
	for _, p := range d.Params {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", p.Name, p.Kind, defaultText(p), p.Range(), p.Description)
	}
	fields := func(title string, fs []world.Field, mark func(world.Field) string) {
		section(title)
		fmt.Fprintln(tw, "  name\ttype\tmeaning")
		for _, f := range fs {
			typ := string(f.Kind)
			if f.Kind == world.Enum {
				typ += " (" + strings.Join(f.Values, ", ") + ")"
			}
			if f.Nullable {
				typ += ", nullable"
			}
			desc := f.Description
			if f.Unit != "" {
				desc += " [" + f.Unit + "]"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s%s\n", f.Name, typ, desc, mark(f))
		}
	}
	none := func(world.Field) string { return "" }
	fields("TASK (what a seed draws; table tasks)", d.Task, none)
	fields("FEATURES (visible before the decision; slices and policy triggers)", d.Features, none)
	fields("HIDDEN TRUTH (columns hidden_NAME; never a feature)", d.Hidden, func(f world.Field) string {
		if f.Name == d.FaultFlag {
			return "  ← fault flag: the harm cap on clean runs counts harms where it is false"
		}
		return ""
	})
	section("ARMS")
	fmt.Fprintln(tw, "  off\tthe control: continue as is")
	for _, iv := range d.Interventions {
		fmt.Fprintf(tw, "  %s\t%s: %s\n", iv.Arm, iv.Action, iv.Description)
	}
	fmt.Fprintln(tw, "  aa\toff again with independent model noise: the noise floor")
	if _, ok := d.Intervention("on"); ok {
		fmt.Fprintln(tw, "  policy\ton's intervention where a guard rule fires (--policy FILE)")
	}
	section("COST")
	fmt.Fprintf(tw, "  %s\t%s\n", strings.Join(d.Cost.Fields, ", "), d.Cost.Description)
	if sc := d.Score; sc != nil {
		section("SCORE (every branch's graded outcome; columns score, score_control, score_treated, score_diff)")
		r := fmt.Sprintf("[%g, %g]", sc.Min, sc.Max)
		if sc.Threshold != nil {
			r += fmt.Sprintf(", success is score >= %g", *sc.Threshold)
		}
		if sc.Unit != "" {
			r += ", " + sc.Unit
		}
		fmt.Fprintf(tw, "  %s\t%s\n", r, sc.Description)
	}
	tw.Flush()
}
