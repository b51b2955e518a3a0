package report_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/htmlreport"
	"github.com/forklab/forklab/pipeline/analysis/report"
	"github.com/forklab/forklab/pipeline/analysis/results/resultstest"
	"github.com/forklab/forklab/pipeline/analysis/search"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
)

// The lamp is a world defined only in this file: an agent presses a button
// until a lamp has lit `need` times, through a bulb that may be dead (a
// press then lights nothing). Swapping the bulb (the recovery) fixes a dead
// bulb but costs a turn and a bulb, which matters on a tight budget. Its
// features are of every kind: a bool, an int, a float and an enum. Nothing
// outside this file knows it; registering it is enough for the sweep, the
// tables, the SQL views and slices, the policy search and both reports.
type lampState struct {
	Seed    uint64 `json:"seed"`
	Need    int64  `json:"need"`
	Budget  int64  `json:"budget"`
	Steps   int64  `json:"steps"`
	Lit     int64  `json:"lit"`
	Dark    int64  `json:"dark"` // presses in a row that lit nothing
	Dead    bool   `json:"dead"` // the bulb is dead (hidden)
	Faulty  bool   `json:"faulty"`
	Swapped bool   `json:"swapped"`
	Done    bool   `json:"done"`
}

type lamp struct{ pDead float64 }

const (
	press world.Action = iota + 1
	stop
	swap
	wait
)

var lampDecl = world.Declaration{
	Name: "lamp_test", Version: "1", Description: "a test-only world: press a button until a lamp lit enough times",
	Params: []world.Param{{Name: "p_dead", Kind: world.ParamFloat, Default: 0.4, Min: world.Bound(0), Max: world.Bound(1),
		Description: "probability the bulb is dead from the start"}},
	Task: []world.Field{{Name: "need", Kind: world.Int, Description: "lights needed"}},
	Features: []world.Field{
		{Name: "last_dark", Kind: world.Bool, Description: "the last press lit nothing"},
		{Name: "dark_run", Kind: world.Int, Description: "presses in a row that lit nothing"},
		{Name: "lit_share", Kind: world.Float, Description: "lights so far over lights needed"},
		{Name: "mood", Kind: world.Enum, Values: []string{"calm", "worried"}, Description: "worried after two dark presses"},
	},
	Hidden:    []world.Field{{Name: "dead", Kind: world.Bool, Description: "the bulb is dead now"}, {Name: "faulty", Kind: world.Bool, Description: "the bulb was dead from the start"}},
	FaultFlag: "faulty",
	Actions:   []string{"no_tool", "press", "stop", "swap", "wait"},
	Interventions: []world.Intervention{
		{Arm: "on", Action: "swap", Description: "swap the bulb: fixes a dead one, costs a turn"},
		{Arm: "placebo", Action: "wait", Description: "wait a turn"},
	},
	Cost: world.CostModel{Fields: []string{world.CostSteps}, Description: "a turn is a step"},
}

func (lamp) Declaration() world.Declaration { return lampDecl }
func (l lamp) Start(seed uint64) lampState {
	need := 2 + int64(world.Draw(seed, 64, 0)*3)
	dead := world.Draw(seed, 66, 0) < l.pDead
	return lampState{Seed: seed, Need: need, Budget: need + 1 + int64(world.Draw(seed, 65, 0)*3), Dead: dead, Faulty: dead}
}
func (lamp) Seed(s *lampState) uint64 { return s.Seed }
func (lamp) Over(s *lampState) bool   { return s.Done || s.Steps >= s.Budget }
func (lamp) Steps(s *lampState) int   { return int(s.Steps) }
func (lamp) Script(s *lampState) world.Action {
	if s.Lit >= s.Need {
		return stop
	}
	return press
}
func (lamp) Tools() []world.Action { return []world.Action{press, stop} }
func (lamp) Step(s *lampState, a world.Action) {
	s.Steps++
	switch a {
	case press:
		if s.Dead {
			s.Dark++
		} else {
			s.Lit, s.Dark = s.Lit+1, 0
		}
	case stop:
		s.Done = true
	case swap:
		s.Dead, s.Swapped = false, true
	}
}
func (lamp) Success(s *lampState) bool { return s.Done && s.Lit >= s.Need }
func (lamp) Task(s *lampState, dst []world.Value) []world.Value {
	return append(dst, world.IntValue(s.Need))
}
func (lamp) Features(s *lampState, dst []world.Value) []world.Value {
	mood := "calm"
	if s.Dark >= 2 {
		mood = "worried"
	}
	return append(dst, world.BoolValue(s.Dark > 0), world.IntValue(s.Dark),
		world.FloatValue(float64(s.Lit)/float64(s.Need)), world.EnumValue(mood))
}
func (lamp) Hidden(s *lampState, dst []world.Value) []world.Value {
	return append(dst, world.BoolValue(s.Dead), world.BoolValue(s.Faulty))
}
func (lamp) Cost(s *lampState) world.Cost { return world.Cost{Steps: s.Steps} }
func (lamp) Observe(s *lampState) any     { return map[string]int64{"lit": s.Lit, "steps": s.Steps} }

