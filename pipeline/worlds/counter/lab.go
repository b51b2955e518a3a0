package counter

import (
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
)

// Lab is fork.Lab[State] written out for the counter world: the same
// Advance, Finish and Branch, move for move, with direct calls and states
// updated in place.
//
// Why it exists: fork.Lab plays any world through the world.World
// interface, so each turn costs four dynamic calls (Observe, Script, Tools,
// Step) and several copies of the state, none of them inlined; a sweep of
// millions of seeds spent most of its simulation time there. fork.Lab stays
// the reference, and the one other worlds and the single-branch paths
// (forklab fork, forklab checkpoint, the session fold) use; the sweep uses
// Lab. TestLabMatchesForkLab holds the two equal on thousands of seeds,
// every fork step, arm and several replicas, for greedy, noisy and
// imperfect configurations, comparing states, outcomes and histories.
//
// A Lab is read-only once made; it may be shared by goroutines.
type Lab struct {
	World World
	Model fork.Model
}

// choose is the model's action in s: fork.Model.Choose applied to the
// script's greedy choice, as fork.Lab's turn does. It is small enough to
// be inlined; the noisy path is a call.
func (l *Lab) choose(s *State, key uint64) world.Action {
	if l.Model.Temperature != 0 { // Choose's own first test
		return l.noisy(s, key)
	}
	return script(s)
}

//go:noinline
func (l *Lab) noisy(s *State, key uint64) world.Action {
	return l.Model.Choose(script(s), tools, key, int(s.Steps))
}

// Advance is fork.Lab.Advance, in place: it plays *s until the run has
// used forkAt steps or is over, appending each turn to hist if hist is not
// nil.
func (l *Lab) Advance(s *State, key uint64, forkAt int, hist *[]world.Action) {
	for !over(s) && int(s.Steps) < forkAt {
		a := l.choose(s, key)
		l.World.step(s, a)
		if hist != nil {
			*hist = append(*hist, a)
		}
	}
}

// Finish is fork.Lab.Finish, in place: it plays *s to the end with noise
// stream key and reports whether the run succeeded.
func (l *Lab) Finish(s *State, key uint64) bool {
	for !over(s) {
		l.World.step(s, l.choose(s, key))
	}
	return s.Declared && s.V == s.Target
}

// Branch is fork.Lab.Branch, into *final: it copies s there, applies arm's
// intervention unconditionally and plays the rest of the run with the
// branch's noise stream. (State is passed by pointer here and not by value
// as in fork.Lab: copies of it were a good part of a sweep's time.)
func (l *Lab) Branch(final, s *State, seed uint64, forkStep int, arm fork.Arm, replica int, fires bool) (success, intervened bool) {
	*final = *s
	if a, ok := intervention(arm, fires); ok {
		l.World.step(final, a)
		intervened = true
	}
	// A greedy model never reads its noise stream, so its key is not
	// worth computing.
	var key uint64
	if l.Model.Temperature != 0 {
		key = fork.BranchKey(seed, forkStep, arm, replica, fires)
	}
	return l.Finish(final, key), intervened
}

// BranchTrace is Branch telling trace every step it plays, the
// intervention first (fork.Lab.BranchTrace): a transcript's steps. Branch
// stays apart so that the sweep's common case pays nothing for it.
func (l *Lab) BranchTrace(final, s *State, seed uint64, forkStep int, arm fork.Arm, replica int, fires bool, trace fork.Trace[State]) (success, intervened bool) {
	*final = *s
	if a, ok := intervention(arm, fires); ok {
		l.World.step(final, a)
		intervened = true
		trace(a, true, final)
	}
	var key uint64
	if l.Model.Temperature != 0 {
		key = fork.BranchKey(seed, forkStep, arm, replica, fires)
	}
	for !over(final) {
		a := l.choose(final, key)
		l.World.step(final, a)
		trace(a, false, final)
	}
	return final.Declared && final.V == final.Target, intervened
}

// intervention is fork.Lab.Intervention for the counter world: refresh for
// on (and policy where its rule fires), nop for placebo.
func intervention(arm fork.Arm, fires bool) (world.Action, bool) {
	switch arm {
	case fork.On:
		return Refresh, true
	case fork.Placebo:
		return Nop, true
	case fork.Policy:
		return Refresh, fires
	}
	return 0, false
}
