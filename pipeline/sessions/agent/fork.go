package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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

// ErrNothingToFork reports a fork point with no run to fork: no turn has
// been played there yet (the beginning, the incarnation event, the
// session_start), or the run had already ended (its outcome is before the
// offset).
var ErrNothingToFork = errors.New("nothing to fork")

// nothingToFork is an ErrNothingToFork with its own wording.
type nothingToFork struct{ msg string }

func (e nothingToFork) Error() string        { return e.msg }
func (e nothingToFork) Is(target error) bool { return target == ErrNothingToFork }

// Now is the offset that names a stream's tail (the protocol's "now"):
// Fork forks there, as the tail is when it looks.
const Now = "now"

// NoTurnYet is the refusal of a fork point before the run's first turn.
func NoTurnYet(stream, offset string) error {
	return nothingToFork{fmt.Sprintf("%s at %s: no turn has been played at this offset, so there is nothing to fork; fork at an offset after step 1 (forklab log read --stream %s --offsets prints each event's offset)", stream, offset, stream)}
}

// Ended is the refusal of a fork point after the run's outcome.
func Ended(stream, offset string) error {
	return nothingToFork{fmt.Sprintf("%s at %s: the run had already ended at this offset; nothing to fork (fork at an offset before its outcome event: forklab log read --stream %s --offsets)", stream, offset, stream)}
}

// Tail returns stream's tail offset (what Now stands for), retrying for
// w.RetryFor while the log does not answer; the error names the stream
// ("look up NAME: …").
func (w Worker) Tail(ctx context.Context, stream string) (string, error) {
	var info client.Info
	err := w.retry(ctx, "look up "+stream, func() error {
		var err error
		info, err = w.Log.Head(ctx, stream)
		return err
	})
	if err != nil && !transient(err) {
		err = fmt.Errorf("look up %s: %w", stream, err) // retry named the others
	}
	return info.Tail, err
}

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
//
// Before anything is written, the parent is folded up to offset: a fork
// point before the run's first turn (offset -1, the incarnation or
// session_start event) or after its outcome is refused with an
// ErrNothingToFork error, and so are an arm or a rule the world does not
// have. Offset Now forks at the parent's tail. A child this call created
// is deleted again if a later step fails (but for a newer incarnation
// fencing this one), so a failed fork leaves no half-made branch.
func Fork(ctx context.Context, w Worker, parent, offset, child string, forkStep int, arm fork.Arm, replica int, rule *policy.Rule) (Result, error) {
	if offset == "" || offset == client.Start {
		return Result{}, NoTurnYet(parent, client.Start+" (the beginning)")
	}
	// Check the arm and the rule against the parent's world before
	// anything is written.
	d, err := w.worldOf(ctx, parent)
	if err != nil {
		return Result{}, err
	}
	if offset == Now {
		if offset, err = w.Tail(ctx, parent); err != nil {
			return Result{}, err
		}
	}
	s, found, err := w.foldTo(ctx, parent, offset)
	if err != nil {
		return Result{}, err
	}
	if found {
		switch {
		case s.Finished():
			return Result{}, Ended(parent, offset)
		case !s.Started || s.Play.Steps() == 0 && s.Between():
			return Result{}, NoTurnYet(parent, offset)
		}
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
	_, herr := w.Log.Head(ctx, child)
	creates := client.IsNotFound(herr)
	res, err := forkWith(ctx, w, parent, offset, child, forkStep, arm, replica, fires)
	if err != nil && creates && !errors.Is(err, ErrFinished) && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrClosed) {
		// Leave no half-made child behind (a rerun forks it afresh).
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if derr := w.Log.Delete(dctx, child); derr != nil && !client.IsNotFound(derr) {
			w.logf("%s: could not delete the unfinished child stream: %v", child, derr)
		}
	}
	return res, err
}

// foldTo folds stream's events up to offset, reading one append at a time
// from the start (the log's max_bytes extension): each chunk ends at a
// boundary between records, whose offset is the one forklab log read
// --offsets prints and forks take. found is false when no record of the
// stream ends at offset; the log then judges the offset when forking.
func (w Worker) foldTo(ctx context.Context, stream, offset string) (s session.Session, found bool, err error) {
	at := client.Start
	for {
		var ch client.Chunk
		err := w.retry(ctx, "read "+stream, func() error {
			var err error
			ch, err = w.Log.ReadMax(ctx, stream, at, 1)
			return err
		})
		if err != nil {
			return s, false, fmt.Errorf("read %s: %w", stream, err)
		}
		events, err := session.DecodeBatch(ch.Data)
		if err != nil {
			return s, false, fmt.Errorf("%s: %w: %v", stream, session.ErrFold, err)
		}
		for i, e := range events {
			if err := s.Apply(e); err != nil {
				return s, false, fmt.Errorf("%s: event %d after %s: %w", stream, i, at, err)
			}
		}
		if ch.Next == offset {
			return s, true, nil
		}
		if ch.UpToDate || ch.Next == at || len(events) == 0 {
			return s, false, nil
		}
		at = ch.Next
	}
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
