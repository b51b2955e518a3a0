package search

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/analysistest"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/queries"
)

// toy is a world declared only here: a bool, a small int, an enum of four,
// a float of three values and a nullable int, a fault flag, steps and
// tokens as cost.
var toy = world.Declaration{
	Name: "toy", Version: "1", Description: "random pairs for property tests",
	Features: []world.Field{
		{Name: "flag", Kind: world.Bool, Description: "a bool"},
		{Name: "level", Kind: world.Int, Description: "0 to 3"},
		{Name: "mood", Kind: world.Enum, Values: []string{"calm", "busy", "stuck", "lost"}, Description: "an enum"},
		{Name: "ratio", Kind: world.Float, Description: "0.25, 0.5 or 0.75"},
		{Name: "gap", Kind: world.Int, Nullable: true, Description: "0 to 2, or missing"},
	},
	Hidden:        []world.Field{{Name: "broken", Kind: world.Bool, Description: "the fault"}},
	FaultFlag:     "broken",
	Interventions: []world.Intervention{{Arm: "on", Action: "fix", Description: "fix it"}},
	Cost:          world.CostModel{Fields: []string{world.CostSteps, world.CostTokens}, Description: "steps and tokens"},
}

// randomPairs makes n datasets, one per configuration, of 15 to 120 pairs
// of arm on each (and a few of arm placebo and a few errors), with
// features that make some triggers better than others.
func randomPairs(r *rand.Rand, n int) []analysistest.Pair {
	var out []analysistest.Pair
	moods := toy.Features[2].Values
	for c := 0; c < n; c++ {
		size := 15 + r.IntN(106)
		bias := r.Float64()
		for i := 0; i < size; i++ {
			seed := int64(c*1000 + i)
			flag := r.IntN(2) == 1
			level := int64(r.IntN(4))
			gap := world.IntValue(int64(r.IntN(3)))
			if r.IntN(5) == 0 {
				gap = world.NullValue()
			}
			broken := r.Float64() < 0.4
			// Rescues are likelier where flag is set and level is high,
			// harms elsewhere; noise everywhere.
			pr := 0.1 + bias*0.5*float64(boolInt(flag))*float64(level)/3
			ph := 0.1 + 0.3*float64(1-boolInt(flag))
			u := r.Float64()
			control, treatment := r.IntN(2) == 1, false
			switch {
			case u < pr:
				control, treatment = false, true
			case u < pr+ph:
				control, treatment = true, false
			default:
				treatment = control
			}
			steps, tokens := float64(r.IntN(4)-1), float64(50*r.IntN(5))
			p := analysistest.Pair{ConfigID: c, ForkStep: 2, Seed: seed, Arm: "on", Control: control, Treatment: treatment,
				Fault: &broken, Error: r.IntN(40) == 0,
				Features: []world.Value{world.BoolValue(flag), world.IntValue(level), world.EnumValue(moods[r.IntN(len(moods))]),
					world.FloatValue([]float64{0.25, 0.5, 0.75}[r.IntN(3)]), gap},
				Extra: [4]*float64{&steps, &tokens, nil, nil}}
			if r.IntN(7) == 0 {
				p.Extra[1] = nil
			}
			out = append(out, p)
			if r.IntN(10) == 0 {
				q := p
				q.Arm = "placebo"
				q.Treatment = !q.Treatment
				out = append(out, q)
			}
		}
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Issue 12 K: every trigger policy_search.sql chooses respects the harm
// cap under each harm scope, and its whole candidate table (triggers,
// order, counts on both sides, extra cost) equals an independent brute
// force that evaluates every condition on every pair, over 40 random
// datasets and caps 0 and 2 on clean runs and on all runs.
func TestPolicySearchMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 11))
	pairs := randomPairs(r, 40)
	db := analysistest.Open(t, toy, pairs)
	text := queries.MustGet("policy_search")
	checkedChosen, overCap := 0, 0
	for _, scope := range []string{"clean", "all"} {
		for _, maxHarm := range []int64{0, 2} {
			if _, err := db.Exec(fmt.Sprintf("SET VARIABLE max_harm = %d; SET VARIABLE harm_scope = '%s'", maxHarm, scope)); err != nil {
				t.Fatal(err)
			}
			rows := analysistest.Query(t, db, text)
			want := analysistest.Search(toy, pairs, analysistest.SearchOptions{MaxHarm: maxHarm, Scope: scope, Holdout: 0.3})
			got := map[[2]int][]map[string]any{}
			for _, row := range rows {
				k := [2]int{int(results.Int(row["config_id"])), int(results.Int(row["fork_step"]))}
				got[k] = append(got[k], row)
			}
			if len(got) != len(want) {
				t.Fatalf("%s cap %d: %d groups searched, want %d", scope, maxHarm, len(got), len(want))
			}
			for k, ws := range want {
				gs := got[k]
				label := fmt.Sprintf("%s cap %d config %d", scope, maxHarm, k[0])
				// The direct invariant: the chosen trigger, evaluated pair
				// by pair, keeps the cap.
				chosen := gs[0]
				if chosen["chosen"] != true {
					t.Fatalf("%s: the first candidate %q is not chosen", label, chosen["trigger"])
				}
				for _, w := range ws {
					if w.Trigger == chosen["trigger"] {
						capped := w.Search.HarmedClean
						if scope == "all" {
							capped = w.Search.Harmed
						}
						if capped > maxHarm {
							overCap++
							t.Errorf("%s: chose %q with %d harms (%s), over the cap", label, w.Trigger, capped, scope)
						}
						checkedChosen++
					}
				}
				if len(gs) != len(ws) {
					t.Errorf("%s: %d candidates, brute force %d", label, len(gs), len(ws))
					continue
				}
				for i, w := range ws {
					g := gs[i]
					if diff := compare(g, w); diff != "" {
						t.Errorf("%s: rank %d: %s", label, i+1, diff)
						break
					}
				}
			}
		}
	}
	if checkedChosen != 4*40 || overCap != 0 {
		t.Fatalf("checked %d chosen triggers (want %d), %d over the cap", checkedChosen, 4*40, overCap)
	}
}

