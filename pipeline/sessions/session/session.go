package session

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
)

// ErrFold marks events that cannot be folded: foreign, corrupt, out of
// order, of a world or layout this forklab does not play, or disagreeing
// with the world's own replay.
var ErrFold = errors.New("cannot fold session")

// Session is the fold of a session's events: the run's exact state and
// what the agent loop owes next. The zero value is an empty session.
//
// A Session value may be copied (a fork of the fold): Apply never changes
// the Play another copy holds, it replaces its own with a changed clone.
type Session struct {
	// Started: session_start has been folded; the fields below up to Key
	// are set.
	Started bool
	// Start is the folded session_start, its parameters resolved.
	Start Event
	// Decl is the world's declaration; Params its resolved parameters.
	Decl   world.Declaration
	Params world.Params
	Model  fork.Model
	Seed   uint64
	// Play is the run after the folded events. Treat it as read-only:
	// Clone it to play on.
	Play lab.Play
	// Key is the noise stream of the model's next turns: the prefix stream
	// of the seed, or the branch's after a fork event.
	Key uint64
	// Branch is set once a fork event is folded.
	Branch *Branch
	// History lists the actions applied, oldest first, a branch's recovery
	// included: turn i took step i+1.
	History []world.Action
	// Outcome is set once the outcome event is folded.
	Outcome *Event
	// Epoch and Nonce are the latest incarnation's.
	Epoch int64
	Nonce string
	// Events counts the domain events folded (incarnations excluded);
	// Incarnations the incarnation events: the stream holds both.
	Events, Incarnations int

	inst            lab.Instance
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
	// Recovery names the action the arm applies at the fork ("" for
	// none).
	Recovery string
	// ForkCost is what the run had cost at the fork: a branch's own cost
	// is its final cost minus ForkCost.
	ForkCost world.Cost
}

// describe names e's kind in a fold error: `model_turn event`, or `an
// event without a "type"` (another program's message on the stream).
func (e Event) describe() string {
	if e.Type == "" {
		return `an event without a "type"`
	}
	return e.Type + " event"
}

func foldErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFold, fmt.Sprintf(format, args...))
}

// Start returns the session_start event of a new session of the world
// declared by d, with parameters p (resolved: every parameter, in its
// canonical type, as world.Declaration.Resolve returns them), model m and
// task seed.
func Start(d world.Declaration, p world.Params, m fork.Model, seed uint64) Event {
	return Event{Type: TypeStart, Version: Version, World: d.Name, WorldVersion: d.Version, Params: &p, Model: &m, Seed: ptr(seed)}
}

// NewStart returns the session_start event of a new session of the
// registered world named worldName (lab.Lookup) with raw parameters (those
// not given take their defaults), model m and task seed. It fails, naming
// the valid choices, on an unknown world, an unknown or out-of-range
// parameter or an invalid model.
func NewStart(worldName string, raw world.Params, m fork.Model, seed uint64) (Event, error) {
	def, err := lab.Lookup(worldName)
	if err != nil {
		return Event{}, err
	}
	d := def.Declaration()
	p, err := d.Resolve(raw)
	if err != nil {
		return Event{}, err
	}
	if err := m.Validate(); err != nil {
		return Event{}, fmt.Errorf("model: %w", err)
	}
	return Start(d, p, m, seed), nil
}

// Apply folds one event into s, checking it against the world's replay: an
// event the session could not have produced is an ErrFold error and leaves
// s unchanged.
func (s *Session) Apply(e Event) error {
	t := *s
	t.History = slices.Clip(s.History) // appends copy: s keeps its own
	if err := t.apply(e); err != nil {
		return err
	}
	*s = t
	return nil
}

// actionName is the declared name of action a.
func (s *Session) actionName(a world.Action) string { return a.Name(&s.Decl) }

