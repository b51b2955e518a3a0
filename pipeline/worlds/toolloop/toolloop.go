// Package toolloop is forklab's second built-in world: a tool-calling agent
// loop with a scripted fake model, after the seed's Monday idea ("forced
// tool calls are gone on the newest models", so a loop must live with turns
// that call no tool).
//
// The task is to gather k facts with a search tool and then give a final
// answer, inside a token budget. Every turn is a model call whose prompt
// holds the history, so a turn costs token_turn plus the tokens the history
// has grown to: each search result adds token_result to it, each loud error
// token_error, each turn without a tool call token_text. The model is
// scripted: it searches for the next fact while it believes it has fewer
// than k, and answers once it has k. It is not perfect: some turns call no
// tool (a wasted turn), some are a premature final answer, and after
// patience identical results in a row it gives up and answers with what it
// has.
//
// The search tool is not perfect either. It sometimes fails loudly (an error
// the model sees), sometimes honestly returns the previous result again (a
// duplicate), and on tasks with a fault its cache goes stale for a
// stretch of turns: a search then gets the previous result again, dressed as
// a fresh one. The model cannot tell a stale result from an honest
// duplicate, and now and then counts a repeated result as the fact it asked
// for, which makes its final answer wrong.
//
// The recovery (arm on) is verify: it re-issues the last search with the
// cache bypassed and checks every fact held against the source. It drops the
// facts counted by mistake, fetches the right answer when the last search
// was served stale or failed, and purges a stale cache, ending the fault. It
// costs a turn and token_verify tokens more than a turn, and its result
// makes every later prompt longer. The placebo is ping, a content-free tool
// call of the same cost whose result, as long as verify's, carries no
// information; it only interrupts: it breaks a run of identical results, and
// the stale stretch, a span of time, runs on during its turn.
//
// No pre-decision signal separates the runs verify rescues from those it
// harms: repeats come from stale caches and from honest duplicates alike, a
// cache can be stale before it has served anything visibly wrong, and
// whether the extra cost breaks the budget depends on how the rest of the
// run goes. docs/worlds.md states every rule with its numbers;
// TestNoSingleFeatureSeparates measures how far single features and
// conjunctions get.
//
// Every random event is a world.Draw of the task seed, a purpose of this
// package and an index kept in the state (the model's turns for the model's
// quirks, the search calls for the tool's), so a copied or decoded state
// continues exactly as the original, and an intervention, which is neither a
// model turn nor a search, does not re-roll the dice of the turns after it.
package toolloop

import (
	"fmt"

	"github.com/forklab/forklab/pipeline/world"
)

// Name is the world's identifier in checkpoints, specs and tables.
const Name = "toolloop"

// Version is the world's version (world.Declaration.Version): it changes
// whenever a rule or a default changes an outcome.
//
// Version 2 added the graded outcome (Score, the declaration's score) and
// the state's score key that holds it; success, cost and every other
// outcome are version 1's.
const Version = "2"

// The toolloop world's actions, indexes into its declaration's Actions.
// Every action is a turn: it costs tokens and counts against max_turns.
const (
	// Search asks the search tool for the next fact.
	Search world.Action = iota + 1
	// Answer is the model's final answer, a text turn that ends the run.
	Answer
	// Verify is the recovery: re-query the last search with the cache
	// bypassed and verify the facts held.
	Verify
	// Ping is the content-free recovery (the placebo arm): a tool call as
	// costly as Verify whose result is empty.
	Ping
)

// Purposes of this package's draws (world.Draw). They start at 64 so that
// they never collide with package world's.
const (
	PurposeK         world.Purpose = 64 + iota // task: facts needed
	PurposeBudget                              // task: token budget
	PurposeFault                               // task: has a stale-cache fault
	PurposeOnset                               // task: turn the cache goes stale at
	PurposeStaleLen                            // task: turns the stale stretch lasts
	PurposeError                               // search n fails loudly
	PurposeDuplicate                           // search n returns a fact already held
	PurposeFooled                              // the model counts repeated result n as new
	PurposePremature                           // model turn n is a premature final answer
	PurposeNoTool                              // model turn n calls no tool
)

