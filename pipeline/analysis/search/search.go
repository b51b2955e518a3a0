// Package search chooses the guard policy: it runs queries/policy_search.sql
// over a results directory to enumerate candidate triggers over whatever
// features the world declares, for every configuration and fork step, picks
// in each the trigger with the most rescues whose harms stay within a cap on
// the search seeds, judges it on held-out seeds, and turns it into a
// policy.Rule that names its world. It also reads the uplift (Qini) curves
// of queries/qini.sql.
package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/analysis/stats"
	"github.com/forklab/forklab/pipeline/world"
)

// Options are the search's settings; Defaults gives the seed's.
type Options struct {
	// MaxHarm caps harms; 0 is the seed's "zero harms".
	MaxHarm int
	// Scope is "clean" (the cap counts harms on runs whose fault flag is
	// false, the seed's cap; every harm when the world declares no fault
	// flag) or "all".
	Scope string
	// Holdout is the share of seeds held out, in (0, 1).
	Holdout float64
	// MinPairs is the least number of pairs each side of the split needs;
	// a configuration and fork step with fewer is not searched.
	MinPairs int
	// ConfigID and ForkStep keep one configuration and one fork step of
	// the result; -1 keeps every one.
	ConfigID, ForkStep int
}

// Defaults returns the seed's cap (zero harms on clean runs), 30% of seeds
// held out, every configuration and fork step.
func Defaults() Options {
	return Options{MaxHarm: 0, Scope: "clean", Holdout: 0.3, MinPairs: 10, ConfigID: -1, ForkStep: -1}
}

// ErrInput marks a search that cannot run on its input: bad options, a
// configuration or fork step the sweep does not have, no arm on, or too
// few pairs.
var ErrInput = errors.New("policy search")

// Validate reports options out of range, wrapping ErrInput.
func (o Options) Validate() error {
	switch {
	case o.MaxHarm < 0:
		return fmt.Errorf("%w: the harm cap must be 0 or more, got %d", ErrInput, o.MaxHarm)
	case o.Scope != "clean" && o.Scope != "all":
		return fmt.Errorf("%w: the harm scope must be clean or all, got %q", ErrInput, o.Scope)
	case !(o.Holdout > 0 && o.Holdout < 1):
		return fmt.Errorf("%w: the held-out share must be strictly between 0 and 1, got %v", ErrInput, o.Holdout)
	case o.ConfigID < -1:
		return fmt.Errorf("%w: config %d does not exist", ErrInput, o.ConfigID)
	case o.ForkStep < -1 || o.ForkStep == 0:
		return fmt.Errorf("%w: fork step %d does not exist", ErrInput, o.ForkStep)
	}
	return nil
}

// Cost is an extra cost summed over the pairs a trigger fires on (pairs'
// extra_<field>: the treatment's mean branch cost minus the control's),
// one value per cost field in world.CostFields order (steps, tokens, usd,
// seconds); NaN for a field the world does not report.
type Cost [4]float64

// Side is a trigger's counts on one side of the split.
type Side struct {
	Pairs, Fires, Rescued, Harmed, HarmedClean int64
	// Extra is the extra cost of the pairs it fires on.
	Extra Cost
}

// Net is rescued minus harmed.
func (s Side) Net() int64 { return s.Rescued - s.Harmed }

// HarmUpper is the exact one-sided 95% upper bound on the harm rate
// (harmed / pairs; Clopper–Pearson).
func (s Side) HarmUpper() float64 { return stats.ClopperPearsonUpper(s.Harmed, s.Pairs, 0.95) }

// Capped is the harm count the cap of scope ("clean" or "all") reads.
func (s Side) Capped(scope string) int64 {
	if scope == "all" {
		return s.Harmed
	}
	return s.HarmedClean
}

// Candidate is one trigger with its counts.
type Candidate struct {
	Rank       int
	Chosen     bool
	Trigger    string
	Conditions int
	WithinCap  bool
	Rule       policy.Rule
	Search     Side
	Holdout    Side
}

