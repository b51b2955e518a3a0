package toolloop

import (
	"fmt"

	"github.com/forklab/forklab/pipeline/world"
)

// State is one run of the toolloop world: plain data, copied by value,
// that round-trips through JSON byte for byte. The task draws (K, Budget,
// Onset, StaleLen) are kept in it so that a state is self-contained; the
// draw indices (ModelTurns, Searches) are what makes a copied state meet
// the same dice as the original.
type State struct {
	Seed     uint64 `json:"seed"`      // the task seed; keys every draw
	K        int32  `json:"k"`         // facts the task needs
	Budget   int64  `json:"budget"`    // token budget
	Onset    int32  `json:"onset"`     // turn the cache goes stale at; 0: no fault
	StaleLen int32  `json:"stale_len"` // turns the stale stretch lasts; 0: no fault

	Steps      int32 `json:"steps"`       // turns taken, interventions included
	Tokens     int64 `json:"tokens"`      // tokens spent
	Context    int64 `json:"context"`     // the history's size in tokens: what the next turn's prompt carries
	ModelTurns int32 `json:"model_turns"` // model turns taken: index of the model's draws
	Searches   int32 `json:"searches"`    // search calls made: index of the tool's draws

	Facts     int32 `json:"facts"`      // facts the model has counted
	True      int32 `json:"facts_true"` // facts really gathered (hidden)
	RepeatRun int32 `json:"repeat_run"` // identical tool results in a row
	SinceNew  int32 `json:"since_new"`  // turns since the last fresh result
	Errors    int32 `json:"errors"`     // search calls that failed loudly
	NoTools   int32 `json:"no_tools"`   // model turns that called no tool

	Last      Outcome `json:"last"`       // what the last turn's tool call returned
	Served    Served  `json:"served"`     // what the tool really did on the last search (hidden)
	HasResult bool    `json:"has_result"` // some search has returned a result (something to repeat)
	Purged    bool    `json:"purged"`     // verify has purged the stale cache: the fault is over
	Answered  bool    `json:"answered"`   // the model gave its final answer
	Correct   bool    `json:"correct"`    // that answer was right: k true facts, none wrong, within budget
	// Score is the answer's grade, fixed when the model answers (Score
	// says how): an intervention applied to a run already over, which
	// changes its facts, does not change the answer it gave. 0 (and left
	// out of the JSON) until then.
	Score float64 `json:"score,omitempty"`
}

// servedNames are the Served values' names in JSON.
var servedNames = [...]string{"none", "fresh", "duplicate", "stale", "error"}

// String returns the kind's name.
func (k Served) String() string {
	if int(k) < len(servedNames) {
		return servedNames[k]
	}
	return fmt.Sprintf("served(%d)", k)
}

// MarshalText writes an Outcome as its name, so checkpoints read as words.
func (o Outcome) MarshalText() ([]byte, error) {
	if int(o) >= len(outcomeNames) {
		return nil, fmt.Errorf("toolloop: outcome %d has no name", o)
	}
	return []byte(outcomeNames[o]), nil
}

// UnmarshalText reads an Outcome's name; an unknown name is an error.
func (o *Outcome) UnmarshalText(b []byte) error {
	for i, n := range outcomeNames {
		if n == string(b) {
			*o = Outcome(i)
			return nil
		}
	}
	return fmt.Errorf("toolloop: unknown outcome %q (known: %v)", b, outcomeNames)
}

// MarshalText writes a Served kind as its name.
func (k Served) MarshalText() ([]byte, error) {
	if int(k) >= len(servedNames) {
		return nil, fmt.Errorf("toolloop: served kind %d has no name", k)
	}
	return []byte(servedNames[k]), nil
}

// UnmarshalText reads a Served kind's name; an unknown name is an error.
func (k *Served) UnmarshalText(b []byte) error {
	for i, n := range servedNames {
		if n == string(b) {
			*k = Served(i)
			return nil
		}
	}
	return fmt.Errorf("toolloop: unknown served kind %q (known: %v)", b, servedNames)
}

