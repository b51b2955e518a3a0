package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/forklab/forklab/pipeline/agent"
	"github.com/forklab/forklab/pipeline/counter"
	"github.com/forklab/forklab/pipeline/fork"
	"github.com/forklab/forklab/pipeline/policy"
	"github.com/spf13/cobra"
)

// forkOutcome is one line of forklab fork's JSON output.
type forkOutcome struct {
	Seed       uint64   `json:"seed"`
	ForkStep   int      `json:"fork_step"`
	Arm        fork.Arm `json:"arm"`
	Replica    int      `json:"replica"`
	Intervened bool     `json:"intervened"`
	Success    bool     `json:"success"`
	Declared   bool     `json:"declared"`
	FinalValue int      `json:"final_value"`
	Steps      int      `json:"steps"`
}

func init() {
	var (
		file, armName, policyFile string
		stream, offset, child     string
		replica                   int
		asJSON                    bool
		lf                        *logFlags
	)
	cmd := &cobra.Command{
		Use:   "fork (--checkpoint FILE | --stream NAME --offset O) --arm ARM",
		Short: "Finish one branch of a checkpoint — from a file, or from a session on the log — and print the outcome",
		Long: `fork finishes the branch of one arm from a checkpoint.

With --checkpoint it decodes checkpoint JSON (the checkpoints table's
checkpoint column, or forklab checkpoint's output) in this process. FILE may
hold one checkpoint or many, one per line; "-" reads stdin. One outcome is
printed per checkpoint, in input order.

With --stream it forks a session on the log at --offset into a new child
stream (the protocol's fork; default name NAME/fork-ARM-rREPLICA-OFFSET):
the checkpoint is the fold of the session's events before the offset, and
the branch's events go to the child stream.`,
		Example: `  forklab checkpoint --seed 0 --fork-at 3 > cp.json
  forklab fork --checkpoint cp.json --arm on
  forklab fork --stream demo --offset 0000000000000000_0000000000000009_1_95fbf6ca --arm on`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (file == "") == (stream == "") {
				return usageErr("give either --checkpoint FILE or --stream NAME --offset O")
			}
			arm := fork.Arm(armName)
			if arm != fork.Off && arm != fork.On && arm != fork.Placebo && arm != fork.AA && arm != fork.Policy {
				return usageErr("--arm %q is unknown (known: off, on, placebo, aa, policy)", armName)
			}
			if replica < 0 {
				return usageErr("--replica must be 0 or more, got %d", replica)
			}
			var rule *policy.Rule
			if arm == fork.Policy {
				if policyFile == "" {
					return usageErr("--arm policy needs --policy FILE")
				}
				r, err := policy.ReadFile(policyFile)
				if err != nil {
					return asInput(err)
				}
				rule = &r
			}
			if stream != "" {
				if offset == "" {
					return usageErr("--stream needs --offset (an offset the log returned, e.g. by forklab log read)")
				}
				if child == "" {
					child = fmt.Sprintf("%s/fork-%s-r%d-%s", stream, arm, replica, offset)
				}
				w := agent.Worker{Log: lf.client(), Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "forklab fork: "+f+"\n", a...) }}
				res, err := agent.Fork(cmd.Context(), w, stream, offset, child, 0, arm, replica, rule)
				if err == nil || errors.Is(err, agent.ErrFinished) {
					printOutcome(child, res)
				}
				return workerExit(err)
			}
			var in io.Reader = os.Stdin
			if file != "-" {
				f, err := os.Open(file)
				if err != nil {
					return asInput(fmt.Errorf("read checkpoint: %w", err))
				}
				defer f.Close()
				in = f
			}
			// Decode everything first: a bad line anywhere prints nothing.
			var cps []fork.Checkpoint[counter.State, counter.Params]
			sc := bufio.NewScanner(in)
			sc.Buffer(make([]byte, 1<<20), 64<<20)
			for line := 1; sc.Scan(); line++ {
				b := bytes.TrimSpace(sc.Bytes())
				if len(b) == 0 {
					continue
				}
				c, err := fork.DecodeCheckpoint[counter.State, counter.Params](b, counter.Name)
				if err == nil {
					err = c.Params.Validate()
				}
				if err == nil {
					lab := fork.Lab[counter.State]{World: counter.World{P: c.Params}, Model: c.Model}
					err = fork.Verify(lab, c, func(s counter.State) uint64 { return s.Seed })
				}
				if err != nil {
					return asInput(fmt.Errorf("read checkpoint %s line %d: %w", file, line, err))
				}
				cps = append(cps, c)
			}
			if err := sc.Err(); err != nil {
				return asInput(fmt.Errorf("read checkpoint %s: %w", file, err))
			}
			if len(cps) == 0 {
				return asInput(fmt.Errorf("read checkpoint %s: no checkpoint in the file", file))
			}
			w := bufio.NewWriter(os.Stdout)
			defer w.Flush()
			enc := json.NewEncoder(w)
			for _, c := range cps {
				lab := fork.Lab[counter.State]{World: counter.World{P: c.Params}, Model: c.Model}
				fires := rule != nil && rule.Fires(lab.World.Features(c.State))
				final, ok, iv := lab.Branch(c.State, c.State.Seed, c.ForkStep, arm, replica, fires)
				o := forkOutcome{Seed: c.State.Seed, ForkStep: c.ForkStep, Arm: arm, Replica: replica, Intervened: iv,
					Success: ok, Declared: final.Declared, FinalValue: int(final.V), Steps: int(final.Steps)}
				if asJSON {
					if err := enc.Encode(o); err != nil {
						return err
					}
					continue
				}
				verdict := "failure"
				if ok {
					verdict = "success"
				}
				fmt.Fprintf(w, "seed %d · fork step %d · arm %s · replica %d: %s (declared %t, value %d, %d steps)\n",
					o.Seed, o.ForkStep, o.Arm, o.Replica, verdict, o.Declared, o.FinalValue, o.Steps)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "checkpoint", "", "checkpoint file (one JSON object per line; - for stdin)")
	f.StringVar(&armName, "arm", "", "arm to finish: off, on, placebo, aa or policy")
	f.IntVar(&replica, "replica", 0, "replica number (selects the model's noise stream)")
	f.StringVar(&policyFile, "policy", "", "guard rule for --arm policy")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per outcome")
	f.StringVar(&stream, "stream", "", "session stream to fork on the log")
	f.StringVar(&offset, "offset", "", "offset in --stream to fork at")
	f.StringVar(&child, "child", "", "name of the child stream (default NAME/fork-ARM-rREPLICA-OFFSET)")
	lf = addLogFlags(cmd)
	cmd.MarkFlagRequired("arm")
	rootCmd.AddCommand(cmd)
}
