package toolloop_test

import (
	"testing"

	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/toolloop"
)

// ruleParams are parameters with round token costs and no randomness:
// each case below turns on the one probability it exercises, at 1.
func ruleParams() toolloop.Params {
	p := toolloop.Default()
	p.TokenTurn, p.TokenResult, p.TokenError, p.TokenText, p.TokenVerify = 100, 20, 5, 7, 50
	p.PFault, p.PError, p.PDuplicate, p.PFooled, p.PNoTool, p.PPremature = 0, 0, 0, 0, 0, 0
	return p
}

// mid is a run two turns in: a loud error (100 tokens, 5 into the
// history), then one fresh fact of three (100 + 5 tokens, 20 into the
// history).
var mid = toolloop.State{Seed: 7, K: 3, Budget: 10000, Steps: 2, Tokens: 205, Context: 25, ModelTurns: 2, Searches: 2,
	Facts: 1, True: 1, SinceNew: 1, Errors: 1, HasResult: true, Last: toolloop.Fresh, Served: toolloop.ServedFresh}

// stale is mid on a task whose cache is stale during turns 2 to 4.
var stale = func() toolloop.State { s := mid; s.Onset, s.StaleLen = 2, 3; return s }()

// Each rule of Step, on a hand-made state: the whole state after the turn
// is pinned. A turn from mid costs 100 + 25 = 125 tokens, verify and ping
// 175; a result then adds 20 tokens to the history, an error 5, a turn
// without a tool call 7.
func TestStepRules(t *testing.T) {
	with := func(s toolloop.State, f func(*toolloop.State)) toolloop.State { f(&s); return s }
	for _, tc := range []struct {
		name   string
		params func(*toolloop.Params)
		from   toolloop.State
		action world.Action
		want   func(*toolloop.State)
	}{
		{"search: the fact asked for", nil, mid, toolloop.Search, func(s *toolloop.State) {
			s.Context = 45
			s.Steps, s.Tokens, s.ModelTurns, s.Searches, s.Facts, s.True, s.SinceNew = 3, 330, 3, 3, 2, 2, 0
		}},
		{"search: a loud error", func(p *toolloop.Params) { p.PError = 1 }, mid, toolloop.Search, func(s *toolloop.State) {
			s.Context = 30
			s.Steps, s.Tokens, s.ModelTurns, s.Searches, s.Errors, s.SinceNew = 3, 330, 3, 3, 2, 2
			s.Last, s.Served = toolloop.Error, toolloop.ServedError
		}},
		{"search: a loud error breaks a run of repeats", func(p *toolloop.Params) { p.PError = 1 },
			with(stale, func(s *toolloop.State) { s.RepeatRun = 2 }), toolloop.Search, func(s *toolloop.State) {
				s.Context = 30
				s.Steps, s.Tokens, s.ModelTurns, s.Searches, s.Errors, s.SinceNew, s.RepeatRun = 3, 330, 3, 3, 2, 2, 0
				s.Last, s.Served = toolloop.Error, toolloop.ServedError
			}},
		{"search: stale cache repeats the previous result", nil, stale, toolloop.Search, func(s *toolloop.State) {
			s.Context = 45
			s.Steps, s.Tokens, s.ModelTurns, s.Searches, s.RepeatRun, s.SinceNew = 3, 330, 3, 3, 1, 2
			s.Last, s.Served = toolloop.Repeated, toolloop.ServedStale
		}},
		{"search: a stale repeat the model counts", func(p *toolloop.Params) { p.PFooled = 1 }, stale, toolloop.Search, func(s *toolloop.State) {
			s.Context = 45
			s.Steps, s.Tokens, s.ModelTurns, s.Searches, s.RepeatRun, s.SinceNew, s.Facts = 3, 330, 3, 3, 1, 2, 2
			s.Last, s.Served = toolloop.Repeated, toolloop.ServedStale
		}},
		{"search: stale with nothing cached looks fresh and is counted", nil,
			with(stale, func(s *toolloop.State) {
				s.HasResult, s.Facts, s.True, s.Last, s.Served = false, 0, 0, toolloop.Error, toolloop.ServedError
			}),
			toolloop.Search, func(s *toolloop.State) {
				s.Context = 45
				s.Steps, s.Tokens, s.ModelTurns, s.Searches, s.Facts, s.SinceNew, s.HasResult = 3, 330, 3, 3, 1, 0, true
				s.Last, s.Served = toolloop.Fresh, toolloop.ServedStale
			}},
		{"search: the stale stretch is over after onset+stale_len-1", nil,
			with(stale, func(s *toolloop.State) { s.StaleLen = 1 }), toolloop.Search, func(s *toolloop.State) {
				s.Context = 45
				s.Steps, s.Tokens, s.ModelTurns, s.Searches, s.Facts, s.True, s.SinceNew = 3, 330, 3, 3, 2, 2, 0
			}},
		{"search: the stale stretch has not begun", nil,
			with(stale, func(s *toolloop.State) { s.Onset = 4 }), toolloop.Search, func(s *toolloop.State) {
				s.Context = 45
				s.Steps, s.Tokens, s.ModelTurns, s.Searches, s.Facts, s.True, s.SinceNew = 3, 330, 3, 3, 2, 2, 0
			}},
		{"search: a purged cache is not stale", nil,
			with(stale, func(s *toolloop.State) { s.Purged = true }), toolloop.Search, func(s *toolloop.State) {
				s.Context = 45
				s.Steps, s.Tokens, s.ModelTurns, s.Searches, s.Facts, s.True, s.SinceNew = 3, 330, 3, 3, 2, 2, 0
			}},
		{"search: a loud error comes before the stale cache", func(p *toolloop.Params) { p.PError = 1 }, stale, toolloop.Search, func(s *toolloop.State) {
			s.Context = 30
			s.Steps, s.Tokens, s.ModelTurns, s.Searches, s.Errors, s.SinceNew = 3, 330, 3, 3, 2, 2
			s.Last, s.Served = toolloop.Error, toolloop.ServedError
		}},
		{"search: an honest duplicate", func(p *toolloop.Params) { p.PDuplicate = 1 }, mid, toolloop.Search, func(s *toolloop.State) {
			s.Context = 45
			s.Steps, s.Tokens, s.ModelTurns, s.Searches, s.RepeatRun, s.SinceNew = 3, 330, 3, 3, 1, 2
			s.Last, s.Served = toolloop.Repeated, toolloop.ServedDuplicate
		}},
		{"search: an honest duplicate the model counts", func(p *toolloop.Params) { p.PDuplicate, p.PFooled = 1, 1 }, mid, toolloop.Search, func(s *toolloop.State) {
			s.Context = 45
			s.Steps, s.Tokens, s.ModelTurns, s.Searches, s.RepeatRun, s.SinceNew, s.Facts = 3, 330, 3, 3, 1, 2, 2
			s.Last, s.Served = toolloop.Repeated, toolloop.ServedDuplicate
		}},
		{"search: no duplicate before any result", func(p *toolloop.Params) { p.PDuplicate = 1 },
			with(mid, func(s *toolloop.State) { s.HasResult, s.Facts, s.True = false, 0, 0 }), toolloop.Search, func(s *toolloop.State) {
				s.Context = 45
				s.Steps, s.Tokens, s.ModelTurns, s.Searches, s.Facts, s.True, s.SinceNew, s.HasResult = 3, 330, 3, 3, 1, 1, 0, true
			}},
		{"no_tool: a wasted turn keeps the run of repeats", nil,
			with(mid, func(s *toolloop.State) { s.RepeatRun, s.Last = 2, toolloop.Repeated }), world.NoTool, func(s *toolloop.State) {
				s.Context = 32
				s.Steps, s.Tokens, s.ModelTurns, s.NoTools, s.SinceNew, s.Last = 3, 330, 3, 1, 2, toolloop.None
			}},
		{"answer: k true facts", nil, with(mid, func(s *toolloop.State) { s.Facts, s.True = 3, 3 }), toolloop.Answer, func(s *toolloop.State) {
			s.Context = 32
			s.Steps, s.Tokens, s.ModelTurns, s.SinceNew, s.Last, s.Answered, s.Correct, s.Score = 3, 330, 3, 2, toolloop.None, true, true, 1
		}},
		{"answer: one fact counted by mistake", nil, with(mid, func(s *toolloop.State) { s.Facts, s.True = 3, 2 }), toolloop.Answer, func(s *toolloop.State) {
			s.Context = 32
			s.Steps, s.Tokens, s.ModelTurns, s.SinceNew, s.Last, s.Answered, s.Score = 3, 330, 3, 2, toolloop.None, true, 2.0/3
		}},
		{"answer: a wrong fact beyond k costs as a missing one", nil, with(mid, func(s *toolloop.State) { s.Facts, s.True = 4, 3 }), toolloop.Answer, func(s *toolloop.State) {
			s.Context = 32
			s.Steps, s.Tokens, s.ModelTurns, s.SinceNew, s.Last, s.Answered, s.Score = 3, 330, 3, 2, toolloop.None, true, 0.75
		}},
		{"answer: premature", nil, mid, toolloop.Answer, func(s *toolloop.State) {
			s.Context = 32
			s.Steps, s.Tokens, s.ModelTurns, s.SinceNew, s.Last, s.Answered, s.Score = 3, 330, 3, 2, toolloop.None, true, 1.0/3
		}},
		{"answer: the answer's turn overruns the budget", nil,
			with(mid, func(s *toolloop.State) { s.Facts, s.True, s.Budget = 3, 3, 329 }), toolloop.Answer, func(s *toolloop.State) {
				s.Context = 32
				s.Steps, s.Tokens, s.ModelTurns, s.SinceNew, s.Last, s.Answered = 3, 330, 3, 2, toolloop.None, true
			}},
		{"answer: exactly the budget is within it", nil,
			with(mid, func(s *toolloop.State) { s.Facts, s.True, s.Budget = 3, 3, 330 }), toolloop.Answer, func(s *toolloop.State) {
				s.Context = 32
				s.Steps, s.Tokens, s.ModelTurns, s.SinceNew, s.Last, s.Answered, s.Correct, s.Score = 3, 330, 3, 2, toolloop.None, true, true, 1
			}},
		{"verify: after the answer (a fork of a run over) leaves its score", nil,
			with(mid, func(s *toolloop.State) {
				s.Answered, s.Score, s.Last, s.Served, s.SinceNew = true, 1.0/3, toolloop.None, toolloop.ServedError, 1
			}), toolloop.Verify, func(s *toolloop.State) {
				s.Context = 45
				s.Steps, s.Tokens, s.Facts, s.True, s.SinceNew = 3, 380, 2, 2, 0
				s.Last, s.Served = toolloop.Verified, toolloop.ServedFresh
			}},
		{"verify: after a stale repeat counted by mistake", nil,
			with(stale, func(s *toolloop.State) {
				s.Facts, s.RepeatRun, s.Last, s.Served, s.SinceNew = 2, 1, toolloop.Repeated, toolloop.ServedStale, 1
			}), toolloop.Verify, func(s *toolloop.State) {
				s.Context = 45
				s.Steps, s.Tokens, s.Facts, s.True, s.RepeatRun, s.SinceNew, s.Purged = 3, 380, 2, 2, 0, 0, true
				s.Last, s.Served = toolloop.Verified, toolloop.ServedFresh
			}},
		{"verify: after a loud error, fetches the fact", nil,
			with(mid, func(s *toolloop.State) { s.Last, s.Served = toolloop.Error, toolloop.ServedError }), toolloop.Verify, func(s *toolloop.State) {
				s.Context = 45
				s.Steps, s.Tokens, s.Facts, s.True, s.SinceNew = 3, 380, 2, 2, 0
				s.Last, s.Served = toolloop.Verified, toolloop.ServedFresh
			}},
		{"verify: after a fresh result, only checks", nil, mid, toolloop.Verify, func(s *toolloop.State) {
			s.Context = 45
			s.Steps, s.Tokens, s.SinceNew, s.Last = 3, 380, 2, toolloop.Verified
		}},
		{"verify: after an honest duplicate, drops the miscount, fetches nothing", nil,
			with(mid, func(s *toolloop.State) {
				s.Facts, s.RepeatRun, s.Last, s.Served = 2, 1, toolloop.Repeated, toolloop.ServedDuplicate
			}), toolloop.Verify, func(s *toolloop.State) {
				s.Context = 45
				s.Steps, s.Tokens, s.Facts, s.SinceNew, s.RepeatRun, s.Last = 3, 380, 1, 2, 0, toolloop.Verified
			}},
		{"verify: a cache stale from its own turn on is purged", nil,
			with(stale, func(s *toolloop.State) { s.Onset = 3 }), toolloop.Verify, func(s *toolloop.State) {
				s.Context = 45
				s.Steps, s.Tokens, s.SinceNew, s.Last, s.Purged = 3, 380, 2, toolloop.Verified, true
			}},
		{"verify: a stale stretch not yet begun is not purged", nil,
			with(stale, func(s *toolloop.State) { s.Onset = 4 }), toolloop.Verify, func(s *toolloop.State) {
				s.Context = 45
				s.Steps, s.Tokens, s.SinceNew, s.Last = 3, 380, 2, toolloop.Verified
			}},
		{"verify: nothing to fetch once k facts are true", nil,
			with(mid, func(s *toolloop.State) { s.Facts, s.True, s.Served = 3, 3, toolloop.ServedError }), toolloop.Verify, func(s *toolloop.State) {
				s.Context = 45
				s.Steps, s.Tokens, s.SinceNew, s.Last = 3, 380, 2, toolloop.Verified
			}},
		{"ping: an empty result breaks the run of repeats", nil,
			with(stale, func(s *toolloop.State) {
				s.Facts, s.RepeatRun, s.Last, s.Served = 2, 2, toolloop.Repeated, toolloop.ServedStale
			}), toolloop.Ping, func(s *toolloop.State) {
				s.Context = 45
				s.Steps, s.Tokens, s.RepeatRun, s.SinceNew, s.Last = 3, 380, 0, 2, toolloop.Empty
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ruleParams()
			if tc.params != nil {
				tc.params(&p)
			}
			w, err := toolloop.NewWith(p)
			if err != nil {
				t.Fatal(err)
			}
			got, want := tc.from, tc.from
			tc.want(&want)
			w.Step(&got, tc.action)
			if got != want {
				d := toolloop.Declaration()
				t.Errorf("after %s\n got %+v\nwant %+v", tc.action.Name(&d), got, want)
			}
		})
	}
}

