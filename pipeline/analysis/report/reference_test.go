package report

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/analysistest"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/analysis/results/resultstest"
	"github.com/forklab/forklab/pipeline/analysis/search"
	"github.com/forklab/forklab/pipeline/analysis/stats"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
)

// checkReference compares every number the report shows — the summary,
// the slices of every feature, every candidate of the policy search of
// every configuration and fork step, and the Qini curves — with the
// independent brute-force references of analysistest, computed pair by
// pair from the rows of the pairs files. It returns the sections and the
// pairs.
func checkReference(t *testing.T, db *results.DB) (*Sections, []analysistest.Pair) {
	t.Helper()
	s, err := Collect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	d := db.Manifest.Declaration
	pairs := analysistest.ReadPairs(t, db.SQL(), d)
	if len(pairs) == 0 {
		t.Fatal("no pairs")
	}

	ok, errs := analysistest.Summary(pairs)
	if len(s.Summary.Rows) != len(ok) {
		t.Errorf("summary has %d rows, reference %d groups", len(s.Summary.Rows), len(ok))
	}
	for _, r := range s.Summary.Records() {
		g := analysistest.Group{ConfigID: int(r.Int("config_id")), ForkStep: int(r.Int("fork_step")), Arm: r.Str("arm")}
		w := ok[g]
		got := fmt.Sprint(r.Int("pairs"), r.Int("rescued"), r.Int("harmed"), r.Int("sure_thing"), r.Int("lost_cause"), r.Int("errors"))
		want := fmt.Sprint(w.Pairs, w.Rescued, w.Harmed, w.SureThing, w.LostCause, errs[g])
		if got != want {
			t.Errorf("summary %+v: pairs rescued harmed sure lost errors %s, reference %s", g, got, want)
		}
	}

	slices := analysistest.Slices(d, pairs)
	if len(s.Slices.Rows) != len(slices) {
		t.Errorf("slices has %d rows, reference %d", len(s.Slices.Rows), len(slices))
	}
	features := map[string]bool{}
	for _, r := range s.Slices.Records() {
		k := analysistest.SliceKey{Group: analysistest.Group{ConfigID: int(r.Int("config_id")), ForkStep: int(r.Int("fork_step")), Arm: r.Str("arm")},
			Feature: r.Str("feature"), Value: r.Str("value")}
		features[k.Feature] = true
		w, found := slices[k]
		got := fmt.Sprint(r.Int("pairs"), r.Int("rescued"), r.Int("harmed"), r.Int("sure_thing"), r.Int("lost_cause"))
		if want := fmt.Sprint(w.Pairs, w.Rescued, w.Harmed, w.SureThing, w.LostCause); !found || got != want {
			t.Errorf("slice %+v: pairs rescued harmed sure lost %s, reference %s (found %v)", k, got, want, found)
		}
	}
	for _, f := range d.Features {
		if !features[f.Name] {
			t.Errorf("no slices of declared feature %s", f.Name)
		}
	}
	checkScores(t, d, s, pairs)

	if s.Search == nil {
		t.Fatalf("no policy search: %s", s.SearchNote)
	}
	o := s.Search.Options
	ref := analysistest.Search(d, pairs, analysistest.SearchOptions{MaxHarm: int64(o.MaxHarm), Scope: o.Scope, Holdout: o.Holdout})
	if len(s.Search.Groups) != len(ref) {
		t.Errorf("%d groups searched, reference %d", len(s.Search.Groups), len(ref))
	}
	for _, g := range s.Search.Searched() {
		want := ref[[2]int{g.ConfigID, g.ForkStep}]
		if len(g.Candidates) != len(want) {
			t.Errorf("config %d fork %d: %d candidates, reference %d", g.ConfigID, g.ForkStep, len(g.Candidates), len(want))
			continue
		}
		for i, c := range g.Candidates {
			if diff := sameCandidate(c, want[i]); diff != "" {
				t.Errorf("config %d fork %d rank %d: %s", g.ConfigID, g.ForkStep, i+1, diff)
				break
			}
		}
		pts, q := analysistest.Qini(d, pairs, g.ConfigID, g.ForkStep, o.Holdout)
		rows := QiniRows(s.Qini, g.ConfigID, g.ForkStep)
		if len(rows) != len(pts) {
			t.Errorf("config %d fork %d: %d Qini rows, reference %d", g.ConfigID, g.ForkStep, len(rows), len(pts))
			continue
		}
		for i, r := range rows {
			p := pts[i]
			if r.Int("fired") != p.Fired || !near(r.Float("rescued"), p.Rescued) || !near(r.Float("harmed"), p.Harmed) ||
				!near(r.Float("net"), p.Net) || !near(r.Float("random_net"), p.Rand) || !near(r.Float("qini"), q) {
				t.Errorf("config %d fork %d Qini at %v: %v, reference %+v qini %v", g.ConfigID, g.ForkStep, p.FireRate, r, p, q)
			}
		}
	}
	return s, pairs
}

