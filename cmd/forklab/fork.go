package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/agentproc"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/sessions/agent"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/stream/client"
	"github.com/spf13/cobra"
)

// forkOutcome is one line of forklab fork's JSON output.
type forkOutcome struct {
	World   string   `json:"world"`
	Arm     fork.Arm `json:"arm"`
	Replica int      `json:"replica"`
	lab.Outcome
	// JSONCost is the branch's cost in the world's declared cost fields,
	// named as everywhere else (steps, tokens, usd, seconds); it hides
	// the embedded Outcome.Cost from --json.
	JSONCost *agentproc.Cost `json:"cost"`
}

func init() {
	var (
		file, armName, policyFile string
		stream, offset, child     string
		agentLine                 string
		agentEnv                  []string
		timeout                   time.Duration
		replica                   int
		asJSON                    bool
		retryFor                  time.Duration
		lf                        *logFlags
	)
	cmd := &cobra.Command{
		Use:   "fork (--checkpoint FILE | --stream NAME --offset O) --arm ARM [--agent CMD]",
		Short: "Finish one branch of a checkpoint — from a file, or from a session on the log — and print the outcome",
		Long: `fork finishes the branch of one arm from a checkpoint.

With --checkpoint it decodes a built-in world's checkpoint JSON (the
checkpoints table's checkpoint column, or forklab checkpoint's output) in
this process; an external agent's takes --agent (below). FILE may
hold one checkpoint or many, one per line; "-" reads stdin. One outcome is
printed per checkpoint, in input order.

With --stream it forks a session on the log at --offset into a new child
stream (the protocol's fork; default name NAME/fork-ARM-rREPLICA-OFFSET):
the checkpoint is the fold of the session's events before the offset, and
the branch's events go to the child stream. The session may play any world:
its session_start event names it. With --agent CMD the session is an
external agent's (docs/agent-protocol.md): the child stream holds the events
before the offset, the agent's fold turns them into the checkpoint, and the
agent finishes the branch. An offset is one the log returned: the
tail agent run -v prints after each event, the next_offset log read prints,
or each event's offset from forklab log read --offsets; now is the stream's
tail. A fork at an offset inside a turn (after a model turn, before its tool
result) completes the turn first. A fork point with no run to fork — -1,
the offsets before the first turn, one after the run's outcome — is refused
before anything is written, and a child stream whose branch fails is
deleted again.

With --checkpoint FILE --agent CMD the checkpoints are an external agent's,
from its sweep: each line is a row of the sweep's checkpoints table, a JSON
object with seed, fork_step and checkpoint (over and other columns may be
there), as forklab sql DIR "SELECT seed, fork_step, over, checkpoint FROM
checkpoints" --format ndjson prints it; a checkpoint given as a JSON string
is the checkpoint's JSON text, as the column holds it. A line fork --agent
--json printed is one too. The agent's branch finishes each, with the noise
key of its seed, fork step, arm and replica, as in the sweep: an agent that
keeps the protocol's rules gives the sweep's outcome. No parameters are
sent: branch takes none, the checkpoint carries what it needs. Every line
is read before the agent starts; a line that is not such a row, or a
checkpoint the agent refuses (-32001 or -32602), exits 2 and prints
nothing. --arm policy is refused there: its rule reads the checkpoint's
features, which the fold of a session on the log reports.

With --agent, --agent-env KEY=VALUE (repeatable) adds to the agent's
environment and --timeout bounds each fold or branch request (default 60s;
initialize gets at least 30s), as in sweep --agent; a request that misses
it is retried twice on a new process, then fails (exit 1).

--json prints one JSON object per outcome: world, arm, replica, seed,
fork_step, intervened, success, cost (the branch's own, from the fork to its
end), final (what the agent saw at the end) and, with --stream, the child
stream, its events, epoch and tail. With --agent the object is the external
agent's: world, arm, replica, seed, fork_step, checkpoint (what its fold
returned, or the line's), intervened, success, cost (its declared cost
fields) and details (what its branch reported, if anything).

--arm policy needs --policy FILE, a guard rule forklab policy wrote: the
branch gets the on intervention where the rule fires on the checkpoint's
features, none elsewhere.`,
		Example: `  forklab checkpoint --seed 0 --fork-at 3 > cp.json
  forklab fork --checkpoint cp.json --arm on
  forklab log read --stream demo --offsets                 # each event's offset
  forklab fork --stream demo --offset OFFSET --arm on --json
  forklab fork --stream py --offset OFFSET --arm on --agent 'python3 examples/agents/seed_core.py'
  forklab sql runs "SELECT seed, fork_step, over, checkpoint FROM checkpoints" --format ndjson > cps.jsonl
  forklab fork --checkpoint cps.jsonl --arm on --agent 'python3 examples/agents/seed_core.py' --timeout 2m --agent-env MODEL=small`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (file == "") == (stream == "") {
				return usageErr("give either --checkpoint FILE or --stream NAME --offset O")
			}
			arm := fork.Arm(armName)
			if arm != fork.Off && arm != fork.On && arm != fork.Placebo && arm != fork.AA && arm != fork.Policy {
				return usageErr("--arm %q is unknown (known: off, on, placebo, aa, policy)", armName)
			}
			if agentLine != "" && file != "" && arm == fork.Policy {
				return usageErr("--arm policy with --checkpoint and --agent: the guard rule reads the checkpoint's features, which forklab does not read from a checkpoint line; fork the agent's session from the log (--stream NAME --offset O), whose fold reports them, or sweep with --arms policy")
			}
			var rule *policy.Rule
			if policyFile != "" && arm != fork.Policy {
				return usageErr("--policy applies only with --arm policy (--arm %s plays no guard rule)", arm)
			}
			if arm == fork.Policy {
				if policyFile == "" {
					return usageErr("--arm policy needs --policy FILE")
				}
				r, err := policy.ReadFile(policyFile)
				if err != nil {
					return asInput(err)
				}
				rule = &r
			}
			if stream != "" {
				// -1 (the beginning) has no run to fork; now is the tail.
				switch offset {
				case "":
				case client.Start:
					return asInput(agent.NoTurnYet(stream, "-1 (the beginning)"))
				case agent.Now:
					w := agent.Worker{Log: lf.client(), RetryFor: retryFor, Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "forklab fork: "+f+"\n", a...) }}
					tail, err := w.Tail(cmd.Context(), stream)
					if err != nil {
						return workerExit(err)
					}
					offset = tail
				}
			}
			if agentLine != "" {
				env, err := envMap(agentEnv)
				if err != nil {
					return err
				}
				// One process: a fork asks one branch at a time.
				spec := &sweep.AgentSpec{Command: agentLine, Environment: env, Timeout: sweep.Duration(timeout), Parallel: 1}
				if file != "" {
					// Rows of an agent sweep's checkpoints table: the
					// agent's branch finishes each.
					return forkAgentCheckpoints(cmd.Context(), spec, file, arm, replica, asJSON)
				}
				// An external agent's session on the log: its fold gives
				// the checkpoint.
				if offset == "" {
					return usageErr("--agent forks an agent's session from the log: give --stream NAME --offset O")
				}
				if child == "" {
					child = fmt.Sprintf("%s/fork-%s-r%d-%s", stream, arm, replica, offset)
				}
				return forkAgent(cmd.Context(), spec, lf.client(), stream, offset, child, arm, replica, rule, asJSON)
			}
			if stream != "" {
				if offset == "" {
					return usageErr("--stream needs --offset (an offset the log returned, e.g. by forklab log read)")
				}
				if child == "" {
					child = fmt.Sprintf("%s/fork-%s-r%d-%s", stream, arm, replica, offset)
				}
				w := agent.Worker{Log: lf.client(), RetryFor: retryFor, Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "forklab fork: "+f+"\n", a...) }}
				res, err := agent.Fork(cmd.Context(), w, stream, offset, child, 0, arm, replica, rule)
				if err == nil || errors.Is(err, agent.ErrFinished) {
					if asJSON {
						if jerr := json.NewEncoder(os.Stdout).Encode(streamOutcome(child, res)); jerr != nil {
							return jerr
						}
					} else {
						printOutcome(child, res)
					}
				}
				return workerExit(err)
			}
			var in io.Reader = os.Stdin
			if file != "-" {
				f, err := os.Open(file)
				if err != nil {
					return asInput(fmt.Errorf("read checkpoint: %w", err))
				}
				defer f.Close()
				in = f
			}
			// Decode and fork everything first: a bad line anywhere prints
			// nothing.
			var outs []forkOutcome
			insts := map[string]lab.Instance{}
			defer func() {
				for _, i := range insts {
					i.Close()
				}
			}()
			sc := bufio.NewScanner(in)
			sc.Buffer(make([]byte, 1<<20), 64<<20)
			for line := 1; sc.Scan(); line++ {
				b := bytes.TrimSpace(sc.Bytes())
				if len(b) == 0 {
					continue
				}
				o, err := forkOne(b, arm, replica, rule, insts)
				if err != nil {
					return asInput(fmt.Errorf("read checkpoint %s line %d: %w", file, line, err))
				}
				outs = append(outs, o)
			}
			if err := sc.Err(); err != nil {
				return asInput(fmt.Errorf("read checkpoint %s: %w", file, err))
			}
			if len(outs) == 0 {
				return asInput(fmt.Errorf("read checkpoint %s: no checkpoint in the file", file))
			}
			w := bufio.NewWriter(os.Stdout)
			defer w.Flush()
			enc := json.NewEncoder(w)
			for _, o := range outs {
				if asJSON {
					if err := enc.Encode(o); err != nil {
						return err
					}
					continue
				}
				iv := ""
				if o.Intervened {
					iv = "intervened; "
				}
				if o.Score != nil {
					iv += fmt.Sprintf("score %g; ", *o.Score)
				}
				fmt.Fprintf(w, "seed %d · fork step %d · arm %s · replica %d: %s (%s%d steps after the fork; final observation %s)\n",
					o.Seed, o.ForkStep, o.Arm, o.Replica, verdictOf(o.Success), iv, o.Cost.Steps, o.Final)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "checkpoint", "", "checkpoint file (one JSON object per line; - for stdin)")
	f.StringVar(&armName, "arm", "", "arm to finish: off, on, placebo, aa or policy")
	intFlag(f, &replica, "replica", 0, 0, sweep.MaxReplicas-1, "replica number (selects the model's noise stream)")
	f.StringVar(&policyFile, "policy", "", "guard rule for --arm policy")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per outcome")
	f.StringVar(&stream, "stream", "", "session stream to fork on the log")
	f.StringVar(&offset, "offset", "", "offset in --stream to fork at: one the log returned after step 1 or later, or now (the tail)")
	durationFlag(f, &retryFor, "retry-for", 2*time.Minute, 0, 24*time.Hour, "with --stream: how long to retry while the log is unreachable")
	f.StringVar(&child, "child", "", "name of the child stream (default NAME/fork-ARM-rREPLICA-OFFSET)")
	f.StringVar(&agentLine, "agent", "", "fork an external agent's checkpoints: the command that starts the agent (with --stream its fold gives the checkpoint; with --checkpoint each line is a row of its sweep's checkpoints table: seed, fork_step, checkpoint)")
	f.StringArrayVar(&agentEnv, "agent-env", nil, "with --agent: KEY=VALUE added to the agent's environment (repeatable)")
	durationFlag(f, &timeout, "timeout", agentproc.DefaultTimeout, time.Millisecond, sweep.MaxAgentTimeout, "with --agent: time the agent may take per fold or branch before it is killed and restarted (initialize gets at least 30s)")
	lf = addLogFlags(cmd)
	for _, name := range []string{"offset", "retry-for", "child", "log", "token"} {
		markNeeds(f, name, "stream")
	}
	markNeeds(f, "agent", "stream", "checkpoint")
	for _, name := range []string{"agent-env", "timeout"} {
		markNeeds(f, name, "agent")
	}
	cmd.MarkFlagRequired("arm")
	rootCmd.AddCommand(cmd)
}

