package report

import (
	"fmt"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"math"
)

// maxResultGroups bounds the (configuration, fork step) combinations the
// Result section describes one by one; the tables hold the rest.
const maxResultGroups = 4

// resultParagraphs writes the "Result" section from the numbers: what
// recovery does overall and where, what the placebo and A/A arms show, what
// the chosen guard keeps and gives up on held-out seeds, and, when the sweep
// ran the policy arm, what the rerun shows.
func resultParagraphs(s *Sections) []string {
	var out []string
	sum := s.Summary.Records()
	groups := 0
	for _, r := range sum {
		if r.Str("arm") != "on" {
			continue
		}
		groups++
		if groups > maxResultGroups {
			out = append(out, fmt.Sprintf("(%d more configurations or fork steps: see SUMMARY and SLICES.)", countArm(sum, "on")-maxResultGroups))
			break
		}
		out = append(out, overall(r, s)+where(r, s))
	}
	for _, r := range sum {
		if r.Int("config_id") != 0 || (len(sum) > 0 && r.Int("fork_step") != sum[0].Int("fork_step")) {
			continue
		}
		switch r.Str("arm") {
		case "placebo":
			out = append(out, placebo(r, find(sum, r, "on")))
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
			out = append(out, p)
		}
	}
	if s.Search != nil {
		out = append(out, guard(s))
	}
	return out
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

func overall(r results.Row, s *Sections) string {
	net := r.Int("net")
	verdict := "a difference indistinguishable from zero at the 5% level"
	if r.Float("mcnemar_p") < 0.05 {
		if net > 0 {
			verdict = "a gain unlikely to be chance"
		} else {
			verdict = "a loss unlikely to be chance"
		}
	}
	p := fmt.Sprintf("Recovery at fork step %d", r.Int("fork_step"))
	if cfgs := configsIn(s); cfgs > 1 {
		p += fmt.Sprintf(" (config %d)", r.Int("config_id"))
	}
	p += fmt.Sprintf(" rescues %d of %d runs and harms %d: net %+d (net rate %s, 95%% CI %s to %s; McNemar exact p = %s), %s.",
		r.Int("rescued"), r.Int("pairs"), r.Int("harmed"), net, Pct(r.Float("net_rate")), Pct(r.Float("net_lo")), Pct(r.Float("net_hi")),
		PValue(r.Float("mcnemar_p")), verdict)
	if flips := r.Int("rescued") + r.Int("harmed"); flips > 0 && float64(abs(net)) < 0.5*float64(flips) && r.Float("mcnemar_p") >= 0.05 {
		p += fmt.Sprintf(" The small net hides %d runs that flip one way or the other.", flips)
	}
	return p
}

func configsIn(s *Sections) int {
	seen := map[int64]bool{}
	for _, r := range s.Summary.Records() {
		seen[r.Int("config_id")] = true
	}
	return len(seen)
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
		p += fmt.Sprintf(" It helps most where %s = %s (%d rescued, %d harmed", best.Str("feature"), best.Str("value"), best.Int("rescued"), best.Int("harmed"))
		p += fmt.Sprintf(", net %+d)", best.Int("net"))
	}
	if worst.Int("net") < 0 {
		if p == "" {
			p += " It"
		} else {
			p += " and"
		}
		p += fmt.Sprintf(" harms most where %s = %s (%d rescued, %d harmed, net %+d)", worst.Str("feature"), worst.Str("value"),
			worst.Int("rescued"), worst.Int("harmed"), worst.Int("net"))
	}
	if p != "" {
		p += "."
	}
	return p
}

func placebo(r, on results.Row) string {
	p := fmt.Sprintf("The placebo, a step burned with nothing new read, rescues %d and harms %d (net %+d; net rate 95%% CI %s to %s)",
		r.Int("rescued"), r.Int("harmed"), r.Int("net"), Pct(r.Float("net_lo")), Pct(r.Float("net_hi")))
	if on == nil {
		return p + "."
	}
	switch {
	case r.Int("rescued") == 0:
		p += fmt.Sprintf(": none of recovery's %d rescues come from merely interrupting the run; they need the fresh reading.", on.Int("rescued"))
	case r.Int("rescued") >= on.Int("rescued"):
		p += fmt.Sprintf(": interrupting the run alone rescues as many as recovery does (%d), so the refresh's new information adds no rescues.", on.Int("rescued"))
	default:
		p += fmt.Sprintf(": interrupting the run alone accounts for up to %d of recovery's %d rescues; the fresh reading accounts for the rest.",
			r.Int("rescued"), on.Int("rescued"))
	}
	return p
}

func guard(s *Sections) string {
	r := s.Search
	c := r.Chosen
	var always *struct{ rescued, harmed int64 }
	for _, b := range r.Baselines {
		if b.Trigger == "always" {
			always = &struct{ rescued, harmed int64 }{b.Holdout.Rescued, b.Holdout.Harmed}
		}
	}
	scope := "on clean runs (no fault)"
	if r.Options.Scope == "all" {
		scope = "in all"
	}
	kept := pick(r.Options.Scope == "all", c.Search.Harmed, c.Search.HarmedClean)
	p := fmt.Sprintf("The guard chosen on %d search pairs, recover only when %s, keeps %s with %s %s there (cap %d).",
		c.Search.Pairs, c.Rule.String(), count(c.Search.Rescued, "rescue"), count(kept, "harm"), scope, r.Options.MaxHarm)
	if c.Trigger == "never" {
		p = fmt.Sprintf("No trigger over the recorded features keeps any rescue with at most %d harms %s on the search pairs, so the guard is never to recover.",
			r.Options.MaxHarm, scope)
	}
	p += fmt.Sprintf(" On the %d held-out pairs it keeps %s and lets through %s (net %+d)", c.Holdout.Pairs,
		count(c.Holdout.Rescued, "rescue"), count(c.Holdout.Harmed, "harm"), c.Holdout.Net())
	if always != nil {
		p += fmt.Sprintf(", where always-on rescues %d and harms %d", always.rescued, always.harmed)
	}
	p += fmt.Sprintf("; with 95%% confidence its held-out harm rate is at most %s (exact Clopper–Pearson bound).", PctUp(c.Holdout.HarmUpper()))
	if c.Conditions == 2 {
		p += " A single feature was not enough here: the rule needs two conditions."
	}
	if c.Holdout.Harmed > 0 && c.Search.Harmed == 0 {
		p += " Its harms on held-out seeds show the search set flattered it."
	}
	return p
}

func pick(all bool, a, b int64) int64 {
	if all {
		return a
	}
	return b
}

func abs(x int64) int64 { return int64(math.Abs(float64(x))) }

// count writes n with its noun, "1 harm", "2 harms".
func count(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