// Outcome is what the last turn's tool call returned, as the agent and an
// observer see it. The first four are the values of the last_outcome
// feature; Verified and Empty are the interventions' results, reported as
// fresh and none.
type Outcome uint8

// The outcomes.
const (
	// None: the last turn called no tool (or there was no turn yet).
	None Outcome = iota
	// Fresh: a result the agent had not seen before.
	Fresh
	// Repeated: a result identical to the previous one (a stale cache or
	// an honest duplicate; the agent cannot tell which).
	Repeated
	// Error: the tool failed loudly.
	Error
	// Verified: verify's result, fresh by construction.
	Verified
	// Empty: ping's result, which carries nothing.
	Empty
)

// outcomeNames are the Outcome values' names (Observation.Outcome).
var outcomeNames = [...]string{"none", "fresh", "repeated", "error", "verified", "empty"}

// String returns the outcome's name.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", o)
}

// Feature returns the outcome as the last_outcome feature reports it:
// verified counts as fresh, empty as none.
func (o Outcome) Feature() Outcome {
	switch o {
	case Verified:
		return Fresh
	case Empty:
		return None
	}
	return o
}

// Served is what the search tool really did on the last search call: the
// hidden side of Outcome.
type Served uint8

// The kinds of search service.
const (
	NotServed       Served = iota // no search yet
	ServedFresh                   // the fact asked for, correct
	ServedDuplicate               // a fact already held, honestly
	ServedStale                   // a stale cache entry
	ServedError                   // a loud failure
)

// Declaration returns the toolloop world's declaration.
func Declaration() world.Declaration { return declaration }