// Group is the search of one configuration and fork step.
type Group struct {
	ConfigID, ForkStep int
	// Candidates are every trigger, best first; empty when Skipped.
	Candidates []Candidate
	// Chosen is the best candidate within the cap (never, if nothing else
	// is).
	Chosen Candidate
	// Baselines are always, never, and for each feature its best
	// single-condition trigger, in that order.
	Baselines []Candidate
	// Skipped says why the group was not searched (too few pairs on a side
	// of the split); "" when it was.
	Skipped string
}

// Result is a finished search: one group per configuration and fork step
// of the sweep (or the one Options asked for), in that order.
type Result struct {
	Options Options
	// World is the declaration of the world searched.
	World  world.Declaration
	Groups []Group
}

// Searched lists the groups that were searched (not skipped).
func (r *Result) Searched() []*Group {
	var gs []*Group
	for i := range r.Groups {
		if r.Groups[i].Skipped == "" {
			gs = append(gs, &r.Groups[i])
		}
	}
	return gs
}

// Run searches the results in db.
func Run(ctx context.Context, db *results.DB, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	d := db.Manifest.Declaration
	if _, ok := d.Intervention("on"); !ok {
		return nil, fmt.Errorf("%w: world %s declares no recovery (arm on) to guard", ErrInput, d.Name)
	}
	hasOn := false
	for _, a := range db.Manifest.Spec.Arms {
		hasOn = hasOn || a == "on"
	}
	if !hasOn {
		return nil, fmt.Errorf("%w: %s has no pairs of the always-on arm; sweep with --arms off,on first", ErrInput, db.Dir)
	}
	if err := checkChoice(db, o); err != nil {
		return nil, err
	}
	if err := db.Materialize(ctx, o.Holdout); err != nil {
		return nil, err
	}
	if err := db.Exec(ctx, fmt.Sprintf("SET VARIABLE max_harm = %d; SET VARIABLE harm_scope = %s;", o.MaxHarm, duck.Quote(o.Scope))); err != nil {
		return nil, err
	}
	t, err := db.Run(ctx, "policy_search")
	if err != nil {
		return nil, err
	}
	r := &Result{Options: o, World: d}
	var g *Group
	for _, row := range t.Records() {
		cfg, step := int(row.Int("config_id")), int(row.Int("fork_step"))
		if (o.ConfigID >= 0 && cfg != o.ConfigID) || (o.ForkStep >= 0 && step != o.ForkStep) {
			continue
		}
		if g == nil || g.ConfigID != cfg || g.ForkStep != step {
			r.Groups = append(r.Groups, Group{ConfigID: cfg, ForkStep: step})
			g = &r.Groups[len(r.Groups)-1]
		}
		c, err := candidateOf(d, row, cfg, step)
		if err != nil {
			return nil, err
		}
		g.Candidates = append(g.Candidates, c)
	}
	if len(r.Groups) == 0 {
		return nil, fmt.Errorf("%w: no labelled pairs of arm on in %s", ErrInput, db.Dir)
	}
	for i := range r.Groups {
		g := &r.Groups[i]
		g.Chosen = g.Candidates[0]
		if s, h := g.Chosen.Search.Pairs, g.Chosen.Holdout.Pairs; s < int64(o.MinPairs) || h < int64(o.MinPairs) {
			g.Skipped = fmt.Sprintf("too few pairs to split: %d search and %d held out, want at least %d each; sweep more seeds or change --holdout",
				s, h, o.MinPairs)
			g.Candidates, g.Chosen = nil, Candidate{}
			continue
		}
		g.Baselines = baselines(g.Candidates)
	}
	return r, nil
}

// checkChoice reports a configuration or fork step the sweep does not have,
// naming those it has.
func checkChoice(db *results.DB, o Options) error {
	m := db.Manifest
	if o.ConfigID >= len(m.Configs) {
		return fmt.Errorf("%w: config %d does not exist (the sweep has configs 0 to %d)", ErrInput, o.ConfigID, len(m.Configs)-1)
	}
	if o.ForkStep >= 0 {
		for _, f := range m.Spec.ForkAt {
			if f == o.ForkStep {
				return nil
			}
		}
		steps := make([]string, len(m.Spec.ForkAt))
		for i, f := range m.Spec.ForkAt {
			steps[i] = strconv.Itoa(f)
		}
		return fmt.Errorf("%w: the sweep forked at step %s, not %d", ErrInput, strings.Join(steps, ", "), o.ForkStep)
	}
	return nil
}

