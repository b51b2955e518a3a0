package session

import (
	"errors"
	"fmt"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/counter"
)

// ErrFold marks events that cannot be folded: foreign, corrupt, out of
// order, or disagreeing with the world's own replay.
var ErrFold = errors.New("cannot fold session")

// Session is the fold of a session's events: the run's exact state and
// what the agent loop owes next. The zero value is an empty session.
type Session struct {
	// Started: session_start has been folded; World, Model, Seed are set.
	Started bool
	World   counter.World
	Model   fork.Model
	Seed    uint64
	// State is the world's state after the folded events.
	State counter.State
	// Key is the noise stream of the model's next turns: the prefix stream
	// of the seed, or the branch's after a fork event.
	Key uint64
	// Branch is set once a fork event is folded.
	Branch *Branch
	// History lists the actions applied, as a checkpoint records them.
	History []fork.Turn
	// Outcome is set once the outcome event is folded.
	Outcome *Event
	// Epoch and Nonce are the latest incarnation's.
	Epoch int64
	Nonce string
	// Events counts the domain events folded (incarnations excluded).
	Events int

	pendingTool     world.Action // a model turn's tool awaiting its tool_result
	hasPendingTool  bool
	pendingRecovery world.Action // the fork's recovery, not yet applied
	hasRecovery     bool
}

// Branch describes a session that is a fork's branch.
type Branch struct {
	ForkStep int
	Arm      fork.Arm
	Replica  int
	Recovery string
}

func (s *Session) lab() fork.Lab[counter.State] {
	return fork.Lab[counter.State]{World: s.World, Model: s.Model}
}

func foldErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFold, fmt.Sprintf(format, args...))
}

// Apply folds one event into s, checking it against the world's replay: an
// event the session could not have produced is an ErrFold error and leaves
// s unchanged.
func (s *Session) Apply(e Event) error {
	t := *s
	t.History = append([]fork.Turn(nil), s.History...)
	if err := t.apply(e); err != nil {
		return err
	}
	*s = t
	return nil
}

