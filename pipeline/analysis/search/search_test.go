package search

import (
	"context"
	"errors"
	"github.com/forklab/forklab/pipeline/analysis/results/resultstest"
	"math"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/queries"
)

// On the seed's world the search finds same_obs = true, and rerunning under
// it gives rescued 75, harmed 0, net +75 against always-on's 75, 83, -8.
func TestSeedWorldFindsSameObsAndRerunDropsHarms(t *testing.T) {
	db := resultstest.Open(t, sweep.DefaultSpec())
	r, err := Run(context.Background(), db, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Groups) != 1 {
		t.Fatalf("%d groups searched, want 1", len(r.Groups))
	}
	g := r.Groups[0]
	c := g.Chosen
	if c.Trigger != "same_obs = true" || !c.Chosen || c.Rule.String() != "same_obs = true" {
		t.Fatalf("chose %q (rule %v), want same_obs = true", c.Trigger, c.Rule)
	}
	// The split is the stable hash of the seed: 210 search, 90 held out.
	want := Candidate{Search: Side{210, 101, 53, 0, 0, Cost{}}, Holdout: Side{90, 44, 22, 0, 0, Cost{}}}
	c.Search.Extra, c.Holdout.Extra = Cost{}, Cost{}
	if c.Search != want.Search || c.Holdout != want.Holdout {
		t.Fatalf("search %+v held out %+v, want %+v %+v", c.Search, c.Holdout, want.Search, want.Holdout)
	}
	if got, w := c.Holdout.HarmUpper(), 1-math.Pow(0.05, 1.0/90); math.Abs(got-w) > 1e-12 {
		t.Errorf("held-out harm bound %v, want 1 - 0.05^(1/90) = %v", got, w)
	}
	if c.Rule.World != "counter" || c.Rule.WorldVersion != db.Manifest.Declaration.Version || *c.Rule.ConfigID != 0 || *c.Rule.ForkStep != 3 {
		t.Errorf("rule names world %s %s config %v fork %v", c.Rule.World, c.Rule.WorldVersion, c.Rule.ConfigID, c.Rule.ForkStep)
	}
	var always Candidate
	for _, b := range g.Baselines {
		if b.Trigger == "always" {
			always = b
		}
	}
	if always.Search.Rescued+always.Holdout.Rescued != 75 || always.Search.Harmed+always.Holdout.Harmed != 83 || always.WithinCap {
		t.Errorf("always: %+v", always)
	}

	// The rule, through its file form, drives the policy arm of a rerun.
	b, err := c.Rule.Encode()
	if err != nil {
		t.Fatal(err)
	}
	rule, err := policy.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	spec := sweep.DefaultSpec()
	spec.Arms = []fork.Arm{fork.Off, fork.On, fork.Policy}
	spec.Policy = &rule
	rerun := resultstest.Open(t, spec)
	tab, err := rerun.Query(context.Background(), "SELECT arm, rescued, harmed, net FROM ("+
		strings.TrimSuffix(strings.TrimSpace(queries.MustGet("summary")), ";")+") ORDER BY arm")
	if err != nil {
		t.Fatal(err)
	}
	got := [][]any{{"on", int64(75), int64(83), int64(-8)}, {"policy", int64(75), int64(0), int64(75)}}
	for i, row := range tab.Rows {
		for j := range row {
			if row[j] != got[i][j] {
				t.Fatalf("rerun summary %v, want %v", tab.Rows, got)
			}
		}
	}
}

// With stalled increments the observation repeats on healthy runs too, and
// same_obs lets harms through: the search must pick something else.
func TestImperfectWorldNeedsAnotherTrigger(t *testing.T) {
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: 0, End: 4000}
	spec.Params = world.Params{"p_stall": 0.2}
	db := resultstest.Open(t, spec)
	r, err := Run(context.Background(), db, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	g := r.Groups[0]
	if g.Chosen.Trigger == "same_obs = true" || g.Chosen.Search.HarmedClean != 0 || g.Chosen.Search.Rescued == 0 {
		t.Fatalf("chose %+v", g.Chosen)
	}
	for _, b := range g.Baselines {
		if b.Trigger == "same_obs = true" && b.WithinCap {
			t.Fatalf("same_obs = true should break the cap under stalls: %+v", b)
		}
	}
}

func TestBadOptionsAndTooFewPairs(t *testing.T) {
	for _, o := range []Options{
		{MaxHarm: -1, Scope: "clean", Holdout: 0.3},
		{Scope: "clean", Holdout: 0},
		{Scope: "clean", Holdout: 1},
		{Scope: "clean", Holdout: 1.5},
		{Scope: "some", Holdout: 0.3},
	} {
		if err := o.Validate(); !errors.Is(err, ErrInput) {
			t.Errorf("%+v: got %v, want ErrInput", o, err)
		}
	}
	spec := sweep.DefaultSpec()
	spec.Seeds = sweep.Range{Start: 0, End: 12}
	db := resultstest.Open(t, spec)
	if r, err := Run(context.Background(), db, Defaults()); err != nil || len(r.Searched()) != 0 || !strings.Contains(r.Groups[0].Skipped, "too few pairs to split") {
		t.Errorf("12 seeds: got %v, %+v, want the group skipped for too few pairs", err, r)
	}
	for _, o := range []Options{{Scope: "clean", Holdout: 0.3, ConfigID: 1, ForkStep: -1}, {Scope: "clean", Holdout: 0.3, ConfigID: -1, ForkStep: 2}} {
		if _, err := Run(context.Background(), db, o); !errors.Is(err, ErrInput) {
			t.Errorf("%+v: got %v, want ErrInput naming what the sweep has", o, err)
		}
	}
	spec = sweep.DefaultSpec()
	spec.Arms = []fork.Arm{fork.Off, fork.Placebo}
	if _, err := Run(context.Background(), resultstest.Open(t, spec), Defaults()); !errors.Is(err, ErrInput) {
		t.Errorf("no arm on: got %v, want ErrInput", err)
	}
}
