package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/forklab/forklab/internal/jsondup"
	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/agentproc"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/stream/client"
)

// forkAgent forks an external agent's session on the log at offset and
// prints the branch's outcome (forklab fork --stream --agent). spec is the
// agent: its command, --agent-env and --timeout.
func forkAgent(ctx context.Context, spec *sweep.AgentSpec, log *client.Client, stream, offset, child string, arm fork.Arm, replica int, rule *policy.Rule, asJSON bool) error {
	def, err := openAgent(ctx, spec, false)
	if err != nil {
		return asInput(err)
	}
	defer def.Close()
	d := def.Declaration()
	var fires func([]world.Value) bool
	if rule != nil {
		if fires, err = rule.Compile(d); err != nil {
			return asInput(fmt.Errorf("--policy: %w", err))
		}
	}
	_, herr := log.Head(ctx, child)
	o, f, err := def.ForkFromLog(ctx, log, stream, offset, child, arm, replica, fires)
	if err != nil && client.IsNotFound(herr) {
		// The child this fork created holds no branch: leave none behind.
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if derr := log.Delete(dctx, child); derr != nil && !client.IsNotFound(derr) {
			fmt.Fprintf(os.Stderr, "forklab fork: could not delete the child stream %s: %v\n", child, derr)
		}
	}
	if err != nil {
		if hint := goneHint(err); hint != "" {
			return asInput(fmt.Errorf("%w (%s)", err, hint))
		}
		// The user's input: an offset or stream the log refuses, one with
		// nothing to fork, events the agent's own fold refuses (-32602),
		// an agent that cannot fold.
		if code := client.StatusCode(err); code >= 400 && code < 500 || errors.Is(err, agentproc.ErrForkStep) ||
			errors.Is(err, agentproc.ErrNoFold) || agentproc.Refused(err) {
			return asInput(err)
		}
		return err
	}
	res := agentForkOutcome{World: d.Name, Arm: arm, Replica: replica, Seed: f.Seed, ForkStep: f.ForkStep, Checkpoint: f.Checkpoint,
		Intervened: o.Intervened, Success: o.Success, Cost: agentproc.CostOf(d.Cost, o.Cost), Details: o.Details, cost: o.Cost}
	return printAgentOutcomes(d, []agentForkOutcome{res}, fmt.Sprintf(" (folded from %s at %s)", stream, offset), asJSON)
}

// agentForkOutcome is one branch of an external agent's checkpoint as
// forklab fork --agent prints it with --json.
type agentForkOutcome struct {
	World      string          `json:"world"`
	Arm        fork.Arm        `json:"arm"`
	Replica    int             `json:"replica"`
	Seed       uint64          `json:"seed"`
	ForkStep   int             `json:"fork_step"`
	Checkpoint json.RawMessage `json:"checkpoint"`
	Intervened bool            `json:"intervened"`
	Success    bool            `json:"success"`
	Cost       *agentproc.Cost `json:"cost"`
	Details    json.RawMessage `json:"details,omitempty"`
	// cost is Cost as the lab holds it, for the text.
	cost world.Cost
}

