package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/forklab/forklab/internal/plural"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/analysis/search"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
)

// maxResultGroups bounds the (configuration, fork step) combinations the
// Result section describes one by one; the tables hold the rest.
const maxResultGroups = 4

// resultParagraphs writes the "Result" section from the numbers, for any
// world: what recovery does overall and where, what it costs, what the
// placebo and A/A arms show, what the chosen guard keeps, gives up and
// costs on held-out seeds, and, when the sweep ran the policy arm, what the
// rerun shows.
func resultParagraphs(s *Sections, m sweep.Manifest) []string {
	var out []string
	sum := s.Summary.Records()
	costs := s.Costs.Records()
	lead := "on"
	if countArm(sum, "on") == 0 && len(sum) > 0 {
		lead = sum[0].Str("arm")
	}
	groups := 0
	for _, r := range sum {
		if r.Str("arm") != lead {
			continue
		}
		groups++
		if groups > maxResultGroups {
			out = append(out, fmt.Sprintf("(%d more configurations or fork steps: see the headlines and SLICES.)", countArm(sum, lead)-maxResultGroups))
			break
		}
		out = append(out, overall(r, s, m)+where(r, s)+costSentence(CostsOf(costs, r)))
	}
	errored := int64(0)
	for _, r := range sum {
		errored += r.Int("errors")
	}
	if errored > 0 {
		out = append(out, fmt.Sprintf("%s errored (a checkpoint or a branch failed) and %s not labelled: the counts above leave %s out.",
			plural.Count(errored, "pair"), map[bool]string{true: "is", false: "are"}[errored == 1], map[bool]string{true: "it", false: "them"}[errored == 1]))
	}
	for _, r := range sum {
		if r.Int("config_id") != sum[0].Int("config_id") || r.Int("fork_step") != sum[0].Int("fork_step") {
			continue
		}
		switch r.Str("arm") {
		case "placebo":
			out = append(out, placebo(r, find(sum, r, "on"), s))
		case "aa":
			out = append(out, fmt.Sprintf("The A/A arm (off against off with independent noise) flips %s of pairs (95%% CI %s to %s): "+
				"that is the noise floor a rescue or harm rate has to clear.", Pct(r.Float("flip_rate")), Pct(r.Float("flip_lo")), Pct(r.Float("flip_hi"))))
		case "policy":
			on := find(sum, r, "on")
			p := fmt.Sprintf("Rerun with recovery only where the guard rule fires, the policy arm rescues %d and harms %d (net %+d",
				r.Int("rescued"), r.Int("harmed"), r.Int("net"))
			if on != nil {
				p += fmt.Sprintf(") against always-on's %d rescued and %d harmed (net %+d) on the same seeds.", on.Int("rescued"), on.Int("harmed"), on.Int("net"))
			} else {
				p += "); this sweep has no always-on arm to compare with."
			}
			p += inSampleSentence(m.Spec)
			out = append(out, p+costSentence(CostsOf(costs, r)))
		}
	}
	if s.Search != nil {
		searched := s.Search.Searched()
		for i, g := range searched {
			if i == maxResultGroups {
				out = append(out, fmt.Sprintf("(%d more searched configurations or fork steps: see POLICY SEARCH.)", len(searched)-maxResultGroups))
				break
			}
			out = append(out, guard(s, g, m, len(s.Search.Groups) > 1))
		}
	}
	if p := PopulationParagraph(m); p != "" {
		out = append(out, p)
	}
	return out
}

// PopulationParagraph says, for a recorded population, what its numbers
// can and cannot speak for: they count these runs, which nobody drew at
// random; "" for a seed population, whose seeds are a random sample of the
// world's task generator (docs/recorded-runs.md, "What the statistics
// mean").
func PopulationParagraph(m sweep.Manifest) string {
	r := m.Spec.Runs
	if r == nil {
		return ""
	}
	return fmt.Sprintf("These are %d recorded runs (%s %s), not a random sample: the counts describe these runs. "+
		"The rates, intervals and McNemar's p treat them as if drawn at random from the runs your agent meets; "+
		"they speak for runs recorded the way these were, not for the runs you did not record (other days, other users, "+
		"the runs a filter left out). The held-out check holds out some of these same runs: it catches a rule fitted "+
		"to chance, not a population that differs from these.", r.Count, r.Format, r.Source)
}

