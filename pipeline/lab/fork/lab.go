package fork

import "github.com/forklab/forklab/pipeline/world"

// Lab plays one world with one model. Its methods are pure functions of
// their arguments; a Lab value may be shared by any number of goroutines.
type Lab[S any] struct {
	World world.World[S]
	Model Model
}

// Advance plays s with the model until the run has used forkAt steps or is
// over — the reference core's "while steps < fork_at and not done: step" —
// and returns the state there. Noise comes from stream key. If hist is not
// nil, each turn taken is appended to it.
func (l Lab[S]) Advance(s S, key uint64, forkAt int, hist *[]Turn) S {
	for {
		o := l.World.Observe(s)
		if o.Over || o.Steps >= forkAt {
			return s
		}
		s = l.turn(s, o, key, hist)
	}
}

// Finish plays s to the end with noise stream key and returns the final
// state and whether the run succeeded.
func (l Lab[S]) Finish(s S, key uint64) (S, bool) {
	for {
		o := l.World.Observe(s)
		if o.Over {
			return s, l.World.Success(s)
		}
		s = l.turn(s, o, key, nil)
	}
}

// turn plays one model turn from s, whose observation is o.
func (l Lab[S]) turn(s S, o world.Observation, key uint64, hist *[]Turn) S {
	a := l.Model.Choose(l.World.Script(o), l.World.Tools(), key, o.Steps)
	s = l.World.Step(s, a)
	if hist != nil {
		after := l.World.Observe(s)
		*hist = append(*hist, Turn{Step: after.Steps, Action: a, Obs: after.Value})
	}
	return s
}

// Intervention returns the action arm applies at the fork, and false when it
// applies none. fires is the guard rule's verdict, read only by Policy.
func Intervention(arm Arm, fires bool) (world.Action, bool) {
	switch arm {
	case On:
		return world.Refresh, true
	case Placebo:
		return world.Nop, true
	case Policy:
		return world.Refresh, fires
	}
	return 0, false
}

// Branch finishes one branch of a fork of s: it applies arm's intervention
// (unconditionally, as the reference core applies refresh even to a run
// already over) and plays on with the branch's own noise stream. It returns
// the final state, whether the run succeeded, and whether an intervention
// was applied.
func (l Lab[S]) Branch(s S, seed uint64, forkStep int, arm Arm, replica int, fires bool) (final S, success, intervened bool) {
	if a, ok := Intervention(arm, fires); ok {
		s = l.World.Step(s, a)
		intervened = true
	}
	final, success = l.Finish(s, Key(seed, forkStep, arm, replica))
	return final, success, intervened
}
