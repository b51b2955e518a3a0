package main

import (
	"fmt"
	"os"

	"github.com/forklab/forklab/pipeline/lab/sweep"
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
		Long: `checkpoint plays one seed's run of a world to a fork step and prints the
checkpoint as one line of JSON: the world and its version, the parameters,
the model, the history and the state. forklab fork --checkpoint finishes any
branch of it, in another process, to the same outcome as the sweep. A run
that ended before the fork step gives the finished run as its checkpoint,
as the sweep does (its checkpoints table marks the row over), and a note on
stderr says so.

The world and its parameters are chosen as for sweep (--world, --param and
the per-parameter flags), and checked the same way.`,
		Example: `  forklab checkpoint --seed 0 --fork-at 3 > cp.json
  forklab checkpoint --world toolloop --seed 7 --fork-at 2 --param p_fault=0.6`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec := sweep.DefaultSpec()
			if err := wf.apply(&spec); err != nil {
				return asInput(err)
			}
			spec.Seeds = sweep.Range{Start: seed, End: seed + 1}
			spec.ForkAt = []int{forkAt}
			r, err := spec.Resolve()
			if err != nil {
				// The same rules as forklab sweep's, naming this
				// command's flags: --fork-at past the world's runs, --seed.
				always := func(string) bool { return true }
				return specErr(err, always, map[string]string{"seeds": "seed"})
			}
			inst, err := r.Def.Open(r.Configs[0].Params, r.Configs[0].Model)
			if err != nil {
				return asInput(err)
			}
			defer inst.Close()
			f, err := inst.Checkpoint(seed, forkAt)
			if err != nil {
				return err
			}
			if _, err = fmt.Fprintf(os.Stdout, "%s\n", f.Checkpoint); err != nil {
				return err
			}
			if f.Over {
				// As the sweep marks the row over: say it, or the
				// checkpoint looks like a run still open at the fork.
				fmt.Fprintf(os.Stderr, "forklab: note: seed %d's run ended before fork step %d: the checkpoint is the finished run (a sweep's checkpoints table marks it over); a fork of it applies the arm's intervention, and charges it, to a run that has ended, so its pair is unchanged\n", seed, forkAt)
			}
			return nil
		},
	}
	f := cmd.Flags()
	uint64Flag(f, &seed, "seed", 0, 0, sweep.MaxSeed-1, "task seed")
	intFlag(f, &forkAt, "fork-at", 3, 1, sweep.MaxForkStep, "fork step: the number of steps run before the checkpoint (at most the steps a run of the world can take)")
	wf = addWorldFlags(f)
	cmd.MarkFlagRequired("seed")
	rootCmd.AddCommand(cmd)
}