// World is the toolloop world with fixed parameters. It implements
// world.World[State]; it is read-only and may be shared by goroutines.
// Make it with New or NewWith (the zero World has no parameters). It holds
// its parameters by pointer so that the interface calls of fork.Lab, four
// a turn, do not copy them: a sweep plays millions of turns
// (BenchmarkLab: about twice as fast as holding them by value).
type World struct{ P *Params }

var _ world.World[State] = World{}
var _ world.Scorer[State] = World{}

// Declaration returns the toolloop world's declaration.
func (World) Declaration() world.Declaration { return declaration }

// uniform returns an integer drawn uniformly from [lo, hi] by draw u in
// [0, 1).
func uniform(u float64, lo, hi int64) int64 {
	return min(lo+int64(u*float64(hi-lo+1)), hi)
}

// Start draws the task for seed: k from [k_min, k_max], the budget from
// [budget_min, budget_max], and with probability p_fault a stale-cache
// fault beginning at a turn from [onset_min, onset_max] and lasting a
// number of turns from [stale_min, stale_max]. Each is one world.Draw of
// the seed with its own purpose, at index 0.
func (w World) Start(seed uint64) State {
	p := w.P
	s := State{
		Seed:   seed,
		K:      int32(uniform(world.Draw(seed, PurposeK, 0), int64(p.KMin), int64(p.KMax))),
		Budget: uniform(world.Draw(seed, PurposeBudget, 0), p.BudgetMin, p.BudgetMax),
	}
	if world.Draw(seed, PurposeFault, 0) < p.PFault {
		s.Onset = int32(uniform(world.Draw(seed, PurposeOnset, 0), int64(p.OnsetMin), int64(p.OnsetMax)))
		s.StaleLen = int32(uniform(world.Draw(seed, PurposeStaleLen, 0), int64(p.StaleMin), int64(p.StaleMax)))
	}
	return s
}

// Seed returns the task seed.
func (World) Seed(s *State) uint64 { return s.Seed }

// Over reports whether the run has ended: answered, out of tokens, or at
// the turn cap.
func (w World) Over(s *State) bool {
	return s.Answered || s.Tokens >= s.Budget || int(s.Steps) >= w.P.MaxTurns
}

// Steps returns the turns taken, interventions included.
func (World) Steps(s *State) int { return int(s.Steps) }

// Script is the scripted model's choice in s, by these rules in order:
// answer once it has counted k facts; answer (give up) after patience
// identical results in a row; answer prematurely with probability
// p_premature; call no tool with probability p_no_tool; otherwise search.
// The two draws are indexed by the model turn about to be taken, so an
// intervention does not shift them.
func (w World) Script(s *State) world.Action {
	if s.Facts >= s.K || int(s.RepeatRun) >= w.P.Patience {
		return Answer
	}
	n := int(s.ModelTurns) + 1
	if w.P.PPremature > 0 && world.Draw(s.Seed, PurposePremature, n) < w.P.PPremature {
		return Answer
	}
	if w.P.PNoTool > 0 && world.Draw(s.Seed, PurposeNoTool, n) < w.P.PNoTool {
		return world.NoTool
	}
	return Search
}

// tools are the actions the model calls: search. Its final answer is a
// text turn, not a tool call, so a noisy model (fork.Model) that departs
// from the script always departs to a turn without a tool call.
var tools = []world.Action{Search}

// Tools returns the actions the model may call: search. The slice is
// shared; callers must not modify it.
func (World) Tools() []world.Action { return tools }

// Success reports whether the run ended with a correct final answer: k
// true facts, none counted by mistake, the answer's turn within budget.
func (World) Success(s *State) bool { return s.Answered && s.Correct }

// Score is the run's graded outcome (the declaration's score): the share
// of the task's facts its final answer got right, true facts over the
// larger of k and the facts it gave (a wrong fact given beyond k costs as
// a missing one does), fixed when the model answers; 0 when the run ended
// without an answer, or the answer's turn broke the budget. A score of 1
// is exactly a success (the declared threshold): k true facts, none wrong,
// within budget.
func (World) Score(s *State) float64 { return s.Score }

