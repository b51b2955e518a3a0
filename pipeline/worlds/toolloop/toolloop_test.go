package toolloop_test

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/toolloop"
)

func TestDeclarationValidates(t *testing.T) {
	d := toolloop.Declaration()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if d.Name != toolloop.Name || d.Version != toolloop.Version {
		t.Fatalf("declaration names %s %s, package %s %s", d.Name, d.Version, toolloop.Name, toolloop.Version)
	}
	w, err := toolloop.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Declaration(); got.Name != d.Name || len(got.Features) != len(d.Features) {
		t.Fatalf("World.Declaration differs from Declaration()")
	}
	// The names downstream tables will show, and the arms the lab offers.
	if got, want := strings.Join(d.FeatureNames(), ","), "last_outcome,last_repeated,repeat_run,turns_since_new,tool_errors,"+
		"no_tool_turns,tokens_used,tokens_left,budget_used,facts_seen,facts_left"; got != want {
		t.Errorf("features %s, want %s", got, want)
	}
	if got, want := strings.Join(d.Arms(), ","), "off,on,placebo,aa,policy"; got != want {
		t.Errorf("arms %s, want %s", got, want)
	}
	kinds := map[world.Kind]bool{}
	for _, f := range d.Features {
		kinds[f.Kind] = true
		if f.Description == "" {
			t.Errorf("feature %s has no description", f.Name)
		}
	}
	for _, k := range world.Kinds {
		if !kinds[k] {
			t.Errorf("no feature of kind %s: the generic SQL would not be exercised on it", k)
		}
	}
	for _, p := range d.Params {
		if p.Description == "" || p.Min == nil || p.Max == nil {
			t.Errorf("parameter %s lacks a description or a range", p.Name)
		}
		if slices.Contains(world.ReservedColumns, p.Name) {
			t.Errorf("parameter %s is a reserved column", p.Name)
		}
	}
	if d.FaultFlag != "fault" || d.Hidden[d.FaultIndex()].Kind != world.Bool {
		t.Errorf("fault flag %q", d.FaultFlag)
	}
	if !d.Cost.Reports(world.CostTokens) || !d.Cost.Reports(world.CostSteps) {
		t.Errorf("cost fields %v, want steps and tokens", d.Cost.Fields)
	}
	for i, name := range d.Actions {
		if got := world.Action(i).Name(&d); got != name {
			t.Errorf("action %d is %s", i, got)
		}
	}
	for a, name := range map[world.Action]string{toolloop.Search: "search", toolloop.Answer: "answer",
		toolloop.Verify: "verify", toolloop.Ping: "ping", world.NoTool: "no_tool"} {
		if got := a.Name(&d); got != name {
			t.Errorf("action constant %d is named %s in the declaration, want %s", a, got, name)
		}
	}
}

// The package's draws never share a purpose with package world's.
func TestPurposesDoNotCollide(t *testing.T) {
	ours := []world.Purpose{toolloop.PurposeK, toolloop.PurposeBudget, toolloop.PurposeFault, toolloop.PurposeOnset,
		toolloop.PurposeStaleLen, toolloop.PurposeError, toolloop.PurposeDuplicate, toolloop.PurposeFooled,
		toolloop.PurposePremature, toolloop.PurposeNoTool}
	for i, p := range ours {
		if p < 64 {
			t.Errorf("purpose %d is below 64", p)
		}
		if slices.Contains(ours[:i], p) {
			t.Errorf("purpose %d used twice", p)
		}
	}
	for _, p := range []world.Purpose{world.PurposeStall, world.PurposeObsNoise, world.PurposeObsNoiseSign,
		world.PurposeRefreshFail, world.PurposeModel, world.PurposeModelNoTool} {
		if slices.Contains(ours, p) {
			t.Errorf("purpose %d is also package world's", p)
		}
	}
}