var declaration = world.Declaration{
	Name:    Name,
	Version: Version,
	Description: "A tool-calling agent loop with a scripted fake model: gather k facts with a search tool, then answer, " +
		"inside a token budget; the tool's cache sometimes goes stale and serves old results dressed as fresh ones; " +
		"verify re-queries with the cache bypassed.",
	Params: []world.Param{
		{Name: "k_min", Kind: world.ParamInt, Default: int64(2), Min: world.Bound(1), Max: world.Bound(64),
			Description: "fewest facts a task needs (k is drawn uniformly from [k_min, k_max])"},
		{Name: "k_max", Kind: world.ParamInt, Default: int64(5), Min: world.Bound(1), Max: world.Bound(64),
			Description: "most facts a task needs; at least k_min"},
		{Name: "budget_min", Kind: world.ParamInt, Default: int64(1500), Min: world.Bound(1), Max: world.Bound(1e9),
			Description: "smallest token budget a task draws (uniformly from [budget_min, budget_max]), in tokens"},
		{Name: "budget_max", Kind: world.ParamInt, Default: int64(4500), Min: world.Bound(1), Max: world.Bound(1e9),
			Description: "largest token budget a task draws, in tokens; at least budget_min"},
		{Name: "max_turns", Kind: world.ParamInt, Default: int64(40), Min: world.Bound(1), Max: world.Bound(10000),
			Description: "turns after which the loop stops the run, interventions included (an agent framework's turn cap)"},
		{Name: "token_turn", Kind: world.ParamInt, Default: int64(150), Min: world.Bound(1), Max: world.Bound(1e6),
			Description: "tokens every turn costs with an empty history (system prompt, task, completion), in tokens"},
		{Name: "token_result", Kind: world.ParamInt, Default: int64(60), Min: world.Bound(0), Max: world.Bound(1e6),
			Description: "tokens a search result (fresh or repeated) adds to the history every later turn pays for; verify's and ping's results too, in tokens"},
		{Name: "token_error", Kind: world.ParamInt, Default: int64(15), Min: world.Bound(0), Max: world.Bound(1e6),
			Description: "tokens a loud error adds to the history, in tokens"},
		{Name: "token_text", Kind: world.ParamInt, Default: int64(30), Min: world.Bound(0), Max: world.Bound(1e6),
			Description: "tokens a turn without a tool call adds to the history, in tokens"},
		{Name: "token_verify", Kind: world.ParamInt, Default: int64(500), Min: world.Bound(0), Max: world.Bound(1e6),
			Description: "tokens verify (and ping, the placebo) costs on top of a turn's cost, in tokens"},
		{Name: "p_fault", Kind: world.ParamFloat, Default: 0.4, Min: world.Bound(0), Max: world.Bound(1),
			Description: "probability a task has a stale-cache fault"},
		{Name: "onset_min", Kind: world.ParamInt, Default: int64(1), Min: world.Bound(1), Max: world.Bound(10000),
			Description: "earliest turn at which a faulty task's cache goes stale (drawn uniformly from [onset_min, onset_max])"},
		{Name: "onset_max", Kind: world.ParamInt, Default: int64(4), Min: world.Bound(1), Max: world.Bound(10000),
			Description: "latest turn at which a faulty task's cache goes stale; at least onset_min"},
		{Name: "stale_min", Kind: world.ParamInt, Default: int64(3), Min: world.Bound(1), Max: world.Bound(10000),
			Description: "fewest turns a stale stretch lasts before the cache expires by itself (drawn uniformly from [stale_min, stale_max]); any turn counts, not only searches"},
		{Name: "stale_max", Kind: world.ParamInt, Default: int64(10), Min: world.Bound(1), Max: world.Bound(10000),
			Description: "most turns a stale stretch lasts; at least stale_min"},
		{Name: "p_error", Kind: world.ParamFloat, Default: 0.1, Min: world.Bound(0), Max: world.Bound(1),
			Description: "probability a search call fails loudly (the model sees an error)"},
		{Name: "p_duplicate", Kind: world.ParamFloat, Default: 0.15, Min: world.Bound(0), Max: world.Bound(1),
			Description: "probability a search that neither fails nor is served stale honestly returns the previous result again (a clean repeat; never before the first result)"},
		{Name: "p_fooled", Kind: world.ParamFloat, Default: 0.25, Min: world.Bound(0), Max: world.Bound(1),
			Description: "probability the model counts a repeated result as the fact it asked for (a wrong fact)"},
		{Name: "p_no_tool", Kind: world.ParamFloat, Default: 0.08, Min: world.Bound(0), Max: world.Bound(1),
			Description: "probability a model turn that would search calls no tool (a wasted text turn)"},
		{Name: "p_premature", Kind: world.ParamFloat, Default: 0.01, Min: world.Bound(0), Max: world.Bound(1),
			Description: "probability a model turn that would search is a premature final answer instead"},
		{Name: "patience", Kind: world.ParamInt, Default: int64(3), Min: world.Bound(1), Max: world.Bound(10000),
			Description: "identical results in a row after which the model gives up and answers with what it has"},
	},
	Task: []world.Field{
		{Name: "k", Kind: world.Int, Unit: "facts", Description: "facts the task needs before the final answer"},
		{Name: "budget", Kind: world.Int, Unit: "tokens", Description: "the task's token budget"},
		{Name: "stale_onset", Kind: world.Int, Unit: "turns", Nullable: true, Description: "the turn at which the cache goes stale; null when the task has no fault"},
		{Name: "stale_len", Kind: world.Int, Unit: "turns", Nullable: true, Description: "turns the stale stretch lasts unless verify purges it; null when the task has no fault"},
	},
	Features: []world.Field{
		{Name: "last_outcome", Kind: world.Enum, Values: []string{"none", "fresh", "repeated", "error"},
			Description: "what the last turn's tool call returned: fresh (a result not seen before; verify's result too), repeated (the previous result again), error (a loud failure), or none (the turn called no tool; ping's empty result too)"},
		{Name: "last_repeated", Kind: world.Bool, Description: "the last tool result was a repeat of the previous one (repeat_run > 0); turns without a tool call since do not change it"},
		{Name: "repeat_run", Kind: world.Int, Unit: "results", Description: "identical tool results in a row, ending with the last one (0 when the last was not a repeat)"},
		{Name: "turns_since_new", Kind: world.Int, Unit: "turns", Description: "turns since the last fresh result (all turns when there was none)"},
		{Name: "tool_errors", Kind: world.Int, Unit: "errors", Description: "search calls so far that failed loudly"},
		{Name: "no_tool_turns", Kind: world.Int, Unit: "turns", Description: "model turns so far that called no tool"},
		{Name: "tokens_used", Kind: world.Int, Unit: "tokens", Description: "tokens spent so far"},
		{Name: "tokens_left", Kind: world.Int, Unit: "tokens", Description: "token budget minus tokens spent, never below 0"},
		{Name: "budget_used", Kind: world.Float, Description: "fraction of the token budget spent, tokens_used / budget"},
		{Name: "facts_seen", Kind: world.Int, Unit: "facts", Description: "facts the model has counted as gathered (some may be wrong)"},
		{Name: "facts_left", Kind: world.Int, Unit: "facts", Description: "facts the model still believes it needs, k - facts_seen, never below 0"},
	},
	Hidden: []world.Field{
		{Name: "stale", Kind: world.Bool, Description: "the cache is stale now: a search in the next turn would be served from it, and verify would purge it"},
		{Name: "fault", Kind: world.Bool, Description: "the task has a stale-cache fault at all, begun yet or not"},
		{Name: "facts_true", Kind: world.Int, Unit: "facts", Description: "facts really gathered, correct and distinct"},
		{Name: "facts_wrong", Kind: world.Int, Unit: "facts", Description: "facts the model counted that are wrong: repeats it took for new facts, and outdated answers a stale cache served"},
	},
	FaultFlag: "fault",
	Score: &world.ScoreSpec{Min: 0, Max: 1, Threshold: world.Bound(1), Unit: "share of facts",
		Description: "the share of the task's facts the final answer got right: true facts over the larger of k and the facts it gave; " +
			"0 without an answer or when the answer's turn broke the budget; 1 (the threshold) is a success"},
	Actions: []string{"no_tool", "search", "answer", "verify", "ping"},
	Interventions: []world.Intervention{
		{Arm: "on", Action: "verify", Description: "verify: re-query the last search with the cache bypassed and check the facts held: " +
			"drops miscounted facts, fetches the right answer after a stale or failed search, purges a stale cache; " +
			"costs a turn plus token_verify tokens"},
		{Arm: "placebo", Action: "ping", Description: "a content-free tool call as costly as verify: a turn plus token_verify tokens, " +
			"an empty result that only breaks a run of identical results"},
	},
	Cost: world.CostModel{Fields: []string{world.CostSteps, world.CostTokens},
		Description: "every turn costs token_turn plus the history's size in tokens (token_result per search result, token_error per error, " +
			"token_text per turn without a tool call); verify and ping cost token_verify more; every turn, interventions included, is one step"},
}

