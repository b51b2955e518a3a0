// Package counter is the seed document's toy world, generalised: a counter
// that has to reach a target (6) within a step budget (7 plus a slack drawn
// from [0, 0, 1, 2]), read through a sensor that may stick (from a value
// drawn from [none, none, 1, 2]) so that the observation stops updating and
// the greedy agent overshoots, which cannot be undone. Success is "declared
// done with the true value at the target". Refresh, the recovery, costs one
// step, un-sticks the sensor and re-reads the true value.
//
// With the default Params the world reproduces the seed's reference core
// exactly, draw for draw: seed N draws its task as random.Random(N) does
// (package pyrand), and Step follows the reference core's step and refresh
// line by line. The extra parameters make the pre-decision signal imperfect:
// increments that stall (the observation repeats though the sensor is fine),
// sensor noise, refreshes that fail, and other slack and fault distributions.
// Their randomness is drawn with world.Draw from the task seed and a per-kind
// counter kept in the state, so a copied state continues identically and
// every arm of a fork meets the same world.
package counter

import (
	"fmt"
	"strconv"

	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/pyrand"
)

// Name is the world's identifier in checkpoints, specs and tables.
const Name = "counter"

// Version is the world's version (world.Declaration.Version): it changes
// when a rule changes an outcome. Version 2 is the seed's world under
// schema version 2, outcome for outcome the same as version 1.
const Version = "2"

// The counter world's actions, indexes into its declaration's Actions.
// Every action, including a turn without a tool call, consumes one step of
// the run's budget.
const (
	// Increment is the counter world's one work tool.
	Increment world.Action = iota + 1
	// Declare ends the run claiming the goal is reached.
	Declare
	// Refresh is the recovery: re-read the world, un-sticking a stuck
	// sensor.
	Refresh
	// Nop is the content-free recovery (the placebo arm): a tool call that
	// burns an action and returns nothing new.
	Nop
)

// Declaration returns the counter world's declaration.
func Declaration() world.Declaration { return declaration }

