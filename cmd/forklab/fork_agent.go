package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/lab/agentproc"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/stream/client"
)

// forkAgent forks an external agent's session on the log at offset and
// prints the branch's outcome (forklab fork --stream --agent).
func forkAgent(ctx context.Context, line string, log *client.Client, stream, offset, child string, arm fork.Arm, replica int, rule *policy.Rule, asJSON bool) error {
	def, err := openAgent(ctx, &sweep.AgentSpec{Command: line})
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
	if asJSON {
		// The agent's checkpoint and details as it wrote them: no HTML
		// escaping of its <, > and &.
		enc := json.NewEncoder(os.Stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(struct {
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
		}{d.Name, arm, replica, f.Seed, f.ForkStep, f.Checkpoint, o.Intervened, o.Success, agentproc.CostOf(d.Cost, o.Cost), o.Details})
	}
	verdict := "failure"
	if o.Success {
		verdict = "success"
	}
	fmt.Printf("%s seed %d · fork step %d (folded from %s at %s) · arm %s · replica %d: %s (intervened %t, cost %s)\n",
		d.Name, f.Seed, f.ForkStep, stream, offset, arm, replica, verdict, o.Intervened, costText(d, o.Cost))
	return nil
}