func (s *Session) apply(e Event) error {
	if e.Type == TypeIncarnation {
		// The server fences epochs per stream; a fork starts a fresh
		// producer history, so a branch's first epoch may be lower than
		// the inherited ones. The fold only tracks the latest claim.
		if e.Nonce == "" || e.Epoch == nil || *e.Epoch < 0 {
			return foldErr("incarnation without an epoch and a nonce")
		}
		s.Epoch, s.Nonce = *e.Epoch, e.Nonce
		s.Incarnations++
		return nil
	}
	if s.Outcome != nil {
		return foldErr("%s after the outcome", e.describe())
	}
	if !s.Started && e.Type != TypeStart {
		return foldErr("%s before session_start", e.describe())
	}
	switch e.Type {
	case TypeStart:
		if err := s.start(e); err != nil {
			return err
		}
	case TypeFork:
		if err := s.fork(e); err != nil {
			return err
		}
	case TypeRecovery:
		if !s.hasRecovery || e.Action != s.actionName(s.pendingRecovery) {
			return foldErr("recovery %q not due", e.Action)
		}
		if err := s.step(e, s.pendingRecovery); err != nil {
			return err
		}
		s.hasRecovery = false
	case TypeModelTurn:
		if err := s.modelTurn(e); err != nil {
			return err
		}
	case TypeToolResult:
		if !s.hasPendingTool || e.Tool != s.actionName(s.pendingTool) {
			return foldErr("tool_result for %q not due", e.Tool)
		}
		if err := s.step(e, s.pendingTool); err != nil {
			return err
		}
		s.hasPendingTool = false
	case TypeOutcome:
		if !s.Between() || !s.Play.Over() {
			return foldErr("outcome before the run is over")
		}
		want, err := s.outcome()
		if err != nil {
			return err
		}
		if e.Success == nil || e.Steps == nil || *e.Success != *want.Success || *e.Steps != *want.Steps {
			return foldErr("outcome (success, steps) disagrees with the replayed run: the events say %s, the replay %s", e.Encode(), want.Encode())
		}
		if err := sameObs(e, want.Obs); err != nil {
			return err
		}
		s.Outcome = &want
	default:
		return foldErr("unknown event type %q", e.Type)
	}
	s.Events++
	return nil
}

