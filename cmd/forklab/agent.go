package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/sessions/agent"
	"github.com/forklab/forklab/pipeline/sessions/session"
	"github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/forklab/forklab/stream/client"
	"github.com/spf13/cobra"
)

// agentCmd groups the agent-session subcommands.
var agentCmd = &cobra.Command{
	Use:   "agent",
	Short: "Agent sessions whose state lives in the session log",
}

// logFlags are the flags that reach the session log.
type logFlags struct{ url, token string }

func addLogFlags(cmd *cobra.Command) *logFlags {
	f := &logFlags{}
	cmd.Flags().StringVar(&f.url, "log", "http://127.0.0.1:4437", "session log URL (forklab log serve)")
	cmd.Flags().StringVar(&f.token, "token", os.Getenv("FORKLAB_TOKEN"), "bearer token for the log (default $FORKLAB_TOKEN)")
	return f
}

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
	case errors.Is(err, agent.ErrForeign), errors.Is(err, session.ErrFold):
		return asInput(err)
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
		verbose         bool
		wf              *worldFlags
		lf              *logFlags
	)
	run := &cobra.Command{
		Use:   "run --session NAME --seed N",
		Short: "Run one agent session on the log; resume it if it was interrupted",
		Long: `run plays one session of the counter world with its scripted fake model and
appends every turn to the session's stream: the model's turn (with or without
a tool call), the tool's result, the final outcome. The session name is the
producer id; each run is one incarnation with the next epoch. A run on an
interrupted session folds its events and continues exactly where it stopped;
on a finished session it says so and exits 0.

Exit status: 0 finished (now or before), 1 the log stayed unreachable,
2 the stream holds events this session cannot fold (nothing appended),
3 fenced: a newer incarnation owns the session.`,
		Example: `  forklab log serve &
  forklab agent run --session demo --seed 5 --delay 200ms   # kill it with ^C …
  forklab agent run --session demo --seed 5                 # … and resume it`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return usageErr("--session is required")
			}
			if until < 0 || delay < 0 || retryFor < 0 {
				return usageErr("--until, --delay and --retry-for must not be negative")
			}
			if seed > sweep.MaxSeed {
				return usageErr("--seed must be below 2^63")
			}
			spec := sweep.DefaultSpec()
			if err := wf.apply(&spec); err != nil {
				return asInput(err)
			}
			if _, err := counter.New(spec.Params); err != nil {
				return asInput(err)
			}
			if err := spec.Model.Validate(); err != nil {
				return asInput(err)
			}
			start := session.Start(spec.Params, spec.Model, seed)
			w := &agent.Worker{Log: lf.client(), Stream: name, Start: &start, Until: until, Delay: delay, RetryFor: retryFor,
				Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "forklab agent: "+f+"\n", a...) }}
			if verbose {
				w.OnAppend = func(e session.Event, tail string) { fmt.Fprintf(os.Stderr, "%s  %s\n", tail, e.Encode()) }
			}
			res, err := w.Run(cmd.Context())
			if errors.Is(err, agent.ErrFinished) {
				fmt.Fprintf(os.Stderr, "forklab agent: session %s already finished; nothing to do\n", name)
			}
			if err == nil || errors.Is(err, agent.ErrFinished) {
				printOutcome(name, res)
			}
			return workerExit(err)
		},
	}
	f := run.Flags()
	f.StringVar(&name, "session", "", "session name: the stream and the producer id")
	f.Uint64Var(&seed, "seed", 0, "task seed")
	f.IntVar(&until, "until", 0, "stop after this many steps (a prefix to fork from); 0 runs to the end")
	f.DurationVar(&delay, "delay", 0, "pause before each append (makes sessions slow enough to interrupt)")
	f.DurationVar(&retryFor, "retry-for", 2*time.Minute, "how long to retry while the log is unreachable")
	f.BoolVarP(&verbose, "verbose", "v", false, "print each appended event with the stream's tail after it")
	wf = addWorldFlags(f)
	lf = addLogFlags(run)
	agentCmd.AddCommand(run)
	rootCmd.AddCommand(agentCmd)
}

// printOutcome prints a session's end on stdout.
func printOutcome(name string, res agent.Result) {
	s := res.Session
	if s.Outcome == nil {
		fmt.Printf("session %s paused at step %d after %d events (epoch %d); tail %s\n", name, s.State.Steps, s.Events, res.Epoch, res.Tail)
		return
	}
	verdict := "failure"
	if *s.Outcome.Success {
		verdict = "success"
	}
	fmt.Printf("session %s: %s (declared %t, value %d, %d steps) · %d events, epoch %d · tail %s\n",
		name, verdict, *s.Outcome.Declared, *s.Outcome.Value, *s.Outcome.Steps, s.Events, res.Epoch, res.Tail)
}