var declaration = world.Declaration{
	Name:    Name,
	Version: Version,
	Description: "The seed's toy: a counter that must be declared done at a target within a step budget, " +
		"read through a sensor that may stick so that the greedy agent overshoots; refresh un-sticks it.",
	Params: []world.Param{
		{Name: "target", Kind: world.ParamInt, Default: int64(6), Min: world.Bound(1), Max: world.Bound(1 << 20),
			Description: "the value the agent must declare at (seed: 6)"},
		{Name: "base_budget", Kind: world.ParamInt, Default: int64(7), Min: world.Bound(1), Max: world.Bound(1 << 20),
			Description: "the step budget before slack (seed: 7)"},
		{Name: "slack", Kind: world.ParamIntList, Default: []int64{0, 0, 1, 2}, Min: world.Bound(0), Max: world.Bound(1 << 20),
			Description: "extra budget steps a task draws from, uniformly by position, as random.choice does (seed: 0,0,1,2)"},
		{Name: "freeze_at", Kind: world.ParamIntList, Default: []int64{0, 0, 1, 2}, Min: world.Bound(0), Max: world.Bound(1 << 20),
			Description: "values at which the sensor sticks, drawn after slack; 0 (or none) means never (seed: none,none,1,2)"},
		{Name: "p_stall", Kind: world.ParamFloat, Default: 0.0, Min: world.Bound(0), Max: world.Bound(1),
			Description: "probability an increment stalls: the true value and the observation stay put though the sensor is fine"},
		{Name: "p_obs_noise", Kind: world.ParamFloat, Default: 0.0, Min: world.Bound(0), Max: world.Bound(1),
			Description: "probability a sensor read is off by one, up or down with equal probability, never below 0"},
		{Name: "p_refresh_fail", Kind: world.ParamFloat, Default: 0.0, Min: world.Bound(0), Max: world.Bound(1),
			Description: "probability a refresh burns its step but neither un-sticks the sensor nor re-reads"},
	},
	Task: []world.Field{
		{Name: "budget", Kind: world.Int, Unit: "steps", Description: "the task's step budget: base_budget plus slack"},
		{Name: "slack", Kind: world.Int, Unit: "steps", Description: "the slack the task drew"},
		{Name: "freeze_at", Kind: world.Int, Nullable: true, Description: "the true value at which the sensor sticks; null when it never does"},
	},
	Features: []world.Field{
		{Name: "same_obs", Kind: world.Bool, Description: "the last increment left the observation unchanged (the seed's feature, \"obs repeated\"; other actions leave it as it was)"},
		{Name: "repeat_run", Kind: world.Int, Unit: "actions", Description: "consecutive increments, ending with the last, that left the observation unchanged (0 when same_obs is false)"},
		{Name: "obs_value", Kind: world.Int, Description: "the current observation"},
		{Name: "steps_used", Kind: world.Int, Unit: "steps", Description: "steps taken so far"},
		{Name: "budget_left", Kind: world.Int, Unit: "steps", Description: "budget minus steps used, never below 0"},
	},
	Hidden: []world.Field{
		{Name: "stuck", Kind: world.Bool, Description: "the sensor is stuck at the checkpoint"},
		{Name: "fault", Kind: world.Bool, Description: "the task has a sensor fault at all, stuck yet or not"},
		{Name: "value", Kind: world.Int, Description: "the true value behind the observation"},
	},
	FaultFlag: "fault",
	Actions:   []string{"no_tool", "increment", "declare", "refresh", "nop"},
	Interventions: []world.Intervention{
		{Arm: "on", Action: "refresh", Description: "refresh: costs one step, un-sticks the sensor and re-reads the true value"},
		{Arm: "placebo", Action: "nop", Description: "a tool call that burns one step and returns nothing new"},
	},
	Cost: world.CostModel{Fields: []string{world.CostSteps}, Description: "every action, a turn without a tool call included, costs one step of the budget"},
}

// ParamsOf converts resolved world parameters (world.Declaration.Resolve
// of the counter's declaration) to Params.
func ParamsOf(p world.Params) Params {
	ints := func(xs []int64) []int {
		out := make([]int, len(xs))
		for i, x := range xs {
			out[i] = int(x)
		}
		return out
	}
	return Params{Target: int(p.Int("target")), BaseBudget: int(p.Int("base_budget")),
		Slack: ints(p.Ints("slack")), FreezeAt: ints(p.Ints("freeze_at")),
		PStall: p.Float("p_stall"), PObsNoise: p.Float("p_obs_noise"), PRefreshFail: p.Float("p_refresh_fail")}
}

// WorldParams is the inverse of ParamsOf.
func (p Params) WorldParams() world.Params {
	ints := func(xs []int) []int64 {
		out := make([]int64, len(xs))
		for i, x := range xs {
			out[i] = int64(x)
		}
		return out
	}
	return world.Params{"target": int64(p.Target), "base_budget": int64(p.BaseBudget),
		"slack": ints(p.Slack), "freeze_at": ints(p.FreezeAt),
		"p_stall": p.PStall, "p_obs_noise": p.PObsNoise, "p_refresh_fail": p.PRefreshFail}
}

// Params are the counter world's parameters. The zero value is not valid;
// start from Default.
type Params struct {
	// Target is the value the agent must declare at (seed: 6).
	Target int `json:"target"`
	// BaseBudget is the step budget before slack (seed: 7).
	BaseBudget int `json:"base_budget"`
	// Slack lists the extra budget steps a task draws from, uniformly by
	// position, as random.choice does (seed: [0, 0, 1, 2]).
	Slack []int `json:"slack"`
	// FreezeAt lists the values at which the sensor sticks, drawn after
	// Slack; 0 means the sensor never sticks (seed: [None, None, 1, 2],
	// written [0, 0, 1, 2]).
	FreezeAt []int `json:"freeze_at"`
	// PStall is the probability that an increment fails: the true value and
	// the observation stay put though the sensor is fine (default 0).
	PStall float64 `json:"p_stall"`
	// PObsNoise is the probability that a sensor read is off by one, up or
	// down with equal probability, never below 0 (default 0).
	PObsNoise float64 `json:"p_obs_noise"`
	// PRefreshFail is the probability that a refresh burns its step but
	// neither un-sticks the sensor nor re-reads (default 0).
	PRefreshFail float64 `json:"p_refresh_fail"`
}

