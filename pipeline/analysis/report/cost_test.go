package report

import (
	"math"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/analysis/search"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
)

// Cost sentences read right with any number of cost fields (issue 26:
// with steps and seconds the guard's sentence read "it saves 13 steps …
// where always-on costs 552 and 1403.00 seconds", and the A/A arm, off
// against off, was given "+3.00 steps per net rescue"): every amount names
// its unit, a verb shared by a run of amounts is said once, "no net rescue
// to pay for" once, and the A/A arm gets no cost at all.
func TestCostSentencesAnyNumberOfFields(t *testing.T) {
	steps := results.Row{"cost": "steps", "mean": 4.49, "mean_off": 4.38, "extra": 0.11, "per_net_rescue": 0.5}
	seconds := results.Row{"cost": "seconds", "mean": 552.0, "mean_off": 555.0, "extra": -3.0, "per_net_rescue": -13.5}
	usd := results.Row{"cost": "usd", "mean": 0.00312, "mean_off": 0.00201, "extra": 0.00111, "per_net_rescue": 0.0222}
	noNet := func(r results.Row) results.Row {
		c := results.Row{}
		for k, v := range r {
			c[k] = v
		}
		delete(c, "per_net_rescue")
		return c
	}
	for _, tc := range []struct {
		name           string
		rows           []results.Row
		line, sentence string
	}{
		{"none", nil, "", ""},
		{"one", []results.Row{steps},
			"cost: 4.49 steps per branch against off's 4.38 (+0.11 per run), +0.50 steps per net rescue",
			" From the fork to the end of the run, against off, it costs 0.11 steps per run (0.50 per net rescue)."},
		{"two, one saved", []results.Row{steps, seconds},
			"cost: 4.49 steps per branch against off's 4.38 (+0.11 per run), +0.50 steps per net rescue; 552.00 seconds per branch against off's 555.00 (-3.00 per run), -13.50 seconds per net rescue",
			" From the fork to the end of the run, against off, it costs 0.11 steps per run (0.50 per net rescue) and saves 3.00 seconds per run (13.50 per net rescue)."},
		{"three, no net rescue", []results.Row{noNet(steps), noNet(usd), noNet(seconds)},
			"cost: 4.49 steps per branch against off's 4.38 (+0.11 per run); 0.00312 usd per branch against off's 0.00201 (+0.00111 per run); 552.00 seconds per branch against off's 555.00 (-3.00 per run), no net rescue to pay for",
			" From the fork to the end of the run, against off, it costs 0.11 steps per run, 0.00111 usd per run and saves 3.00 seconds per run."},
	} {
		if got := CostLine(tc.rows); got != tc.line {
			t.Errorf("%s: CostLine\n got %q\nwant %q", tc.name, got, tc.line)
		}
		if got := costSentence(tc.rows); got != tc.sentence {
			t.Errorf("%s: costSentence\n got %q\nwant %q", tc.name, got, tc.sentence)
		}
	}
	costs := []results.Row{
		{"config_id": int64(0), "fork_step": int64(3), "arm": "aa", "cost": "steps", "mean": 4.4, "mean_off": 4.38, "extra": 0.02, "per_net_rescue": 3.0},
		{"config_id": int64(0), "fork_step": int64(3), "arm": "on", "cost": "steps", "mean": 4.49, "mean_off": 4.38, "extra": 0.11},
	}
	aa := results.Row{"config_id": int64(0), "fork_step": int64(3), "arm": "aa"}
	if got := CostsOf(costs, aa); got != nil {
		t.Errorf("the A/A arm has cost rows %v; it is off against off and gets none", got)
	}
	var b strings.Builder
	writeHeadline(&b, results.Row{"arm": "aa", "fork_step": int64(3), "pairs": int64(300), "rescued": int64(2), "harmed": int64(1),
		"net": int64(1), "net_rate": 0.003, "mcnemar_p": 1.0}, "", CostsOf(costs, aa), "")
	if strings.Contains(b.String(), "cost") {
		t.Errorf("the A/A arm's headline speaks of cost:\n%s", b.String())
	}

	// The guard's held-out cost, with two fields: each amount with its
	// unit, always-on's in a clause of its own.
	decl := world.Declaration{Name: "w", FaultFlag: "fault", Cost: world.CostModel{Fields: []string{world.CostSteps, world.CostSeconds}}}
	nan := math.NaN()
	g := search.Group{ForkStep: 3,
		Chosen: search.Candidate{Trigger: "same_obs = true", Conditions: 1,
			Search:  search.Side{Pairs: 210, Fires: 101, Rescued: 53},
			Holdout: search.Side{Pairs: 90, Fires: 44, Rescued: 22, Extra: search.Cost{-13, nan, nan, 1403}}},
		Baselines: []search.Candidate{{Trigger: "always", Holdout: search.Side{Pairs: 90, Fires: 90, Rescued: 22, Harmed: 26, Extra: search.Cost{552, nan, nan, 2000}}}},
	}
	s := &Sections{Search: &search.Result{Options: search.Defaults(), World: decl, Groups: []search.Group{g}}}
	got := guard(s, &s.Search.Groups[0], sweep.Manifest{}, false)
	want := " Against off, on the held-out runs it fires on, it saves 13 steps (0.59 per net rescue) and costs 1403.00 seconds (63.77 per net rescue); always-on costs 552 steps and 2000.00 seconds."
	if !strings.Contains(got, want) {
		t.Errorf("guard with two cost fields:\n%s\nwant it to hold\n%s", got, want)
	}
}