// streamForkOutcome is forklab fork --stream --json's output: the branch's
// outcome as forklab fork --checkpoint --json prints it, with the child
// stream, its events (every one forklab log read lists, incarnation events
// included) and tail.
type streamForkOutcome struct {
	Stream string `json:"stream"`
	forkOutcome
	Events int    `json:"events"`
	Epoch  int64  `json:"epoch"`
	Tail   string `json:"tail"`
}

// streamOutcome describes a finished branch session.
func streamOutcome(child string, res agent.Result) streamForkOutcome {
	s := res.Session
	o := streamForkOutcome{Stream: child, Events: s.Events + s.Incarnations, Epoch: res.Epoch, Tail: res.Tail,
		forkOutcome: forkOutcome{World: s.Decl.Name}}
	if b := s.Branch; b != nil {
		o.Arm, o.Replica, o.ForkStep = b.Arm, b.Replica, b.ForkStep
		o.Intervened = b.Recovery != ""
		o.Cost = s.Play.Cost().Sub(b.ForkCost)
	}
	o.JSONCost = agentproc.CostOf(s.Decl.Cost, o.Cost)
	o.Seed = s.Seed
	if s.Outcome != nil {
		o.Success, o.Final = *s.Outcome.Success, s.Outcome.Obs
	}
	return o
}

