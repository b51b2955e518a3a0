package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/forklab/forklab/internal/kafkadial"
	"github.com/forklab/forklab/internal/plural"
	"github.com/forklab/forklab/pipeline/analysis/export"
	"github.com/forklab/forklab/pipeline/lab/agentproc"
	"github.com/forklab/forklab/pipeline/lab/scaleout"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// scaleFlags are forklab sweep's flags for sweeps spread over processes:
// a share of a static split, or a distributed sweep's coordinator.
type scaleFlags struct {
	shard       string
	share       scaleout.Share
	distributed bool
	brokers     string
	queue       string
	partitions  int
	maxAttempts int
	lease       time.Duration
	dialTimeout time.Duration
	retryFor    time.Duration
}

func addScaleFlags(f *pflag.FlagSet) *scaleFlags {
	sf := &scaleFlags{}
	f.StringVar(&sf.shard, "shard", "", "run only share I/N of the sweep's units (I from 0, e.g. $JOB_COMPLETION_INDEX/3) into --out; then forklab sweep finalize")
	f.BoolVar(&sf.distributed, "distributed", false, "publish the units on Kafka (--brokers) for forklab workers, follow them, finalize --out when all are in")
	f.StringVar(&sf.brokers, "brokers", os.Getenv("FORKLAB_BROKERS"), "Kafka bootstrap brokers host:port,… for --distributed (default $FORKLAB_BROKERS)")
	f.StringVar(&sf.queue, "queue", scaleout.DefaultQueue, "--distributed: queue name (topics QUEUE.units, QUEUE.results; the workers' group QUEUE.workers)")
	intFlag(f, &sf.partitions, "partitions", scaleout.DefaultPartitions, 1, 100000, "--distributed: partitions of the units topic (the most workers busy at once); grows an existing topic")
	intFlag(f, &sf.maxAttempts, "max-attempts", 3, 1, 100, "--distributed: attempts at a unit before it is written as error rows")
	dialTimeoutFlag(f, &sf.dialTimeout, "--distributed: ")
	durationFlag(f, &sf.retryFor, "retry-for", kafkadial.DefaultRetryFor, kafkadial.MinRetryFor, kafkadial.MaxRetryFor,
		"--distributed: how long Kafka may stay out of reach once running (a broker restarting, a network cut) before giving up; --from-log: how long the session log may; retried with backoff meanwhile")
	durationFlag(f, &sf.lease, "lease", 10*time.Second, time.Second, 24*time.Hour, "--distributed: how long a unit whose worker went silent counts as still running")
	return sf
}

// check refuses flag combinations that do not go together.
func (sf *scaleFlags) check(cmd *cobra.Command, resume, fromLog bool) error {
	if sf.shard != "" {
		sh, err := scaleout.ParseShare(sf.shard)
		if err != nil {
			return asInput(fmt.Errorf("--shard: %w", err))
		}
		sf.share = sh
		if resume {
			return usageErr("--resume does not apply to --shard: a share run again keeps the units it finished")
		}
		if sf.distributed {
			return usageErr("--shard and --distributed do not go together: a static split or work units on Kafka")
		}
	}
	fl := cmd.Flags()
	if !sf.distributed {
		for _, name := range []string{"brokers", "queue", "partitions", "max-attempts", "lease", "dial-timeout"} {
			if fl.Changed(name) {
				return usageErr("--%s applies only with --distributed", name)
			}
		}
		if fl.Changed("retry-for") && !fromLog {
			return usageErr("--retry-for applies only with --distributed or --from-log")
		}
		return nil
	}
	switch {
	case sf.brokers == "":
		return usageErr("--distributed needs --brokers host:port,… (or $FORKLAB_BROKERS): the Kafka cluster the workers read")
	case resume:
		return usageErr("--resume does not apply to --distributed: run the same command again to pick a stopped coordinator's sweep up")
	case fromLog:
		return usageErr("--from-log does not go with --distributed")
	case fl.Changed("workers"):
		return usageErr("--workers does not apply to --distributed: start forklab worker processes (--parallel each)")
	}
	return nil
}