// Params are the toolloop world's parameters, as the declaration lists
// them (see there for meanings and ranges). Make them with Default or
// ParamsOf; New validates them.
type Params struct {
	KMin, KMax           int     // facts a task needs, drawn uniformly from [KMin, KMax]
	BudgetMin, BudgetMax int64   // token budget, drawn uniformly from [BudgetMin, BudgetMax]
	MaxTurns             int     // turn cap, interventions included
	TokenTurn            int64   // a turn costs TokenTurn plus the history's size
	TokenResult          int64   // history tokens a search result adds
	TokenError           int64   // history tokens a loud error adds
	TokenText            int64   // history tokens a turn without a tool call adds
	TokenVerify          int64   // verify's and ping's extra tokens
	PFault               float64 // probability a task has a stale-cache fault
	OnsetMin, OnsetMax   int     // turn the cache goes stale at
	StaleMin, StaleMax   int     // turns a stale stretch lasts
	PError               float64 // probability a search fails loudly
	PDuplicate           float64 // probability an honest search returns a fact already held
	PFooled              float64 // probability the model counts a repeat as new
	PNoTool              float64 // probability a searching turn calls no tool
	PPremature           float64 // probability a searching turn answers prematurely
	Patience             int     // identical results in a row before the model gives up
}

// Default returns the declared defaults.
func Default() Params {
	p, err := declaration.Resolve(nil)
	if err != nil {
		panic(err) // the declaration's defaults are checked by its tests
	}
	return ParamsOf(p)
}