func countArm(rs []results.Row, arm string) int {
	n := 0
	for _, r := range rs {
		if r.Str("arm") == arm {
			n++
		}
	}
	return n
}

// find returns the summary row of arm for r's configuration and fork step.
func find(rs []results.Row, r results.Row, arm string) results.Row {
	for _, x := range rs {
		if x.Str("arm") == arm && x.Int("config_id") == r.Int("config_id") && x.Int("fork_step") == r.Int("fork_step") {
			return x
		}
	}
	return nil
}

func overall(r results.Row, s *Sections, m sweep.Manifest) string {
	net := r.Int("net")
	verdict := "a difference indistinguishable from zero at the 5% level"
	if r.Float("mcnemar_p") < 0.05 {
		if net > 0 {
			verdict = "a gain unlikely to be chance"
		} else {
			verdict = "a loss unlikely to be chance"
		}
	}
	what := "Recovery"
	if r.Str("arm") != "on" {
		what = "The " + r.Str("arm") + " arm"
	}
	p := fmt.Sprintf("%s at fork step %d", what, r.Int("fork_step"))
	if l := ConfigLabel(m, r.Int("config_id")); l != "" {
		p += " (" + l + ")"
	}
	if r.Int("pairs") == 0 {
		return p + fmt.Sprintf(" has no labelled pair: every one of its %s errored, so its net rate and McNemar's test are %s.", plural.Count(r.Int("errors"), "pair"), NA)
	}
	p += fmt.Sprintf(" rescues %d of %d runs and harms %d: net %+d (net rate %s, 95%% CI %s to %s; McNemar exact p %s), %s.",
		r.Int("rescued"), r.Int("pairs"), r.Int("harmed"), net, Pct(r.Float("net_rate")), Pct(r.Float("net_lo")), Pct(r.Float("net_hi")),
		PEquals(r.Float("mcnemar_p")), verdict)
	if flips := r.Int("rescued") + r.Int("harmed"); flips > 0 && float64(abs(net)) < 0.5*float64(flips) && r.Float("mcnemar_p") >= 0.05 {
		p += fmt.Sprintf(" The small net hides %d runs that flip one way or the other.", flips)
	}
	if r["mean_score_diff"] != nil {
		p += " Graded, its mean paired score difference is " + ScoreSigned(r.Float("mean_score_diff"))
		if r["score_diff_lo"] != nil {
			p += fmt.Sprintf(" (95%% CI %s to %s, paired t", ScoreSigned(r.Float("score_diff_lo")), ScoreSigned(r.Float("score_diff_hi")))
			if r.Int("wilcoxon_n") > 0 {
				p += fmt.Sprintf("; Wilcoxon signed-rank p %s", PEquals(r.Float("wilcoxon_p")))
			}
			p += ")"
		}
		p += "."
	}
	return p
}

