package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/forklab/forklab/pipeline/analysis/export"
	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/sessions/agent"
	"github.com/forklab/forklab/stream/client"
	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

func init() {
	var (
		seeds, forkAt, arms, specFile, policyFile, out string
		replicas, workers                              int
		overwrite, quiet, resume                       bool
		wf                                             *worldFlags
		fromLog, logPrefix, token                      string
		logParallel                                    int
		sf                                             *scaleFlags
	)
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Fork every seed's run into arms, label the pairs, write Parquet tables",
		Long: `sweep runs each seed of the range to each fork step, checkpoints, forks the
checkpoint into the arms (off: continue; on: refresh, then continue; placebo;
aa; policy), finishes every branch, labels each treatment arm against off as
rescued, harmed or unchanged, and writes tasks, checkpoints, branches and pairs
as Parquet under --out, then manifest.json last.

Flags override a --spec file (JSON or YAML with the keys of manifest.json's
"spec"); the resolved spec is stored in the manifest.

With --from-log URL every run and branch is played as a session on the
session log (forklab log serve) instead of in memory: each seed's run is the
stream PREFIX/cCONFIG/sSEED, played to the last fork step; each checkpoint is
the fold of its events up to the fork step's offset, and each branch is a
child stream PREFIX/cCONFIG/sSEED/fSTEP/ARM/rREPLICA forked from that offset.
The tables are the in-memory sweep's, byte for byte, for any world.

On many machines (docs/scale-out.md), with --out on storage they all write
at the same path: --shard I/N runs only share I of N of the sweep's units
(I from 0) and forklab sweep finalize publishes once every share is in; or
--distributed --brokers B publishes the units on Kafka for forklab worker
processes, shows their progress and publishes when every unit is in (run
the same command again to pick up a stopped coordinator's sweep). Either
way the tables are the single-process sweep's, byte for byte.`,
		Example: `  forklab sweep --seeds 0:300 --fork-at 3 --out out
  forklab sweep --seeds 0:10000 --fork-at 1-4 --arms off,on,placebo,aa --temperature 0.1 --replicas 5 --out noisy
  forklab sweep --from-log http://127.0.0.1:4437 --seeds 0:300 --out from-log
  forklab sweep --seeds 0:30000000 --shard 0/3 --out /data/big
  forklab sweep --distributed --brokers kafka:9092 --seeds 0:300000000 --out /data/big`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if workers < 0 {
				return usageErr("--workers must be 0 (one per CPU) or more, got %d", workers)
			}
			if logParallel < 1 {
				return usageErr("--log-parallel must be at least 1, got %d", logParallel)
			}
			if err := sf.check(cmd, resume, fromLog != ""); err != nil {
				return err
			}
			if fromLog == "" {
				for _, name := range []string{"log-prefix", "log-parallel", "token"} {
					if cmd.Flags().Changed(name) {
						return usageErr("--%s applies only with --from-log URL", name)
					}
				}
			}
			spec := sweep.DefaultSpec()
			var err error
			if specFile != "" {
				if spec, err = sweep.ReadSpecFile(specFile, spec); err != nil {
					return asInput(err)
				}
			}
			fl := cmd.Flags()
			if fl.Changed("seeds") {
				if spec.Seeds, err = sweep.ParseRange(seeds); err != nil {
					return asInput(fmt.Errorf("--seeds: %w", err))
				}
			}
			if fl.Changed("fork-at") {
				if spec.ForkAt, err = sweep.ParseSteps(forkAt); err != nil {
					return asInput(fmt.Errorf("--fork-at: %w", err))
				}
			}
			if fl.Changed("arms") {
				if spec.Arms, err = fork.ParseArms(arms); err != nil {
					return asInput(fmt.Errorf("--arms: %w", err))
				}
			}
			if fl.Changed("replicas") {
				spec.Replicas = replicas
			}
			if err := wf.apply(&spec); err != nil {
				return asInput(err)
			}
			if policyFile != "" {
				r, err := policy.ReadFile(policyFile)
				if err != nil {
					return asInput(err)
				}
				spec.Policy = &r
			}
			resolved, err := spec.Resolve()
			if err != nil {
				return asInput(err)
			}
			if sf.shard != "" || sf.distributed {
				return sf.run(cmd, resolved, out, overwrite, quiet, workers)
			}
			st, err := sweep.Stage(out, overwrite, resume)
			if err != nil {
				return asInput(err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opt := sweep.Options{Workers: workers, Version: version}
			total := int64(spec.Seeds.Len()) * int64(len(resolved.Configs))
			var bar *progressbar.ProgressBar
			if !quiet && isatty.IsTerminal(os.Stderr.Fd()) {
				bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(os.Stderr),
					progressbar.OptionSetDescription("sweep"), progressbar.OptionShowCount(),
					progressbar.OptionShowIts(), progressbar.OptionSetItsString("seeds"),
					progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
				opt.Progress = func(n, _ int) { bar.Add(n) }
			}
			start := time.Now()
			if fromLog != "" {
				c := client.New(fromLog)
				if token != "" {
					c = client.New(fromLog, client.WithToken(token))
				}
				if logPrefix == "" {
					logPrefix = fmt.Sprintf("sweep-%d", time.Now().UnixNano())
				}
				if !quiet {
					fmt.Fprintf(os.Stderr, "playing the sweep's sessions on %s under %s/\n", fromLog, logPrefix)
				}
				opt.Runners = agent.Runners(c, resolved, agent.PlayOptions{Prefix: logPrefix, Parallel: logParallel,
					Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "forklab sweep: "+f+"\n", a...) }})
			}
			res, err := sweep.Run(ctx, resolved, st, opt)
			if bar != nil {
				bar.Finish()
			}
			if err != nil {
				st.Release()
				if ctx.Err() != nil {
					return exitError{130, fmt.Errorf("sweep interrupted; %s is as it was before; the finished work is kept for forklab sweep --resume", out)}
				}
				return fmt.Errorf("%w (the finished work is kept for forklab sweep --resume)", err)
			}
			m := res.Manifest
			// The DuckDB database for BI tools: views over the tables just
			// written (pipeline/analysis/export; docs/bi.md).
			if _, err := export.WriteDB(ctx, out); err != nil {
				return fmt.Errorf("write %s/results.duckdb: %w", out, err)
			}
			if !quiet {
				resumed := ""
				if res.Resumed > 0 {
					resumed = fmt.Sprintf(" (%d units kept from the interrupted sweep)", res.Resumed)
				}
				fmt.Fprintf(os.Stderr, "wrote %s: %d tasks, %d checkpoints, %d branches, %d pairs in %s%s\n",
					out, m.Rows["tasks"], m.Rows["checkpoints"], m.Rows["branches"], m.Rows["pairs"],
					time.Since(start).Round(time.Millisecond), resumed)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&seeds, "seeds", "0:300", "seed range START:END (END exclusive, as Python's range); N alone means 0:N")
	f.StringVar(&forkAt, "fork-at", "3", "fork steps: 3, 1,2,3 or 1-4")
	f.StringVar(&arms, "arms", "off,on", "arms, the control off among them: off,on,placebo,aa,policy")
	f.IntVar(&replicas, "replicas", 1, "forks per checkpoint and arm, labelled by majority vote")
	f.StringVar(&out, "out", "out", "results directory")
	f.BoolVar(&overwrite, "overwrite", false, "replace a finished sweep in --out (atomically, once the new one is complete)")
	f.BoolVar(&resume, "resume", false, "continue the interrupted sweep of --out, keeping the units it finished")
	f.IntVar(&workers, "workers", 0, "parallel workers (0: one per CPU); never changes the output")
	f.StringVar(&specFile, "spec", "", "sweep spec file (.json, .yaml); flags override it")
	f.StringVar(&policyFile, "policy", "", "guard rule for the policy arm (forklab policy writes one)")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress bar or summary line")
	f.StringVar(&fromLog, "from-log", "", "play every run and branch as a session on this session log (URL) and fork them from their offsets")
	f.StringVar(&logPrefix, "log-prefix", "", "stream name prefix for --from-log (default sweep-<time>; must be new)")
	f.IntVar(&logParallel, "log-parallel", 16, "seeds played on the log at once")
	f.StringVar(&token, "token", os.Getenv("FORKLAB_TOKEN"), "bearer token for --from-log (default $FORKLAB_TOKEN)")
	wf = addWorldFlags(f)
	sf = addScaleFlags(f)
	cmd.AddCommand(finalizeCmd())
	rootCmd.AddCommand(cmd)
}