func TestParams(t *testing.T) {
	d := toolloop.Declaration()
	resolved, err := d.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	def := toolloop.Default()
	if toolloop.ParamsOf(resolved) != def {
		t.Fatalf("ParamsOf(defaults) = %+v, Default() = %+v", toolloop.ParamsOf(resolved), def)
	}
	want := toolloop.Params{KMin: 2, KMax: 5, BudgetMin: 1500, BudgetMax: 4500, MaxTurns: 40, TokenTurn: 150, TokenResult: 60, TokenError: 15, TokenText: 30,
		TokenVerify: 500, PFault: 0.4, OnsetMin: 1, OnsetMax: 4, StaleMin: 3, StaleMax: 10, PError: 0.1, PDuplicate: 0.15,
		PFooled: 0.25, PNoTool: 0.08, PPremature: 0.01, Patience: 3}
	if def != want {
		t.Fatalf("defaults %+v, docs/worlds.md says %+v", def, want)
	}
	// WorldParams is ParamsOf's inverse, and covers every declared name.
	wp := def.WorldParams()
	if len(wp) != len(d.Params) {
		t.Fatalf("WorldParams has %d names, the declaration %d", len(wp), len(d.Params))
	}
	again, err := d.Resolve(wp)
	if err != nil || toolloop.ParamsOf(again) != def {
		t.Fatalf("WorldParams round trip: %v %+v", err, toolloop.ParamsOf(again))
	}
	w, err := toolloop.New(world.Params{"p_fault": 0.9, "k_max": int64(8)})
	if err != nil || w.P.PFault != 0.9 || w.P.KMax != 8 || w.P.KMin != 2 {
		t.Fatalf("New with two values set: %v %+v", err, w.P)
	}
	for _, tc := range []struct {
		raw  world.Params
		want string
	}{
		{world.Params{"p_stall": 0.1}, `world toolloop has no parameter "p_stall" (its parameters: k_min, k_max,`},
		{world.Params{"p_fault": 1.5}, "p_fault must be a number in [0, 1], got 1.5"},
		{world.Params{"k_min": int64(0)}, "k_min must be an integer in [1, 64], got 0"},
		{world.Params{"patience": 2.5}, "patience must be an integer in [1, 10000], got 2.5"},
		{world.Params{"k_min": int64(6)}, "world toolloop: k_min (6) must not exceed k_max (5)"},
		{world.Params{"budget_max": int64(1000)}, "world toolloop: budget_min (1500) must not exceed budget_max (1000)"},
		{world.Params{"onset_min": int64(5)}, "world toolloop: onset_min (5) must not exceed onset_max (4)"},
		{world.Params{"stale_max": int64(2)}, "world toolloop: stale_min (3) must not exceed stale_max (2)"},
	} {
		_, err := toolloop.New(tc.raw)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("New(%v): error %v, want one starting %q", tc.raw, err, tc.want)
		}
	}
	if _, err := toolloop.NewWith(toolloop.Params{}); err == nil {
		t.Errorf("NewWith(zero Params) accepted")
	}
}

// Every value Task, Features and Hidden report fits its declared field,
// for states all along many runs, on every arm.
func TestValuesFitDeclaration(t *testing.T) {
	d := toolloop.Declaration()
	lab := newLab(t, toolloop.Default(), fork.Model{Temperature: 0.2, NoTool: 0.5})
	var vals []world.Value
	check := func(s *toolloop.State) {
		for _, g := range []struct {
			fields []world.Field
			get    func(*toolloop.State, []world.Value) []world.Value
		}{{d.Task, lab.World.Task}, {d.Features, lab.World.Features}, {d.Hidden, lab.World.Hidden}} {
			vals = g.get(s, vals[:0])
			if len(vals) != len(g.fields) {
				t.Fatalf("%d values for %d fields", len(vals), len(g.fields))
			}
			for i, f := range g.fields {
				if err := f.Check(vals[i]); err != nil {
					t.Fatalf("seed %d step %d: %v", s.Seed, s.Steps, err)
				}
				if f.Kind == world.Int && !vals[i].Null && vals[i].I < 0 {
					t.Fatalf("seed %d step %d: %s is negative: %d", s.Seed, s.Steps, f.Name, vals[i].I)
				}
			}
		}
	}
	var final toolloop.State
	for seed := range uint64(500) {
		s := lab.World.Start(seed)
		for f := 1; f <= 12; f++ {
			lab.Advance(&s, fork.PrefixKey(seed), f, nil)
			check(&s)
			for _, arm := range fork.Arms {
				lab.Branch(&final, &s, seed, f, arm, 0, true)
				check(&final)
			}
		}
	}
}