// absAgent makes the relative paths in a distributed sweep's agent
// command absolute, against this directory: workers run the command
// wherever they were started, and a path relative to the coordinator's
// directory would name nothing there (or something else). A word is a
// relative path when it names an existing file here and is not the
// command's name (which the shell looks up in PATH); words with quotes,
// escapes or variables are left as they are. The returned notes say what
// was changed.
func absAgent(line, dir string) (string, []string) {
	var notes []string
	words := strings.Fields(line)
	name := true // the next word is the command's name (after NAME=value words)
	for i, w := range words {
		isName := name && !strings.Contains(w, "=")
		if isName {
			name = false
		}
		if strings.ContainsAny(w, "'\"\\$`~=;&|<>(){}*?") || strings.HasPrefix(w, "/") || strings.HasPrefix(w, "-") ||
			(isName && !strings.Contains(w, "/")) {
			continue
		}
		p := filepath.Join(dir, w)
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		words[i] = shellQuote(p)
		notes = append(notes, fmt.Sprintf("%s as %s", w, words[i]))
	}
	if notes == nil {
		return line, nil
	}
	return strings.Join(words, " "), notes
}

// agentForWorkers rewrites a distributed sweep's agent command for the
// workers (absAgent) and says so.
func (sf *scaleFlags) agentForWorkers(spec *sweep.Spec, quiet bool) error {
	if !sf.distributed || spec.Agent == nil {
		return nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	line, notes := absAgent(spec.Agent.Command, dir)
	if notes != nil && !quiet {
		fmt.Fprintf(os.Stderr, "forklab sweep: the workers run the agent command wherever they were started: it sends them %s (a worker's --agent CMD replaces it)\n", strings.Join(notes, ", "))
	}
	spec.Agent.Command = line
	return nil
}

// run runs the share or the distributed sweep; ext is the sweep's
// external agent, or nil.
func (sf *scaleFlags) run(cmd *cobra.Command, r sweep.Resolved, ext *agentproc.Definition, out string, overwrite, quiet bool, workers int) error {
	if len(r.Spec.MaxCost) > 0 {
		// Each process would spend up to the whole budget: refused rather
		// than recorded and overshot (docs/scale-out.md).
		how := "the shares of a static split (--shard)"
		if sf.distributed {
			how = "the workers of a distributed sweep (--distributed)"
		}
		return usageErr("--max-cost (max_cost) is not enforced across %s: leave it out and watch the cost in the progress, or run the sweep in one process", how)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if sf.distributed {
		return sf.coordinate(ctx, r, out, overwrite, quiet)
	}
	if ext != nil {
		// As forklab sweep: the agent's finished seeds journaled beside
		// the units (a share run again pays for none twice), its stderr
		// in the output, one unit per agent process.
		st := &sweep.Staging{Out: out, Dir: sweep.StagingDir(out)}
		ext.SetJournal(st.JournalDir())
		ext.SetLogDir(filepath.Join(st.Dir, sweep.AgentLogs, "share-"+strconv.Itoa(sf.share.I)))
		if !cmd.Flags().Changed("workers") {
			workers = ext.Pool().Parallel()
		}
	}
	return runShare(ctx, r, out, sf.share, overwrite, quiet, workers)
}

// coordinate runs the coordinator of a distributed sweep.
func (sf *scaleFlags) coordinate(ctx context.Context, r sweep.Resolved, out string, overwrite, quiet bool) error {
	q := scaleout.Queue{Brokers: splitList(sf.brokers), Name: sf.queue, Partitions: sf.partitions, DialTimeout: sf.dialTimeout, RetryFor: sf.retryFor}
	logf := func(f string, a ...any) {
		if !quiet {
			fmt.Fprintf(os.Stderr, "forklab sweep: "+f+"\n", a...)
		}
	}
	total := int64(r.Spec.Population().Len()) * int64(len(r.Configs))
	bar := seedBar("sweep", total, quiet)
	var lastLine time.Time
	progress := func(s scaleout.Status) {
		what := fmt.Sprintf("units %d/%d · %s · %d running", s.Done, s.Units, plural.Count(s.Workers, "worker"), s.Running)
		if s.Failed > 0 {
			what += fmt.Sprintf(" · %s failed", plural.Count(s.Failed, "attempt"))
		}
		if s.Poison > 0 {
			what += fmt.Sprintf(" · %s as error rows", plural.Count(s.Poison, "unit"))
		}
		switch {
		case bar != nil:
			bar.Describe(what)
			bar.Set64(int64(s.SeedsDone))
		case !quiet && time.Since(lastLine) >= 10*time.Second:
			lastLine = time.Now()
			fmt.Fprintf(os.Stderr, "forklab sweep: %s · seeds %d/%d\n", what, s.SeedsDone, s.Seeds)
		}
	}
	start := time.Now()
	res, err := scaleout.Coordinate(ctx, r, scaleout.CoordinatorConfig{Queue: q, Out: out, Overwrite: overwrite,
		MaxAttempts: sf.maxAttempts, Lease: sf.lease, Version: version, Progress: progress, Logf: logf})
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		if ctx.Err() != nil {
			return exitError{130, fmt.Errorf("coordinator stopped; the workers carry on: run the same command again to pick the sweep up")}
		}
		if errors.Is(err, sweep.ErrFinished) || strings.Contains(err.Error(), "holds an unfinished distributed sweep") ||
			strings.Contains(err.Error(), "is not empty and holds no forklab sweep") {
			return asInput(err)
		}
		return err
	}
	return published(ctx, out, res, start, quiet)
}

// seedBar is a progress bar of seeds on stderr, or nil when stderr is not
// a terminal or quiet is set.
func seedBar(what string, total int64, quiet bool) *progressbar.ProgressBar {
	if quiet || !isatty.IsTerminal(os.Stderr.Fd()) {
		return nil
	}
	return progressbar.NewOptions64(total, progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(what), progressbar.OptionShowCount(),
		progressbar.OptionShowIts(), progressbar.OptionSetItsString("seeds"),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
}

func runShare(ctx context.Context, r sweep.Resolved, out string, sh scaleout.Share, overwrite, quiet bool, workers int) error {
	var total uint64
	r.Units(func(u sweep.Unit) bool {
		if sh.Owns(r.UnitSeq(u)) {
			total += u.Seeds.Len()
		}
		return true
	})
	opt := sweep.Options{Workers: workers, Version: version}
	bar := seedBar("share "+sh.String(), int64(total), quiet)
	if bar != nil {
		opt.Progress = func(n, _ int) { bar.Add(n) }
	}
	start := time.Now()
	res, err := scaleout.RunShare(ctx, r, out, sh, overwrite, opt)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		if ctx.Err() != nil {
			return exitError{130, fmt.Errorf("share %s interrupted; the units it finished are kept: run it again to go on", sh)}
		}
		if errors.Is(err, agentproc.ErrFailing) {
			return exitError{7, errors.New(failingMessage(err, "share "+sh.String(), r.Spec.Agent.Command, "run the share again: the units and seeds it finished are kept"))}
		}
		if errors.Is(err, sweep.ErrFinished) {
			return asInput(err)
		}
		if errors.Is(err, sweep.ErrSpecChanged) {
			// Another spec's units: running the share again would not help.
			return asInput(fmt.Errorf("share %s: %w", sh, err))
		}
		return fmt.Errorf("share %s: %w (the units it finished are kept: run it again to go on)", sh, err)
	}
	if !quiet {
		kept := ""
		if res.Kept > 0 {
			kept = fmt.Sprintf(" (%d kept from an earlier run)", res.Kept)
		}
		fmt.Fprintf(os.Stderr, "share %s: %s, %s in %s%s; when every share is done: forklab sweep finalize %s\n",
			sh, plural.Count(res.Units, "unit"), plural.Count(total, "seed"), time.Since(start).Round(time.Millisecond), kept, out)
	}
	return nil
}

func finalizeCmd() *cobra.Command {
	var (
		overwrite, quiet bool
		wait, poll       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "finalize DIR",
		Short: "Check that every share (or unit) of a spread sweep is in DIR and publish it with its manifest",
		Long: `finalize finishes a sweep whose units other processes wrote into DIR: the
shares of a static split (forklab sweep … --shard I/N --out DIR), or the
workers of a distributed sweep whose coordinator is gone. It reads the spec
the units were written for, checks that every unit is present (naming the
shares that have not finished and the first missing units), checks every
file against the size and CRC-32C its unit recorded, writes the
configuration tables and manifest.json, publishes DIR atomically and writes
DIR/results.duckdb.

With --wait it waits up to that long for shares still running (a
finishing job started beside them).

Exit status 0: published; 1: units are missing or damaged (named), or the
wait ran out; 2: DIR holds nothing to finalize.`,
		Example: `  forklab sweep --seeds 0:3000000 --shard 0/3 --out /data/big &
  forklab sweep --seeds 0:3000000 --shard 1/3 --out /data/big &
  forklab sweep --seeds 0:3000000 --shard 2/3 --out /data/big
  wait; forklab sweep finalize /data/big`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := args[0]
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			start := time.Now()
			res, err := scaleout.Finalize(ctx, out, scaleout.FinalizeOptions{Overwrite: overwrite, Wait: wait, Poll: poll, Version: version})
			if err != nil {
				switch {
				case ctx.Err() != nil:
					return exitError{130, fmt.Errorf("finalize interrupted; %s is as it was", out)}
				case errors.Is(err, sweep.ErrFinished), errors.Is(err, os.ErrNotExist):
					return asInput(err)
				}
				if _, _, serr := sweep.StagedSpec(out); serr != nil {
					return asInput(err)
				}
				return err
			}
			return published(ctx, out, res, start, quiet)
		},
	}
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "replace a finished sweep in DIR")
	durationFlag(cmd.Flags(), &wait, "wait", 0, 0, 30*24*time.Hour, "wait up to this long for shares still running (e.g. 2h)")
	durationFlag(cmd.Flags(), &poll, "poll", 5*time.Second, 10*time.Millisecond, time.Hour, "with --wait, how often to look for the missing units")
	markNeeds(cmd.Flags(), "poll", "wait")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no summary line")
	ownSignals(cmd)
	return cmd
}

