// Command forklab counts what a recovery step does to an agent — rescues,
// harms, net — by forking checkpointed runs into "recovery off" and
// "recovery on", and serves the session log those agents write to.
//
// Each subcommand lives in its own file and registers itself with the root
// command in an init function; this file holds only the root and the mapping
// from errors to exit statuses (docs/exit-status.md): 0 success, 1 a failure
// of the run itself, 2 bad input (unknown flags, malformed values, unusable
// paths), 3 an agent worker refused because a newer incarnation owns its
// session, 4 a results directory that does not match its manifest, 5 a
// sweep that finished with more error pairs than --max-error-rate (its
// numbers are incomplete), 6 a sweep stopped at --max-cost (resumable),
// 130 interrupted.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/pipeline/lab/agentproc"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/spf13/cobra"
)

// version is the forklab release recorded in every manifest.
const version = "0.1.0"

var rootCmd = &cobra.Command{
	Use:           "forklab",
	Short:         "Fork checkpointed agent runs and count rescues and harms; serve the session log",
	Version:       version,
	SilenceUsage:  true,
	SilenceErrors: true,
}

func init() {
	rootCmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr("%v (see '%s --help')%s", err, c.CommandPath(), paramHint(c, err))
	})
}

// paramHint is what an unknown flag of a command that takes --param may
// have meant: a parameter of the world, which has no flag of its own when
// the world is an external agent's (--horizon 4 for an --agent world's
// horizon): "; a parameter of an --agent world has no flag of its own: set
// it with --param horizon=VALUE". Only the commands that play an agent
// (sweep, agent check) say it; "" for other errors and commands.
func paramHint(c *cobra.Command, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	agent := c.Flags().Lookup("agent") != nil || c.CommandPath() == "forklab agent check"
	if !ok || !agent || c.Flags().Lookup("param") == nil || !paramFlagName.MatchString(name) {
		return ""
	}
	return fmt.Sprintf("; a parameter of an --agent world has no flag of its own: set it with --param %s=VALUE", strings.ReplaceAll(name, "-", "_"))
}

// paramFlagName matches a flag name that could be a declared parameter's
// (snake_case written with dashes or underscores).
var paramFlagName = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// inputError marks an error caused by the user's input; it exits with status 2.
type inputError struct{ err error }

func (e inputError) Error() string { return e.err.Error() }
func (e inputError) Unwrap() error { return e.err }

// exitError carries a specific exit status (for instance 3 for a fenced
// agent worker).
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// usageErr builds an inputError from a format string.
func usageErr(format string, args ...any) error {
	return inputError{fmt.Errorf(format, args...)}
}

// asInput marks err as caused by bad input, keeping nil as nil.
func asInput(err error) error {
	if err == nil {
		return nil
	}
	return inputError{err}
}

// ownSignalsKey annotates a command that handles SIGINT and SIGTERM itself
// (a sweep keeps its finished work for --resume, a server shuts down
// cleanly, a worker drains): main leaves the signals to it.
const ownSignalsKey = "forklab.own-signals"

// ownSignals marks cmd as handling SIGINT and SIGTERM itself.
func ownSignals(cmd *cobra.Command) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[ownSignalsKey] = "true"
}

// signalGrace is how long a command has, after SIGINT or SIGTERM cancelled
// its context, to stop by itself; then (or at a second signal) main removes
// every temporary file still in flight and exits 130.
const signalGrace = 5 * time.Second

// onSignals cancels the returned context at the first SIGINT or SIGTERM,
// for every command but those that handle signals themselves (ownSignals):
// the command stops, its deferred Aborts remove what it was writing, and
// main exits 130. A command that does not stop within signalGrace, or a
// second signal, ends the process at once — after atomicfile.Cleanup has
// removed every temporary file and folder in flight, so that nothing
// half-written stays (docs/exit-status.md).
func onSignals(args []string) (context.Context, *atomic.Bool) {
	var interrupted atomic.Bool
	if c, _, err := rootCmd.Find(args); err == nil && c.Annotations[ownSignalsKey] != "" {
		return context.Background(), &interrupted
	}
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		interrupted.Store(true)
		cancel()
		select {
		case <-sigs:
		case <-time.After(signalGrace):
		}
		atomicfile.Cleanup()
		fmt.Fprintln(os.Stderr, "forklab: interrupted; nothing half-written was left")
		os.Exit(130)
	}()
	return ctx, &interrupted
}

func main() {
	ignoreFileSizeSignal()
	// A crash inside DuckDB is a failure (exit 1) in one line; what was
	// being written goes first.
	duck.OnCrash(func(string) { atomicfile.Cleanup() })
	refuseRepeats(rootCmd)
	guardOutputs(rootCmd)
	ctx, interrupted := onSignals(os.Args[1:])
	err := rootCmd.ExecuteContext(ctx)
	if err == nil {
		return
	}
	var ex exitError
	if interrupted.Load() && !errors.As(err, &ex) {
		atomicfile.Cleanup()
		fmt.Fprintln(os.Stderr, "forklab: interrupted; nothing half-written was left")
		os.Exit(130)
	}
	var in inputError
	if isCobraUsage(err) {
		// cobra puts its suggestion on lines of its own; keep one line.
		msg := strings.TrimSpace(err.Error())
		msg = strings.Replace(msg, "\n\nDid you mean this?\n\t", "; did you mean ", 1)
		fmt.Fprintln(os.Stderr, "forklab:", strings.ReplaceAll(msg, "\n\t", ", ")+suffixIf(strings.Contains(msg, "did you mean"), "?"))
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "forklab:", err)
	switch {
	case errors.As(err, &ex):
		os.Exit(ex.code)
	case errors.Is(err, sweep.ErrMismatch):
		os.Exit(4)
	case errors.As(err, &in), errors.Is(err, agentproc.ErrInconsistent):
		// An agent whose processes declare different worlds is bad input.
		os.Exit(2)
	case errors.Is(err, atomicfile.ErrNotRegular), errors.Is(err, atomicfile.ErrExists):
		// An output path that is a symlink, a device or a directory, or
		// a file that exists without --overwrite: refused, nothing done.
		os.Exit(2)
	}
	os.Exit(1)
}

func suffixIf(cond bool, s string) string {
	if cond {
		return s
	}
	return ""
}

// isCobraUsage reports errors cobra raises itself for unknown commands or
// wrong argument counts, which are usage errors.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "unknown flag", "unknown shorthand", "required flag", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