// The task draws are spread over their declared ranges.
func TestStartDrawsTheDeclaredRanges(t *testing.T) {
	w, _ := toolloop.New(nil)
	ks, onsets, lens := map[int32]int{}, map[int32]int{}, map[int32]int{}
	faults := 0
	lo, hi := int64(math.MaxInt64), int64(0)
	for seed := range uint64(20000) {
		s := w.Start(seed)
		ks[s.K]++
		lo, hi = min(lo, s.Budget), max(hi, s.Budget)
		if s.Onset > 0 {
			faults++
			onsets[s.Onset]++
			lens[s.StaleLen]++
		} else if s.StaleLen != 0 {
			t.Fatalf("seed %d: a clean task with stale_len %d", seed, s.StaleLen)
		}
		if s.Steps != 0 || s.Tokens != 0 || s.Seed != seed {
			t.Fatalf("seed %d: start state %+v", seed, s)
		}
	}
	if len(ks) != 4 || ks[1] != 0 || ks[6] != 0 || len(onsets) != 4 || len(lens) != 8 || lens[2] != 0 || lens[11] != 0 {
		t.Fatalf("k %v onset %v stale_len %v", ks, onsets, lens)
	}
	if lo < 1500 || hi > 4500 || lo > 1510 || hi < 4490 {
		t.Fatalf("budgets in [%d, %d], want [1500, 4500]", lo, hi)
	}
	if faults < 7800 || faults > 8200 { // p_fault 0.4 of 20,000: 8,000 ± 3 sd
		t.Fatalf("%d faulty tasks of 20,000 at p_fault 0.4", faults)
	}
}

// AppendJSON writes json.Marshal's bytes, for the states runs go through
// and for extreme values, and AppendObservation those of their
// observations.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	states := []toolloop.State{{}, {Seed: math.MaxUint64, K: math.MaxInt32, Budget: math.MinInt64, Onset: -1, StaleLen: 12345,
		Steps: 99, Tokens: math.MaxInt64, ModelTurns: 10, Searches: -7, Facts: 1000, True: 100000, RepeatRun: 3, SinceNew: 11,
		Errors: 9, NoTools: 10, Last: toolloop.Empty, Served: toolloop.ServedError, HasResult: true, Purged: true, Answered: true, Correct: true, Score: 1.0 / 64}}
	lab := newLab(t, toolloop.Default(), fork.Model{Temperature: 0.3, NoTool: 0.5})
	var final toolloop.State
	for seed := range uint64(300) {
		s := lab.World.Start(seed)
		for f := 1; f <= 10; f++ {
			lab.Advance(&s, fork.PrefixKey(seed), f, nil)
			states = append(states, s)
			for _, arm := range []fork.Arm{fork.On, fork.Placebo} {
				lab.Branch(&final, &s, seed, f, arm, 0, false)
				states = append(states, final)
			}
		}
	}
	for _, s := range states {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.AppendJSON([]byte("x")); string(got) != "x"+string(want) {
			t.Fatalf("%+v:\nAppendJSON   %s\njson.Marshal %s", s, got[1:], want)
		}
		var back toolloop.State
		if err := json.Unmarshal(want, &back); err != nil || back != s {
			t.Fatalf("%s decodes to %+v (%v)", want, back, err)
		}
		// The observation, as transcripts hold it.
		if want, err = json.Marshal(lab.World.Observe(&s)); err != nil {
			t.Fatal(err)
		}
		if got := toolloop.AppendObservation(&s, []byte("x")); string(got) != "x"+string(want) {
			t.Fatalf("%+v:\nAppendObservation %s\njson.Marshal      %s", s, got[1:], want)
		}
	}
}

// The outcome and served names are the checkpoint's words; other words
// are refused.
func TestStateJSONNames(t *testing.T) {
	b, _ := json.Marshal(toolloop.State{Last: toolloop.Repeated, Served: toolloop.ServedStale})
	if !strings.Contains(string(b), `"last":"repeated","served":"stale"`) {
		t.Fatalf("state JSON %s", b)
	}
	for _, bad := range []string{`{"last":"stale"}`, `{"served":"repeated"}`, `{"last":2}`} {
		var s toolloop.State
		if err := json.Unmarshal([]byte(bad), &s); err == nil {
			t.Errorf("%s decoded to %+v", bad, s)
		}
	}
	if _, err := json.Marshal(toolloop.State{Last: 9}); err == nil {
		t.Errorf("an outcome without a name encoded")
	}
}
