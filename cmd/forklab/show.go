package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/forklab/forklab/pipeline/analysis/pairview"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/spf13/cobra"
)

func init() {
	var (
		seed              uint64
		runID, arm, html  string
		forkStep, replica int
		config            int
		overwrite         bool
	)
	cmd := &cobra.Command{
		Use:   "show DIR --seed S [--fork-step K] [--arm A] [--replica R]",
		Short: "Show one pair: the checkpoint, then the control and treated branches side by side, step by step",
		Long: `show prints one pair of the sweep in DIR: seed S's run forked at step K, the
treatment arm A against the control off. First the pair's label (rescued,
harmed, unchanged) and why, then the checkpoint (the turns before the fork,
its features, hidden truth and cost so far), then both branches side by side,
step by step — the action, what the agent saw, a tool call and its result,
what the step cost — with the step where they part marked », and each
branch's outcome and cost. --replica R picks the replica of each side shown
(the pair is labelled by the majority of its replicas).

--fork-step, --arm and --config may be left out when the sweep has one of
them. --run-id ID names the run instead of --seed: for a seed population a
run's id is its seed in decimal; a recorded population's runs (forklab sweep
--runs) are named by their run ids only.

The steps are the branches table's transcripts when the sweep kept them (an
agent that sent them; forklab sweep --transcripts for a built-in world).
Otherwise a built-in world's branches are played again from the checkpoint,
which gives the sweep's branches exactly (show checks their outcome and
cost against the table's); an agent's branch without a transcript shows its
outcome, cost and details.

show reads the pair's rows from the one file of each table that holds the
seed, so it answers at once on a sweep of any size (a recorded run is first
found by its run id in the fork step's checkpoints files). --html FILE writes the
same view as a self-contained page (no scripts, nothing fetched); an
existing FILE needs --overwrite, and FILE may not be one of DIR's own files
(its tables, manifest.json, results.duckdb).

Exit status 0: shown; 2: DIR is not a results directory, or the seed, run
id, configuration, fork step, arm or replica is not in the sweep (what it
holds is named); 4: DIR's files do not match its manifest.`,
		Example: `  forklab show out --seed 5
  forklab show out --seed 5 --fork-step 3 --arm on --html seed5.html
  forklab show lab --run-id prod/s17 --fork-step 3 --arm on
  forklab show noisy --seed 12 --fork-step 2 --arm aa --replica 3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			if !fl.Changed("seed") && runID == "" {
				return usageErr("give the pair's run: --seed S (or --run-id ID)")
			}
			if runID != "" && fl.Changed("seed") && runID != strconv.FormatUint(seed, 10) {
				return usageErr("--seed %d and --run-id %q name different runs: give one of them", seed, runID)
			}
			a := fork.Arm(arm)
			if arm != "" && !validArm(a) {
				return usageErr("--arm %q is unknown (known: on, placebo, aa, policy; off is the control, shown beside them)", arm)
			}
			out, err := createHTML(html, overwrite)
			if err != nil {
				return err
			}
			if out != nil {
				defer out.Abort()
			}
			s, err := pairview.Open(args[0])
			if errors.Is(err, sweep.ErrNotResults) {
				return asInput(err)
			}
			if err != nil {
				return err
			}
			defer s.Close()
			v, err := s.Pair(pairview.Query{Config: config, Seed: seed, RunID: runID, ForkStep: forkStep, Arm: a, Replica: replica})
			if errors.Is(err, pairview.ErrNotInSweep) {
				return asInput(err)
			}
			if err != nil {
				return err
			}
			if out != nil {
				sweep.DeriveOutput(out, s.Dir, s.Manifest.SweepID)
				if err := pairview.WriteHTML(out, v, s.Dir, len(s.Manifest.Configs)); err != nil {
					return err
				}
			}
			if err := pairview.Write(os.Stdout, v, len(s.Manifest.Configs)); err != nil {
				return err
			}
			if out == nil {
				return nil
			}
			if err := out.Commit(); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote %s\n", html)
			return nil
		},
	}
	f := cmd.Flags()
	uint64Flag(f, &seed, "seed", 0, 0, sweep.MaxSeed-1, "the pair's task seed")
	f.StringVar(&runID, "run-id", "", "the pair's run, by its run id instead of --seed (a seed population's run ids are its seeds in decimal; a recorded population's are its runs' ids)")
	intFlagOr(f, &forkStep, "fork-step", 0, 1, sweep.MaxForkStep, 0, "the sweep's only fork step", "the fork step")
	f.StringVar(&arm, "arm", "", "the treatment arm shown beside off: on, placebo, aa or policy (default: the sweep's only one)")
	intFlag(f, &replica, "replica", 0, 0, sweep.MaxReplicas-1, "the replica of each side shown, from 0")
	intFlagOr(f, &config, "config", -1, 0, sweep.MaxConfigs-1, -1, "the sweep's only configuration", "the configuration (a spec with a grid has several)")
	f.StringVar(&html, "html", "", "also write the view as a self-contained HTML page to this file")
	f.BoolVar(&overwrite, "overwrite", false, "let --html replace an existing file")
	markNeeds(f, "overwrite", "html")
	rootCmd.AddCommand(cmd)
}

// validArm says whether a names an arm (off included).
func validArm(a fork.Arm) bool {
	for _, k := range fork.Arms {
		if a == k {
			return true
		}
	}
	return false
}
