package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/forklab/forklab/internal/plural"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/sessions/agent"
	"github.com/forklab/forklab/pipeline/sessions/session"
	"github.com/forklab/forklab/stream/client"
	"github.com/spf13/cobra"
)

// agentCmd groups the agent-session subcommands.
var agentCmd = &cobra.Command{
	Use:   "agent",
	Short: "Agents: sessions on the session log, and your own agent over the forklab-agent/1 protocol",
	Long: `agent groups the commands about agents.

run plays one agent session whose every turn is an event on the session log:
killed and started again, it folds the events and goes on; a zombie of it is
fenced. check tests an agent you wrote against the forklab-agent/1 protocol
(docs/agent-protocol.md); serve speaks that protocol for a built-in world.`,
	Example: `  forklab agent run --session demo --seed 5
  forklab agent check 'python3 examples/agents/seed_core.py'
  forklab agent serve --world counter`,
}

// logFlags are the flags that reach the session log.
type logFlags struct{ url, token string }

// addLogFlags gives cmd --log and --token, and makes its errors say, when
// the log cannot be reached at all, how to start it or where to point
// --log (logHint). Call it once cmd has its RunE.
func addLogFlags(cmd *cobra.Command) *logFlags {
	f := &logFlags{}
	cmd.Flags().StringVar(&f.url, "log", "http://127.0.0.1:4437", "session log URL (forklab log serve)")
	markURLFlag(cmd.Flags(), "log")
	cmd.Flags().StringVar(&f.token, "token", os.Getenv("FORKLAB_TOKEN"), "bearer token for the log (default $FORKLAB_TOKEN)")
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error { return logHint(run(c, args), "--log", f.url) }
	return f
}

// logHint adds to an error that is a failure to reach the session log at
// url at all (client.Unreachable: connection refused, unknown host) what
// to do about it: start the log, or point flag (--log, --from-log) at
// the one that runs. Other errors, and nil, are returned as they are.
func logHint(err error, flag, url string) error {
	if err == nil || !client.Unreachable(err) {
		return err
	}
	return fmt.Errorf("%w: no session log answers at %s: start one with forklab log serve (in another terminal, or in the background with &), or give %s the URL of yours", err, url, flag)
}

// failFast is whether a command's agent.Worker gives up at once on a log
// that does not answer its first request: unless --retry-for was given
// (to wait for a log that is starting or restarting), a log nobody started
// is said at once, not retried for two minutes.
func failFast(cmd *cobra.Command) bool { return !cmd.Flags().Changed("retry-for") }

func (f *logFlags) client() *client.Client {
	if f.token != "" {
		return client.New(f.url, client.WithToken(f.token))
	}
	return client.New(f.url)
}

// workerExit maps a worker's error to the command's: nil for a finished
// session, status 3 for a fenced worker, 2 for a stream it must not touch or
// a request the log refused as bad (4xx), 1 otherwise (the log unreachable).
func workerExit(err error) error {
	switch {
	case err == nil, errors.Is(err, agent.ErrFinished):
		return nil
	case errors.Is(err, agent.ErrFenced), errors.Is(err, agent.ErrClosed):
		return exitError{3, err}
	case errors.Is(err, agent.ErrForeign), errors.Is(err, session.ErrFold), errors.Is(err, agent.ErrRule), errors.Is(err, agent.ErrArm),
		errors.Is(err, agent.ErrNothingToFork):
		return asInput(err)
	}
	if hint := goneHint(err); hint != "" {
		return asInput(fmt.Errorf("%w (%s)", err, hint))
	}
	// The log refused the request itself (a bad name or offset, a missing
	// stream, a missing or read-only token): retrying will not help.
	if code := client.StatusCode(err); code >= 400 && code < 500 {
		return asInput(err)
	}
	return err
}