// baselines picks always, never and each feature's best single condition
// from candidates ranked best first.
func baselines(cs []Candidate) []Candidate {
	var out []Candidate
	for _, want := range []string{"always", "never"} {
		for _, c := range cs {
			if c.Trigger == want {
				out = append(out, c)
			}
		}
	}
	seen := map[string]bool{}
	for _, c := range cs {
		if c.Conditions == 1 && !seen[c.Rule.All[0].Feature] {
			seen[c.Rule.All[0].Feature] = true
			out = append(out, c)
		}
	}
	return out
}

func candidateOf(d world.Declaration, row results.Row, cfg, step int) (Candidate, error) {
	side := func(prefix string) Side {
		s := Side{Pairs: row.Int(prefix + "_pairs"), Fires: row.Int(prefix + "_fires"), Rescued: row.Int(prefix + "_rescued"),
			Harmed: row.Int(prefix + "_harmed"), HarmedClean: row.Int(prefix + "_harmed_clean")}
		for i, f := range world.CostFields {
			s.Extra[i] = math.NaN()
			if v := row[prefix+"_extra_"+f]; v != nil {
				s.Extra[i] = results.Float(v)
			}
		}
		return s
	}
	c := Candidate{Rank: int(row.Int("rank")), Chosen: row["chosen"] == true, Trigger: row.Str("trigger"),
		Conditions: int(row.Int("conditions")), WithinCap: row["within_cap"] == true,
		Search: side("search"), Holdout: side("holdout")}
	rule, err := ruleOf(d, row, cfg, step)
	if err != nil {
		return c, fmt.Errorf("policy_search.sql: candidate %q: %w", c.Trigger, err)
	}
	c.Rule = rule
	return c, nil
}

// ruleOf turns a candidate row into the rule it stands for, its values
// typed as the world declares its features.
func ruleOf(d world.Declaration, row results.Row, cfg, step int) (policy.Rule, error) {
	r := policy.Rule{Version: policy.Version, World: d.Name, WorldVersion: d.Version, ConfigID: &cfg, ForkStep: &step, All: []policy.Condition{}}
	switch row.Str("trigger") {
	case "never":
		r.Never = true
		return r, nil
	case "always":
		return r, nil
	}
	for _, i := range []string{"1", "2"} {
		name, ok := row["feature_"+i].(string)
		if !ok {
			continue
		}
		f, _, ok := d.Feature(name)
		if !ok {
			return r, fmt.Errorf("unknown feature %q", name)
		}
		text := row.Str("value_" + i)
		var v any = text
		switch f.Kind {
		case world.Bool:
			v = text == "true"
		case world.Int, world.Float:
			x, err := strconv.ParseFloat(text, 64)
			if err != nil {
				return r, fmt.Errorf("value %q of %s: %w", text, name, err)
			}
			v = x
		}
		r.All = append(r.All, policy.Condition{Feature: name, Op: row.Str("op_" + i), Value: v})
	}
	return r, r.Check(d)
}

// Qini runs queries/qini.sql with the options' split: the curve of every
// configuration and fork step (or the one the options keep).
func Qini(ctx context.Context, db *results.DB, o Options) (*results.Table, error) {
	if err := db.Materialize(ctx, o.Holdout); err != nil {
		return nil, err
	}
	t, err := db.Run(ctx, "qini")
	if err != nil {
		return nil, err
	}
	if o.ConfigID < 0 && o.ForkStep < 0 {
		return t, nil
	}
	out := &results.Table{Columns: t.Columns}
	for i, row := range t.Records() {
		if (o.ConfigID < 0 || row.Int("config_id") == int64(o.ConfigID)) && (o.ForkStep < 0 || row.Int("fork_step") == int64(o.ForkStep)) {
			out.Rows = append(out.Rows, t.Rows[i])
		}
	}
	return out, nil
}