func compare(g map[string]any, w analysistest.Candidate) string {
	if g["trigger"] != w.Trigger {
		return fmt.Sprintf("trigger %q, brute force %q", g["trigger"], w.Trigger)
	}
	if g["within_cap"] != w.WithinCap || results.Int(g["conditions"]) != int64(w.Conditions) {
		return fmt.Sprintf("%s: within cap %v conditions %v, brute force %v %d", w.Trigger, g["within_cap"], g["conditions"], w.WithinCap, w.Conditions)
	}
	for _, side := range []struct {
		name string
		s    analysistest.Side
	}{{"search", w.Search}, {"holdout", w.Holdout}} {
		got := fmt.Sprint(results.Int(g[side.name+"_pairs"]), results.Int(g[side.name+"_fires"]), results.Int(g[side.name+"_rescued"]),
			results.Int(g[side.name+"_harmed"]), results.Int(g[side.name+"_harmed_clean"]))
		want := fmt.Sprint(side.s.Pairs, side.s.Fires, side.s.Rescued, side.s.Harmed, side.s.HarmedClean)
		if got != want {
			return fmt.Sprintf("%s %s: pairs fires rescued harmed harmed_clean %s, brute force %s", w.Trigger, side.name, got, want)
		}
		for i, f := range world.CostFields {
			v := g[side.name+"_extra_"+f]
			x := side.s.Extra[i]
			if (v == nil) != math.IsNaN(x) || (v != nil && math.Abs(results.Float(v)-x) > 1e-9) {
				return fmt.Sprintf("%s %s extra %s: %v, brute force %v", w.Trigger, side.name, f, v, x)
			}
		}
	}
	return ""
}

// The brute force really enumerates conjunctions and enum inequalities:
// the test above would pass vacuously otherwise.
func TestBruteForceCoversEveryKindOfCondition(t *testing.T) {
	pairs := randomPairs(rand.New(rand.NewPCG(1, 2)), 3)
	seen := map[string]bool{}
	for _, cs := range analysistest.Search(toy, pairs, analysistest.SearchOptions{Scope: "clean", Holdout: 0.3}) {
		for _, c := range cs {
			for _, part := range strings.Split(c.Trigger, " AND ") {
				f := strings.Fields(part)
				if len(f) == 3 {
					seen[f[0]+" "+f[1]] = true
				}
			}
			seen[fmt.Sprint(c.Conditions)] = true
		}
	}
	for _, want := range []string{"0", "1", "2", "flag =", "level >=", "level <=", "mood !=", "mood =", "ratio >=", "gap <="} {
		if !seen[want] {
			t.Errorf("brute force has no %q candidate", want)
		}
	}
}