// forkOne decodes a checkpoint, picks its world from it, and finishes the
// branch of arm and replica. insts caches opened worlds by name.
func forkOne(b []byte, arm fork.Arm, replica int, rule *policy.Rule, insts map[string]lab.Instance) (forkOutcome, error) {
	name, _, err := fork.PeekWorld(b)
	if err != nil {
		var keys map[string]json.RawMessage
		if json.Unmarshal(b, &keys) == nil && keys["world"] == nil {
			// An external agent's checkpoint names no world of forklab's.
			return forkOutcome{}, fmt.Errorf("%w (a built-in world's checkpoint names its world; an external agent's, from its sweep's checkpoints table, is branched by the agent: give --agent CMD, with lines of seed, fork_step and checkpoint)", err)
		}
		return forkOutcome{}, err
	}
	inst, ok := insts[name]
	if !ok {
		def, err := lab.Lookup(name)
		if err != nil {
			return forkOutcome{}, fmt.Errorf("%w: %v", fork.ErrCheckpoint, err)
		}
		d := def.Declaration()
		params, err := d.Resolve(nil)
		if err != nil {
			return forkOutcome{}, err
		}
		if inst, err = def.Open(params, fork.Model{}); err != nil {
			return forkOutcome{}, err
		}
		insts[name] = inst
	}
	var fires func([]world.Value) bool
	if rule != nil {
		if fires, err = rule.Compile(inst.Declaration()); err != nil {
			return forkOutcome{}, fmt.Errorf("--policy: %w", err)
		}
	}
	o, err := inst.Branch(b, arm, replica, fires)
	if err != nil {
		return forkOutcome{}, err
	}
	return forkOutcome{World: name, Arm: arm, Replica: replica, Outcome: o,
		JSONCost: agentproc.CostOf(inst.Declaration().Cost, o.Cost)}, nil
}

// verdictOf is how the text of fork, fork --agent and agent run names a
// branch's or run's outcome: "success" or "failure".
func verdictOf(success bool) string {
	if success {
		return "success"
	}
	return "failure"
}
