package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/forklab/forklab/internal/plural"
	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/agentproc"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/recorded"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/sessions/agent"
	"github.com/forklab/forklab/stream/client"
	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

func init() {
	var (
		seeds, forkAt, arms, specFile, policyFile, out        string
		runs                                                  string
		replicas, workers                                     int
		overwrite, quiet, resume, transcripts, policyAnywhere bool
		wf                                                    *worldFlags
		af                                                    *agentFlags
		fromLog, logPrefix, token                             string
		logParallel                                           int
		sf                                                    *scaleFlags
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
"spec"); the resolved spec is stored in the manifest. A parameter is either
one value (its flag, --param, the spec's params: or model:) or an axis of the
spec's grid:, never both, and is given once (--target 7 --param target=6 is
refused); a grid axis lists each value once.

With --runs SOURCE the population is runs already recorded instead of a
seed range (docs/recorded-runs.md): a .jsonl or .parquet file of records
({"run_id": …, "checkpoint": …}, each forked at its own fork step), a
session-log URL naming a stream prefix (every session under it, folded to
--fork-at), or agent: (the runs --agent lists with its runs method). Rows
are keyed by run_id; the manifest records the source, its size, checksum
and run count; the report says the runs are not a random sample. A
duplicate run_id, a checkpoint of another world or one the world cannot
decode, a stream that is not a session and a file written to while it is
read exit 2 naming the record, before anything is published.

With --from-log URL every run and branch is played as a session on the
session log (forklab log serve) instead of in memory: each seed's run is the
stream PREFIX/cCONFIG/sSEED, played to the last fork step; each checkpoint is
the fold of its events up to the fork step's offset, and each branch is a
child stream PREFIX/cCONFIG/sSEED/fSTEP/ARM/rREPLICA forked from that offset.
The tables are the in-memory sweep's, byte for byte, for any world.

--transcripts keeps every branch's steps after the fork (action,
observation, cost) in the branches table's transcript column. Without it a
built-in world's sweep keeps none (recording them costs about a third of
its speed) and forklab show plays a branch again from its checkpoint, which is
exact; an agent's transcripts are kept whenever it sends them.

With --agent CMD the world is an external agent speaking forklab-agent/1
(docs/agent-protocol.md): --parallel processes of it, each request bounded by
--timeout, a crashed or hung process killed and restarted, a failed request
retried --retries times, then its pairs written as error rows, never labels.
Every seed the agent finished is journaled at once, so a sweep killed at any
point and run again with --resume pays for no finished fork twice.

--resume finishes the interrupted sweep of --out, keeping the units it
finished. Given with no --spec and no flag that sets a spec key (--seeds,
--fork-at, --arms, --replicas, --unit-seeds, --world, parameters, --policy,
…), it takes the spec stored with the interrupted sweep: forklab sweep
--resume --out DIR is enough. Spec flags given must match the stored spec
(a --resume of another spec is refused naming the keys that differ).
Flags that only say how it runs (--workers, -q, --max-error-rate, …) are
free. An external agent's command is not stored: resume an agent's sweep
with its --agent command and flags again, adding --resume.

