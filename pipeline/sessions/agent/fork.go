package agent

import (
	"context"
	"fmt"

	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/sessions/session"
	"github.com/forklab/forklab/stream/client"
)

// Fork forks session stream parent at offset into the new stream child
// (the protocol's fork: the child reads as the parent's events before
// offset, then its own), folds the child to find the checkpoint there, and
// finishes the branch of arm and replica on it. rule decides the policy
// arm. A fork at an offset inside a turn first completes that turn.
//
// forkStep labels the branch (and, with arm and replica, selects the
// model's noise stream, as fork.Key does); 0 takes the fold's step count.
//
// Forking the same parent at the same offset into the same child twice is
// idempotent: the second call finds the branch finished and returns it.
func Fork(ctx context.Context, w Worker, parent, offset, child string, forkStep int, arm fork.Arm, replica int, rule *policy.Rule) (Result, error) {
	c := w.Log
	// A child that exists already (a rerun, or a worker that died after
	// forking) is continued as it is; its fold says whose branch it is.
	err := w.retry(ctx, "look up "+child, func() error {
		_, err := c.Head(ctx, child)
		return err
	})
	if client.IsNotFound(err) {
		err = w.retry(ctx, "fork "+parent, func() error {
			_, err := c.Fork(ctx, child, parent, client.ForkOptions{At: offset})
			return err
		})
	}
	if err != nil {
		return Result{}, fmt.Errorf("fork %s at %s into %s: %w", parent, offset, child, err)
	}
	// The checkpoint is the fold of the inherited events.
	var s session.Session
	w.Stream = child
	if _, err := w.readFold(ctx, &s, client.Start); err != nil {
		return Result{}, err
	}
	if !s.Started {
		return Result{}, fmt.Errorf("%s at %s: %w: no session_start before the offset", parent, offset, session.ErrFold)
	}
	if s.Branch != nil && (s.Branch.Arm != arm || s.Branch.Replica != replica) {
		return Result{}, fmt.Errorf("%s: %w: it is already the branch %s/%d", child, ErrForeign, s.Branch.Arm, s.Branch.Replica)
	}
	step := forkStep
	if step <= 0 {
		step = int(s.State.Steps)
		if !s.Between() {
			step++ // the turn in progress completes before the fork
		}
	}
	fires := rule != nil && rule.Fires(s.World.Features(s.State))
	ev := session.ForkEvent(step, arm, replica, fires)
	if s.Branch != nil {
		ev = session.ForkEvent(s.Branch.ForkStep, arm, replica, s.Branch.Recovery != "")
	}
	w.Fork = &ev
	w.Start = nil
	w.Until = 0
	return w.Run(ctx)
}