// printAgentOutcomes prints outcomes, one line or JSON object each; from
// says where the checkpoint came from in the text ("" for none).
func printAgentOutcomes(d world.Declaration, outs []agentForkOutcome, from string, asJSON bool) error {
	w := bufio.NewWriter(os.Stdout)
	// The agent's checkpoint and details as it wrote them: no HTML
	// escaping of its <, > and &.
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, o := range outs {
		if asJSON {
			if err := enc.Encode(o); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(w, "%s seed %d · fork step %d%s · arm %s · replica %d: %s (intervened %t, cost %s)\n",
			o.World, o.Seed, o.ForkStep, from, o.Arm, o.Replica, verdictOf(o.Success), o.Intervened, costText(d, o.cost))
	}
	return w.Flush()
}

// agentCheckpoint is one line of forklab fork --checkpoint FILE --agent: a
// row of an agent sweep's checkpoints table.
type agentCheckpoint struct {
	line       int
	world      string
	seed       uint64
	forkStep   int
	over       bool
	checkpoint json.RawMessage
}

// agentRowHelp says what a line of forklab fork --checkpoint --agent is.
const agentRowHelp = `with --agent each line is a JSON object with seed, fork_step and checkpoint (over and other columns are allowed; a recorded run without a seed gives its run_id instead), a row of the agent sweep's checkpoints table as forklab sql DIR "SELECT seed, run_id, fork_step, over, checkpoint FROM checkpoints" --format ndjson prints it (or a line forklab fork --agent --json printed): branch is sent the seed (a recorded run's run key) and fork step, and the noise key is drawn from them`

// parseAgentCheckpoint reads one line of forklab fork --checkpoint --agent.
// The checkpoint is the row's checkpoint: a JSON string holds its JSON
// text, as the checkpoints table's column does; any other value is the
// checkpoint itself.
func parseAgentCheckpoint(b []byte) (agentCheckpoint, error) {
	var c agentCheckpoint
	if !json.Valid(b) {
		_, _, err := fork.PeekWorld(b) // says where the JSON breaks
		return c, err
	}
	if err := jsondup.Check(b); err != nil {
		return c, fmt.Errorf("%w: %v", fork.ErrCheckpoint, err)
	}
	var row map[string]json.RawMessage
	if err := json.Unmarshal(b, &row); err != nil {
		return c, fmt.Errorf("%w: not a JSON object: %s", fork.ErrCheckpoint, agentRowHelp)
	}
	raw, ok := row["checkpoint"]
	if !ok {
		var w string
		if json.Unmarshal(row["world"], &w) == nil && w != "" {
			return c, fmt.Errorf("%w: this is a checkpoint of the built-in world %s (it names its world): fork it without --agent", fork.ErrCheckpoint, w)
		}
		return c, fmt.Errorf("%w: no checkpoint field: %s", fork.ErrCheckpoint, agentRowHelp)
	}
	field := func(name, want string, v any, required bool) error {
		r, ok := row[name]
		if !ok || string(r) == "null" {
			if required {
				return fmt.Errorf("%w: no %s field: %s", fork.ErrCheckpoint, name, agentRowHelp)
			}
			return nil
		}
		if err := json.Unmarshal(r, v); err != nil {
			return fmt.Errorf("%w: %s is %s, want %s", fork.ErrCheckpoint, name, r, want)
		}
		return nil
	}
	var runID string
	if err := field("run_id", "text", &runID, false); err != nil {
		return c, err
	}
	if err := field("seed", "an integer in [0, 2^63-2]", &c.seed, runID == ""); err != nil {
		return c, err
	}
	if s, ok := row["seed"]; (!ok || string(s) == "null") && runID != "" {
		// A recorded run without a seed: its branches were keyed by its
		// run key, as the sweep keyed them.
		c.seed = lab.RunKey(runID)
	}
	if c.seed >= sweep.MaxSeed {
		return c, fmt.Errorf("%w: seed is %d, want an integer in [0, 2^63-2]", fork.ErrCheckpoint, c.seed)
	}
	if err := field("fork_step", "an integer, 1 or more", &c.forkStep, true); err != nil {
		return c, err
	}
	if c.forkStep < 1 {
		return c, fmt.Errorf("%w: fork_step %d is below 1", fork.ErrCheckpoint, c.forkStep)
	}
	if err := field("over", "true or false", &c.over, false); err != nil {
		return c, err
	}
	if err := field("world", "a world's name", &c.world, false); err != nil {
		return c, err
	}
	if string(raw) == "null" {
		return c, fmt.Errorf("%w: checkpoint is null (an error row of the checkpoints table, whose seed failed: select the rows WHERE status = 'ok')", fork.ErrCheckpoint)
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if !json.Valid([]byte(text)) {
			return c, fmt.Errorf("%w: checkpoint is a string that holds no JSON: a string is read as the checkpoint's JSON text, as the checkpoints table's column holds it", fork.ErrCheckpoint)
		}
		raw = json.RawMessage(text)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return c, fmt.Errorf("%w: checkpoint: %v", fork.ErrCheckpoint, err)
	}
	c.checkpoint = buf.Bytes()
	return c, nil
}

// forkAgentCheckpoints sends each checkpoint of file (rows of an agent
// sweep's checkpoints table, one per line; "-" for stdin) to the agent's
// branch for arm and replica, and prints one outcome per checkpoint, in
// input order (forklab fork --checkpoint --agent). Every line is read
// before the agent starts, and every branch finished before anything is
// printed: a bad line or a refused checkpoint prints nothing.
func forkAgentCheckpoints(ctx context.Context, spec *sweep.AgentSpec, file string, arm fork.Arm, replica int, asJSON bool) error {
	var in io.Reader = os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return asInput(fmt.Errorf("read checkpoint: %w", err))
		}
		defer f.Close()
		in = f
	}
	var cps []agentCheckpoint
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		c, err := parseAgentCheckpoint(b)
		if err != nil {
			return asInput(fmt.Errorf("read checkpoint %s line %d: %w", file, line, err))
		}
		c.line = line
		cps = append(cps, c)
	}
	if err := sc.Err(); err != nil {
		return asInput(fmt.Errorf("read checkpoint %s: %w", file, err))
	}
	if len(cps) == 0 {
		return asInput(fmt.Errorf("read checkpoint %s: no checkpoint in the file", file))
	}
	def, err := openAgent(ctx, spec, false)
	if err != nil {
		return asInput(err)
	}
	defer def.Close()
	d := def.Declaration()
	if !slices.Contains(d.Arms(), string(arm)) {
		return usageErr("--arm %s: agent world %s declares no intervention for it (its arms: %s)", arm, d.Name, strings.Join(d.Arms(), ", "))
	}
	li, err := def.Open(nil, fork.Model{})
	if err != nil {
		return err
	}
	inst := li.(*agentproc.Instance)
	outs := make([]agentForkOutcome, 0, len(cps))
	for _, c := range cps {
		where := fmt.Sprintf("checkpoint %s line %d (seed %d, fork step %d)", file, c.line, c.seed, c.forkStep)
		if c.world != "" && c.world != d.Name {
			return asInput(fmt.Errorf("%s: %w: a checkpoint of world %s, but the agent plays world %s", where, fork.ErrCheckpoint, c.world, d.Name))
		}
		o, err := inst.BranchAt(ctx, c.seed, c.forkStep, c.over, c.checkpoint, arm, replica, false)
		if err != nil {
			// The agent refused the checkpoint (-32001) or the request's
			// params (-32602): the input was wrong; asking again will not
			// help.
			if agentproc.Refused(err) || agentproc.BadCheckpoint(err) {
				return asInput(fmt.Errorf("%s: the agent refused it: %w", where, err))
			}
			return fmt.Errorf("%s: %w", where, err)
		}
		outs = append(outs, agentForkOutcome{World: d.Name, Arm: arm, Replica: replica, Seed: c.seed, ForkStep: c.forkStep, Checkpoint: c.checkpoint,
			Intervened: o.Intervened, Success: o.Success, Cost: agentproc.CostOf(d.Cost, o.Cost), Details: o.Details, cost: o.Cost})
	}
	return printAgentOutcomes(d, outs, "", asJSON)
}