func (s *Session) apply(e Event) error {
	if e.Type == TypeIncarnation {
		// The server fences epochs per stream; a fork starts a fresh
		// producer history, so a branch's first epoch may be lower than
		// the inherited ones. The fold only tracks the latest claim.
		if e.Nonce == "" || e.Epoch == nil {
			return foldErr("incarnation without an epoch and a nonce")
		}
		s.Epoch, s.Nonce = *e.Epoch, e.Nonce
		return nil
	}
	if s.Outcome != nil {
		return foldErr("%s event after the outcome", e.Type)
	}
	if !s.Started && e.Type != TypeStart {
		return foldErr("%s event before session_start", e.Type)
	}
	w := s.World
	switch e.Type {
	case TypeStart:
		if s.Started {
			return foldErr("a second session_start")
		}
		if e.Version != Version || e.World != counter.Name || e.Params == nil || e.Model == nil || e.Seed == nil {
			return foldErr("session_start must carry version %d, world %q, params, model and seed", Version, counter.Name)
		}
		cw, err := counter.New(*e.Params)
		if err != nil {
			return foldErr("session_start params: %v", err)
		}
		if err := e.Model.Validate(); err != nil {
			return foldErr("session_start model: %v", err)
		}
		s.Started, s.World, s.Model, s.Seed = true, cw, *e.Model, *e.Seed
		s.State = cw.Start(s.Seed)
		s.Key = fork.PrefixKey(s.Seed)
	case TypeFork:
		if s.Branch != nil || s.hasPendingTool {
			return foldErr("fork event in the middle of a turn or after another fork")
		}
		if e.ForkStep < 1 || e.Replica == nil || *e.Replica < 0 {
			return foldErr("fork event needs fork_step >= 1 and replica >= 0")
		}
		want, intervenes := fork.Intervention(e.Arm, true)
		switch {
		case e.Arm != fork.Off && e.Arm != fork.On && e.Arm != fork.Placebo && e.Arm != fork.AA && e.Arm != fork.Policy:
			return foldErr("fork event with unknown arm %q", e.Arm)
		case e.Recovery != "" && (!intervenes || e.Recovery != want.String()):
			return foldErr("arm %s cannot apply recovery %q", e.Arm, e.Recovery)
		case e.Recovery == "" && intervenes && e.Arm != fork.Policy:
			return foldErr("arm %s must apply %s", e.Arm, want)
		}
		s.Branch = &Branch{ForkStep: e.ForkStep, Arm: e.Arm, Replica: *e.Replica, Recovery: e.Recovery}
		s.Key = fork.Key(s.Seed, e.ForkStep, e.Arm, *e.Replica)
		if e.Recovery != "" {
			s.pendingRecovery, s.hasRecovery = want, true
		}
	case TypeRecovery:
		if !s.hasRecovery || e.Action != s.pendingRecovery.String() {
			return foldErr("recovery %q not due", e.Action)
		}
		s.State = w.Step(s.State, s.pendingRecovery)
		s.hasRecovery = false
		if err := s.check(e); err != nil {
			return err
		}
		s.History = append(s.History, fork.Turn{Step: int(s.State.Steps), Action: s.pendingRecovery, Obs: int(s.State.Obs)})
	case TypeModelTurn:
		if s.hasPendingTool || s.hasRecovery {
			return foldErr("model_turn while a tool result or the recovery is due")
		}
		o := w.Observe(s.State)
		if o.Over {
			return foldErr("model_turn after the run is over")
		}
		if e.Turn != o.Steps+1 {
			return foldErr("model_turn for turn %d, expected turn %d", e.Turn, o.Steps+1)
		}
		want := s.Model.Choose(w.Script(o), w.Tools(), s.Key, o.Steps)
		got := world.NoTool
		if !e.NoTool {
			a, err := world.ParseAction(e.Tool)
			if err != nil || a == world.NoTool {
				return foldErr("model_turn tool %q", e.Tool)
			}
			got = a
		}
		if got != want {
			return foldErr("model_turn %d chose %s, but the model replays %s: the events are not this session's", e.Turn, got, want)
		}
		if got == world.NoTool {
			s.State = w.Step(s.State, world.NoTool)
			s.History = append(s.History, fork.Turn{Step: int(s.State.Steps), Action: world.NoTool, Obs: int(s.State.Obs)})
		} else {
			s.pendingTool, s.hasPendingTool = got, true
		}
	case TypeToolResult:
		if !s.hasPendingTool || e.Tool != s.pendingTool.String() {
			return foldErr("tool_result for %q not due", e.Tool)
		}
		if e.Turn != int(s.State.Steps)+1 {
			return foldErr("tool_result for turn %d, expected %d", e.Turn, s.State.Steps+1)
		}
		s.State = w.Step(s.State, s.pendingTool)
		s.hasPendingTool = false
		if err := s.check(e); err != nil {
			return err
		}
		s.History = append(s.History, fork.Turn{Step: int(s.State.Steps), Action: s.pendingTool, Obs: int(s.State.Obs)})
	case TypeOutcome:
		if s.hasPendingTool || s.hasRecovery || !w.Observe(s.State).Over {
			return foldErr("outcome before the run is over")
		}
		want := s.outcome()
		if e.Success == nil || e.Declared == nil || e.Value == nil || e.Steps == nil ||
			*e.Success != *want.Success || *e.Declared != *want.Declared || *e.Value != *want.Value || *e.Steps != *want.Steps {
			return foldErr("outcome disagrees with the replayed run")
		}
		s.Outcome = &want
	default:
		return foldErr("unknown event type %q", e.Type)
	}
	s.Events++
	return nil
}

// check compares an event's observation and steps with the replayed state.
func (s *Session) check(e Event) error {
	if e.Obs == nil || e.Steps == nil || *e.Obs != s.State.Obs || *e.Steps != s.State.Steps {
		return foldErr("%s at turn %d disagrees with the replayed world (observation or steps)", e.Type, e.Turn)
	}
	return nil
}

func (s *Session) outcome() Event {
	return Event{Type: TypeOutcome, Success: ptr(s.World.Success(s.State)), Declared: ptr(s.State.Declared),
		Value: ptr(s.State.V), Steps: ptr(s.State.Steps)}
}