// An intervention is neither a model turn nor a search, so it does not
// shift the model's dice or the tool's: on a clean task, the turns after
// a ping are the turns that would have come without it.
func TestInterventionsDoNotShiftDraws(t *testing.T) {
	w, _ := toolloop.New(nil)
	compared := 0
	for seed := range uint64(2000) {
		s := w.Start(seed)
		for range 2 {
			w.Step(&s, w.Script(&s))
		}
		if s.Onset != 0 || s.RepeatRun != 0 || w.Over(&s) {
			continue // a stale stretch is a span of time, and ping resets a run of repeats
		}
		a, b := s, s
		w.Step(&b, toolloop.Ping)
		for range 3 {
			if w.Script(&a) != w.Script(&b) {
				t.Fatalf("seed %d: ping changed the model's choice", seed)
			}
			w.Step(&a, toolloop.Search)
			w.Step(&b, toolloop.Search)
			if a.Served != b.Served || a.Facts != b.Facts || a.True != b.True {
				t.Fatalf("seed %d: ping changed a search: %+v, %+v", seed, a, b)
			}
			compared++
		}
	}
	if compared < 2000 {
		t.Fatalf("only %d searches compared", compared)
	}
}

func TestScript(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params func(*toolloop.Params)
		state  func(*toolloop.State)
		want   world.Action
	}{
		{"searches for the next fact", nil, nil, toolloop.Search},
		{"answers with k facts counted", nil, func(s *toolloop.State) { s.Facts = 3 }, toolloop.Answer},
		{"answers with k facts counted, some wrong", nil, func(s *toolloop.State) { s.Facts, s.True = 3, 1 }, toolloop.Answer},
		{"gives up after patience repeats", nil, func(s *toolloop.State) { s.RepeatRun = 3 }, toolloop.Answer},
		{"not before", nil, func(s *toolloop.State) { s.RepeatRun = 2 }, toolloop.Search},
		{"premature answer", func(p *toolloop.Params) { p.PPremature = 1 }, nil, toolloop.Answer},
		{"a turn without a tool call", func(p *toolloop.Params) { p.PNoTool = 1 }, nil, world.NoTool},
		{"premature answer before no tool", func(p *toolloop.Params) { p.PNoTool, p.PPremature = 1, 1 }, nil, toolloop.Answer},
		{"k facts before premature", func(p *toolloop.Params) { p.PNoTool, p.PPremature = 1, 1 }, func(s *toolloop.State) { s.Facts = 3 }, toolloop.Answer},
	} {
		p := ruleParams()
		if tc.params != nil {
			tc.params(&p)
		}
		w, _ := toolloop.NewWith(p)
		s := mid
		if tc.state != nil {
			tc.state(&s)
		}
		if got := w.Script(&s); got != tc.want {
			t.Errorf("%s: script chose %d, want %d", tc.name, got, tc.want)
		}
	}
	// The draws: model turn n is premature when Draw(seed, PurposePremature,
	// n) < p_premature, where n counts model turns from 1.
	p := ruleParams()
	p.PPremature, p.PNoTool = 0.5, 0.5
	w, _ := toolloop.NewWith(p)
	for seed := range uint64(200) {
		s := mid
		s.Seed = seed
		n := int(s.ModelTurns) + 1
		want := toolloop.Search
		switch {
		case world.Draw(seed, toolloop.PurposePremature, n) < 0.5:
			want = toolloop.Answer
		case world.Draw(seed, toolloop.PurposeNoTool, n) < 0.5:
			want = world.NoTool
		}
		if got := w.Script(&s); got != want {
			t.Fatalf("seed %d: script chose %d, the draws say %d", seed, got, want)
		}
	}
}