// wide is toy with a wide int feature, cut into quantile buckets.
var wide = func() world.Declaration {
	d := toy
	d.Name = "wide"
	d.Features = append(append([]world.Field{}, toy.Features...), world.Field{Name: "tokens", Kind: world.Int, Description: "0 to 5000"})
	return d
}()

// summary.sql, slices.sql and qini.sql equal the brute force on random
// pairs with error rows (never labelled, counted apart), an arm besides
// on, and a wide feature cut at its deciles.
func TestSummarySlicesQiniMatchBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pairs := randomPairs(r, 8)
	for i := range pairs {
		pairs[i].Features = append(pairs[i].Features, world.IntValue(int64(r.IntN(5001))))
	}
	db := analysistest.Open(t, wide, pairs)
	if _, err := db.Exec("SET VARIABLE holdout = 0.3"); err != nil {
		t.Fatal(err)
	}

	ok, errs := analysistest.Summary(pairs)
	errored := 0
	for _, row := range analysistest.Query(t, db, queries.MustGet("summary")) {
		g := analysistest.Group{ConfigID: int(results.Int(row["config_id"])), ForkStep: int(results.Int(row["fork_step"])), Arm: row["arm"].(string)}
		w := ok[g]
		got := fmt.Sprint(row["pairs"], row["rescued"], row["harmed"], row["sure_thing"], row["lost_cause"], row["errors"])
		if want := fmt.Sprint(w.Pairs, w.Rescued, w.Harmed, w.SureThing, w.LostCause, errs[g]); got != want {
			t.Errorf("summary %+v: %s, reference %s", g, got, want)
		}
		errored += int(results.Int(row["errors"]))
	}
	if errored == 0 {
		t.Fatal("no error pairs: the test would not show they are counted apart")
	}

	slices := analysistest.Slices(wide, pairs)
	got := analysistest.Query(t, db, queries.MustGet("slices"))
	if len(got) != len(slices) {
		t.Errorf("%d slices, reference %d", len(got), len(slices))
	}
	buckets := 0
	for _, row := range got {
		k := analysistest.SliceKey{Group: analysistest.Group{ConfigID: int(results.Int(row["config_id"])), ForkStep: int(results.Int(row["fork_step"])), Arm: row["arm"].(string)},
			Feature: row["feature"].(string), Value: row["value"].(string)}
		w, found := slices[k]
		if g, want := fmt.Sprint(row["pairs"], row["rescued"], row["harmed"]), fmt.Sprint(w.Pairs, w.Rescued, w.Harmed); !found || g != want {
			t.Errorf("slice %+v: %s, reference %s (found %v)", k, g, want, found)
		}
		if k.Feature == "tokens" {
			buckets++
		}
	}
	if buckets < 5*8 {
		t.Errorf("tokens cut into %d buckets over 8 configurations, want deciles", buckets)
	}

	qini := analysistest.Query(t, db, queries.MustGet("qini"))
	if len(qini) != 11*8 {
		t.Fatalf("%d Qini rows, want 11 for each of 8 configurations", len(qini))
	}
	for _, row := range qini {
		cfg := int(results.Int(row["config_id"]))
		pts, q := analysistest.Qini(wide, pairs, cfg, 2, 0.3)
		p := pts[int(math.Round(results.Float(row["fire_rate"])*10))]
		near := func(a any, b float64) bool { return math.Abs(results.Float(a)-b) < 1e-9 }
		if results.Int(row["fired"]) != p.Fired || !near(row["rescued"], p.Rescued) || !near(row["harmed"], p.Harmed) ||
			!near(row["net"], p.Net) || !near(row["random_net"], p.Rand) || !near(row["qini"], q) {
			t.Errorf("config %d at %v: %v, reference %+v qini %v", cfg, p.FireRate, row, p, q)
		}
	}
}
