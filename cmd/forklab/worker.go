package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/forklab/forklab/pipeline/lab/scaleout"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/spf13/cobra"
)

func init() {
	var (
		brokers, queue, id string
		parallel, maxUnits int
		partitions         int
		sessionTimeout     time.Duration
		dialTimeout        time.Duration
		verbose, quiet     bool
		debug              bool
		agentCmd           string
		agentEnv           []string
	)
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Take units of distributed sweeps from Kafka, run them, write their files into the sweeps' directories",
		Long: `worker joins the consumer group of a queue's units topic (QUEUE.units, group
QUEUE.workers) and runs the units of work that forklab sweep --distributed
publishes there, whatever sweep they belong to: each record carries the
sweep's spec and its results directory, which must be on storage this
machine writes at the same path (a network file system). A unit's files go
into the directory's staging area (temporary name, fsync, rename), then its
ledger entry; it is reported on QUEUE.results, and only then is its offset
committed. Start any number of workers, anywhere, at any time; a worker
killed mid-unit leaves its unit to the others, which write the same bytes.

A sweep of an external agent (forklab sweep --distributed --agent CMD)
starts the agent on the worker, as many processes as the coordinator's
--parallel for each unit the worker runs at once; --agent CMD replaces the
coordinator's command line (the agent may live elsewhere on this machine).
The agent's environment is not sent over Kafka: the agent gets the worker's
own environment, and --agent-env KEY=VALUE. Every seed an agent finished is
journaled in the output directory, so a unit redone after a worker was
killed pays for none of them twice.

A unit whose attempts fail --max-attempts times (set by the coordinator) is
written as error rows naming each failure. A worker that cannot start a
sweep's agent records that as a failed attempt at the unit it took (the
coordinator shows it), puts the unit back and stops (exit 1). A worker that
cannot write the output directory stops with the error and leaves the unit
to the others.

The first SIGINT or SIGTERM lets the running units finish and leaves the
group; a second one stops at once (the units go to other workers).

Exit status 0: drained; 1: stopped by an error (named).`,
		Example: `  forklab worker --brokers kafka-0:9092,kafka-1:9092,kafka-2:9092
  forklab worker --brokers 127.0.0.1:9092 --parallel 2 -v
  forklab worker --brokers 127.0.0.1:9092 --agent 'python3 /opt/agents/seed_core.py' --agent-env OPENAI_API_KEY=$KEY`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if brokers == "" {
				return usageErr("--brokers is required: the Kafka cluster the coordinator publishes units on (host:port,…)")
			}
			env, err := envMap(agentEnv)
			if err != nil {
				return err
			}
			logf := func(string, ...any) {}
			if verbose {
				logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			w, err := scaleout.NewWorker(ctx, scaleout.WorkerConfig{
				Queue: scaleout.Queue{Brokers: splitList(brokers), Name: queue, Partitions: partitions, DialTimeout: dialTimeout},
				ID:    id, Parallel: parallel, SessionTimeout: sessionTimeout, MaxUnits: maxUnits,
				Version: version, Logf: logf, Debug: debug,
				Token: os.Getenv("FORKLAB_TOKEN"),
				OpenAgent: func(ctx context.Context, a sweep.AgentSpec) (scaleout.Agent, error) {
					if agentCmd != "" {
						a.Command = agentCmd
					}
					a.Environment = env
					return openAgent(ctx, &a)
				}})
			if err != nil {
				return err
			}
			sigs := make(chan os.Signal, 2)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)
			go func() {
				<-sigs
				if !quiet {
					fmt.Fprintf(os.Stderr, "forklab worker %s: finishing the running units (again to stop at once)\n", w.ID())
				}
				w.Drain()
				<-sigs
				cancel()
			}()
			if !quiet {
				q := scaleout.Queue{Name: queue}
				fmt.Fprintf(os.Stderr, "forklab worker %s: taking units from %s as group %s\n", w.ID(), q.UnitsTopic(), q.Group())
			}
			start := time.Now()
			err = w.Run(ctx)
			if !quiet {
				s := w.Stats()
				fmt.Fprintf(os.Stderr, "forklab worker %s: %d units run, %d found done already, %d written as error rows, %d attempts failed, in %s\n",
					w.ID(), s.Units, s.Again, s.Poison, s.Failed, time.Since(start).Round(time.Second))
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&brokers, "brokers", os.Getenv("FORKLAB_BROKERS"), "Kafka bootstrap brokers host:port,… (default $FORKLAB_BROKERS)")
	f.StringVar(&queue, "queue", scaleout.DefaultQueue, "queue name: topics QUEUE.units and QUEUE.results, group QUEUE.workers")
	intFlag(f, &partitions, "partitions", scaleout.DefaultPartitions, 1, 100000, "partitions of the units topic if this worker creates it")
	dialTimeoutFlag(f, &dialTimeout, "")
	f.StringVar(&id, "id", "", "worker name in reports and attempt records (default HOST-PID)")
	intFlag(f, &parallel, "parallel", 0, 0, maxWorkers, "units run at once, each a member of the group (0: one per CPU)")
	intFlag(f, &maxUnits, "max-units", 0, 0, sweep.MaxUnits, "leave after finishing this many units (0: never)")
	durationFlag(f, &sessionTimeout, "session-timeout", 10*time.Second, 6*time.Second, 30*time.Minute, "how long Kafka waits for a silent worker before giving its units to others (Kafka's group.min.session.timeout.ms and group.max.session.timeout.ms by default)")
	f.StringVar(&agentCmd, "agent", "", "the command line that starts the agent of external-agent sweeps on this machine (default: the coordinator's)")
	f.StringArrayVar(&agentEnv, "agent-env", nil, "KEY=VALUE added to the agents' environment (repeatable)")
	f.BoolVarP(&verbose, "verbose", "v", false, "a line per unit")
	f.BoolVar(&debug, "debug", false, "log the Kafka client's errors too")
	f.BoolVarP(&quiet, "quiet", "q", false, "no start and summary lines")
	ownSignals(cmd)
	rootCmd.AddCommand(cmd)
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