func TestOverAndSuccess(t *testing.T) {
	p := ruleParams()
	p.MaxTurns = 10
	w, _ := toolloop.NewWith(p)
	for _, tc := range []struct {
		name          string
		state         func(*toolloop.State)
		over, success bool
	}{
		{"running", nil, false, false},
		{"answered right", func(s *toolloop.State) { s.Answered, s.Correct = true, true }, true, true},
		{"answered wrong", func(s *toolloop.State) { s.Answered = true }, true, false},
		{"out of tokens", func(s *toolloop.State) { s.Tokens = s.Budget }, true, false},
		{"one token left", func(s *toolloop.State) { s.Tokens = s.Budget - 1 }, false, false},
		{"at the turn cap", func(s *toolloop.State) { s.Steps = 10 }, true, false},
	} {
		s := mid
		if tc.state != nil {
			tc.state(&s)
		}
		if w.Over(&s) != tc.over || w.Success(&s) != tc.success {
			t.Errorf("%s: over %t success %t, want %t %t", tc.name, w.Over(&s), w.Success(&s), tc.over, tc.success)
		}
	}
}

// Task, Features, Hidden, Cost and Observe on a hand-made state.
func TestReadings(t *testing.T) {
	w, _ := toolloop.New(nil)
	s := stale
	s.Facts, s.RepeatRun, s.Last, s.NoTools = 2, 1, toolloop.Repeated, 1
	d := toolloop.Declaration()
	text := func(fields []world.Field, vals []world.Value) string {
		out := ""
		for i, f := range fields {
			out += f.Name + "=" + vals[i].Text(f.Kind) + " "
		}
		return out
	}
	for _, tc := range []struct{ got, want string }{
		{text(d.Task, w.Task(&s, nil)), "k=3 budget=10000 stale_onset=2 stale_len=3 "},
		{text(d.Task, w.Task(&mid, nil)), "k=3 budget=10000 stale_onset= stale_len= "},
		{text(d.Features, w.Features(&s, nil)), "last_outcome=repeated last_repeated=true repeat_run=1 turns_since_new=1 tool_errors=1 " +
			"no_tool_turns=1 tokens_used=205 tokens_left=9795 budget_used=0.0205 facts_seen=2 facts_left=1 "},
		{text(d.Hidden, w.Hidden(&s, nil)), "stale=true fault=true facts_true=1 facts_wrong=1 "},
		{text(d.Hidden, w.Hidden(&mid, nil)), "stale=false fault=false facts_true=1 facts_wrong=0 "},
	} {
		if tc.got != tc.want {
			t.Errorf("got  %s\nwant %s", tc.got, tc.want)
		}
	}
	// Verify's and ping's results show as fresh and none.
	for o, want := range map[toolloop.Outcome]string{toolloop.Verified: "fresh", toolloop.Empty: "none", toolloop.Error: "error"} {
		s.Last = o
		if got := w.Features(&s, nil)[0].S; got != want {
			t.Errorf("last_outcome of %s is %s, want %s", o, got, want)
		}
	}
	s.Tokens = 20000
	if got := w.Features(&s, nil)[7].I; got != 0 {
		t.Errorf("tokens_left %d past the budget", got)
	}
	if c := w.Cost(&s); c != (world.Cost{Steps: 2, Tokens: 20000}) {
		t.Errorf("cost %+v", c)
	}
	s.Last = toolloop.Empty
	if o := w.Observe(&s).(toolloop.Observation); o != (toolloop.Observation{Step: 2, Outcome: "empty", Facts: 2, K: 3, TokensUsed: 20000}) {
		t.Errorf("observation %+v", o)
	}
}
