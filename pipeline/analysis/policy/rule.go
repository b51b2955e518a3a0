// Package policy is the guard policy: a small, human-readable rule over a
// checkpoint's pre-decision features that says when to fire the recovery
// (the seed's should_recover(state), milestone 6).
//
// A rule is a conjunction of conditions, each comparing one feature with a
// value. The empty conjunction fires always; Never fires never. In a file:
//
//	{
//	  "policy_version": 2,
//	  "world": "counter",
//	  "world_version": "2",
//	  "all": [{"feature": "same_obs", "op": "=", "value": true}]
//	}
package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/forklab/forklab/internal/jsondup"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
)

// Version is the rule file layout version. Version 2 names the world (and
// its version) the rule was searched on, and compares any declared feature.
const Version = 2

// Ops lists the comparison operators. Boolean and enum features allow = and
// != only.
var Ops = []string{"=", "!=", "<", "<=", ">", ">="}

// Condition compares one feature with a value: a JSON boolean for a bool
// feature, a number for an int or float one, a string for an enum.
type Condition struct {
	Feature string `json:"feature"`
	Op      string `json:"op"`
	Value   any    `json:"value"`
}

// Rule fires when every condition in All holds, or never if Never is set.
type Rule struct {
	Version int `json:"policy_version"`
	// World and WorldVersion name the world whose features the rule reads;
	// a sweep of another world (or version) refuses the rule.
	World        string `json:"world"`
	WorldVersion string `json:"world_version"`
	// ConfigID and ForkStep say which configuration and fork step of the
	// sweep the rule was searched on (informational; nil when not from a
	// search).
	ConfigID *int `json:"config_id,omitempty"`
	ForkStep *int `json:"fork_step,omitempty"`
	// Params and Model are that configuration's world parameters (all of
	// them) and model noise; Search the seeds the rule was searched on.
	// forklab policy records them; a sweep applies the rule only at its
	// fork step, with its parameters and model and the world version it
	// names (Scope), unless told to apply it anywhere. nil in a rule
	// written by hand: it applies anywhere.
	Params world.Params `json:"params,omitempty"`
	Model  *fork.Model  `json:"model,omitempty"`
	Search *Split       `json:"search,omitempty"`
	Never  bool         `json:"never,omitempty"`
	All    []Condition  `json:"all"`
	// Note is free text for people: where the rule came from.
	Note string `json:"note,omitempty"`
}

// Split is the runs a rule was searched on: the seeds of the sweep's range
// [Start, End) not held out at share Holdout (HeldOut), or, for a recorded
// population (forklab sweep --runs), its runs not held out, the population
// named by Runs (its source) and CRC32C (its listing's checksum, as the
// manifest records it), and Count its runs.
type Split struct {
	Start   uint64  `json:"start"`
	End     uint64  `json:"end"`
	Runs    string  `json:"runs,omitempty"`
	CRC32C  string  `json:"crc32c,omitempty"`
	Count   uint64  `json:"count,omitempty"`
	Holdout float64 `json:"holdout"`
}

// HeldOut reports whether seed is held out of the search at share holdout:
// ((seed mod 2^32) × 2654435761 mod 2^32) / 2^32 < holdout, Knuth's
// multiplicative hash, as forklab policy's SQL splits the pairs
// (queries/views.go, heldOut).
func HeldOut(seed uint64, holdout float64) bool {
	h := ((seed & 0xffffffff) * 2654435761) & 0xffffffff
	return float64(h) < holdout*4294967296
}

// exactCount bounds the seeds Searched counts one by one.
const exactCount = 1 << 26

// Searched returns how many seeds of [start, end) the rule was searched on
// (nil Search: 0), and whether the count is exact: beyond 2^26 seeds in
// common it is the overlap times the search share, rounded.
func (r Rule) Searched(start, end uint64) (n uint64, exact bool) {
	if r.Search == nil || r.Search.Runs != "" {
		return 0, true
	}
	lo, hi := max(start, r.Search.Start), min(end, r.Search.End)
	if lo >= hi {
		return 0, true
	}
	if hi-lo > exactCount {
		return uint64(math.Round(float64(hi-lo) * (1 - r.Search.Holdout))), false
	}
	for s := lo; s < hi; s++ {
		if !HeldOut(s, r.Search.Holdout) {
			n++
		}
	}
	return n, true
}