// Default returns the seed's parameters.
func Default() Params {
	return Params{Target: 6, BaseBudget: 7, Slack: []int{0, 0, 1, 2}, FreezeAt: []int{0, 0, 1, 2}}
}

// Validate reports the first parameter that is out of range, naming it as
// the spec file and flags do.
func (p Params) Validate() error {
	switch {
	case p.Target < 1:
		return fmt.Errorf("target must be at least 1, got %d", p.Target)
	case p.BaseBudget < 1:
		return fmt.Errorf("base_budget must be at least 1, got %d", p.BaseBudget)
	case len(p.Slack) == 0 || len(p.Slack) > 1<<20:
		return fmt.Errorf("slack must list between 1 and 2^20 values, got %d", len(p.Slack))
	case len(p.FreezeAt) == 0 || len(p.FreezeAt) > 1<<20:
		return fmt.Errorf("freeze_at must list between 1 and 2^20 values, got %d", len(p.FreezeAt))
	}
	for _, v := range p.Slack {
		if v < 0 || v > 1<<20 {
			return fmt.Errorf("slack values must be in [0, 2^20], got %d", v)
		}
	}
	for _, v := range p.FreezeAt {
		if v < 0 || v > 1<<20 {
			return fmt.Errorf("freeze_at values must be 0 (never) or a value in [1, 2^20], got %d", v)
		}
	}
	for _, q := range []struct {
		name string
		v    float64
	}{{"p_stall", p.PStall}, {"p_obs_noise", p.PObsNoise}, {"p_refresh_fail", p.PRefreshFail}} {
		if !(q.v >= 0 && q.v <= 1) {
			return fmt.Errorf("%s must be a probability in [0, 1], got %v", q.name, q.v)
		}
	}
	return nil
}

// MaxBudget is the largest budget a task can draw.
func (p Params) MaxBudget() int {
	m := 0
	for _, v := range p.Slack {
		m = max(m, v)
	}
	return p.BaseBudget + m
}

// State is one run of the counter world: plain data, copied by value, that
// round-trips through JSON. Field names follow the reference core.
type State struct {
	Seed      uint64 `json:"seed"`       // the task seed; keys the world's draws
	Target    int32  `json:"target"`     // value to declare at
	Budget    int32  `json:"budget"`     // step budget
	Steps     int32  `json:"steps"`      // steps used, recovery included
	V         int32  `json:"v"`          // the true value (hidden)
	Obs       int32  `json:"obs"`        // the sensor reading
	FreezeAt  int32  `json:"freeze_at"`  // value the sensor sticks at; 0 never
	Frozen    bool   `json:"frozen"`     // the sensor is stuck now (hidden)
	Declared  bool   `json:"declared"`   // the agent declared done
	SameObs   bool   `json:"same_obs"`   // the last action left obs unchanged
	RepeatRun int32  `json:"repeat_run"` // consecutive actions leaving obs unchanged
	Attempts  int32  `json:"attempts"`   // increments attempted: index of stall draws
	Reads     int32  `json:"reads"`      // sensor reads: index of noise draws
	Refreshes int32  `json:"refreshes"`  // refreshes applied: index of failure draws
}

// World is the counter world with fixed parameters. It implements
// world.World[State].
type World struct{ P Params }

// New returns the world for p, or p's validation error.
func New(p Params) (World, error) {
	if err := p.Validate(); err != nil {
		return World{}, err
	}
	return World{P: p}, nil
}

