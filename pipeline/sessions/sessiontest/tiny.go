// Package sessiontest holds what the tests of sessions on the log share: a
// tiny world registered only inside tests, so that the generic code (the
// fold, the worker, forks from offsets, a sweep played on the log) is
// proven on a world that is not the counter and that nothing outside its
// own file names.
//
// The tiny world, "tiny": walk a position to a goal and finish there. A
// step stalls with probability p_stall; from a seeded moment the agent's
// view goes blind (it keeps seeing the old position, the fault), so the
// greedy agent walks past the goal unless it peeks (the recovery, arm on).
// Its observation is a JSON object whose keys are not in sorted order, and
// it reports two cost fields (steps and tokens), so the fold's canonical
// JSON and the cost columns meet something the counter does not give them.
// It declares no placebo intervention.
package sessiontest

import (
	"testing"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/world"
)

// Name is the tiny world's name in the registry.
const Name = "tiny"

// The tiny world's actions.
const (
	Walk   world.Action = 1
	Finish world.Action = 2
	Peek   world.Action = 3
)

// State is one run of the tiny world.
type State struct {
	Seed    uint64 `json:"seed"`
	Goal    int32  `json:"goal"`
	Budget  int32  `json:"budget"`
	BlindAt int32  `json:"blind_at"` // step from which the view is stale; 0: never
	Steps   int32  `json:"steps"`
	Pos     int32  `json:"pos"`
	Seen    int32  `json:"seen"`
	Blind   bool   `json:"blind"`
	Peeked  bool   `json:"peeked"`
	Stalled bool   `json:"stalled"`
	Done    bool   `json:"done"`
	Walks   int32  `json:"walks"`
}

// Decl is the tiny world's declaration.
var Decl = world.Declaration{
	Name: Name, Version: "1",
	Description: "test-only: walk to a goal and finish there, through a view that may go stale",
	Params: []world.Param{
		{Name: "goal", Kind: world.ParamInt, Default: int64(4), Min: world.Bound(1), Max: world.Bound(100), Description: "where to finish"},
		{Name: "p_stall", Kind: world.ParamFloat, Default: 0.2, Min: world.Bound(0), Max: world.Bound(1), Description: "probability a walk stalls"},
	},
	Task: []world.Field{
		{Name: "blind_at", Kind: world.Int, Nullable: true, Description: "step the view goes stale at; null: never"},
	},
	Features: []world.Field{
		{Name: "stalled", Kind: world.Bool, Description: "the last walk did not move the view"},
		{Name: "left", Kind: world.Int, Unit: "steps", Description: "budget left"},
	},
	Hidden: []world.Field{
		{Name: "blind", Kind: world.Bool, Description: "the view is stale now"},
		{Name: "faulty", Kind: world.Bool, Description: "the task goes blind at some step"},
	},
	FaultFlag: "faulty",
	Actions:   []string{"no_tool", "walk", "finish", "peek"},
	Interventions: []world.Intervention{
		{Arm: "on", Action: "peek", Description: "look again: the view is fresh from now on"},
	},
	Cost: world.CostModel{Fields: []string{world.CostSteps, world.CostTokens}, Description: "a step costs 10 tokens plus 3 per walk so far"},
}

// World is the tiny world with one configuration.
type World struct {
	Goal   int32
	PStall float64
}

// Declaration returns Decl.
func (World) Declaration() world.Declaration { return Decl }

// Start draws the task: budget goal+2..goal+4, blind at step 0 (never), 2
// or 3.
func (w World) Start(seed uint64) State {
	blind := [...]int32{0, 0, 2, 3}[int(world.Draw(seed, 101, 0)*4)]
	return State{Seed: seed, Goal: w.Goal, Budget: w.Goal + 2 + int32(world.Draw(seed, 102, 0)*3), BlindAt: blind}
}

// Seed returns the task seed.
func (World) Seed(s *State) uint64 { return s.Seed }

// Over: finished or out of budget.
func (World) Over(s *State) bool { return s.Done || s.Steps >= s.Budget }

// Steps returns the steps taken.
func (World) Steps(s *State) int { return int(s.Steps) }

// Script finishes once the view shows the goal, and walks otherwise.
func (World) Script(s *State) world.Action {
	if s.Seen >= s.Goal {
		return Finish
	}
	return Walk
}

var tools = []world.Action{Walk, Finish}

// Tools are walk and finish.
func (World) Tools() []world.Action { return tools }

// Step applies one action.
func (w World) Step(s *State, a world.Action) {
	s.Steps++
	if s.BlindAt != 0 && s.Steps >= s.BlindAt && !s.Peeked {
		s.Blind = true
	}
	switch a {
	case Walk:
		s.Walks++
		prev := s.Seen
		if world.Draw(s.Seed, 103, int(s.Walks)) >= w.PStall {
			s.Pos++
		}
		if !s.Blind {
			s.Seen = s.Pos
		}
		s.Stalled = s.Seen == prev
	case Finish:
		s.Done = true
	case Peek:
		s.Peeked, s.Blind = true, false
		s.Seen = s.Pos
	}
}

// Success: finished at the goal.
func (World) Success(s *State) bool { return s.Done && s.Pos == s.Goal }

// Task returns blind_at.
func (World) Task(s *State, dst []world.Value) []world.Value {
	if s.BlindAt == 0 {
		return append(dst, world.NullValue())
	}
	return append(dst, world.IntValue(int64(s.BlindAt)))
}

// Features returns stalled and left.
func (World) Features(s *State, dst []world.Value) []world.Value {
	return append(dst, world.BoolValue(s.Stalled), world.IntValue(int64(max(0, s.Budget-s.Steps))))
}

// Hidden returns blind and faulty.
func (World) Hidden(s *State, dst []world.Value) []world.Value {
	return append(dst, world.BoolValue(s.Blind), world.BoolValue(s.BlindAt != 0))
}

// Cost is steps, and 10 tokens a step plus 3 per walk.
func (World) Cost(s *State) world.Cost {
	return world.Cost{Steps: int64(s.Steps), Tokens: 10*int64(s.Steps) + 3*int64(s.Walks)}
}

// Observe returns a map whose keys encoding/json sorts, unlike a struct's.
func (World) Observe(s *State) any {
	return map[string]any{"seen": s.Seen, "steps": s.Steps, "done": s.Done, "a_note": "view"}
}

// Definition is the tiny world's registry entry.
var Definition = lab.Builtin[State]{Decl: Decl, New: func(p world.Params) (world.World[State], error) {
	return World{Goal: int32(p.Int("goal")), PStall: p.Float("p_stall")}, nil
}, MaxSteps: func(p world.Params) int { return int(p.Int("goal")) + 4 }}

// Register registers the tiny world for the test and unregisters it when
// the test ends.
func Register(t testing.TB) {
	t.Helper()
	lab.Register(Definition)
	t.Cleanup(func() { lab.Unregister(Name) })
}