func init() {
	var (
		name            string
		seed            uint64
		until           int
		delay, retryFor time.Duration
		verbose, gate   bool
		wf              *worldFlags
		lf              *logFlags
	)
	run := &cobra.Command{
		Use:   "run --session NAME --seed N [--world W] [world flags]",
		Short: "Run one agent session on the log; resume it if it was interrupted",
		Long: `run plays one session of a world (--world, default counter; forklab worlds
lists them) with its scripted fake model and appends every turn to the
session's stream: the model's turn (with or without a tool call), the tool's
result with what the agent sees, the final outcome. The session name is the
producer id; each run is one incarnation with the next epoch. A run on an
interrupted session folds its events and continues exactly where it stopped;
on a finished session it says so and exits 0.

--seed, the world and its parameters describe the session. To start one,
--seed is required. To resume one, give the same flags (a session that holds
another task is refused), or give --session alone: the session's own
session_start event then decides the world, its parameters, the model and
the seed.

Exit status: 0 finished (now or before), 1 the log stayed unreachable,
2 bad flags, or the stream holds events this session cannot fold (nothing
appended), 3 fenced: a newer incarnation owns the session.`,
		Example: `  forklab log serve &
  forklab agent run --session demo --seed 5 --delay 200ms   # kill it with ^C …
  forklab agent run --session demo --seed 5                 # … and resume it
  forklab agent run --session demo                          # or resume it as it was started
  forklab agent run --session t1 --seed 3 --world counter --p-stall 0.2 --temperature 0.1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return usageErr("--session is required")
			}
			fl := cmd.Flags()
			logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, "forklab agent: "+f+"\n", a...) }
			w := &agent.Worker{Log: lf.client(), Stream: name, Until: until, Delay: delay, RetryFor: retryFor, FailFast: failFast(cmd), Logf: logf}
			if fl.Changed("seed") {
				spec := sweep.DefaultSpec()
				if err := wf.apply(&spec); err != nil {
					return asInput(err)
				}
				// The rules forklab sweep and checkpoint apply: --until is
				// a fork step, at most the steps a run of the world takes.
				spec.Seeds = sweep.Range{Start: seed, End: seed + 1}
				if until > 0 {
					spec.ForkAt = []int{until}
				}
				if _, err := spec.Resolve(); err != nil {
					always := func(string) bool { return true }
					return specErr(err, always, map[string]string{"seeds": "seed", "fork_at": "until"})
				}
				start, err := session.NewStart(spec.World, spec.Params, spec.Model, seed)
				if err != nil {
					return asInput(err)
				}
				w.Start = &start
			} else {
				if set := wf.changed(); len(set) > 0 {
					return usageErr("%s describe the session's task and need --seed N (without --seed, agent run resumes the session as it was started)", strings.Join(set, ", "))
				}
				logf("no --seed: resuming session %s as its session_start describes it", name)
			}
			if gate && !verbose {
				return usageErr("--gate needs -v: it waits after each event -v prints")
			}
			if verbose {
				stdin := bufio.NewReader(os.Stdin)
				w.OnAppend = func(e session.Event, tail string) {
					fmt.Fprintf(os.Stderr, "%s  %s\n", tail, e.Encode())
					if gate {
						stdin.ReadString('\n') // EOF: nobody holds the gate any more; go on
					}
				}
			}
			res, err := w.Run(cmd.Context())
			if errors.Is(err, agent.ErrFinished) {
				logf("session %s already finished; nothing to do", name)
			}
			if err == nil || errors.Is(err, agent.ErrFinished) {
				printOutcome(name, res)
			}
			if errors.Is(err, agent.ErrNoSession) {
				return usageErr("session %s does not exist; start it with --seed N", name)
			}
			return workerExit(err)
		},
	}
	f := run.Flags()
	f.StringVar(&name, "session", "", "session name: the stream and the producer id")
	uint64Flag(f, &seed, "seed", 0, 0, sweep.MaxSeed-1, "task seed (required to start a session)")
	intFlag(f, &until, "until", 0, 0, sweep.MaxForkStep, "stop after this many steps (a prefix to fork from); 0 runs to the end")
	durationFlag(f, &delay, "delay", 0, 0, time.Hour, "pause before each append (makes sessions slow enough to interrupt)")
	durationFlag(f, &retryFor, "retry-for", 2*time.Minute, 0, 24*time.Hour, "how long to retry while the log is unreachable")
	f.BoolVarP(&verbose, "verbose", "v", false, "print each appended event with the stream's tail after it")
	f.BoolVar(&gate, "gate", false, "with -v: after each event, wait for a line on stdin before going on (forklab chaos uses it to land its faults)")
	wf = addWorldFlags(f)
	lf = addLogFlags(run)
	agentCmd.AddCommand(run)
	rootCmd.AddCommand(agentCmd)
}

// printOutcome prints a session's end on stdout.
func printOutcome(name string, res agent.Result) {
	s := res.Session
	if s.Outcome == nil {
		steps := 0
		if s.Started {
			steps = s.Play.Steps()
		}
		fmt.Printf("session %s paused at step %d after %s, epoch %d; tail %s\n", name, steps, eventsText(s), res.Epoch, res.Tail)
		return
	}
	fmt.Printf("session %s: %s (%s; final %s) · %s, epoch %d · tail %s\n",
		name, verdictOf(*s.Outcome.Success), plural.Count(*s.Outcome.Steps, "step"), s.Outcome.Obs, eventsText(s), res.Epoch, res.Tail)
}

// eventsText counts a session's events as forklab log read lists them,
// incarnation events included: "19 events (1 incarnation)".
func eventsText(s session.Session) string {
	return fmt.Sprintf("%s (%s)", plural.Count(s.Events+s.Incarnations, "event"), plural.Count(s.Incarnations, "incarnation"))
}