// writeDB writes the results.duckdb of out, a sweep just published: the
// DuckDB database for BI tools, views over its tables
// (pipeline/analysis/export; docs/bi.md). The sweep is published whatever
// happens here, so its exit status stays the sweep's: a failure (DuckDB
// out of memory under ulimit -v, an interrupt) is a warning line, -q or
// not, naming the command that writes the file. It runs forklab db in a
// child process, so that DuckDB crashing outright (a segmentation fault
// under ulimit -v 1800000, which no Go code can recover from) costs the
// database, not the published sweep's exit status.
func writeDB(ctx context.Context, out string) {
	var err error
	if exe, xerr := os.Executable(); xerr == nil {
		cmd := exec.CommandContext(ctx, exe, "db", out)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err = cmd.Run(); err != nil {
			if line := lastLine(errb.String()); line != "" {
				err = errors.New(strings.TrimPrefix(line, "forklab: "))
			}
		}
	} else {
		_, err = export.WriteDB(ctx, out)
	}
	if err != nil {
		why := err.Error()
		if ctx.Err() != nil {
			why = "interrupted"
		}
		fmt.Fprintf(os.Stderr, "forklab: warning: %s is published, but its results.duckdb was not written (%s): forklab db %s writes it\n", out, why, out)
	}
}

