package agentproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/stream/client"
)

// Folded is a run an agent folded from its session's events: a
// checkpoint at the step the run had reached (ForkStep), with its seed.
type Folded struct {
	Seed uint64
	lab.ForkResult
}

// Fold asks the agent to fold a session's events (stream's, read up to
// offset) into the run they describe. The agent must declare the fold
// capability.
func (d *Definition) Fold(ctx context.Context, stream, offset string, events []json.RawMessage) (Folded, error) {
	if !d.init.Capabilities.Fold {
		return Folded{}, fmt.Errorf("agent world %s %w: it cannot fork runs from the session log", d.init.World.Name, ErrNoFold)
	}
	if events == nil {
		events = []json.RawMessage{}
	}
	var out Folded
	c := foldCall(&d.init.World, FoldParams{Stream: stream, Offset: offset, Events: events}, &out)
	if err := d.pool.do(ctx, []*call{c}); err != nil {
		return Folded{}, err
	}
	if c.err != nil {
		return Folded{}, c.err
	}
	return out, nil
}

// foldCall is the fold request of params, decoding into out.
func foldCall(decl *world.Declaration, params FoldParams, out *Folded) *call {
	return &call{method: MethodFold, units: 1, params: params,
		decode: func(raw json.RawMessage) error {
			var r FoldResult
			if err := decodeResult("fold.result", raw, &r); err != nil {
				return err
			}
			out.Seed, out.ForkStep = *r.Seed, *r.ForkStep
			return parseFork("result", decl, &r.WireFork, &out.ForkResult)
		}}
}

// ReadEvents returns the events of session stream before offset. It uses
// the protocol's fork (Durable Streams §4.2): child is created as a fork of
// stream at offset, unless it exists already, and read from its start to
// its tail — exactly the source's events before the offset, whatever the
// log's chunking.
func ReadEvents(ctx context.Context, log *client.Client, stream, offset, child string) ([]json.RawMessage, error) {
	if _, err := log.Head(ctx, child); client.IsNotFound(err) {
		if _, err := log.Fork(ctx, child, stream, client.ForkOptions{At: offset}); err != nil {
			return nil, fmt.Errorf("fork %s at %s into %s: %w", stream, offset, child, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("look up %s: %w", child, err)
	}
	var events []json.RawMessage
	r := log.NewReader(child, client.Start, client.CatchUp)
	for {
		ch, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return events, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", child, err)
		}
		var batch []json.RawMessage
		if err := json.Unmarshal(ch.Data, &batch); err != nil {
			return nil, fmt.Errorf("read %s: not a JSON stream: %v", child, err)
		}
		for _, e := range batch {
			events = append(events, bytes.Clone(e))
		}
	}
}

// ForkFromLog forks an agent's session on the log: it reads the session's
// events before offset (ReadEvents, through child), asks the agent's fold
// for the checkpoint there, and asks the agent to finish the branch of arm
// and replica from it, at the fold's fork step — with that step's noise
// key. rule is the policy arm's guard rule, read on the folded features. A
// fold at step 0 (no action before the offset) is refused with
// ErrForkStep, the branch not asked.
func (d *Definition) ForkFromLog(ctx context.Context, log *client.Client, stream, offset, child string, arm fork.Arm, replica int, rule func([]world.Value) bool) (lab.Outcome, Folded, error) {
	if !d.init.Capabilities.Fold {
		return lab.Outcome{}, Folded{}, fmt.Errorf("agent world %s %w: it cannot fork runs from the session log", d.init.World.Name, ErrNoFold)
	}
	events, err := ReadEvents(ctx, log, stream, offset, child)
	if err != nil {
		return lab.Outcome{}, Folded{}, err
	}
	f, err := d.Fold(ctx, stream, offset, events)
	if err != nil {
		return lab.Outcome{}, Folded{}, fmt.Errorf("fold %s at %s: %w", stream, offset, err)
	}
	if f.ForkStep < 1 {
		return lab.Outcome{}, f, fmt.Errorf("%w: fold %s at %s: the run had taken no step before that offset (fold answered fork_step 0): fork at the offset of an event after its first action", ErrForkStep, stream, offset)
	}
	fires := rule != nil && rule(f.Features)
	inst := &Instance{def: d}
	o, err := inst.BranchAt(ctx, f.Seed, f.ForkStep, f.Over, f.Checkpoint, arm, replica, fires)
	if err != nil {
		return lab.Outcome{}, f, err
	}
	return o, f, nil
}

// ErrForkStep marks a fork asked where the run had taken no step yet: fork
// steps are 1 or more — in a sweep's --fork-at, in branch's fork_step, in
// the noise key — so a fold at step 0 is not branched
// (docs/agent-protocol.md, "fold").
var ErrForkStep = errors.New("nothing to fork")

// ErrNoFold marks a fork from the log asked of an agent that does not
// declare the fold capability: the user's choice of agent, not a failure.
var ErrNoFold = errors.New("does not declare the fold capability")

// Refused says whether err carries the agent's refusal of a request's
// params (error code -32602: events it cannot fold, an arm it does not
// support, a checkpoint it does not know): the input forklab passed on
// from the user was wrong, and asking again will not help. A command that
// hits it exits 2, as for any bad input (docs/exit-status.md).
func Refused(err error) bool {
	code, ok := replyCode(err)
	return ok && code == CodeInvalidParams
}

// BadCheckpoint says whether err carries the agent's refusal of a
// checkpoint (error code -32001: not one this agent, or this version of
// it, wrote). Like Refused, it marks input forklab passed on from the
// user; a command that hits it exits 2.
func BadCheckpoint(err error) bool {
	code, ok := replyCode(err)
	return ok && code == CodeBadCheckpoint
}
