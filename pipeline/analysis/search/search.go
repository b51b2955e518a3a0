// Package search chooses the guard policy: it runs queries/policy_search.sql
// over a results directory to enumerate candidate triggers on the search
// seeds, picks the one with the most rescues whose harms stay within a cap,
// judges it on held-out seeds, and turns it into a policy.Rule. It also reads
// the uplift (Qini) curve of queries/qini.sql.
package search

import (
	"context"
	"errors"
	"fmt"

	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/analysis/stats"
	"github.com/forklab/forklab/pipeline/world"
)

// Options are the search's settings; Defaults gives the seed's.
type Options struct {
	// ConfigID is the configuration searched.
	ConfigID int
	// MaxHarm caps harms; 0 is the seed's "zero harms".
	MaxHarm int
	// Scope is "clean" (the cap counts harms on runs whose hidden truth is
	// "no fault", the seed's cap) or "all".
	Scope string
	// Holdout is the share of seeds held out, in (0, 1).
	Holdout float64
	// MinPairs is the least number of pairs each side of the split needs.
	MinPairs int
}

// Defaults returns the seed's cap (zero harms on clean runs), 30% of seeds
// held out, configuration 0.
func Defaults() Options {
	return Options{MaxHarm: 0, Scope: "clean", Holdout: 0.3, MinPairs: 10}
}

// ErrInput marks a search that cannot run on its input: bad options or too
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
	case o.ConfigID < 0:
		return fmt.Errorf("%w: config %d does not exist", ErrInput, o.ConfigID)
	}
	return nil
}

// Side is a trigger's counts on one side of the split.
type Side struct {
	Pairs, Fires, Rescued, Harmed, HarmedClean int64
}

// Net is rescued minus harmed.
func (s Side) Net() int64 { return s.Rescued - s.Harmed }

// HarmUpper is the exact one-sided 95% upper bound on the harm rate
// (harmed / pairs; Clopper–Pearson).
func (s Side) HarmUpper() float64 { return stats.ClopperPearsonUpper(s.Harmed, s.Pairs, 0.95) }

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

// Result is a finished search.
type Result struct {
	Options    Options
	Candidates []Candidate // best first
	Chosen     Candidate
	// Baselines are always, never, and for each feature its best
	// single-condition trigger, in that order.
	Baselines []Candidate
}

// Run searches the results in db.
func Run(ctx context.Context, db *results.DB, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.ConfigID >= len(db.Manifest.Configs) {
		return nil, fmt.Errorf("%w: config %d does not exist (the sweep has %d)", ErrInput, o.ConfigID, len(db.Manifest.Configs))
	}
	hasOn := false
	for _, a := range db.Manifest.Spec.Arms {
		hasOn = hasOn || a == "on"
	}
	if !hasOn {
		return nil, fmt.Errorf("%w: %s has no pairs of the always-on arm; sweep with --arms off,on first", ErrInput, db.Dir)
	}
	if err := setVars(ctx, db, o); err != nil {
		return nil, err
	}
	t, err := db.Run(ctx, "policy_search")
	if err != nil {
		return nil, err
	}
	r := &Result{Options: o}
	col := index(t)
	for _, row := range t.Rows {
		c := Candidate{
			Rank: int(results.Int(row[col["rank"]])), Chosen: row[col["chosen"]] == true,
			Trigger: row[col["trigger"]].(string), Conditions: int(results.Int(row[col["conditions"]])),
			WithinCap: row[col["within_cap"]] == true,
			Search: Side{results.Int(row[col["search_pairs"]]), results.Int(row[col["search_fires"]]), results.Int(row[col["search_rescued"]]),
				results.Int(row[col["search_harmed"]]), results.Int(row[col["search_harmed_clean"]])},
			Holdout: Side{results.Int(row[col["holdout_pairs"]]), results.Int(row[col["holdout_fires"]]), results.Int(row[col["holdout_rescued"]]),
				results.Int(row[col["holdout_harmed"]]), results.Int(row[col["holdout_harmed_clean"]])},
		}
		c.Rule = ruleOf(db.Manifest.Declaration, c.Trigger, row, col)
		r.Candidates = append(r.Candidates, c)
	}
	if len(r.Candidates) == 0 {
		return nil, fmt.Errorf("%w: no pairs of arm on in config %d", ErrInput, o.ConfigID)
	}
	if s, h := r.Candidates[0].Search.Pairs, r.Candidates[0].Holdout.Pairs; s < int64(o.MinPairs) || h < int64(o.MinPairs) {
		return nil, fmt.Errorf("%w: too few pairs to split: %d search and %d held out, want at least %d each; sweep more seeds or change --holdout",
			ErrInput, s, h, o.MinPairs)
	}
	r.Chosen = r.Candidates[0]
	seen := map[string]bool{}
	for _, want := range []string{"always", "never"} {
		for _, c := range r.Candidates {
			if c.Trigger == want {
				r.Baselines = append(r.Baselines, c)
			}
		}
	}
	for _, c := range r.Candidates {
		if c.Conditions == 1 && !seen[c.Rule.All[0].Feature] {
			seen[c.Rule.All[0].Feature] = true
			r.Baselines = append(r.Baselines, c)
		}
	}
	return r, nil
}

// Qini runs queries/qini.sql with the options' split.
func Qini(ctx context.Context, db *results.DB, o Options) (*results.Table, error) {
	if err := setVars(ctx, db, o); err != nil {
		return nil, err
	}
	return db.Run(ctx, "qini")
}

func setVars(ctx context.Context, db *results.DB, o Options) error {
	_, err := db.SQL().ExecContext(ctx, fmt.Sprintf(
		"SET VARIABLE config_id = %d; SET VARIABLE max_harm = %d; SET VARIABLE harm_scope = %s; SET VARIABLE holdout = %v;",
		o.ConfigID, o.MaxHarm, duck.Quote(o.Scope), o.Holdout))
	return err
}

func ruleOf(d world.Declaration, trigger string, row []any, col map[string]int) policy.Rule {
	r := policy.Rule{Version: policy.Version, World: d.Name, WorldVersion: d.Version, All: []policy.Condition{}}
	switch trigger {
	case "never":
		r.Never = true
		return r
	case "always":
		return r
	}
	for _, i := range []string{"1", "2"} {
		f, ok := row[col["feature_"+i]].(string)
		if !ok {
			continue
		}
		var v any = float64(results.Int(row[col["value_"+i]]))
		if fd, _, ok := d.Feature(f); ok && fd.Kind == world.Bool {
			v = results.Int(row[col["value_"+i]]) == 1
		}
		r.All = append(r.All, policy.Condition{Feature: f, Op: row[col["op_"+i]].(string), Value: v})
	}
	return r
}

func index(t *results.Table) map[string]int {
	m := map[string]int{}
	for i, c := range t.Columns {
		m[c] = i
	}
	return m
}