// costSentence says what an arm costs beyond off, per run and per net
// rescue, for each cost field: " From the fork to the end of the run,
// against off, it costs 0.11 steps per run (0.5 per net rescue) and saves
// 2.00 seconds per run."; "" without cost rows (and for the A/A arm,
// which CostsOf gives none).
func costSentence(rows []results.Row) string {
	var parts []costPart
	for _, c := range rows {
		p := costPart{x: c.Float("extra"), text: fmt.Sprintf("%s %s per run", CostNum(math.Abs(c.Float("extra"))), c.Str("cost"))}
		if c["per_net_rescue"] != nil {
			p.text += fmt.Sprintf(" (%s per net rescue)", CostNum(math.Abs(c.Float("per_net_rescue"))))
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return ""
	}
	return " From the fork to the end of the run, against off, it " + costList(parts) + "."
}

// costPart is one cost field's amount against off (negative: a saving)
// and its text without the verb, "13 steps (0.59 per net rescue)".
type costPart struct {
	x    float64
	text string
}

// costList writes cost parts as one list with their verbs, said once for
// a run of parts that share one: "saves 13 steps and 2.00 seconds",
// "saves 13 steps, costs 40 tokens and 3.00 seconds". Every amount names
// its unit, so any number of cost fields reads right.
func costList(parts []costPart) string {
	var b strings.Builder
	last := ""
	for i, p := range parts {
		switch {
		case i == 0:
		case i == len(parts)-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		verb := "costs "
		if p.x < 0 {
			verb = "saves "
		}
		if verb != last {
			b.WriteString(verb)
		}
		last = verb
		b.WriteString(p.text)
	}
	return b.String()
}

// sliceText writes a slice as a condition: "same_obs = true", "tokens_left
// < 1440", "budget_used is in [0.118, 0.131)".
func sliceText(r results.Row) string {
	v := r.Str("value")
	switch {
	case strings.HasPrefix(v, "<"), strings.HasPrefix(v, ">="):
		return r.Str("feature") + " " + v
	case strings.HasPrefix(v, "["):
		return r.Str("feature") + " is in " + v
	case v == "null":
		return r.Str("feature") + " is missing"
	}
	return r.Str("feature") + " = " + v
}

// where names the slice with the best and the worst net for r's
// configuration, fork step and arm.
func where(r results.Row, s *Sections) string {
	var best, worst results.Row
	for _, x := range s.Slices.Records() {
		if x.Int("config_id") != r.Int("config_id") || x.Int("fork_step") != r.Int("fork_step") || x.Str("arm") != r.Str("arm") ||
			x.Int("pairs") == r.Int("pairs") {
			continue
		}
		if best == nil || x.Int("net") > best.Int("net") {
			best = x
		}
		if worst == nil || x.Int("net") < worst.Int("net") {
			worst = x
		}
	}
	if best == nil {
		return ""
	}
	p := ""
	if best.Int("net") > 0 {
		p += fmt.Sprintf(" It helps most where %s (%d rescued, %d harmed", sliceText(best), best.Int("rescued"), best.Int("harmed"))
		p += fmt.Sprintf(", net %+d)", best.Int("net"))
	}
	if worst.Int("net") < 0 {
		if p == "" {
			p += " It"
		} else {
			p += " and"
		}
		p += fmt.Sprintf(" harms most where %s (%d rescued, %d harmed, net %+d)", sliceText(worst),
			worst.Int("rescued"), worst.Int("harmed"), worst.Int("net"))
	}
	if p != "" {
		p += "."
	}
	return p
}

func placebo(r, on results.Row, s *Sections) string {
	what := "The placebo"
	if iv, ok := s.World.Intervention("placebo"); ok && iv.Description != "" {
		what += " (" + iv.Description + ")"
	}
	p := fmt.Sprintf("%s rescues %d and harms %d (net %+d; net rate 95%% CI %s to %s)",
		what, r.Int("rescued"), r.Int("harmed"), r.Int("net"), Pct(r.Float("net_lo")), Pct(r.Float("net_hi")))
	if on == nil {
		return p + "."
	}
	switch {
	case r.Int("rescued") == 0:
		p += fmt.Sprintf(": none of recovery's %s come%s from merely interrupting the run; %s what the recovery does.", plural.Count(on.Int("rescued"), "rescue"),
			plural.Word(on.Int("rescued"), "s", ""), plural.Word(on.Int("rescued"), "it needs", "they need"))
	case r.Int("rescued") >= on.Int("rescued"):
		p += fmt.Sprintf(": interrupting the run alone rescues as many as recovery does (%d), so what the recovery does adds no rescues.", on.Int("rescued"))
	default:
		p += fmt.Sprintf(": interrupting the run alone accounts for up to %d of recovery's %d rescues; what the recovery does accounts for the rest.",
			r.Int("rescued"), on.Int("rescued"))
	}
	return p
}

func guard(s *Sections, g *search.Group, m sweep.Manifest, several bool) string {
	r := s.Search
	c := g.Chosen
	var always *search.Candidate
	for i, b := range g.Baselines {
		if b.Trigger == "always" {
			always = &g.Baselines[i]
		}
	}
	scope := ScopeText(r.Options.Scope, r.World)
	at := ""
	if several {
		at = " for " + GroupTitle(m, g.ConfigID, g.ForkStep)
	}
	p := fmt.Sprintf("The guard chosen%s on %d search pairs, recover only when %s, keeps %s with %s %s there (cap %d).",
		at, c.Search.Pairs, ruleText(c), plural.Count(c.Search.Rescued, "rescue"), plural.Count(c.Search.Capped(r.Options.Scope), "harm"), scope, r.Options.MaxHarm)
	if c.Trigger == "never" {
		p = fmt.Sprintf("No trigger over the recorded features%s keeps any rescue with at most %s %s on the search pairs, so the guard is never to recover.",
			at, plural.Count(int64(r.Options.MaxHarm), "harm"), scope)
	}
	p += fmt.Sprintf(" On the %d held-out pairs it keeps %s and lets through %s (net %+d)", c.Holdout.Pairs,
		plural.Count(c.Holdout.Rescued, "rescue"), plural.Count(c.Holdout.Harmed, "harm"), c.Holdout.Net())
	if always != nil {
		p += fmt.Sprintf(", where always-on rescues %d and harms %d", always.Holdout.Rescued, always.Holdout.Harmed)
	}
	p += fmt.Sprintf("; with 95%% confidence its held-out harm rate is at most %s (exact Clopper–Pearson bound).", PctUp(c.Holdout.HarmUpper()))
	// What it costs against off, then what always-on costs, each amount
	// with its unit: with two cost fields the old sentence read "saves 13
	// steps … where always-on costs 552 and 1403.00 seconds" (issue 26).
	var costs, alwaysCosts []costPart
	for _, k := range reported(r.World) {
		x := c.Holdout.Extra[k]
		if math.IsNaN(x) || c.Holdout.Fires == 0 {
			continue
		}
		part := costPart{x: x, text: fmt.Sprintf("%s %s", CostTotal(k, math.Abs(x)), fieldName(k))}
		if n := c.Holdout.Net(); n > 0 {
			part.text += fmt.Sprintf(" (%s per net rescue)", CostNum(math.Abs(x)/float64(n)))
		}
		costs = append(costs, part)
		if always != nil && !math.IsNaN(always.Holdout.Extra[k]) {
			a := always.Holdout.Extra[k]
			alwaysCosts = append(alwaysCosts, costPart{x: a, text: fmt.Sprintf("%s %s", CostTotal(k, math.Abs(a)), fieldName(k))})
		}
	}
	if len(costs) > 0 {
		p += " Against off, on the held-out runs it fires on, it " + costList(costs)
		if len(alwaysCosts) > 0 {
			p += "; always-on " + costList(alwaysCosts)
		}
		p += "."
	}
	if c.Conditions == 2 {
		p += " A single feature was not enough here: the rule needs two conditions."
	}
	if c.Holdout.Harmed > 0 && c.Search.Harmed == 0 {
		p += " Its harms on held-out " + Runs(m) + " show the search set flattered it."
	}
	return p
}

func fieldName(k int) string { return world.CostFields[k] }

func abs(x int64) int64 { return int64(math.Abs(float64(x))) }

// inSampleSentence is what the Result's rerun paragraph says of a policy
// arm played on seeds its rule was searched on; "" otherwise. The brief
// report leaves it out: the policy headline's in-sample line says it there.
func inSampleSentence(spec sweep.Spec) string {
	tag := sweep.PolicySample(spec)
	if !strings.HasPrefix(tag, "in-sample") {
		return ""
	}
	return " These are in-sample figures: the rule was searched on " + strings.TrimPrefix(tag, "in-sample: the rule was searched on ") +
		", so they flatter it; its held-out figures are those of the sweep it was searched on (forklab policy)."
}