// ParamsOf converts resolved world parameters (world.Declaration.Resolve
// of the toolloop declaration, which fills in defaults and checks ranges)
// to Params.
func ParamsOf(p world.Params) Params {
	return Params{
		KMin: int(p.Int("k_min")), KMax: int(p.Int("k_max")),
		BudgetMin: p.Int("budget_min"), BudgetMax: p.Int("budget_max"),
		MaxTurns:  int(p.Int("max_turns")),
		TokenTurn: p.Int("token_turn"), TokenResult: p.Int("token_result"), TokenError: p.Int("token_error"),
		TokenText: p.Int("token_text"), TokenVerify: p.Int("token_verify"),
		PFault:   p.Float("p_fault"),
		OnsetMin: int(p.Int("onset_min")), OnsetMax: int(p.Int("onset_max")),
		StaleMin: int(p.Int("stale_min")), StaleMax: int(p.Int("stale_max")),
		PError: p.Float("p_error"), PDuplicate: p.Float("p_duplicate"), PFooled: p.Float("p_fooled"),
		PNoTool: p.Float("p_no_tool"), PPremature: p.Float("p_premature"),
		Patience: int(p.Int("patience")),
	}
}

// WorldParams is the inverse of ParamsOf.
func (p Params) WorldParams() world.Params {
	return world.Params{
		"k_min": int64(p.KMin), "k_max": int64(p.KMax),
		"budget_min": p.BudgetMin, "budget_max": p.BudgetMax,
		"max_turns":  int64(p.MaxTurns),
		"token_turn": p.TokenTurn, "token_result": p.TokenResult, "token_error": p.TokenError,
		"token_text": p.TokenText, "token_verify": p.TokenVerify,
		"p_fault":   p.PFault,
		"onset_min": int64(p.OnsetMin), "onset_max": int64(p.OnsetMax),
		"stale_min": int64(p.StaleMin), "stale_max": int64(p.StaleMax),
		"p_error": p.PError, "p_duplicate": p.PDuplicate, "p_fooled": p.PFooled,
		"p_no_tool": p.PNoTool, "p_premature": p.PPremature,
		"patience": int64(p.Patience),
	}
}

// Validate checks p against the declared ranges and the constraints
// between parameters (each _min at most its _max), naming the first
// problem as the spec file and --param do.
func (p Params) Validate() error {
	if _, err := declaration.Resolve(p.WorldParams()); err != nil {
		return err
	}
	for _, r := range []struct {
		lo, hi string
		a, b   int64
	}{
		{"k_min", "k_max", int64(p.KMin), int64(p.KMax)},
		{"budget_min", "budget_max", p.BudgetMin, p.BudgetMax},
		{"onset_min", "onset_max", int64(p.OnsetMin), int64(p.OnsetMax)},
		{"stale_min", "stale_max", int64(p.StaleMin), int64(p.StaleMax)},
	} {
		if r.a > r.b {
			return fmt.Errorf("%s (%d) must not exceed %s (%d)", r.lo, r.a, r.hi, r.b)
		}
	}
	return nil
}

// New returns the world for raw parameter values (a spec's params map or
// --param flags): unknown names, values out of range and a _min above its
// _max are errors naming the parameter and its valid range. Missing
// parameters take their defaults; nil means all defaults.
func New(raw world.Params) (World, error) {
	p, err := declaration.Resolve(raw)
	if err != nil {
		return World{}, err
	}
	return NewWith(ParamsOf(p))
}

// NewWith returns the world for typed parameters, or their validation
// error.
func NewWith(p Params) (World, error) {
	if err := p.Validate(); err != nil {
		return World{}, fmt.Errorf("world %s: %w", Name, err)
	}
	return World{P: &p}, nil
}