// staleAt reports whether the cache is stale during turn n (turns count
// from 1, interventions included): the task has a fault, verify has not
// purged it, and n falls in [onset, onset + stale_len). The stale stretch
// is a span of time, as a cache entry's time to live is: a turn spent on
// anything but a search lets it run on.
func staleAt(s *State, n int32) bool {
	return s.Onset > 0 && !s.Purged && n >= s.Onset && n < s.Onset+s.StaleLen
}

// Step applies a to *s. Every action costs a turn: token_turn plus the
// history's size in tokens, plus token_verify for verify and ping; its
// output then joins the history (token_result for a search result,
// verify's and ping's included, token_error for a loud error, token_text
// for a turn without a tool call). Then:
//
//   - no_tool: a wasted text turn.
//   - search: the next search call (see search).
//   - answer: the final answer, correct when the model holds k true facts
//     and none counted by mistake, and its turn ended within budget.
//   - verify: drop the facts counted by mistake; if the last search was
//     served stale or failed, fetch its right answer (one more true fact);
//     if the cache is stale now, purge it, ending the fault. Its result is
//     fresh: the run of identical results is broken.
//   - ping: a content-free result: the run of identical results is
//     broken, nothing else changes.
//
// no_tool, search and answer are model turns (they advance the model's
// draw index); verify and ping are not. An action the declaration does not
// list is played as no_tool.
func (w World) Step(s *State, a world.Action) {
	cost := w.P.TokenTurn + s.Context
	if a == Verify || a == Ping {
		cost += w.P.TokenVerify
	}
	s.Tokens += cost
	s.Steps++
	switch a {
	case Search:
		s.ModelTurns++
		w.search(s)
		if s.Last == Error {
			s.Context += w.P.TokenError
		} else {
			s.Context += w.P.TokenResult
		}
	case Answer:
		s.ModelTurns++
		s.Answered = true
		s.Correct = s.Facts == s.True && s.True >= s.K && s.Tokens <= s.Budget
		if s.Tokens <= s.Budget {
			s.Score = float64(s.True) / float64(max(s.K, s.Facts))
		}
		s.Last = None
		s.SinceNew++
		s.Context += w.P.TokenText
	case Verify:
		s.Context += w.P.TokenResult
		s.Facts = s.True
		gained := (s.Served == ServedStale || s.Served == ServedError) && s.True < s.K
		if gained {
			s.True++
			s.Facts++
			s.Served = ServedFresh
			s.HasResult = true
			s.SinceNew = 0
		} else {
			s.SinceNew++
		}
		if staleAt(s, s.Steps) {
			s.Purged = true
		}
		s.Last = Verified
		s.RepeatRun = 0
	case Ping:
		s.Context += w.P.TokenResult
		s.Last = Empty
		s.RepeatRun = 0
		s.SinceNew++
	default: // world.NoTool
		s.ModelTurns++
		s.NoTools++
		s.Context += w.P.TokenText
		s.Last = None
		s.SinceNew++
	}
}

// search is search call n = Searches+1: with probability p_error it fails
// loudly; otherwise, if the cache is stale during this turn, it serves the
// previous result again (or, when there is none yet, an outdated answer
// that looks fresh and is counted, wrongly); otherwise, with probability
// p_duplicate (when there is a previous result), it honestly returns the
// previous result again; otherwise it returns the fact asked for. A
// repeated result is counted as the fact asked for with probability
// p_fooled.
func (w World) search(s *State) {
	s.Searches++
	n := s.Searches
	switch {
	case w.P.PError > 0 && world.Draw(s.Seed, PurposeError, int(n)) < w.P.PError:
		s.Served = ServedError
		s.Last = Error
		s.Errors++
		s.RepeatRun = 0
		s.SinceNew++
	case staleAt(s, s.Steps):
		s.Served = ServedStale
		if s.HasResult {
			w.repeat(s, n)
			break
		}
		// Nothing cached to repeat: the stale entry is an outdated answer
		// to this very query, which looks fresh.
		s.Last = Fresh
		s.HasResult = true
		s.Facts++
		s.RepeatRun = 0
		s.SinceNew = 0
	case s.HasResult && w.P.PDuplicate > 0 && world.Draw(s.Seed, PurposeDuplicate, int(n)) < w.P.PDuplicate:
		s.Served = ServedDuplicate
		w.repeat(s, n)
	default:
		s.Served = ServedFresh
		s.Last = Fresh
		s.HasResult = true
		s.Facts++
		s.True++
		s.RepeatRun = 0
		s.SinceNew = 0
	}
}