// lastLine is the last non-blank line of s, trimmed.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// published writes out's results.duckdb and the summary line of a sweep
// just published; a sweep with more error pairs than its max_error_rate
// exits 5, as forklab sweep does.
func published(ctx context.Context, out string, res sweep.Result, start time.Time, quiet bool) error {
	writeDB(ctx, out)
	m := res.Manifest
	if !quiet {
		fmt.Fprintf(os.Stderr, "wrote %s: %s in %s\n", out, m.RowsText(), time.Since(start).Round(time.Millisecond))
		// The label counts, as forklab sweep prints them.
		for _, l := range res.Labels {
			where := fmt.Sprintf("fork step %d", l.ForkStep)
			if len(m.Configs) > 1 {
				where = fmt.Sprintf("config %d · %s", l.Config, where)
			}
			errs := ""
			if l.Errors > 0 {
				errs = fmt.Sprintf("   errors %d (no label)", l.Errors)
			}
			fmt.Printf("%s vs off · %s: rescued %d   harmed %d   unchanged %d   net %+d%s\n", l.Arm, where, l.Rescued, l.Harmed, l.Unchanged, l.Net(), errs)
		}
	}
	if m.Errors > 0 {
		msg := m.ErrorsText() + ", not labels"
		if m.Incomplete {
			return exitError{5, fmt.Errorf("INCOMPLETE: %s — above the max error rate %g%%, so the numbers are incomplete", msg, 100*m.MaxErrorRate)}
		}
		if !quiet {
			fmt.Fprintf(os.Stderr, "warning: %s (within the max error rate %g%%)\n", msg, 100*m.MaxErrorRate)
		}
	}
	return nil
}
