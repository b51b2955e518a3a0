package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/sessions/session"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/stream/client"
)

// ErrArm reports an arm the session's world has no intervention for.
var ErrArm = errors.New("no such arm")

// ErrRule reports a guard rule that does not fit the world of the session
// it is to decide on.
var ErrRule = errors.New("the guard rule does not fit the session's world")

// Fork forks session stream parent at offset into the new stream child
// (the protocol's fork: the child reads as the parent's events before
// offset, then its own), folds the child to find the checkpoint there, and
// finishes the branch of arm and replica on it, for whatever world the
// session plays. rule decides the policy arm; a rule for another world is
// an error. A fork at an offset inside a turn first completes that turn.
//
// forkStep labels the branch (and, with arm and replica, selects the
// model's noise stream, as fork.Key does); 0 takes the fold's step count.
//
// Forking the same parent at the same offset into the same child twice is
// idempotent: the second call finds the branch finished and returns it
// (with ErrFinished).
func Fork(ctx context.Context, w Worker, parent, offset, child string, forkStep int, arm fork.Arm, replica int, rule *policy.Rule) (Result, error) {
	// Check the arm and the rule against the parent's world before
	// anything is written.
	d, err := w.worldOf(ctx, parent)
	if err != nil {
		return Result{}, err
	}
	if !slices.Contains(d.Arms(), string(arm)) {
		return Result{}, fmt.Errorf("%s: %w: world %s has no arm %s (its arms: %s)", parent, ErrArm, d.Name, arm, strings.Join(d.Arms(), ", "))
	}
	var fires func(*session.Session) (bool, error)
	if rule != nil {
		f, err := rule.Compile(d)
		if err != nil {
			return Result{}, fmt.Errorf("%s: %w: %v", parent, ErrRule, err)
		}
		fires = func(s *session.Session) (bool, error) { return f(s.Play.Features(nil)), nil }
	}
	return forkWith(ctx, w, parent, offset, child, forkStep, arm, replica, fires)
}

// worldOf returns the declaration of the world a session stream plays,
// from its session_start event.
func (w Worker) worldOf(ctx context.Context, stream string) (world.Declaration, error) {
	var ch client.Chunk
	err := w.retry(ctx, "read "+stream, func() error {
		var err error
		ch, err = w.Log.Read(ctx, stream, client.Start)
		return err
	})
	if err != nil {
		return world.Declaration{}, fmt.Errorf("read %s: %w", stream, err)
	}
	events, err := session.DecodeBatch(ch.Data)
	if err != nil {
		return world.Declaration{}, fmt.Errorf("%s: %w: %v", stream, session.ErrFold, err)
	}
	for _, e := range events {
		if e.Type == session.TypeStart {
			def, err := lab.Lookup(e.World)
			if err != nil {
				return world.Declaration{}, fmt.Errorf("%s: %w: %v", stream, session.ErrFold, err)
			}
			return def.Declaration(), nil
		}
	}
	return world.Declaration{}, fmt.Errorf("%s: %w: no session_start", stream, session.ErrFold)
}

// forkWith is Fork with the policy verdict computed by fires (nil: never
// fires).
func forkWith(ctx context.Context, w Worker, parent, offset, child string, forkStep int, arm fork.Arm, replica int, fires func(*session.Session) (bool, error)) (Result, error) {
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
	var ev session.Event
	if s.Branch != nil {
		ev = s.ForkEvent(s.Branch.ForkStep, arm, replica, s.Branch.Recovery != "")
	} else {
		step := forkStep
		if step <= 0 {
			step = s.Play.Steps()
			if !s.Between() {
				step++ // the turn in progress completes before the fork
			}
		}
		fired := false
		if fires != nil && arm == fork.Policy {
			// The rule reads the features at the fork: after the turn in
			// progress, if any, completes.
			at, err := completeTurn(s)
			if err != nil {
				return Result{}, err
			}
			if fired, err = fires(&at); err != nil {
				return Result{}, err
			}
		}
		ev = s.ForkEvent(step, arm, replica, fired)
	}
	w.Fork = &ev
	w.Start = nil
	w.Until = 0
	return w.Run(ctx)
}

// completeTurn returns a copy of s with the turn in progress (a tool
// result or recovery due) folded, as the worker will append it.
func completeTurn(s session.Session) (session.Session, error) {
	for !s.Between() {
		e, _, err := s.Next(0)
		if err != nil {
			return s, err
		}
		if err := s.Apply(e); err != nil {
			return s, err
		}
	}
	return s, nil
}
