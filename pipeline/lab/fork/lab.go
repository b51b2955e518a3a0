package fork

import (
	"fmt"

	"github.com/forklab/forklab/pipeline/world"
)

// Lab plays one world with one model. Its methods are pure functions of
// their arguments (states are changed only where a pointer to them is
// passed); a Lab value may be shared by any number of goroutines. Make it
// with NewLab.
type Lab[S any] struct {
	World world.World[S]
	Model Model
	Decl  world.Declaration
	// on and placebo are the actions of the declared interventions;
	// hasOn and hasPlacebo say whether the world declares them.
	on, placebo       world.Action
	hasOn, hasPlacebo bool
}

// NewLab returns the lab of w played by m. It fails if the declaration is
// invalid or names an intervention action it does not list.
func NewLab[S any](w world.World[S], m Model) (Lab[S], error) {
	d := w.Declaration()
	if err := d.Validate(); err != nil {
		return Lab[S]{}, err
	}
	l := Lab[S]{World: w, Model: m, Decl: d}
	if iv, ok := d.Intervention(string(On)); ok {
		a, found := d.Action(iv.Action)
		if !found {
			return l, fmt.Errorf("world %s: on's action %q is not declared", d.Name, iv.Action)
		}
		l.on, l.hasOn = a, true
	}
	if iv, ok := d.Intervention(string(Placebo)); ok {
		a, found := d.Action(iv.Action)
		if !found {
			return l, fmt.Errorf("world %s: placebo's action %q is not declared", d.Name, iv.Action)
		}
		l.placebo, l.hasPlacebo = a, true
	}
	return l, nil
}

// Supports reports an arm the world cannot play: on and policy need an on
// intervention, placebo a placebo one.
func (l *Lab[S]) Supports(arm Arm) error {
	switch {
	case (arm == On || arm == Policy) && !l.hasOn, arm == Placebo && !l.hasPlacebo:
		return fmt.Errorf("world %s declares no intervention for arm %s (its arms: %v)", l.Decl.Name, arm, l.Decl.Arms())
	}
	return nil
}

// Advance plays *s with the model until the run has taken forkAt steps or
// is over — the reference core's "while steps < fork_at and not done:
// step". Noise comes from stream key. If hist is not nil, each action taken
// is appended to it.
func (l *Lab[S]) Advance(s *S, key uint64, forkAt int, hist *[]world.Action) {
	for !l.World.Over(s) && l.World.Steps(s) < forkAt {
		a := l.choose(s, key)
		l.World.Step(s, a)
		if hist != nil {
			*hist = append(*hist, a)
		}
	}
}

// Finish plays *s to the end with noise stream key and reports whether the
// run succeeded.
func (l *Lab[S]) Finish(s *S, key uint64) bool {
	for !l.World.Over(s) {
		l.World.Step(s, l.choose(s, key))
	}
	return l.World.Success(s)
}

// choose is the model's action in s.
func (l *Lab[S]) choose(s *S, key uint64) world.Action {
	greedy := l.World.Script(s)
	if l.Model.Temperature == 0 {
		return greedy
	}
	return l.Model.Choose(greedy, l.World.Tools(), key, l.World.Steps(s))
}

// Intervention returns the action arm applies at the fork, and false when it
// applies none. fires is the guard rule's verdict, read only by Policy.
func (l *Lab[S]) Intervention(arm Arm, fires bool) (world.Action, bool) {
	switch arm {
	case On:
		return l.on, l.hasOn
	case Placebo:
		return l.placebo, l.hasPlacebo
	case Policy:
		return l.on, l.hasOn && fires
	}
	return 0, false
}

// Branch finishes one branch of a fork of s into *final: it copies *s
// there, applies arm's intervention (unconditionally, as the reference core
// applies refresh even to a run already over) and plays on with the
// branch's own noise stream. It reports whether the run succeeded and
// whether an intervention was applied.
func (l *Lab[S]) Branch(final, s *S, seed uint64, forkStep int, arm Arm, replica int, fires bool) (success, intervened bool) {
	return l.BranchTrace(final, s, seed, forkStep, arm, replica, fires, nil)
}

// Trace is told every step of a branch as it is played: the action, whether
// it was the arm's intervention at the fork, and the state after it.
type Trace[S any] func(a world.Action, intervention bool, s *S)

// BranchTrace is Branch, telling trace (when not nil) every step it plays,
// the intervention first: what a branch's transcript records.
func (l *Lab[S]) BranchTrace(final, s *S, seed uint64, forkStep int, arm Arm, replica int, fires bool, trace Trace[S]) (success, intervened bool) {
	*final = *s
	if a, ok := l.Intervention(arm, fires); ok {
		l.World.Step(final, a)
		intervened = true
		if trace != nil {
			trace(a, true, final)
		}
	}
	var key uint64
	if l.Model.Temperature != 0 { // a greedy model never reads its noise
		key = BranchKey(seed, forkStep, arm, replica, fires)
	}
	if trace == nil {
		return l.Finish(final, key), intervened
	}
	for !l.World.Over(final) {
		a := l.choose(final, key)
		l.World.Step(final, a)
		trace(a, false, final)
	}
	return l.World.Success(final), intervened
}

// Checkpoint plays seed's run to forkStep and returns it as a checkpoint,
// with the world's parameters p.
func (l *Lab[S]) Checkpoint(seed uint64, forkStep int, p world.Params) Checkpoint[S] {
	s := l.World.Start(seed)
	var hist []world.Action
	l.Advance(&s, PrefixKey(seed), forkStep, &hist)
	return Checkpoint[S]{Version: CheckpointVersion, World: l.Decl.Name, WorldVersion: l.Decl.Version,
		Params: p, Model: l.Model, ForkStep: forkStep, History: l.Turns(hist), State: s}
}

// Turns names a history of actions: turn i took step i+1.
func (l *Lab[S]) Turns(hist []world.Action) []Turn {
	turns := make([]Turn, len(hist))
	for i, a := range hist {
		turns[i] = Turn{Step: i + 1, Action: a.Name(&l.Decl)}
	}
	return turns
}
