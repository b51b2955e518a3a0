package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/sessions/chaos"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/spf13/cobra"
)

func init() {
	var (
		cfg chaos.Config
		wf  *worldFlags
	)
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run agent sessions as worker processes, kill, freeze and restart them and the log, then check nothing broke",
		Long: `chaos starts a session-log service (embedded broker, synced writes) on a
temporary data directory and runs --sessions agent sessions of a world
(--world and its parameter flags, the model's --temperature and --no-tool;
every worker process gets all of them) as separate 'forklab agent run'
processes against it. It kills workers with SIGKILL and restarts them
(--kills in all), freezes some with SIGSTOP, starts a successor and then lets
the frozen one continue (--zombies), and kills and restarts the log service
itself (--restarts). Faults are planned before anything runs, each after a
chosen acknowledged event of a chosen session with events still to come, so
every fault asked for lands; a plan the sessions are too few or too short to
host is refused (exit 2) saying how many faults fit. At the end it reads
every session back and prints a table: sessions completed, kills, zombie
appends fenced (403) or refused on the closed session (409), duplicates and
gaps seen by readers, acknowledged events lost, sessions whose events or
outcome differ from an uninterrupted run. With --sink-kills N a forklab log
sink --follow copies the sessions' events into Parquet beside the run and is
killed with SIGKILL N times; its files must end with exactly the events the
log holds, stream by stream, and a one-shot run after it must write nothing.
It exits 1 unless every check passes and every fault asked for landed. The
same --seed gives the same sessions and the same plan of faults (their exact
timing depends on the machine).`,
		Example: `  forklab chaos --sessions 50 --kills 200 --zombies 20 --restarts 2 --seed 1
  forklab chaos --sessions 100 --seed 7 --base-budget 20 --target 15
  forklab chaos --sessions 50 --kills 200 --restarts 2 --sink-kills 30`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec := sweep.DefaultSpec()
			spec.Model.Temperature = 0.1
			spec.Params = world.Params{"p_stall": 0.1} // the counter's default here; another world starts from its own
			if err := wf.apply(&spec); err != nil {
				return asInput(err)
			}
			cfg.World, cfg.Params, cfg.Model = spec.World, spec.Params, spec.Model
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			cfg.Bin = bin
			cfg.Logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "forklab chaos: "+f+"\n", a...) }
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if _, err := chaos.Plan(cfg); err != nil {
				return asInput(err)
			}
			rep, err := chaos.Run(ctx, cfg)
			if rep != nil {
				rep.Write(os.Stdout)
			}
			if err != nil {
				return err
			}
			if !rep.OK() {
				return fmt.Errorf("chaos: some checks failed (see the table)")
			}
			return nil
		},
	}
	f := cmd.Flags()
	intFlag(f, &cfg.Sessions, "sessions", 50, 1, 100000, "agent sessions to run")
	intFlag(f, &cfg.Kills, "kills", 200, 0, 1000000, "worker SIGKILLs to inflict")
	intFlag(f, &cfg.Zombies, "zombies", 20, 0, 1000000, "workers to freeze (SIGSTOP), replace, then wake (SIGCONT)")
	intFlag(f, &cfg.Restarts, "restarts", 2, 0, 10000, "times to SIGKILL and restart the log service")
	uint64Flag(f, &cfg.Seed, "seed", 1, 0, (sweep.MaxSeed-100000)/1000, "seed of the sessions (task seeds SEED*1000+i, below 2^63) and of the plan of faults")
	intFlag(f, &cfg.Parallel, "parallel", 10, 1, 1024, "sessions running at once")
	durationFlag(f, &cfg.Delay, "delay", 20*time.Millisecond, 0, time.Hour, "each worker's pause before every append")
	f.StringVar(&cfg.DataDir, "data-dir", "", "log data directory (default: a temporary one, removed after)")
	intFlag(f, &cfg.SinkKills, "sink-kills", 0, 0, 100000, "run forklab log sink --follow beside the sessions and SIGKILL it this many times (0: no sink)")
	f.StringVar(&cfg.SinkOut, "sink-out", "", "the sink's output directory (default: DATA-DIR/sink-out)")
	wf = addWorldFlags(f)
	f.Lookup("temperature").DefValue = "0.1"
	ps := f.Lookup("p-stall")
	ps.Usage = strings.Replace(ps.Usage, "(default 0)", "(default here 0.1, for the counter)", 1)
	ownSignals(cmd)
	rootCmd.AddCommand(cmd)
}
