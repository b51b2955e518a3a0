package main

import (
	"encoding/json"
	"fmt"
	"github.com/forklab/forklab/internal/atomicfile"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/agentproc"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/spf13/cobra"
)

func init() {
	var (
		timeout     time.Duration
		seeds       string
		forkAt      int
		params      []string
		asJSON      bool
		logDir      string
		environment []string
	)
	check := &cobra.Command{
		Use:   "check 'CMD ARGS'",
		Short: "Check that an agent speaks forklab-agent/1 correctly: a pass/fail table, exit 1 on failure",
		Long: `check starts the agent (a shell command line) and runs the conformance checks
of forklab-agent/1 (docs/agent-protocol.md): the handshake and version
negotiation; start replies carrying every declared task draw, feature and
hidden value with its type; every declared arm branched; the same checkpoint,
arm and replica giving the same outcome twice (unless the agent declares
itself nondeterministic: then sweep it with replicas); a checkpoint forked in
a fresh process (which must declare what the first did) giving the same
outcome; error replies to an unknown method and refusals of malformed input,
the process going on; batches when declared; shutdown, the process exiting
within 5 seconds. Every reply is validated by the code a sweep uses, so the
check fails wherever a sweep would refuse a reply, with the sweep's message.
--param takes what sweep takes (a list as 2,5 or [2,5]). The agents' stderr
goes to --log-dir (default: a temporary directory, named when a check
fails).`,
		Example: `  forklab agent check 'python3 examples/agents/seed_core.py'
  forklab agent check 'node examples/agents/toolbot.mjs'
  forklab agent check 'forklab agent serve --world toolloop'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(args[0]) == "" {
				return usageErr("the agent command is empty")
			}
			r, err := sweep.ParseRange(seeds)
			if err != nil {
				return asInput(fmt.Errorf("--seeds: %w", err))
			}
			if r.Len() > 1000 {
				return usageErr("--seeds: check at most 1000 seeds, got %d", r.Len())
			}
			var seedList []uint64
			for s := r.Start; s < r.End; s++ {
				seedList = append(seedList, s)
			}
			env, err := envMap(environment)
			if err != nil {
				return err
			}
			removeTmp := func() {}
			if logDir != "" {
				// A folder that takes no file (read-only, not permitted) is
				// the user's to change, before any agent runs (exit 2, as
				// every writer's output).
				if err := writableDir(logDir); err != nil {
					return asInput(fmt.Errorf("--log-dir: %w", err))
				}
			} else {
				// Removed after a pass, kept after a failure (the agents'
				// stderr), and removed on a signal (atomicfile.Cleanup).
				if logDir, removeTmp, err = atomicfile.TempDir("", "forklab-agent-check-"); err != nil {
					return err
				}
			}
			rows, inputErr := agentproc.Check(cmd.Context(), agentproc.CheckOptions{Command: agentproc.Command{Line: args[0], Env: env},
				Timeout: timeout, Seeds: seedList, ForkStep: forkAt, Params: params, LogDir: logDir})
			if err := cmd.Context().Err(); err != nil {
				removeTmp()
				return err
			}
			failed := 0
			for _, row := range rows {
				if row.Status == agentproc.Fail {
					failed++
				}
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetEscapeHTML(false) // details quote the agent's text as it wrote it
				for _, row := range rows {
					enc.Encode(row)
				}
			} else {
				tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "CHECK\tRESULT\tDETAIL")
				for _, row := range rows {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", row.Name, row.Status, row.Detail)
				}
				tw.Flush()
			}
			if inputErr != nil {
				// The agent is not at fault: say what to fix (exit 2).
				removeTmp()
				return asInput(inputErr)
			}
			if failed > 0 {
				return exitError{1, fmt.Errorf("agent check: %d of %d checks failed; the agents' stderr is in %s", failed, len(rows), logDir)}
			}
			removeTmp()
			fmt.Fprintf(os.Stderr, "agent check: all %d checks passed or skipped\n", len(rows))
			return nil
		},
	}
	f := check.Flags()
	durationFlag(f, &timeout, "timeout", agentproc.CheckTimeout, time.Millisecond, sweep.MaxAgentTimeout, "time the agent may take per request")
	f.StringVar(&seeds, "seeds", "0:8", "seeds to play, START:END")
	intFlag(f, &forkAt, "fork-at", 2, 1, sweep.MaxForkStep, "fork step to checkpoint at (step 1 is checked too)")
	f.StringArrayVar(&params, "param", nil, "set a declared parameter, key=value (repeatable; a list as 2,5 or [2,5], as sweep takes it)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per check")
	f.StringVar(&logDir, "log-dir", "", "directory for the agents' stderr (default: a temporary one)")
	f.StringArrayVar(&environment, "agent-env", nil, "KEY=VALUE added to the agent's environment (repeatable)")
	agentCmd.AddCommand(check)

	var (
		worldName   string
		transcripts bool
	)
	serve := &cobra.Command{
		Use:   "serve --world NAME",
		Short: "Serve a built-in world over forklab-agent/1 on stdin and stdout",
		Long: `serve answers forklab-agent/1 (docs/agent-protocol.md) for a built-in world on
its standard input and output: a reference agent. Sweeping a world through it
gives the same Parquet files, byte for byte, as sweeping it in process.
--transcripts adds each branch's transcript to its reply, as an agent may
(docs/agent-protocol.md, Transcripts): the sweep keeps them as it would with
sweep --transcripts in process.`,
		Example: `  forklab sweep --agent 'forklab agent serve --world counter' --out served
  forklab agent check 'forklab agent serve --world toolloop'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			def, err := lab.Lookup(worldName)
			if err != nil {
				return asInput(fmt.Errorf("--world: %w", err))
			}
			return agentproc.ServeWith(cmd.Context(), def, os.Stdin, os.Stdout, agentproc.ServeOptions{Transcripts: transcripts})
		},
	}
	serve.Flags().StringVar(&worldName, "world", "counter", "the built-in world to serve (forklab worlds lists them)")
	serve.Flags().BoolVar(&transcripts, "transcripts", false, "send each branch's transcript (its steps after the fork) with its outcome")
	// A protocol server that writes no file: a signal ends it at once, as
	// its parent (a sweep that stops its agents) expects.
	ownSignals(serve)
	agentCmd.AddCommand(serve)
}