// checkScores compares the summary's and the slices' score statistics
// (mean difference, paired t interval, Wilcoxon p and n) with
// pipeline/analysis/stats computed pair by pair, and the slices'
// Holm-adjusted p-values with stats.Holm over each arm's slices; a
// pass/fail world's score columns are NULL.
func checkScores(t *testing.T, d world.Declaration, s *Sections, pairs []analysistest.Pair) {
	t.Helper()
	groups, slices := analysistest.ScoreDiffs(d, pairs)
	check := func(what string, r results.Row, diffs []float64) {
		t.Helper()
		cols := []string{"mean_score_diff", "score_diff_lo", "score_diff_hi", "wilcoxon_p"}
		if d.Score == nil {
			for _, c := range append(cols, "wilcoxon_n") {
				if r[c] != nil {
					t.Errorf("%s: %s = %v in a pass/fail world", what, c, r[c])
				}
			}
			return
		}
		mean, iv := stats.PairedT(diffs)
		p, n := stats.Wilcoxon(diffs)
		for i, want := range []float64{mean, iv.Lo, iv.Hi, p} {
			got, null := r.Float(cols[i]), r[cols[i]] == nil
			if null != math.IsNaN(want) || (!null && math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want))) {
				t.Errorf("%s: %s = %v, reference %v (%d differences)", what, cols[i], r[cols[i]], want, len(diffs))
			}
		}
		if r.Int("wilcoxon_n") != n {
			t.Errorf("%s: wilcoxon_n = %d, reference %d", what, r.Int("wilcoxon_n"), n)
		}
	}
	ranked := int64(0)
	for _, r := range s.Summary.Records() {
		g := analysistest.Group{ConfigID: int(r.Int("config_id")), ForkStep: int(r.Int("fork_step")), Arm: r.Str("arm")}
		check(fmt.Sprintf("summary %+v", g), r, groups[g])
		ranked += r.Int("wilcoxon_n")
	}
	if d.Score != nil && ranked < 100 {
		t.Errorf("a scored world's summary ranks only %d nonzero score differences: the comparison shows little", ranked)
	}
	byArm := map[analysistest.Group][]results.Row{}
	for _, r := range s.Slices.Records() {
		g := analysistest.Group{ConfigID: int(r.Int("config_id")), ForkStep: int(r.Int("fork_step")), Arm: r.Str("arm")}
		check(fmt.Sprintf("slice %+v %s %s", g, r.Str("feature"), r.Str("value")), r, slices[analysistest.SliceKey{Group: g, Feature: r.Str("feature"), Value: r.Str("value")}])
		byArm[g] = append(byArm[g], r)
	}
	for g, rows := range byArm {
		for _, col := range []string{"mcnemar_p", "wilcoxon_p"} {
			p := make([]float64, len(rows))
			for i, r := range rows {
				p[i] = math.NaN()
				if r[col] != nil {
					p[i] = r.Float(col)
				}
			}
			for i, want := range stats.Holm(p) {
				got := rows[i][col+"_adj"]
				if (got == nil) != math.IsNaN(want) || (got != nil && rows[i].Float(col+"_adj") != want) {
					t.Errorf("slices %+v %s %s: %s_adj = %v, Holm %v", g, rows[i].Str("feature"), rows[i].Str("value"), col, got, want)
				}
			}
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func sameCandidate(c search.Candidate, w analysistest.Candidate) string {
	if c.Trigger != w.Trigger || c.Conditions != w.Conditions || c.WithinCap != w.WithinCap {
		return fmt.Sprintf("%q (%d conditions, within cap %v), reference %q (%d, %v)", c.Trigger, c.Conditions, c.WithinCap, w.Trigger, w.Conditions, w.WithinCap)
	}
	for _, side := range []struct {
		name string
		got  search.Side
		want analysistest.Side
	}{{"search", c.Search, w.Search}, {"held-out", c.Holdout, w.Holdout}} {
		g, r := side.got, side.want
		if g.Pairs != r.Pairs || g.Fires != r.Fires || g.Rescued != r.Rescued || g.Harmed != r.Harmed || g.HarmedClean != r.HarmedClean {
			return fmt.Sprintf("%s %s: %+v, reference %+v", c.Trigger, side.name, g, r)
		}
		for i := range g.Extra {
			if math.IsNaN(g.Extra[i]) != math.IsNaN(r.Extra[i]) || (!math.IsNaN(r.Extra[i]) && !near(g.Extra[i], r.Extra[i])) {
				return fmt.Sprintf("%s %s extra %s: %v, reference %v", c.Trigger, side.name, world.CostFields[i], g.Extra[i], r.Extra[i])
			}
		}
	}
	return ""
}

// The seed's sweep: every number against the reference, and the seed's
// own figures (README, docs/method.md) where they appear in the text.
func TestSeedReportAgainstReference(t *testing.T) {
	db := resultstest.Open(t, sweep.DefaultSpec())
	s, _ := checkReference(t, db)
	var buf bytes.Buffer
	if err := WriteSections(&buf, db, s); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"on vs off · fork step 3 · 300 pairs\n  rescued 75   harmed 83   unchanged 142   net -8\n",
		"McNemar exact p = 0.578 on 158 discordant pairs",
		"▶ same_obs = true (chosen)  ok    101           53       0       0             +53  44              22       0       0             +22  3.3%",
		"cost: 4.49 steps per branch against off's 4.38 (+0.11 per run), no net rescue to pay for",
		"Qini coefficient 0.1951:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// The Qini table prints no column that is one constant value.
	if strings.Contains(out, "random_net  qini") {
		t.Error("the Qini table still prints the coefficient as a column")
	}
}

// A noisy, imperfect sweep of two fork steps, four arms and three
// replicas; a grid of two configurations; the toolloop world, whose
// numeric features are cut at their deciles: every number of the report
// equals the reference.
func TestReportsAgainstReference(t *testing.T) {
	grid := sweep.DefaultSpec()
	grid.Seeds = sweep.Range{Start: 0, End: 1500}
	grid.Grid = map[string][]any{"p_stall": {0.0, 0.2}}
	tool := sweep.DefaultSpec()
	tool.World = "toolloop"
	tool.Seeds = sweep.Range{Start: 0, End: 1500}
	tool.ForkAt = []int{2}
	tool.Arms = []fork.Arm{fork.Off, fork.On, fork.Placebo, fork.AA}
	tool.Params = world.Params{}
	for _, tc := range []struct {
		name string
		spec sweep.Spec
	}{{"noisy", resultstest.NoisySpec()}, {"grid", grid}, {"toolloop", tool}} {
		t.Run(tc.name, func(t *testing.T) {
			db := resultstest.Open(t, tc.spec)
			s, _ := checkReference(t, db)
			if tc.name == "grid" {
				if n := len(s.Search.Searched()); n != 2 {
					t.Fatalf("%d configurations searched, want 2", n)
				}
				// With stalls, same_obs = true lets harms through: configuration
				// 1 must get its own rule.
				if a, b := s.Search.Groups[0].Chosen.Trigger, s.Search.Groups[1].Chosen.Trigger; a != "same_obs = true" || b == a {
					t.Errorf("chosen: config 0 %q, config 1 %q", a, b)
				}
			}
			if tc.name == "toolloop" {
				var quantile bool
				for _, r := range s.Slices.Records() {
					quantile = quantile || strings.HasPrefix(r.Str("value"), "[")
				}
				if !quantile {
					t.Error("no quantile bucket among toolloop's slices")
				}
			}
		})
	}
}