// start folds session_start: it opens the world the event names, with its
// parameters and model, and begins the seed's run.
func (s *Session) start(e Event) error {
	if s.Started {
		return foldErr("a second session_start")
	}
	if e.Version != Version {
		return foldErr("session_start has layout version %d; this forklab folds version %d", e.Version, Version)
	}
	if e.World == "" || e.Params == nil || e.Model == nil || e.Seed == nil {
		return foldErr("session_start must carry version, world, world_version, params, model and seed")
	}
	def, err := lab.Lookup(e.World)
	if err != nil {
		return foldErr("session_start: %v", err)
	}
	d := def.Declaration()
	if e.WorldVersion != d.Version {
		return foldErr("the session plays world %s version %q; this forklab plays version %q", e.World, e.WorldVersion, d.Version)
	}
	p, err := d.Resolve(*e.Params)
	if err != nil {
		return foldErr("session_start params: %v", err)
	}
	var missing []string
	for _, name := range d.ParamNames() {
		if _, ok := (*e.Params)[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return foldErr("session_start params lack %s: a session names every parameter of world %s", strings.Join(missing, ", "), d.Name)
	}
	if err := e.Model.Validate(); err != nil {
		return foldErr("session_start model: %v", err)
	}
	inst, err := def.Open(p, *e.Model)
	if err != nil {
		return foldErr("session_start: open world %s: %v", d.Name, err)
	}
	s.Started, s.Decl, s.Params, s.Model, s.Seed, s.inst = true, d, p, *e.Model, *e.Seed, inst
	s.Start = Start(d, p, *e.Model, *e.Seed)
	s.Play = inst.Start(s.Seed)
	s.Key = fork.PrefixKey(s.Seed)
	return nil
}

// fork folds a fork event: the session becomes the branch of an arm and
// replica, with the branch's noise stream and the arm's recovery due.
func (s *Session) fork(e Event) error {
	if s.Branch != nil || !s.Between() {
		return foldErr("fork event in the middle of a turn or after another fork")
	}
	if e.ForkStep < 1 || e.Replica == nil || *e.Replica < 0 {
		return foldErr("fork event needs fork_step >= 1 and replica >= 0")
	}
	if !slices.Contains(fork.Arms, e.Arm) {
		return foldErr("fork event with unknown arm %q", e.Arm)
	}
	if !slices.Contains(s.Decl.Arms(), string(e.Arm)) {
		return foldErr("world %s has no arm %s (its arms: %s)", s.Decl.Name, e.Arm, strings.Join(s.Decl.Arms(), ", "))
	}
	// A run is forked once it has taken the fork step's steps, or earlier
	// if it ended first (as fork.Lab.Advance stops).
	if steps := s.Play.Steps(); e.ForkStep != steps && !(s.Play.Over() && e.ForkStep > steps) {
		return foldErr("fork at step %d, but the run has taken %d steps", e.ForkStep, steps)
	}
	want, intervenes := s.inst.Intervention(e.Arm, true)
	switch {
	case e.Recovery != "" && (!intervenes || e.Recovery != s.actionName(want)):
		return foldErr("arm %s cannot apply recovery %q", e.Arm, e.Recovery)
	case e.Recovery == "" && intervenes && e.Arm != fork.Policy:
		return foldErr("arm %s must apply %s", e.Arm, s.actionName(want))
	}
	s.Branch = &Branch{ForkStep: e.ForkStep, Arm: e.Arm, Replica: *e.Replica, Recovery: e.Recovery, ForkCost: s.Play.Cost()}
	s.Key = fork.BranchKey(s.Seed, e.ForkStep, e.Arm, *e.Replica, e.Recovery != "")
	if e.Recovery != "" {
		s.pendingRecovery, s.hasRecovery = want, true
	}
	return nil
}

// modelTurn folds a model_turn: the action must be the one the model
// replays with the session's noise stream.
func (s *Session) modelTurn(e Event) error {
	if !s.Between() {
		return foldErr("model_turn while a tool result or the recovery is due")
	}
	if s.Play.Over() {
		return foldErr("model_turn after the run is over")
	}
	if turn := s.Play.Steps() + 1; e.Turn != turn {
		return foldErr("model_turn for turn %d, expected turn %d", e.Turn, turn)
	}
	got := world.NoTool
	if !e.NoTool {
		a, ok := s.Decl.Action(e.Tool)
		if !ok || a == world.NoTool {
			return foldErr("model_turn calls %q, which is not a tool of world %s (its actions: %s)", e.Tool, s.Decl.Name, strings.Join(s.Decl.Actions, ", "))
		}
		got = a
	} else if e.Tool != "" {
		return foldErr("model_turn with no_tool names tool %q", e.Tool)
	}
	if want := s.Play.Choose(s.Key); got != want {
		return foldErr("model_turn %d chose %s, but the model replays %s: the events are not this session's", e.Turn, s.actionName(got), s.actionName(want))
	}
	if got != world.NoTool {
		s.pendingTool, s.hasPendingTool = got, true
		return nil
	}
	p := s.Play.Clone()
	p.Step(world.NoTool)
	s.Play = p
	s.History = append(s.History, world.NoTool)
	return nil
}

// step applies action a, which event e (a tool_result or recovery)
// reports, and checks e's turn, steps and observation against the replay.
func (s *Session) step(e Event, a world.Action) error {
	if turn := s.Play.Steps() + 1; e.Turn != turn {
		return foldErr("%s for turn %d, expected turn %d", e.Type, e.Turn, turn)
	}
	p := s.Play.Clone()
	p.Step(a)
	if e.Steps == nil || *e.Steps != p.Steps() {
		return foldErr("%s at turn %d disagrees with the replayed world: steps %s, the replay %d", e.Type, e.Turn, intText(e.Steps), p.Steps())
	}
	obs, err := observe(p)
	if err != nil {
		return foldErr("%s at turn %d: %v", e.Type, e.Turn, err)
	}
	if err := sameObs(e, obs); err != nil {
		return err
	}
	s.Play = p
	s.History = append(s.History, a)
	return nil
}

// sameObs checks an event's observation against the replay's (canonical
// JSON).
func sameObs(e Event, want []byte) error {
	if len(e.Obs) == 0 {
		return foldErr("%s at turn %d has no observation (obs)", e.Type, e.Turn)
	}
	got, err := Canonical(e.Obs)
	if err != nil {
		return foldErr("%s at turn %d: obs: %v", e.Type, e.Turn, err)
	}
	if !bytes.Equal(got, want) {
		return foldErr("%s at turn %d disagrees with the replayed world: observation %s, the replay %s", e.Type, e.Turn, got, want)
	}
	return nil
}

func intText(p *int) string {
	if p == nil {
		return "missing"
	}
	return fmt.Sprint(*p)
}

// outcome is the outcome event of the finished run.
func (s *Session) outcome() (Event, error) {
	obs, err := observe(s.Play)
	if err != nil {
		return Event{}, foldErr("outcome: %v", err)
	}
	return Event{Type: TypeOutcome, Obs: obs, Steps: ptr(s.Play.Steps()), Success: ptr(s.Play.Success())}, nil
}

// Finished reports whether the outcome has been folded.
func (s *Session) Finished() bool { return s.Outcome != nil }

// Between reports whether the session is between turns: no tool result and
// no recovery due.
func (s *Session) Between() bool { return !s.hasPendingTool && !s.hasRecovery }

// Next returns the next domain event the agent loop appends, and false when
// there is none: the run has its outcome or, with until > 0, the prefix to a
// fork step is done — the run has used until steps or is over (as
// fork.Lab.Advance stops), between turns and without an outcome, which the
// branches will write. The session must have started. An error means the
// world's observation cannot be written as JSON (a bug of the world).
func (s *Session) Next(until int) (Event, bool, error) {
	if !s.Started || s.Outcome != nil {
		return Event{}, false, nil
	}
	turn := s.Play.Steps() + 1
	result := func(typ string, a world.Action) (Event, bool, error) {
		p := s.Play.Clone()
		p.Step(a)
		obs, err := observe(p)
		if err != nil {
			return Event{}, false, err
		}
		e := Event{Type: typ, Turn: turn, Obs: obs, Steps: ptr(p.Steps())}
		if typ == TypeRecovery {
			e.Action = s.actionName(a)
		} else {
			e.Tool = s.actionName(a)
		}
		return e, true, nil
	}
	switch {
	case s.hasRecovery:
		return result(TypeRecovery, s.pendingRecovery)
	case s.hasPendingTool:
		return result(TypeToolResult, s.pendingTool)
	}
	over := s.Play.Over()
	if until > 0 && (over || s.Play.Steps() >= until) {
		return Event{}, false, nil
	}
	if over {
		e, err := s.outcome()
		return e, err == nil, err
	}
	a := s.Play.Choose(s.Key)
	if a == world.NoTool {
		return Event{Type: TypeModelTurn, Turn: turn, NoTool: true}, true, nil
	}
	return Event{Type: TypeModelTurn, Turn: turn, Tool: s.actionName(a)}, true, nil
}

// ForkEvent returns the fork event that turns a copy of s (folded to its
// fork point) into the branch of arm and replica at forkStep; fires is
// the guard rule's verdict for the policy arm.
func (s *Session) ForkEvent(forkStep int, arm fork.Arm, replica int, fires bool) Event {
	e := Event{Type: TypeFork, ForkStep: forkStep, Arm: arm, Replica: ptr(replica)}
	if s.inst != nil {
		if a, ok := s.inst.Intervention(arm, fires); ok {
			e.Recovery = s.actionName(a)
		}
	}
	return e
}

// Checkpoint returns the folded run as the checkpoint JSON at fork step
// forkStep (lab.Play.Checkpoint): byte for byte what a sweep's checkpoints
// table holds for the same seed and fork step. A session in the middle of
// a turn, owing its recovery, or already a branch cannot be checkpointed.
func (s *Session) Checkpoint(forkStep int) ([]byte, error) {
	switch {
	case !s.Started:
		return nil, foldErr("no session_start: nothing to checkpoint")
	case !s.Between():
		return nil, foldErr("the offset falls inside a turn (a tool result or a recovery is due); fork at a turn boundary")
	case s.Branch != nil:
		return nil, foldErr("the session is already the branch %s/%d of a fork at step %d: a checkpoint is of the run before its fork", s.Branch.Arm, s.Branch.Replica, s.Branch.ForkStep)
	}
	b, err := s.Play.Checkpoint(forkStep, s.History)
	if err != nil {
		return nil, fmt.Errorf("checkpoint at fork step %d: %w", forkStep, err)
	}
	return b, nil
}

// Close releases the world the fold opened (an external agent's process;
// nothing for a built-in world). Copies of s share it.
func (s *Session) Close() error {
	if s.inst == nil {
		return nil
	}
	return s.inst.Close()
}

// Uninterrupted returns the domain events of a whole session that starts
// with start, as one worker running it without interruption writes them:
// what any interrupted and resumed run of the session must end up with.
func Uninterrupted(start Event) ([]Event, error) {
	var s Session
	defer s.Close()
	if err := s.Apply(start); err != nil {
		return nil, err
	}
	out := []Event{start}
	for {
		e, ok, err := s.Next(0)
		if err != nil || !ok {
			return out, err
		}
		if err := s.Apply(e); err != nil {
			return out, err
		}
		out = append(out, e)
	}
}