// Scope lists where a sweep would apply the rule outside what it was
// chosen for, one phrase each ("fork step 2, the rule's is 3",
// "p_stall 0.2, the rule's is 0", "world version 3, the rule's is 2"):
// its world version, fork steps, and the parameters and model of its
// configurations (params: by id). Nothing for what the rule does not
// record (a hand-written rule).
func (r Rule) Scope(d world.Declaration, forkSteps []int, params map[int]world.Params, models map[int]fork.Model) []string {
	var out []string
	if r.WorldVersion != d.Version {
		out = append(out, fmt.Sprintf("world version %s, the rule's is %s", d.Version, r.WorldVersion))
	}
	if r.ForkStep != nil {
		for _, f := range forkSteps {
			if f != *r.ForkStep {
				out = append(out, fmt.Sprintf("fork step %d, the rule's is %d", f, *r.ForkStep))
			}
		}
	}
	ids := make([]int, 0, len(params))
	for id := range params {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	// Both sides in their canonical types (a file's numbers are JSON's).
	canon := func(p world.Params) world.Params {
		if q, err := d.Resolve(p); err == nil {
			return q
		}
		return p
	}
	ruleParams := canon(r.Params)
	seen := map[string]bool{}
	for _, id := range ids {
		if r.Params != nil {
			cp := canon(params[id])
			for _, p := range d.Params {
				got, want := cp.Text(p.Name), ruleParams.Text(p.Name)
				if _, ok := r.Params[p.Name]; ok && got != want && !seen[p.Name+"="+got] {
					seen[p.Name+"="+got] = true
					out = append(out, fmt.Sprintf("%s %s, the rule's is %s", p.Name, got, want))
				}
			}
		}
		if r.Model != nil {
			m := models[id]
			if m.Temperature != r.Model.Temperature && !seen[fmt.Sprint("t", m.Temperature)] {
				seen[fmt.Sprint("t", m.Temperature)] = true
				out = append(out, fmt.Sprintf("temperature %g, the rule's is %g", m.Temperature, r.Model.Temperature))
			}
			if m.NoTool != r.Model.NoTool && !seen[fmt.Sprint("n", m.NoTool)] {
				seen[fmt.Sprint("n", m.NoTool)] = true
				out = append(out, fmt.Sprintf("no_tool %g, the rule's is %g", m.NoTool, r.Model.NoTool))
			}
		}
	}
	return out
}

// Validate checks the rule's own shape: its version, never without
// conditions, known operators. Check checks it against a world.
func (r Rule) Validate() error {
	if r.Version != Version {
		return fmt.Errorf("policy_version is %d, this forklab reads %d", r.Version, Version)
	}
	if r.World == "" {
		return fmt.Errorf("the rule names no world (key \"world\")")
	}
	if r.Never && len(r.All) > 0 {
		return fmt.Errorf("a rule with never set cannot also list conditions")
	}
	for i, c := range r.All {
		if !slices.Contains(Ops, c.Op) {
			return fmt.Errorf("condition %d: unknown operator %q (known: %s)", i+1, c.Op, strings.Join(Ops, " "))
		}
	}
	if sp := r.Search; sp != nil && ((sp.Runs == "" && sp.Start >= sp.End) || (sp.Runs != "" && (sp.Start != 0 || sp.End != 0)) || !(sp.Holdout > 0 && sp.Holdout < 1)) {
		return fmt.Errorf("search: want start < end (seeds) or runs (a recorded population) and a holdout strictly between 0 and 1, got %+v", *sp)
	}
	return nil
}

// Check reports a rule that cannot run on world d: another world or world
// version, an unknown feature (naming the known ones), a value of the wrong
// type, an operator the feature's type does not allow.
func (r Rule) Check(d world.Declaration) error {
	if r.WorldVersion != d.Version && r.World == d.Name {
		if err := r.Validate(); err != nil {
			return err
		}
		return fmt.Errorf("the rule is for world %s version %s, this sweep plays version %s: search it again", r.World, r.WorldVersion, d.Version)
	}
	return r.checkFeatures(d)
}

// checkFeatures is Check without the world version: the rule's world,
// features, values and operators.
func (r Rule) checkFeatures(d world.Declaration) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.World != d.Name {
		return fmt.Errorf("the rule is for world %s, not %s", r.World, d.Name)
	}
	for i, c := range r.All {
		f, _, ok := d.Feature(c.Feature)
		if !ok {
			return fmt.Errorf("condition %d: unknown feature %q (world %s's features: %s)", i+1, c.Feature, d.Name, strings.Join(d.FeatureNames(), ", "))
		}
		if (f.Kind == world.Bool || f.Kind == world.Enum) && c.Op != "=" && c.Op != "!=" {
			return fmt.Errorf("condition %d: %s is %s, use = or !=, not %s", i+1, c.Feature, f.Kind, c.Op)
		}
		if _, err := value(f, c.Value); err != nil {
			return fmt.Errorf("condition %d: %w", i+1, err)
		}
	}
	return nil
}

