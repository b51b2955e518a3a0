package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/sessions/sink"
	"github.com/spf13/cobra"
)

func init() {
	var (
		cfg     sink.Config
		brokers string
		quiet   bool
	)
	cmd := &cobra.Command{
		Use:   "sink --out DIR [--prefix P] [--follow] [--rotate-records N] [--rotate-interval D]",
		Short: "Copy session events into Parquet under DIR/sink/, exactly once, resuming where it stopped",
		Long: `sink reads the session log's Kafka topic directly, partition by partition,
from where it last stopped, and appends the selected streams' events to
DIR/sink/ as Parquet files, Hive-partitioned by the UTC date of the record
(event_date=YYYY-MM-DD/) and named by topic, partition and the first and last
Kafka offset of the batch they come from:

  DIR/sink/event_date=2025-06-01/forklab.streams+0+0000000000001200+0000000000001799.parquet

Columns: the events table (schemas/README.md), as forklab log export writes
it, with generation, kafka_partition, kafka_offset and appended_at. Progress
is committed to DIR/sink/_state/ only after the batch's files are durable
(temporary file, fsync, rename), so a sink killed at any moment and started
again writes every event exactly once: a batch cut short is written again
under the same names, with the same bytes.

Without --follow it stops at the end of the log as of its start: run it from
cron and each run appends what is new (a run with nothing new writes
nothing); --rotate-interval is refused there. With --follow it long-polls
and closes a batch every --rotate-records events or --rotate-interval after
its first record; SIGINT or SIGTERM commit the open batch and stop.
Either way a Kafka it cannot read (a broker restarting, a network cut) is
retried from the last commit with backoff; out of reach for longer than
--retry-for, it ends the run (exit 1, saying so).

Records retention removed before the sink read them are reported as gaps
with their size (and kept in the state file), never skipped silently.
In a results directory, forklab db adds the files to the events view.`,
		Example: `  forklab log serve --kafka-port 9092 &
  forklab log sink --out out                              # nightly: append what is new, then stop
  forklab log sink --out out --follow --rotate-interval 30s   # follow the log
  forklab sql out "SELECT type, count(*) FROM events GROUP BY ALL"  # the events view reads the sink's files`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if cfg.Out == "" {
				return usageErr("--out DIR is required")
			}
			if fi, err := os.Stat(cfg.Out); err == nil && !fi.IsDir() {
				return usageErr("--out %s is a file; give a directory", cfg.Out)
			}
			if err := sweep.CheckOutput(filepath.Join(cfg.Out, sink.Dir), sink.Dir); err != nil {
				return asInput(err)
			}
			if c.Flags().Changed("rotate-interval") && !cfg.Follow {
				return usageErr("--rotate-interval applies with --follow: a run without it closes a batch every --rotate-records events and at its end")
			}
			for _, b := range strings.Split(brokers, ",") {
				if b = strings.TrimSpace(b); b != "" {
					cfg.Brokers = append(cfg.Brokers, b)
				}
			}
			if len(cfg.Brokers) == 0 {
				return usageErr("--brokers is empty; give the log's Kafka address (forklab log serve --kafka-port)")
			}
			cfg.Logf = func(f string, a ...any) {
				if !quiet || strings.HasPrefix(f, "GAP") {
					fmt.Fprintf(os.Stderr, "forklab log sink: "+f+"\n", a...)
				}
			}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// In a results directory, sink/ belongs to the sweep: it goes
			// when the sweep is replaced (sweep.RegisterDerived). Noted
			// once it exists, so that a refused run leaves no trace.
			sinkDir := filepath.Join(cfg.Out, sink.Dir)
			derive := func() error {
				if _, err := os.Stat(sinkDir); err != nil {
					return nil
				}
				return sweep.RegisterDerived(sinkDir)
			}
			if err := derive(); err != nil {
				return err
			}
			rep, err := sink.Run(ctx, cfg)
			if derr := derive(); err == nil {
				err = derr
			}
			if errors.Is(err, sink.ErrUsage) {
				return asInput(err)
			}
			if rep != nil {
				printSinkReport(rep, &cfg)
			}
			if !cfg.Follow && ctx.Err() != nil {
				return exitError{130, fmt.Errorf("sink interrupted; what it read is committed in %s, the next run goes on from there", filepath.Join(cfg.Out, sink.Dir))}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Out, "out", "", "directory to write sink/ into (a results directory, or any)")
	f.StringVar(&cfg.Prefix, "prefix", "", "copy only the streams whose names start with this")
	f.BoolVar(&cfg.Follow, "follow", false, "keep following the log (long polls) until SIGINT or SIGTERM")
	intFlag(f, &cfg.RotateRecords, "rotate-records", 10000, 1, 10000000, "close a batch (one file per date) once it holds this many events")
	durationFlag(f, &cfg.RotateInterval, "rotate-interval", time.Minute, time.Millisecond, 24*time.Hour, "with --follow, close a batch this long after its first record")
	f.StringVar(&brokers, "brokers", "127.0.0.1:9092", "the log's Kafka bootstrap brokers, host:port,…")
	f.StringVar(&cfg.Topic, "topic", "forklab.streams", "the log's data topic")
	dialTimeoutFlag(f, &cfg.DialTimeout, "without --follow: ")
	retryForFlag(f, &cfg.RetryFor, "")
	f.BoolVarP(&quiet, "quiet", "q", false, "print only gaps and the summary")
	ownSignals(cmd)
	logCmd.AddCommand(cmd)
}

func printSinkReport(rep *sink.Report, cfg *sink.Config) {
	dir := filepath.Join(cfg.Out, sink.Dir)
	var pos []string
	for _, p := range rep.Partitions {
		pos = append(pos, fmt.Sprintf("partition %d at offset %d", p.Partition, p.Next))
	}
	switch {
	case rep.Files == 0 && rep.Records == 0:
		fmt.Fprintf(os.Stderr, "forklab log sink: nothing new: %s is up to date with %s (%s)\n", dir, cfg.Topic, strings.Join(pos, ", "))
	default:
		again := ""
		if rep.Rewritten > 0 {
			again = fmt.Sprintf(" (%d written again as before, after a crash)", rep.Rewritten)
		}
		fmt.Fprintf(os.Stderr, "forklab log sink: %d events from %d records in %d %s%s under %s; %s; %s\n",
			rep.Events, rep.Records, rep.Files, plural(rep.Files, "file", "files"), again, dir, strings.Join(pos, ", "),
			rep.Elapsed.Round(time.Millisecond))
	}
	if len(rep.Gaps) > 0 {
		fmt.Fprintf(os.Stderr, "forklab log sink: warning: %d %s in the log this run (above; all of them are in %s)\n",
			len(rep.Gaps), plural(len(rep.Gaps), "gap", "gaps"), filepath.Join(dir, sink.StateDir))
	}
	if len(rep.Superseded) > 0 {
		fmt.Fprintf(os.Stderr, "forklab log sink: warning: %d stream %s replaced by a newer generation that %s own partition does not delete (above): their rows are of a generation that is over\n",
			len(rep.Superseded), plural(len(rep.Superseded), "generation was", "generations were"), plural(len(rep.Superseded), "its", "their"))
	}
	for _, d := range rep.Differing {
		fmt.Fprintf(os.Stderr, "forklab log sink: warning: %s was kept though the batch made again differs\n", d)
	}
}
