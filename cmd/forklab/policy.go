package main

import (
	"errors"
	"fmt"
	"github.com/forklab/forklab/internal/atomicfile"
	"os"

	"github.com/forklab/forklab/pipeline/analysis/report"
	"github.com/forklab/forklab/pipeline/analysis/search"
	"github.com/spf13/cobra"
)

func init() {
	var (
		out       string
		overwrite bool
		opt       = search.Defaults()
	)
	cmd := &cobra.Command{
		Use:   "policy DIR",
		Short: "Search guard triggers on part of the seeds, judge them on the rest, write the chosen rule",
		Long: `policy enumerates triggers over the pre-decision features of DIR's always-on
pairs (each feature against each value, and conjunctions of two), keeps those
whose harms stay within --max-harm on the search seeds, picks the one with the
most rescues (ties go to the simpler trigger), and reports it and the baselines
on the held-out seeds with an exact 95% upper bound on the harm rate. The
rule is written to --out as JSON for 'forklab sweep --arms off,on,policy
--policy FILE'.`,
		Example: `  forklab policy out --max-harm 0 --out policy.json
  forklab sweep --arms off,on,policy --policy policy.json --out rerun`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opt.Validate(); err != nil {
				return asInput(err)
			}
			if out != "" && !overwrite {
				if _, err := os.Stat(out); err == nil {
					return usageErr("%s exists; pass --overwrite to replace it", out)
				}
			}
			db, err := openResults(cmd, args[0])
			if err != nil {
				return err
			}
			defer db.Close()
			r, err := search.Run(cmd.Context(), db, opt)
			if errors.Is(err, search.ErrInput) {
				return asInput(err)
			}
			if err != nil {
				return err
			}
			if err := report.WritePolicy(os.Stdout, r); err != nil {
				return err
			}
			if out == "" {
				return nil
			}
			rule := r.Chosen.Rule
			rule.Note = fmt.Sprintf("chosen by forklab policy on %s: most search rescues with at most %d harms on %s runs; search %d rescued / %d harmed, held out %d rescued / %d harmed",
				args[0], opt.MaxHarm, opt.Scope, r.Chosen.Search.Rescued, r.Chosen.Search.Harmed, r.Chosen.Holdout.Rescued, r.Chosen.Holdout.Harmed)
			b, err := rule.Encode()
			if err != nil {
				return err
			}
			if err := atomicfile.WriteFile(out, b); err != nil {
				return asInput(fmt.Errorf("write policy: %w", err))
			}
			fmt.Fprintf(os.Stderr, "wrote %s: recover when %s\n", out, rule)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&opt.MaxHarm, "max-harm", opt.MaxHarm, "cap on harms (see --harm-scope)")
	f.StringVar(&opt.Scope, "harm-scope", opt.Scope, "clean: the cap counts harms on runs without a fault (the seed's cap); all: every harm")
	f.Float64Var(&opt.Holdout, "holdout", opt.Holdout, "share of seeds held out, in (0, 1), split by a stable hash of the seed")
	f.IntVar(&opt.ConfigID, "config", 0, "configuration of a grid sweep to search")
	f.StringVarP(&out, "out", "o", "", "write the chosen rule to this JSON file")
	f.BoolVar(&overwrite, "overwrite", false, "replace --out if it exists")
	rootCmd.AddCommand(cmd)
}