var _ world.World[State] = World{}

// Declaration returns the counter world's declaration.
func (World) Declaration() world.Declaration { return declaration }

// Start draws the task for seed exactly as the reference core's new_run:
// budget = base + random.choice(slack), then freeze_at = random.choice(freeze).
func (w World) Start(seed uint64) State { return w.StartWith(seed, pyrand.New(seed)) }

// StartWith is Start with a generator already seeded with seed (a
// pyrand.Gen, or a lane of a pyrand.Batch); it consumes g's outputs in the
// reference core's order.
func (w World) StartWith(seed uint64, g pyrand.Source) State {
	budget := w.P.BaseBudget + w.P.Slack[g.Choice(len(w.P.Slack))]
	freeze := w.P.FreezeAt[g.Choice(len(w.P.FreezeAt))]
	return State{Seed: seed, Target: int32(w.P.Target), Budget: int32(budget), FreezeAt: int32(freeze)}
}

// Seed returns the task seed.
func (World) Seed(s *State) uint64 { return s.Seed }

// Over reports whether the run has ended: declared, or its budget spent.
// The reference core marks the latter lazily, on the next step call, but no
// action happens in either case, so the outcome is the same.
func (World) Over(s *State) bool { return over(s) }

// over is Over, small enough to inline into the Lab's loops.
func over(s *State) bool { return s.Declared || s.Steps >= s.Budget }

// Steps returns the steps taken.
func (World) Steps(s *State) int { return int(s.Steps) }

// Script is the reference core's agent: declare once the observation has
// reached the target, increment otherwise.
func (World) Script(s *State) world.Action { return script(s) }

func script(s *State) world.Action {
	if s.Obs >= s.Target {
		return Declare
	}
	return Increment
}

// tools are the actions the counter world's agent may call.
var tools = []world.Action{Increment, Declare}

// Tools returns the actions the agent may call: increment and declare. The
// slice is shared; callers must not modify it.
func (World) Tools() []world.Action { return tools }

// Success is the reference core's outcome: declared, with the true value at
// the target.
func (World) Success(s *State) bool { return s.Declared && s.V == s.Target }

// Task returns the task's budget, slack and freeze_at (null when the
// sensor never sticks).
func (w World) Task(s *State, dst []world.Value) []world.Value {
	freeze := world.IntValue(int64(s.FreezeAt))
	if s.FreezeAt == 0 {
		freeze = world.NullValue()
	}
	return append(dst, world.IntValue(int64(s.Budget)), world.IntValue(int64(s.Budget)-int64(w.P.BaseBudget)), freeze)
}

// Features returns same_obs, repeat_run, obs_value, steps_used and
// budget_left.
func (World) Features(s *State, dst []world.Value) []world.Value {
	return append(dst, world.BoolValue(s.SameObs), world.IntValue(int64(s.RepeatRun)), world.IntValue(int64(s.Obs)),
		world.IntValue(int64(s.Steps)), world.IntValue(int64(max(0, s.Budget-s.Steps))))
}

// Hidden returns whether the sensor is stuck, whether the task has a
// fault, and the true value.
func (World) Hidden(s *State, dst []world.Value) []world.Value {
	return append(dst, world.BoolValue(s.Frozen), world.BoolValue(s.FreezeAt != 0), world.IntValue(int64(s.V)))
}

// Observation is what the counter world's agent sees after a turn.
type Observation struct {
	Obs   int32 `json:"obs"`   // the sensor reading
	Steps int32 `json:"steps"` // steps taken
}

// Observe returns the sensor reading and the steps taken.
func (World) Observe(s *State) any { return Observation{Obs: s.Obs, Steps: s.Steps} }

// AppendObservation appends the JSON of s's observation to b: the bytes
// json.Marshal writes of Observe(s), without reflection (transcripts hold
// one per step; TestAppendJSONMatchesMarshal holds the two equal).
func AppendObservation(s *State, b []byte) []byte {
	b = appendInt(append(b, `{"obs":`...), s.Obs)
	b = appendInt(append(b, `,"steps":`...), s.Steps)
	return append(b, '}')
}