// The lamp, registered here and nowhere else, goes through the whole
// pipeline: sweep → Parquet → the views (its features as columns and in the
// long features view) → slices of every feature → the policy search with
// conjunctions, per fork step → the text and HTML reports.
func TestTinyWorldEndToEnd(t *testing.T) {
	lab.Register(lab.Builtin[lampState]{Decl: lampDecl, New: func(p world.Params) (world.World[lampState], error) {
		return lamp{pDead: p.Float("p_dead")}, nil
	}})
	defer lab.Unregister(lampDecl.Name)
	spec := sweep.DefaultSpec()
	spec.World, spec.Params = lampDecl.Name, world.Params{}
	spec.Seeds, spec.ForkAt = sweep.Range{Start: 0, End: 3000}, []int{1, 2}
	spec.Arms = []fork.Arm{fork.Off, fork.On, fork.Placebo}
	db := resultstest.Open(t, spec)
	ctx := context.Background()
	if err := db.AddReportViews(ctx); err != nil {
		t.Fatal(err)
	}

	q := func(sql string) string {
		tab, err := db.Query(ctx, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return fmt.Sprint(tab.Rows)
	}
	if got := q("SELECT feature, count(*) FROM features GROUP BY ALL ORDER BY ALL"); got != "[[dark_run 6000] [last_dark 6000] [lit_share 6000] [mood 6000]]" {
		t.Fatalf("features view: %s", got)
	}
	if got := q("SELECT count(*) FROM pairs WHERE arm = 'on' AND label IS NOT NULL AND mood IN ('calm', 'worried') AND lit_share >= 0"); got != "[[6000]]" {
		t.Fatalf("pairs with the lamp's feature columns: %s", got)
	}
	// Recovery both rescues and harms here, and a fault makes the rescues.
	if got := q("SELECT count(*) FILTER (WHERE label = 'rescued') > 0, count(*) FILTER (WHERE label = 'harmed') > 0 FROM pairs WHERE arm = 'on'"); got != "[[true true]]" {
		t.Fatalf("the lamp's recovery should rescue and harm: %s", got)
	}
	sliced := q("SELECT DISTINCT feature FROM slices ORDER BY ALL")
	if sliced != "[[dark_run] [last_dark] [lit_share] [mood]]" {
		t.Fatalf("slices cover %s", sliced)
	}

	res, err := search.Run(ctx, db, search.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Groups) != 2 {
		t.Fatalf("%d search groups, want one per fork step", len(res.Groups))
	}
	conj := false
	for _, g := range res.Searched() {
		for _, c := range g.Candidates {
			conj = conj || c.Conditions == 2
		}
		if g.Chosen.Rule.World != lampDecl.Name {
			t.Fatalf("chosen rule names world %q", g.Chosen.Rule.World)
		}
	}
	if !conj {
		t.Fatal("the policy search tried no conjunction")
	}

	var text bytes.Buffer
	if err := report.Write(ctx, &text, db); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lamp_test", "mood", "lit_share", "dark_run", "last_dark"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text report does not mention %s", want)
		}
	}
	var page bytes.Buffer
	if err := htmlreport.Write(ctx, &page, db); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "mood") || !strings.Contains(page.String(), "lamp_test") {
		t.Error("the HTML report does not show the lamp's features")
	}
}