// value reads a condition's value as feature f's type.
func value(f world.Field, x any) (world.Value, error) {
	switch f.Kind {
	case world.Bool:
		if b, ok := x.(bool); ok {
			return world.BoolValue(b), nil
		}
		return world.Value{}, fmt.Errorf("%s is bool: compare it with true or false, not %v", f.Name, x)
	case world.Enum:
		if s, ok := x.(string); ok && slices.Contains(f.Values, s) {
			return world.EnumValue(s), nil
		}
		return world.Value{}, fmt.Errorf("%s is an enum: compare it with one of %s, not %v", f.Name, strings.Join(f.Values, ", "), x)
	}
	n, ok := x.(float64)
	if !ok {
		return world.Value{}, fmt.Errorf("%s is a number: compare it with a number, not %v", f.Name, x)
	}
	return world.FloatValue(n), nil
}

// Compile returns the rule's should_recover for world d: a function of a
// checkpoint's features, in declaration order, that reports whether the
// rule fires. It fails as Check does.
func (r Rule) Compile(d world.Declaration) (func(features []world.Value) bool, error) {
	if err := r.Check(d); err != nil {
		return nil, err
	}
	return r.compile(d), nil
}

// CompileAnywhere is Compile for a rule applied outside the world version
// it was chosen for (forklab sweep --policy-anywhere): its world, features
// and values must still fit.
func (r Rule) CompileAnywhere(d world.Declaration) (func(features []world.Value) bool, error) {
	if err := r.checkFeatures(d); err != nil {
		return nil, err
	}
	return r.compile(d), nil
}

func (r Rule) compile(d world.Declaration) func(features []world.Value) bool {
	if r.Never {
		return func([]world.Value) bool { return false }
	}
	type cond struct {
		i    int
		kind world.Kind
		op   string
		v    world.Value
		num  float64
	}
	conds := make([]cond, len(r.All))
	for k, c := range r.All {
		f, i, _ := d.Feature(c.Feature)
		v, _ := value(f, c.Value)
		num := v.F
		if f.Kind == world.Bool {
			num = float64(v.I)
		}
		conds[k] = cond{i: i, kind: f.Kind, op: c.Op, v: v, num: num}
	}
	return func(fs []world.Value) bool {
		for _, c := range conds {
			x := fs[c.i]
			if x.Null {
				return false
			}
			if c.kind == world.Enum {
				if (x.S == c.v.S) != (c.op == "=") {
					return false
				}
				continue
			}
			if !compare(x.Number(c.kind), c.op, c.num) {
				return false
			}
		}
		return true
	}
}

func compare(x float64, op string, v float64) bool {
	switch op {
	case "=":
		return x == v
	case "!=":
		return x != v
	case "<":
		return x < v
	case "<=":
		return x <= v
	case ">":
		return x > v
	case ">=":
		return x >= v
	}
	return false
}

// String renders the rule for people: "same_obs = true AND repeat_run >= 2",
// "always" or "never".
func (r Rule) String() string {
	if r.Never {
		return "never"
	}
	if len(r.All) == 0 {
		return "always"
	}
	parts := make([]string, len(r.All))
	for i, c := range r.All {
		parts[i] = fmt.Sprintf("%s %s %v", c.Feature, c.Op, c.Value)
	}
	return strings.Join(parts, " AND ")
}

// Decode reads a rule strictly: unknown keys, trailing data and invalid
// rules are errors.
func Decode(b []byte) (Rule, error) {
	var r Rule
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return r, fmt.Errorf("malformed policy JSON: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return r, fmt.Errorf("malformed policy JSON: trailing data after the rule")
	}
	if err := jsondup.Check(b); err != nil {
		return r, fmt.Errorf("malformed policy JSON: %w", err)
	}
	return r, r.Validate()
}

// ReadFile reads and validates a rule file.
func ReadFile(path string) (Rule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Rule{}, fmt.Errorf("read policy: %w", err)
	}
	r, err := Decode(b)
	if err != nil {
		return r, fmt.Errorf("policy %s: %w", path, err)
	}
	return r, nil
}

// Encode renders the rule as indented JSON with a trailing newline. The
// operators stay as people write them ("op": ">="): encoding/json would
// escape <, > and & for HTML ("\u003e="), which reads as noise in a file
// meant to be read and edited.
func (r Rule) Encode() ([]byte, error) {
	if r.All == nil {
		r.All = []Condition{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(r)
	return b.Bytes(), err
}
