// Package world defines what the fork lab needs from an agent environment:
// a deterministic, pure transition function from (state, action) to state,
// with no files, clocks or shared randomness behind it, in the way etcd's raft
// library keeps its algorithm a state machine and leaves I/O to the caller.
//
// A world owns its state type S (plain data that round-trips through JSON),
// the scripted fake model that plays it greedily, the features an observer
// can see before deciding whether to recover, and the hidden truth that the
// harness records beside them but never uses as a feature.
//
// Randomness inside a world (a flaky step, a noisy sensor) is not a stream:
// each draw is a pure function of the task seed and what is being drawn (see
// Draw), so a copied state continues exactly as the original would.
package world

import "fmt"

// Action is what happens in one turn. Agents choose Increment, Declare or
// NoTool; the harness applies Refresh (the recovery) and Nop (the placebo
// recovery) at the fork.
type Action uint8

// The actions. Every action, including a turn without a tool call, consumes
// one step of the run's budget.
const (
	// NoTool is a model turn that called no tool. With forced tool choice
	// gone on the newest models (see the seed), a loop must accept such a
	// turn as a normal, budget-consuming turn.
	NoTool Action = iota
	// Increment is the counter world's one work tool.
	Increment
	// Declare ends the run claiming the goal is reached.
	Declare
	// Refresh is the recovery: re-read the world, un-sticking a stuck sensor.
	Refresh
	// Nop is the content-free recovery (the placebo arm): a tool call that
	// burns an action and returns nothing new.
	Nop
)

var actionNames = [...]string{NoTool: "no_tool", Increment: "increment", Declare: "declare", Refresh: "refresh", Nop: "nop"}

// String returns the action's snake_case name, as written to checkpoints and
// session events.
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", a)
}

// ParseAction is the inverse of Action.String; it fails on unknown names.
func ParseAction(s string) (Action, error) {
	for i, n := range actionNames {
		if n == s {
			return Action(i), nil
		}
	}
	return 0, fmt.Errorf("unknown action %q (want one of no_tool, increment, declare, refresh, nop)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (a Action) MarshalText() ([]byte, error) {
	if int(a) >= len(actionNames) {
		return nil, fmt.Errorf("unknown action %d", a)
	}
	return []byte(a.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *Action) UnmarshalText(b []byte) error {
	v, err := ParseAction(string(b))
	*a = v
	return err
}

// Observation is what the agent sees at the start of a turn.
type Observation struct {
	Value  int // the sensor reading
	Target int // the value the task asks for
	Steps  int // steps used so far
	Budget int // the step budget
	// Over: the run has ended (declared, or out of budget) and takes no
	// more turns. It is the harness's signal, not the agent's.
	Over bool
}

// Features are the pre-decision signals recorded at a checkpoint: anything an
// observer of the run could compute before choosing whether to recover.
// They are the columns slices and policy triggers are built from.
type Features struct {
	// SameObs: did the last action leave the observation unchanged? The
	// seed's feature ("obs repeated").
	SameObs bool
	// RepeatRun is the number of consecutive actions, ending with the
	// last, that left the observation unchanged (0 when SameObs is false).
	RepeatRun int
	// ObsValue is the current observation.
	ObsValue int
	// StepsUsed is the number of steps taken so far.
	StepsUsed int
	// BudgetLeft is budget minus steps used (never below 0).
	BudgetLeft int
}

// Truth is the hidden ground truth at a checkpoint: what the harness knows
// and the agent does not. It is stored for evaluation (for instance the
// "zero harms on clean runs" cap) and is never a feature.
type Truth struct {
	// Stuck: the sensor was stuck at the checkpoint.
	Stuck bool
	// Fault: the task has a sensor fault at all, stuck yet or not.
	Fault bool
	// Value is the true value behind the observation.
	Value int
}

// World is a deterministic environment over state type S. All methods are
// pure: they neither mutate their argument nor touch anything outside it.
type World[S any] interface {
	// Name is the world's identifier in checkpoints and tables.
	Name() string
	// Start returns the initial state of the task drawn for seed.
	Start(seed uint64) S
	// Observe returns what the agent sees in s, and whether the run is
	// over.
	Observe(s S) Observation
	// Script is the scripted fake model's greedy choice for an
	// observation; Tools lists the actions the model may call.
	Script(o Observation) Action
	Tools() []Action
	// Step applies one action and returns the next state. The caller
	// asks only while the run is not over, except for the recovery
	// applied at a fork, which the harness applies unconditionally as the
	// seed does.
	Step(s S, a Action) S
	// Success reports whether a finished run met its goal.
	Success(s S) bool
	// Features and Truth describe s at a checkpoint.
	Features(s S) Features
	Truth(s S) Truth
}