On many machines (docs/scale-out.md), with --out on storage they all write
at the same path: --shard I/N runs only share I of N of the sweep's units
(I from 0) and forklab sweep finalize publishes once every share is in; or
--distributed --brokers B publishes the units on Kafka for forklab worker
processes, shows their progress and publishes when every unit is in (run
the same command again to pick up a stopped coordinator's sweep). Either
way the tables are the single-process sweep's, byte for byte.

A sweep writes into a hidden directory beside --out and replaces --out in one
atomic step when it is complete: interrupted or failed, --out holds the old
sweep, whole. What was derived from the old sweep inside --out (report.html,
policy.json, a rerun/ sweep, results.duckdb, …) goes with it; your own files
stay where they are: into a directory that holds them (--overwrite), or the
working directory (--out .), the sweep is published in place, its manifest
last. Every flag and spec key is range-checked before anything runs; a sweep
holds at most 65,536 units and 2^53 branch rows (8,589,934,592 seeds with the
default unit size; docs/scale-out.md), and a larger seed range is refused
naming the largest that fits.

An agent that fails — every one of its first attempts (20 of them, or 3
or more in the first 30 seconds, before any succeeded), or more than
--fail-on-error (50%) of its last 100 — stops the sweep within a minute,
quoting the last failure (a line it wrote where a reply was expected, its
exit status, the end of its stderr).

Exit status: 0 done; 5 done, but more than --max-error-rate of the pairs
are errors (the numbers are incomplete; --resume plays the failed units
again); 6 stopped at --max-cost (resumable); 7 stopped early because the
agent is failing (resumable once it is fixed); 130 interrupted (resumable).`,
		Example: `  forklab sweep --seeds 0:300 --fork-at 3 --out out
  forklab sweep --seeds 0:10000 --fork-at 1-4 --arms off,on,placebo,aa --temperature 0.1 --replicas 5 --out noisy
  forklab sweep --from-log http://127.0.0.1:4437 --seeds 0:300 --out from-log
  forklab sweep --runs runs.jsonl --out recorded
  forklab sweep --runs http://127.0.0.1:4437/v1/stream/prod/ --fork-at 3 --out prod
  forklab sweep --agent 'python3 examples/agents/seed_core.py' --parallel 2 --seeds 0:300 --out x
  forklab sweep --seeds 0:30000000 --shard 0/3 --out /data/big
  forklab sweep --distributed --brokers kafka:9092 --seeds 0:300000000 --out /data/big`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := sf.check(cmd, resume, fromLog != ""); err != nil {
				return err
			}
			// Not into another sweep's own files (its pairs/, …).
			if err := sweep.CheckOutput(out); err != nil {
				return asInput(err)
			}
			if fromLog == "" {
				for _, name := range []string{"log-prefix", "log-parallel"} {
					if cmd.Flags().Changed(name) {
						return usageErr("--%s applies only with --from-log URL", name)
					}
				}
				if cmd.Flags().Changed("token") && !strings.HasPrefix(runs, "http") {
					return usageErr("--token applies only with --from-log URL or --runs URL")
				}
			}
			if runs != "" && fromLog != "" {
				return usageErr("--runs and --from-log exclude each other: --from-log plays seeds' runs on the log; --runs URL forks the sessions already there")
			}
			if runs != "" && cmd.Flags().Changed("seeds") {
				return usageErr("--seeds and --runs exclude each other: a sweep's population is a seed range or recorded runs")
			}
			spec := sweep.DefaultSpec()
			var err error
			fl := cmd.Flags()
			resuming := "" // the line saying the stored spec is resumed
			if resume && specFile == "" && !specFlagGiven(fl, wf) {
				// --resume alone: the sweep goes on with the spec stored
				// with it, not with the flags' defaults.
				stored, decl, dir, err := sweep.ResumeSpec(out)
				if err != nil {
					return asInput(err)
				}
				if dir == "" {
					if _, err := os.Stat(sweep.StagingDir(out)); err == nil {
						// Stopped before its first write, the spec: the
						// flags' defaults are not the sweep it was.
						return asInput(fmt.Errorf("--resume: the interrupted sweep of %s recorded no spec (it stopped before its first write, the spec, was done), so its spec is unknown and none of its work is kept: run it again with its spec flags or --spec, without --resume (forklab sweep --seeds … --out %s)", out, out))
					}
				} else {
					if agentSweep(stored, dir) {
						return usageErr("--resume: the sweep of %s ran an external agent (world %s), and an agent's command is not stored with its sweep: run the forklab sweep command it was started with again (its --agent CMD or --spec, and the same flags), adding --resume", out, decl.Name)
					}
					spec = stored
					resuming = fmt.Sprintf("forklab: resuming the interrupted sweep of %s: %s", out, specSummary(stored))
				}
			}
			// A recorded file's runs fork at their own steps unless a
			// fork step is given (a flag, the spec file, the stored spec).
			forkAtGiven := fl.Changed("fork-at") || resuming != ""
			if specFile != "" {
				if spec, err = sweep.ReadSpecFile(specFile, spec); err != nil {
					return asInput(err)
				}
				if own, err := sweep.ReadSpecFile(specFile, sweep.Spec{}); err == nil && own.ForkAt != nil {
					forkAtGiven = true
				}
			}
			if runs != "" {
				spec.Seeds, spec.Runs = sweep.Range{}, &sweep.Runs{Source: runs}
			} else if fl.Changed("seeds") {
				spec.Runs = nil
			}
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
			if fl.Changed("transcripts") {
				spec.Transcripts = transcripts
			}
			if fromLog != "" && spec.Transcripts {
				// Its runners play sessions on the log, which record every
				// step; none would reach the table.
				return usageErr("--transcripts (spec key transcripts) and --from-log exclude each other: a sweep played on the session log keeps every step there already (forklab log read, forklab log export)")
			}
			if err := af.apply(&spec); err != nil {
				return asInput(err)
			}
			if err := sf.agentForWorkers(&spec, quiet); err != nil {
				return err
			}
			if policyFile != "" {
				r, err := policy.ReadFile(policyFile)
				if err != nil {
					return asInput(err)
				}
				spec.Policy = &r
			}
			if fl.Changed("policy-anywhere") {
				spec.PolicyAnywhere = policyAnywhere
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var (
				resolved sweep.Resolved
				ext      *agentproc.Definition
				src      recorded.Source
			)
			if spec.Agent != nil {
				// An external agent: its declaration is the world.
				if fromLog != "" {
					return usageErr("--from-log plays built-in worlds on the session log; an external agent writes its own sessions (docs/agent-protocol.md)")
				}
				if fl.Changed("world") {
					return usageErr("--world and --agent exclude each other: the agent declares its own world")
				}
				// The agent's keys are checked before it is started.
				if err := spec.Agent.Validate(); err != nil {
					return specErr(err, fl.Changed, nil)
				}
				if ext, err = openAgent(ctx, spec.Agent, true); err != nil {
					if errors.Is(err, agentproc.ErrFailing) {
						return exitError{7, errors.New(failingMessage(err, "sweep", spec.Agent.Command, "run the same sweep again"))}
					}
					return asInput(err)
				}
				defer ext.Close()
				if err := wf.applyDecl(&spec, ext.Declaration(), true); err != nil {
					return asInput(err)
				}
				if spec.Runs != nil {
					if src, err = openRuns(ctx, &spec, ext.Declaration(), ext, forkAtGiven, token); err != nil {
						return err
					}
					defer src.Close()
				}
				if resolved, err = spec.ResolveWith(ext); err != nil {
					return specErr(err, fl.Changed, nil)
				}
			} else {
				if err := wf.apply(&spec); err != nil {
					return asInput(err)
				}
				if spec.Runs != nil {
					def, err := lab.Lookup(spec.World)
					if err != nil {
						return asInput(fmt.Errorf("world: %w", err))
					}
					if src, err = openRuns(ctx, &spec, def.Declaration(), nil, forkAtGiven, token); err != nil {
						return err
					}
					defer src.Close()
				}
				if resolved, err = spec.Resolve(); err != nil {
					return specErr(err, fl.Changed, nil)
				}
			}
			resolved.Source = src
			if w := sweep.ReplicasWarning(resolved.Decl, resolved.Spec.Replicas); w != "" && !quiet {
				fmt.Fprintf(os.Stderr, "forklab: warning: %s\n", w)
			}
			if w := sweep.PolicyAnywhereLine(resolved.Spec, resolved.Decl, resolved.Configs); w != "" && !quiet {
				fmt.Fprintf(os.Stderr, "forklab: warning: %s\n", w)
			}
			if sf.shard != "" || sf.distributed {
				return sf.run(cmd, resolved, ext, out, overwrite, quiet, workers)
			}
			st, err := sweep.Stage(out, overwrite, resume)
			if err != nil {
				return asInput(err)
			}
			if resuming != "" && !quiet {
				fmt.Fprintln(os.Stderr, resuming)
			}
			opt := sweep.Options{Workers: workers, Version: version}
			spec = resolved.Spec
			prog := &sweepProgress{perSeed: len(spec.ForkAt) * (len(spec.Arms) - 1), def: ext, decl: resolved.Decl,
				limit: spec.MaxCost, start: time.Now(), lastLine: time.Now()}
			prog.total = int64(spec.Population().Len()) * int64(len(resolved.Configs)) * int64(prog.perSeed)
			if ext != nil {
				logs := filepath.Join(st.Dir, sweep.AgentLogs)
				ext.SetLogDir(logs)
				ext.SetJournal(st.JournalDir())
				// The runners stop at the budget, having overshot it by
				// at most one seed's cost (agentproc/budget.go).
				ext.SetBudget(spec.MaxCost)
				if !fl.Changed("workers") {
					opt.Workers = ext.Pool().Parallel()
				}
				if !quiet {
					// Where the logs are while the sweep runs (its staging
					// directory), and where they will be once it is published.
					fmt.Fprintf(os.Stderr, "forklab sweep: agent %q: world %s %s, %s; its stderr goes to %s (%s once the sweep is published)\n",
						spec.Agent.Command, resolved.Decl.Name, resolved.Decl.Version, plural.Of(ext.Pool().Parallel(), "process", "processes"), logs, filepath.Join(out, sweep.AgentLogs))
				}
			}
			if !quiet && isatty.IsTerminal(os.Stderr.Fd()) {
				prog.bar = progressbar.NewOptions64(prog.total, progressbar.OptionSetWriter(os.Stderr),
					progressbar.OptionSetDescription("sweep"), progressbar.OptionShowCount(),
					progressbar.OptionShowIts(), progressbar.OptionSetItsString("pairs"),
					// The ETA is the description's (etaText): none while
					// most pairs are errors.
					progressbar.OptionSetPredictTime(false), progressbar.OptionSetElapsedTime(true),
					progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
			} else {
				prog.lines = !quiet && ext != nil
			}
			opt.Progress = prog.seeds
			opt.KeptCost = prog.keep
			if ext != nil || len(spec.MaxCost) > 0 {
				wctx, wstop := context.WithCancel(ctx)
				defer wstop()
				go prog.watch(wctx)
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
				opt.Runners = agent.Runners(c, resolved, agent.PlayOptions{Prefix: logPrefix, Parallel: logParallel, RetryFor: sf.retryFor, FailFast: failFast(cmd),
					Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "forklab sweep: "+f+"\n", a...) }})
			}
			res, err := sweep.Run(ctx, resolved, st, opt)
			if prog.bar != nil {
				prog.bar.Finish()
			}
			if runsInputErr(err) {
				st.Release()
				return asInput(fmt.Errorf("%w; nothing was published (%s is as it was)", populationErr(err), out))
			}
			if errors.Is(err, sweep.ErrSpecChanged) {
				st.Refused()
				how := "" // how to resume it with the spec it was started with
				if spec.Agent == nil {
					how = fmt.Sprintf(" (forklab sweep --resume --out %s with no spec flags takes it)", out)
				}
				return asInput(fmt.Errorf("--resume: %w; its finished work is kept: resume it with the spec it was started with%s, or start over without --resume (with --overwrite if %s holds a finished sweep)", err, how, out))
			}
			if err != nil {
				st.Release()
				if ctx.Err() != nil {
					return exitError{130, fmt.Errorf("sweep interrupted; %s is as it was before; the finished work is kept for forklab sweep --resume", out)}
				}
				if errors.Is(err, agentproc.ErrFailing) {
					return exitError{7, errors.New(failingMessage(err, "sweep", spec.Agent.Command,
						fmt.Sprintf("run the same sweep again with --resume: %s is as it was before, and every seed finished so far is kept", out)))}
				}
				if errors.Is(err, agentproc.ErrStopped) {
					prog.mu.Lock()
					msg := prog.stopMessage(out)
					prog.mu.Unlock()
					return exitError{6, errors.New(msg)}
				}
				if _, _, dir, _ := sweep.ResumeSpec(out); dir == "" {
					// Its first write, the spec, failed: nothing to resume.
					return fmt.Errorf("%w (nothing of the sweep was kept: run it again once the cause is fixed)", err)
				}
				return fmt.Errorf("%w (the finished work is kept for forklab sweep --resume)", err)
			}
			m := res.Manifest
			if !quiet {
				resumed := ""
				if res.Resumed > 0 {
					resumed = fmt.Sprintf(" (%s kept from the interrupted sweep)", plural.Count(res.Resumed, "unit"))
				}
				fmt.Fprintf(os.Stderr, "wrote %s: %s in %s%s\n", out, m.RowsText(), time.Since(start).Round(time.Millisecond), resumed)
				if ext != nil {
					fmt.Fprintf(os.Stderr, "cost: %s\n", costText(resolved.Decl, res.Cost))
				}
			}
			if !quiet {
				for _, l := range res.Labels {
					where := fmt.Sprintf("fork step %d", l.ForkStep)
					if len(resolved.Configs) > 1 {
						where = fmt.Sprintf("config %d · %s", l.Config, where)
					}
					errs := ""
					if l.Errors > 0 {
						errs = fmt.Sprintf("   errors %d (no label)", l.Errors)
					}
					fmt.Printf("%s vs off · %s: rescued %d   harmed %d   unchanged %d   net %+d%s\n", l.Arm, where, l.Rescued, l.Harmed, l.Unchanged, l.Net(), errs)
					if t := sweep.PolicySample(resolved.Spec); t != "" && l.Arm == fork.Policy {
						fmt.Printf("  %s\n", t)
					}
				}
			}
			writeDB(ctx, out)
			if m.Errors > 0 {
				pairs := m.Rows["pairs"]
				msg := fmt.Sprintf("%s, not labels; the table counts the other %d", m.ErrorsText(), pairs-m.Errors)
				if ext != nil {
					msg += fmt.Sprintf("; the agents' stderr is in %s", filepath.Join(out, sweep.AgentLogs))
				}
				if m.Incomplete {
					return exitError{5, fmt.Errorf("INCOMPLETE: %s — above --max-error-rate %g%%, so the numbers are incomplete; fix the cause and run the same sweep with --resume: only the units with errors are played again", msg, 100*m.MaxErrorRate)}
				}
				if !quiet {
					fmt.Fprintf(os.Stderr, "warning: %s (within --max-error-rate %g%%); --resume plays them again\n", msg, 100*m.MaxErrorRate)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&seeds, "seeds", "0:300", "seed range START:END (END exclusive, as Python's range; seeds are integers in [0, 9223372036854775806], so END is at most 9223372036854775807); N alone means 0:N")
	f.StringVar(&runs, "runs", "", "recorded runs to fork instead of seeds: a .jsonl or .parquet file of records, a session-log URL naming a stream prefix (http://HOST:PORT/v1/stream/PREFIX), or agent: (the --agent's own runs); docs/recorded-runs.md")
	f.StringVar(&forkAt, "fork-at", "3", "fork steps: 3, 1,2,3 or 1-4")
	f.StringVar(&arms, "arms", "off,on", "arms, the control off among them: off,on,placebo,aa,policy")
	intFlag(f, &replicas, "replicas", 1, 1, sweep.MaxReplicas, "forks per checkpoint and arm, labelled by majority vote")
	f.StringVar(&out, "out", "out", "results directory (its path may not hold any of , * ? [ ] { }, which DuckDB reads as globs or list separators)")
	f.BoolVar(&overwrite, "overwrite", false, "replace a finished sweep in --out (atomically, once the new one is complete)")
	f.BoolVar(&resume, "resume", false, "continue the interrupted sweep of --out, keeping the units it finished; with no --spec and no flag setting a spec key, with the spec stored with it (an external agent's sweep needs its --agent and flags again)")
	intFlag(f, &workers, "workers", 0, 0, maxWorkers, "parallel workers (0: one per CPU); never changes the output")
	f.StringVar(&specFile, "spec", "", "sweep spec file (.json, .yaml); flags override it")
	f.StringVar(&policyFile, "policy", "", "guard rule for the policy arm (forklab policy writes one); applied only at the fork step, world version, parameters and model it was chosen for")
	f.BoolVar(&transcripts, "transcripts", false, "keep every branch's steps (action, observation, cost) in the branches table; off, forklab show replays a built-in world's branch from its checkpoint (an agent's transcripts are kept whenever it sends them)")
	f.BoolVar(&policyAnywhere, "policy-anywhere", false, "apply --policy's rule at another fork step, world version, parameters or model than it was chosen for (the manifest and the report say so)")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress bar or summary line")
	f.StringVar(&fromLog, "from-log", "", "play every run and branch as a session on this session log (URL) and fork them from their offsets")
	markURLFlag(f, "from-log")
	f.StringVar(&logPrefix, "log-prefix", "", "stream name prefix for --from-log (default sweep-<time>; must be new)")
	intFlag(f, &logParallel, "log-parallel", 16, 1, 1024, "seeds played on the log at once")
	f.StringVar(&token, "token", os.Getenv("FORKLAB_TOKEN"), "bearer token for --from-log or --runs URL (default $FORKLAB_TOKEN)")
	wf = addWorldFlags(f)
	af = addAgentFlags(f)
	sf = addScaleFlags(f)
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		err := run(c, args)
		if fromLog != "" {
			err = logHint(err, "--from-log", fromLog)
		}
		return err
	}
	cmd.AddCommand(finalizeCmd())
	ownSignals(cmd)
	rootCmd.AddCommand(cmd)
}
