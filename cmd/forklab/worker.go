package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/forklab/forklab/internal/plural"
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
		retryFor           time.Duration
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

Each member of the group (--parallel of them) runs in a process of its own
that this one supervises: a member process that dies in the middle of a unit
(a world that exits, a segfault, the OOM killer) is a failed attempt at the
unit, recorded with how it ended, and the member is started again; a worker
killed as a whole (its machine lost, preempted) is not: its units are run
again elsewhere, with no attempt counted. A unit whose attempts fail
--max-attempts times (set by the coordinator) is written as error rows naming
each failure. A worker that cannot start a sweep's agent records that as a
failed attempt at the unit it took (the coordinator shows it), puts the unit
back and stops (exit 1). A worker that cannot write the output directory
stops with the error and leaves the unit to the others.

Rebalances, fetch timeouts, a broker restarting, a network cut are retried
with backoff; only Kafka out of reach for longer than --retry-for (5m) stops
the worker (exit 1, saying so).

The first SIGINT or SIGTERM lets the running units finish and leaves the
group; a second one stops at once (the units go to other workers).

Exit status 0: drained; 1: stopped by an error (named), or Kafka out of
reach for longer than --retry-for.`,
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
			wcfg := scaleout.WorkerConfig{
				Queue: scaleout.Queue{Brokers: splitList(brokers), Name: queue, Partitions: partitions, DialTimeout: dialTimeout, RetryFor: retryFor},
				ID:    id, Parallel: parallel, SessionTimeout: sessionTimeout, MaxUnits: maxUnits,
				Version: version, Logf: logf, Debug: debug,
				Token: os.Getenv("FORKLAB_TOKEN"),
				OpenAgent: func(ctx context.Context, a sweep.AgentSpec) (scaleout.Agent, error) {
					if agentCmd != "" {
						a.Command = agentCmd
					}
					a.Environment = env
					return openAgent(ctx, &a, true)
				}}
			if member := os.Getenv(scaleout.ChildEnv); member != "" {
				return runMember(ctx, cancel, wcfg, member)
			}
			return superviseMembers(ctx, cancel, wcfg, quiet)
		},
	}
	f := cmd.Flags()
	f.StringVar(&brokers, "brokers", os.Getenv("FORKLAB_BROKERS"), "Kafka bootstrap brokers host:port,… (default $FORKLAB_BROKERS)")
	f.StringVar(&queue, "queue", scaleout.DefaultQueue, "queue name: topics QUEUE.units and QUEUE.results, group QUEUE.workers")
	intFlag(f, &partitions, "partitions", scaleout.DefaultPartitions, 1, 100000, "partitions of the units topic if this worker creates it")
	dialTimeoutFlag(f, &dialTimeout, "")
	retryForFlag(f, &retryFor, "")
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

// superviseMembers runs the worker: each member of the group in a process
// of its own (forklab worker again, with scaleout.ChildEnv), supervised
// by this one, so that a unit that crashes its process is told from a
// worker that vanished (scaleout.Supervise).
func superviseMembers(ctx context.Context, cancel context.CancelFunc, cfg scaleout.WorkerConfig, quiet bool) error {
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	cfg.ID = scaleout.CleanID(cfg.ID)
	if cfg.Parallel <= 0 {
		cfg.Parallel = runtime.GOMAXPROCS(0)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	drain := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		<-sigs
		if !quiet {
			fmt.Fprintf(os.Stderr, "forklab worker %s: finishing the running units (again to stop at once)\n", cfg.ID)
		}
		close(drain)
		<-sigs
		cancel()
	}()
	if !quiet {
		fmt.Fprintf(os.Stderr, "forklab worker %s: taking units from %s as group %s\n", cfg.ID, cfg.Queue.UnitsTopic(), cfg.Queue.Group())
	}
	start := time.Now()
	st, err := scaleout.Supervise(ctx, scaleout.SuperviseConfig{ID: cfg.ID, Members: cfg.Parallel, MaxUnits: cfg.MaxUnits,
		Logf: func(f string, a ...any) {
			fmt.Fprintf(os.Stderr, "forklab worker %s: "+f+"\n", append([]any{cfg.ID}, a...)...)
		},
		Command: func(k int) *exec.Cmd {
			c := exec.Command(self, os.Args[1:]...)
			c.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d", scaleout.ChildEnv, cfg.ID, k))
			ownProcessGroup(c) // ^C reaches this process, which passes it on
			return c
		}}, drain)
	if !quiet {
		crashed := ""
		if st.Crashes > 0 {
			crashed = fmt.Sprintf(", %s crashed mid-unit", plural.Of(st.Crashes, "member process", "member processes"))
		}
		fmt.Fprintf(os.Stderr, "forklab worker %s: %s run, %d found done already, %d written as error rows, %s failed%s, in %s\n",
			cfg.ID, plural.Count(st.Units, "unit"), st.Again, st.Poison, plural.Count(st.Failed, "attempt"), crashed, time.Since(start).Round(time.Second))
	}
	return err
}

// runMember runs one member of a supervised worker: member is "ID K".
// It says where its attempts are on file descriptor 3 and exits at once
// when its supervisor dies (its standard input ends).
func runMember(ctx context.Context, cancel context.CancelFunc, cfg scaleout.WorkerConfig, member string) error {
	id, k, ok := strings.Cut(member, " ")
	n, err := strconv.Atoi(k)
	if !ok || err != nil {
		return fmt.Errorf("%s=%q: want \"ID K\"", scaleout.ChildEnv, member)
	}
	scaleout.ExitWithParent(os.Stdin)
	status := os.NewFile(3, "supervisor")
	closeOnExec(status)
	closeOnExec(os.Stdin)
	link := scaleout.NewChildLink(status)
	cfg.ID, cfg.FirstMember, cfg.Parallel, cfg.MaxUnits = id, n, 1, 0
	link.Configure(&cfg)
	w, err := scaleout.NewWorker(ctx, cfg)
	if err != nil {
		link.End(scaleout.WorkerStats{}, err)
		os.Exit(1)
	}
	link.Ready()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		<-sigs
		w.Drain()
		<-sigs
		cancel()
	}()
	err = w.Run(ctx)
	link.End(w.Stats(), err)
	if err != nil {
		os.Exit(1) // the supervisor says it
	}
	return nil
}