// Finished reports whether the outcome has been folded.
func (s *Session) Finished() bool { return s.Outcome != nil }

// Next returns the next domain event the agent loop appends, and false when
// there is none: the run has its outcome or, with until > 0, the prefix to a
// fork step is done — the run has used until steps or is over (as
// fork.Lab.Advance stops), between turns and without an outcome, which the
// branches will write. The session must have started.
func (s *Session) Next(until int) (Event, bool) {
	if !s.Started || s.Outcome != nil {
		return Event{}, false
	}
	w := s.World
	turn := int(s.State.Steps) + 1
	switch {
	case s.hasRecovery:
		st := w.Step(s.State, s.pendingRecovery)
		return Event{Type: TypeRecovery, Turn: turn, Action: s.pendingRecovery.String(), Obs: ptr(st.Obs), Steps: ptr(st.Steps)}, true
	case s.hasPendingTool:
		st := w.Step(s.State, s.pendingTool)
		return Event{Type: TypeToolResult, Turn: turn, Tool: s.pendingTool.String(), Obs: ptr(st.Obs), Steps: ptr(st.Steps)}, true
	}
	o := w.Observe(s.State)
	if until > 0 && (o.Over || o.Steps >= until) {
		return Event{}, false
	}
	if o.Over {
		return s.outcome(), true
	}
	a := s.Model.Choose(w.Script(o), w.Tools(), s.Key, o.Steps)
	if a == world.NoTool {
		return Event{Type: TypeModelTurn, Turn: turn, NoTool: true}, true
	}
	return Event{Type: TypeModelTurn, Turn: turn, Tool: a.String()}, true
}

// Start returns the session_start event of a new session.
func Start(p counter.Params, m fork.Model, seed uint64) Event {
	return Event{Type: TypeStart, Version: Version, World: counter.Name, Params: &p, Model: &m, Seed: ptr(seed)}
}

// ForkEvent returns the fork event that turns a copy of a session into the
// branch of arm and replica at forkStep; fires is the guard rule's verdict
// for the policy arm.
func ForkEvent(forkStep int, arm fork.Arm, replica int, fires bool) Event {
	e := Event{Type: TypeFork, ForkStep: forkStep, Arm: arm, Replica: ptr(replica)}
	if a, ok := fork.Intervention(arm, fires); ok {
		e.Recovery = a.String()
	}
	return e
}

// Checkpoint returns the folded run as a checkpoint at fork step forkStep:
// the same data a sweep's checkpoints table holds for an in-memory run. A
// session in the middle of a turn or owing its recovery cannot be
// checkpointed: finish the turn first.
func (s *Session) Checkpoint(forkStep int) (fork.Checkpoint[counter.State, counter.Params], error) {
	if !s.Started {
		return fork.Checkpoint[counter.State, counter.Params]{}, foldErr("no session_start: nothing to checkpoint")
	}
	if s.hasPendingTool || s.hasRecovery {
		return fork.Checkpoint[counter.State, counter.Params]{}, foldErr("the offset falls inside a turn (a tool result or a recovery is due); fork at a turn boundary")
	}
	return fork.Checkpoint[counter.State, counter.Params]{Version: fork.CheckpointVersion, World: counter.Name,
		Params: s.World.P, Model: s.Model, ForkStep: forkStep, History: append([]fork.Turn{}, s.History...), State: s.State}, nil
}

// Between reports whether the session is between turns: no tool result and
// no recovery due.
func (s *Session) Between() bool { return !s.hasPendingTool && !s.hasRecovery }

// Uninterrupted returns the domain events of a whole session that starts
// with start, as one worker running it without interruption writes them:
// what any interrupted and resumed run of the session must end up with.
func Uninterrupted(start Event) ([]Event, error) {
	var s Session
	if err := s.Apply(start); err != nil {
		return nil, err
	}
	out := []Event{start}
	for {
		e, ok := s.Next(0)
		if !ok {
			return out, nil
		}
		if err := s.Apply(e); err != nil {
			return out, err
		}
		out = append(out, e)
	}
}
