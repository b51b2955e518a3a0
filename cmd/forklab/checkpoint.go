package main

import (
	"fmt"
	"os"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/spf13/cobra"
)

func init() {
	var (
		seed   uint64
		forkAt int
		wf     *worldFlags
	)
	cmd := &cobra.Command{
		Use:   "checkpoint --seed N --fork-at STEP",
		Short: "Run one seed to a fork step and print its checkpoint as JSON",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec := sweep.DefaultSpec()
			if err := wf.apply(&spec); err != nil {
				return asInput(err)
			}
			if forkAt < 1 {
				return usageErr("--fork-at %d is below 1: the fork must come after at least one step", forkAt)
			}
			if seed > sweep.MaxSeed {
				return usageErr("--seed must be below 2^63")
			}
			w, err := counter.New(spec.Params)
			if err != nil {
				return asInput(err)
			}
			if err := spec.Model.Validate(); err != nil {
				return asInput(err)
			}
			lab := fork.Lab[counter.State]{World: w, Model: spec.Model}
			var hist []fork.Turn
			s := lab.Advance(w.Start(seed), fork.PrefixKey(seed), forkAt, &hist)
			b, err := fork.Checkpoint[counter.State, counter.Params]{Version: fork.CheckpointVersion, World: counter.Name,
				Params: spec.Params, Model: spec.Model, ForkStep: forkAt, History: hist, State: s}.Encode()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(os.Stdout, "%s\n", b)
			return err
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&seed, "seed", 0, "task seed")
	f.IntVar(&forkAt, "fork-at", 3, "fork step")
	wf = addWorldFlags(f)
	cmd.MarkFlagRequired("seed")
	rootCmd.AddCommand(cmd)
}
