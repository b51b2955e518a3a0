// Package world defines what the fork lab needs from an agent environment,
// and how a world declares itself to everything downstream.
//
// A world is two things. Its Declaration (declare.go) says what it is to
// the rest of forklab: its name and version, its parameters, what a seed
// draws, the pre-decision features an observer can see at a checkpoint,
// the hidden truth recorded beside them (and which hidden flag means the
// run had a fault), the interventions its treatment arms apply, and its
// cost model. The sweep, the Parquet schema, the SQL views, the policy
// search and the report read the declaration and nothing else, so no layer
// names a world's features.
//
// Its World implementation is the state machine: a deterministic, pure
// transition function from (state, action) to state, with no files, clocks
// or shared randomness behind it, in the way etcd's raft library keeps its
// algorithm a state machine and leaves I/O to the caller. A world owns its
// state type S (plain data that round-trips through JSON), the scripted
// fake model that plays it greedily, and the functions that read features,
// hidden truth, task draws and cost off a state.
//
// Randomness inside a world (a flaky step, a noisy sensor) is not a stream:
// each draw is a pure function of the task seed and what is being drawn (see
// Draw), so a copied state continues exactly as the original would.
//
// An agent outside forklab (docs/agent-protocol.md) gives the same
// Declaration in reply to initialize; only built-in worlds implement World.
package world

import "fmt"

// Action is what happens in one turn: an index into the declaration's
// Actions. NoTool is every world's action 0; the rest are the world's own.
// The harness applies the declared interventions at the fork.
type Action uint8

// NoTool is a model turn that called no tool. With forced tool choice gone
// on the newest models (see the seed), a loop must accept such a turn as a
// normal, budget-consuming turn.
const NoTool Action = 0

// Name returns the action's name in the declaration d.
func (a Action) Name(d *Declaration) string {
	if int(a) < len(d.Actions) {
		return d.Actions[a]
	}
	return fmt.Sprintf("action(%d)", a)
}

// Cost is what a run has cost so far, or what a branch cost from its fork
// to its end: the fields of CostFields. A world fills the fields its
// CostModel reports; the others stay zero and are written as NULL.
//
// In JSON (the manifest's cost, fork --json, the agent journal) its keys
// are snake_case like every other: {"steps":…,"tokens":…,"usd":…,"seconds":…}.
// Files written before they were (with Go's names, "Steps") still decode:
// encoding/json matches keys regardless of case.
type Cost struct {
	Steps   int64   `json:"steps"`   // turns taken, interventions included
	Tokens  int64   `json:"tokens"`  // model tokens
	USD     float64 `json:"usd"`     // money, US dollars
	Seconds float64 `json:"seconds"` // wall time
}

// Sub returns c - o, field by field: the cost of a branch is its final
// cost minus the cost at its fork.
func (c Cost) Sub(o Cost) Cost {
	return Cost{Steps: c.Steps - o.Steps, Tokens: c.Tokens - o.Tokens, USD: c.USD - o.USD, Seconds: c.Seconds - o.Seconds}
}

// Add returns c + o, field by field.
func (c Cost) Add(o Cost) Cost {
	return Cost{Steps: c.Steps + o.Steps, Tokens: c.Tokens + o.Tokens, USD: c.USD + o.USD, Seconds: c.Seconds + o.Seconds}
}

// Max returns the larger of c and o in each field.
func (c Cost) Max(o Cost) Cost {
	return Cost{Steps: max(c.Steps, o.Steps), Tokens: max(c.Tokens, o.Tokens), USD: max(c.USD, o.USD), Seconds: max(c.Seconds, o.Seconds)}
}

// Field returns the field named by one of CostFields (CostSteps,
// CostTokens, CostUSD, CostSeconds) as a float64; 0 for another name.
func (c Cost) Field(name string) float64 {
	switch name {
	case CostSteps:
		return float64(c.Steps)
	case CostTokens:
		return float64(c.Tokens)
	case CostUSD:
		return c.USD
	case CostSeconds:
		return c.Seconds
	}
	return 0
}

// World is a deterministic environment over state type S. Every method is
// a pure function of its arguments: Step changes only the state it is
// given, the others change nothing. A World value holds the configuration's
// parameters and is read-only: it may be shared by goroutines.
type World[S any] interface {
	// Declaration describes the world (the same for every parameter
	// setting).
	Declaration() Declaration
	// Start returns the initial state of the task seed draws.
	Start(seed uint64) S
	// Seed returns the task seed of a state: a checkpoint is verified by
	// replaying its seed's run.
	Seed(s *S) uint64
	// Over reports whether the run has ended (succeeded, given up, or out
	// of budget) and takes no more turns.
	Over(s *S) bool
	// Steps is the number of turns taken so far, interventions included:
	// a run is forked once it has taken the fork step's number of turns.
	Steps(s *S) int
	// Script is the scripted fake model's greedy choice in s; Tools lists
	// the actions the model may call, which a noisy model picks among
	// (fork.Model). Tools' slice is shared and must not be modified.
	Script(s *S) Action
	Tools() []Action
	// Step applies one action to *s. The lab asks only while the run is
	// not over, except for an intervention at a fork, which it applies
	// unconditionally, as the seed's reference core applies refresh.
	Step(s *S, a Action)
	// Success reports whether a finished run met its goal.
	Success(s *S) bool
	// Task, Features and Hidden append the declared task draws, features
	// and hidden truths of s to dst, in declaration order, and return it.
	Task(s *S, dst []Value) []Value
	Features(s *S, dst []Value) []Value
	Hidden(s *S, dst []Value) []Value
	// Cost returns what the run in s has cost since its start.
	Cost(s *S) Cost
	// Observe returns what the agent sees in s, as a JSON-ready value
	// (a small struct or map): session events record it after every
	// turn, so a reader of the log sees the run as the agent did.
	Observe(s *S) any
}