// Cost returns the steps taken.
func (World) Cost(s *State) world.Cost { return world.Cost{Steps: int64(s.Steps)} }

// Step applies a to *s. Increment and Declare follow the reference core's
// step (after its budget check, which Over covers); Refresh follows its
// refresh; Nop and a turn without a tool call only burn the step.
func (w World) Step(s *State, a world.Action) { w.step(s, a) }

// step is Step; Step and the fast Lab share it, so there is one copy of the
// transition rules.
func (w *World) step(s *State, a world.Action) {
	s.Steps++
	switch a {
	case Declare:
		s.Declared = true
	case Increment:
		s.Attempts++
		moved := !(w.P.PStall > 0 && world.Draw(s.Seed, world.PurposeStall, int(s.Attempts)) < w.P.PStall)
		if moved {
			s.V++
			if s.FreezeAt == s.V {
				s.Frozen = true
			}
		}
		prev := s.Obs
		if !s.Frozen {
			s.Obs = w.read(s)
		}
		s.SameObs = s.Obs == prev
		if s.SameObs {
			s.RepeatRun++
		} else {
			s.RepeatRun = 0
		}
	case Refresh:
		s.Refreshes++
		if w.P.PRefreshFail > 0 && world.Draw(s.Seed, world.PurposeRefreshFail, int(s.Refreshes)) < w.P.PRefreshFail {
			break
		}
		s.Frozen = false
		s.Obs = w.read(s)
	}
}

// read returns the sensor's reading of the true value, off by one with
// probability PObsNoise.
func (w *World) read(s *State) int32 {
	s.Reads++
	if w.P.PObsNoise > 0 && world.Draw(s.Seed, world.PurposeObsNoise, int(s.Reads)) < w.P.PObsNoise {
		if world.Draw(s.Seed, world.PurposeObsNoiseSign, int(s.Reads)) < 0.5 {
			return max(0, s.V-1)
		}
		return s.V + 1
	}
	return s.V
}

// AppendJSON appends s's JSON encoding to b: the same bytes json.Marshal
// produces, without reflection. The sweep encodes a checkpoint per fork
// with it (fork.Encoder.StateJSON); TestAppendJSONMatchesMarshal holds it
// to json.Marshal.
func (s *State) AppendJSON(b []byte) []byte {
	b = append(b, `{"seed":`...)
	b = strconv.AppendUint(b, s.Seed, 10)
	b = appendInt(append(b, `,"target":`...), s.Target)
	b = appendInt(append(b, `,"budget":`...), s.Budget)
	b = appendInt(append(b, `,"steps":`...), s.Steps)
	b = appendInt(append(b, `,"v":`...), s.V)
	b = appendInt(append(b, `,"obs":`...), s.Obs)
	b = appendInt(append(b, `,"freeze_at":`...), s.FreezeAt)
	b = appendBool(append(b, `,"frozen":`...), s.Frozen)
	b = appendBool(append(b, `,"declared":`...), s.Declared)
	b = appendBool(append(b, `,"same_obs":`...), s.SameObs)
	b = appendInt(append(b, `,"repeat_run":`...), s.RepeatRun)
	b = appendInt(append(b, `,"attempts":`...), s.Attempts)
	b = appendInt(append(b, `,"reads":`...), s.Reads)
	b = appendInt(append(b, `,"refreshes":`...), s.Refreshes)
	return append(b, '}')
}

// appendInt appends v in decimal, as strconv.AppendInt does, with a
// shortcut for the small values states are made of.
func appendInt(b []byte, v int32) []byte {
	switch {
	case uint32(v) < 10:
		return append(b, byte('0'+v))
	case uint32(v) < 100:
		return append(b, byte('0'+v/10), byte('0'+v%10))
	}
	return strconv.AppendInt(b, int64(v), 10)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}