// repeat records search n returning the previous result again.
func (w World) repeat(s *State, n int32) {
	s.Last = Repeated
	s.RepeatRun++
	s.SinceNew++
	if w.P.PFooled > 0 && world.Draw(s.Seed, PurposeFooled, int(n)) < w.P.PFooled {
		s.Facts++
	}
}

// Task returns k, the budget, and the stale onset and length (null when
// the task has no fault).
func (World) Task(s *State, dst []world.Value) []world.Value {
	onset, length := world.NullValue(), world.NullValue()
	if s.Onset > 0 {
		onset, length = world.IntValue(int64(s.Onset)), world.IntValue(int64(s.StaleLen))
	}
	return append(dst, world.IntValue(int64(s.K)), world.IntValue(s.Budget), onset, length)
}

// lastOutcome holds the last_outcome feature's values, made once so that
// Features does not build strings.
var lastOutcome = [...]world.Value{
	None: world.EnumValue("none"), Fresh: world.EnumValue("fresh"),
	Repeated: world.EnumValue("repeated"), Error: world.EnumValue("error"),
}

// Features returns the declared features in order: last_outcome,
// last_repeated, repeat_run, turns_since_new, tool_errors, no_tool_turns,
// tokens_used, tokens_left, budget_used, facts_seen, facts_left.
func (World) Features(s *State, dst []world.Value) []world.Value {
	used := 0.0
	if s.Budget > 0 {
		used = float64(s.Tokens) / float64(s.Budget)
	}
	return append(dst,
		lastOutcome[s.Last.Feature()],
		world.BoolValue(s.RepeatRun > 0),
		world.IntValue(int64(s.RepeatRun)),
		world.IntValue(int64(s.SinceNew)),
		world.IntValue(int64(s.Errors)),
		world.IntValue(int64(s.NoTools)),
		world.IntValue(s.Tokens),
		world.IntValue(max(0, s.Budget-s.Tokens)),
		world.FloatValue(used),
		world.IntValue(int64(s.Facts)),
		world.IntValue(int64(max(0, s.K-s.Facts))),
	)
}

// Hidden returns whether the cache is stale now (the next search would be
// served from it), whether the task has a fault, and the true and wrong
// facts counted.
func (World) Hidden(s *State, dst []world.Value) []world.Value {
	return append(dst,
		world.BoolValue(staleAt(s, s.Steps+1)),
		world.BoolValue(s.Onset > 0),
		world.IntValue(int64(s.True)),
		world.IntValue(int64(s.Facts-s.True)),
	)
}

// Cost returns the turns taken and the tokens spent.
func (World) Cost(s *State) world.Cost {
	return world.Cost{Steps: int64(s.Steps), Tokens: s.Tokens}
}

// Observation is what the toolloop agent sees after a turn: the session
// event's payload.
type Observation struct {
	Step       int32  `json:"step"`        // turns taken
	Outcome    string `json:"outcome"`     // the last turn's tool result: none, fresh, repeated, error, verified, empty
	Facts      int32  `json:"facts"`       // facts the model has counted
	K          int32  `json:"k"`           // facts the task needs
	TokensUsed int64  `json:"tokens_used"` // tokens spent
	TokensLeft int64  `json:"tokens_left"` // budget left, never below 0
	Answered   bool   `json:"answered"`    // the model gave its final answer
}

// Observe returns what the agent sees: the last tool result's kind (not
// whether it was stale), its own fact count, the task's k and its tokens.
func (World) Observe(s *State) any {
	return Observation{Step: s.Steps, Outcome: s.Last.String(), Facts: s.Facts, K: s.K,
		TokensUsed: s.Tokens, TokensLeft: max(0, s.Budget-s.Tokens), Answered: s.Answered}
}
